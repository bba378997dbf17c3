"""Calibration files: fitted estimators/pipelines with provenance.

A calibration file is a small header followed by a joblib payload::

    b"POWERMODELS-CALIBRATION\\n"      magic line
    <8-byte big-endian length><JSON header>
    <joblib payload: the pickled object>

The JSON header holds the metadata (package, scikit-learn and Python
versions, device, driver, date, the input schema) and the SHA-256 of the
payload. :func:`load_calibration` reads and checks the header *before*
unpickling anything: a file from another major version of powermodels, with a
different input schema than the caller expects, or whose payload does not
match its hash (edited, truncated or swapped) is refused with a
:class:`CalibrationError` (a ``ValueError``) that says why.

.. warning::
   The payload is a pickle. Unpickling runs code chosen by whoever wrote the
   file, so **only load calibration files you trust** (made by you or your
   team, kept where others cannot write). The hash detects accidental
   corruption and careless edits; it is *not* a signature — anyone able to
   write the file can also rewrite the hash in its header.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import io
import json
import platform
import struct
from pathlib import Path

import joblib

__all__ = ["FORMAT_VERSION", "CalibrationError", "input_schema", "load_calibration", "read_metadata",
           "save_calibration"]

MAGIC = b"POWERMODELS-CALIBRATION\n"
FORMAT_VERSION = 1


class CalibrationError(ValueError):
    """A calibration file is unreadable, tampered with, or incompatible."""


def _package_version() -> str:
    from . import __version__

    return __version__


def _major(version: str) -> str:
    return str(version).split(".")[0].split("+")[0]


def input_schema(obj) -> list[str] | None:
    """Column names an estimator was fitted on (``feature_names_in_``), if known.

    Looks at ``obj`` and, for a pipeline, its first step.
    """
    names = getattr(obj, "feature_names_in_", None)
    if names is None and hasattr(obj, "steps") and obj.steps:
        names = getattr(obj.steps[0][1], "feature_names_in_", None)
    return None if names is None else [str(n) for n in names]


def save_calibration(obj, path, metadata: dict | None = None, *, compress: int = 3) -> Path:
    """Write a fitted estimator or pipeline with its metadata.

    Parameters
    ----------
    obj : object
        Usually a fitted estimator or ``Pipeline``.
    path : str or Path
        Destination file (parents are created).
    metadata : dict, optional
        JSON-serialisable provenance. Recognised keys: ``device``,
        ``driver``, ``schema`` (list of input columns; defaults to the
        estimator's ``feature_names_in_``), anything else is kept as given.
        ``package_version``, ``sklearn_version``, ``python_version``,
        ``date`` (UTC, ISO 8601) and ``object`` are filled in.
    compress : int, default=3
        joblib compression level.

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    ValueError
        If ``metadata`` is not a dict or not JSON-serialisable.
    """
    import sklearn

    if metadata is not None and not isinstance(metadata, dict):
        raise ValueError(f"metadata must be a dict, got {type(metadata).__name__}")
    meta = dict(metadata or {})
    meta.setdefault("device", None)
    meta.setdefault("driver", None)
    if meta.get("schema") is None:
        meta["schema"] = input_schema(obj)
    meta.update(
        package_version=_package_version(),
        sklearn_version=sklearn.__version__,
        python_version=platform.python_version(),
        date=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        object=f"{type(obj).__module__}.{type(obj).__qualname__}",
    )
    buf = io.BytesIO()
    joblib.dump(obj, buf, compress=compress)
    payload = buf.getvalue()
    header = {"format_version": FORMAT_VERSION, "sha256": hashlib.sha256(payload).hexdigest(),
              "payload_bytes": len(payload), "metadata": meta}
    try:
        blob = json.dumps(header, sort_keys=True).encode()
    except TypeError as exc:
        raise ValueError(f"metadata must be JSON-serialisable: {exc}") from exc
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(MAGIC)
        fh.write(struct.pack(">Q", len(blob)))
        fh.write(blob)
        fh.write(payload)
    return path


def _read(path) -> tuple[dict, bytes]:
    path = Path(path)
    if not path.is_file():
        raise CalibrationError(f"{path}: no such calibration file")
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise CalibrationError(f"{path}: not a powermodels calibration file (bad magic line)")
    pos = len(MAGIC)
    if len(data) < pos + 8:
        raise CalibrationError(f"{path}: truncated header")
    (n,) = struct.unpack(">Q", data[pos : pos + 8])
    pos += 8
    try:
        header = json.loads(data[pos : pos + n].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path}: corrupt header ({exc})") from exc
    if not isinstance(header, dict) or "metadata" not in header or "sha256" not in header:
        raise CalibrationError(f"{path}: corrupt header (missing fields)")
    return header, data[pos + n :]


def read_metadata(path) -> dict:
    """The metadata of a calibration file, without unpickling its payload."""
    return _read(path)[0]["metadata"]


def load_calibration(path, *, expected_schema=None, return_metadata: bool = False):
    """Load a calibration file written by :func:`save_calibration`.

    The header is checked before the payload is unpickled. See the module
    docstring: **only load files you trust** (pickle).

    Parameters
    ----------
    path : str or Path
        The file.
    expected_schema : list of str, optional
        Input columns the caller will feed; refused if the file's schema
        differs.
    return_metadata : bool, default=False
        Also return the metadata dict.

    Returns
    -------
    object or (object, dict)

    Raises
    ------
    CalibrationError
        Not a calibration file, newer file format, payload hash mismatch
        (tampered or corrupt), another major version of powermodels, or a
        schema different from ``expected_schema``.
    """
    header, payload = _read(path)
    meta = header["metadata"]
    if header.get("format_version", 0) > FORMAT_VERSION:
        raise CalibrationError(
            f"{path}: file format {header.get('format_version')} is newer than this powermodels "
            f"reads ({FORMAT_VERSION}); upgrade powermodels"
        )
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise CalibrationError(
            f"{path}: payload does not match its SHA-256 (file tampered with or corrupt); refusing to load"
        )
    ours = _package_version()
    theirs = str(meta.get("package_version", "?"))
    if _major(theirs) != _major(ours):
        raise CalibrationError(
            f"{path}: written by powermodels {theirs}, incompatible with {ours} (major version differs); "
            "refit the calibration"
        )
    if expected_schema is not None:
        want = [str(c) for c in expected_schema]
        have = meta.get("schema")
        if have is not None and list(have) != want:
            missing = [c for c in have if c not in want]
            extra = [c for c in want if c not in have]
            raise CalibrationError(
                f"{path}: input schema differs: calibration expects {have}, caller has {want} "
                f"(missing {missing}, unexpected {extra})"
            )
    obj = joblib.load(io.BytesIO(payload))
    return (obj, meta) if return_metadata else obj
