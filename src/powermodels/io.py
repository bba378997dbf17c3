"""Calibration files: fitted estimators/pipelines with provenance, in a format that cannot run code.

A calibration file is a small header followed by a payload::

    b"POWERMODELS-CALIBRATION\\n"      magic line
    <8-byte big-endian length><JSON header>
    <payload: skops.io archive (default) or joblib pickle>

The JSON header holds the metadata (package, scikit-learn and Python
versions, device, driver, date, the input schema), the payload's format and
its SHA-256. :func:`load_calibration` reads and checks the header *before*
reading the payload: a file from another major version of powermodels, with a
different input schema than the caller expects, or whose payload does not
match its hash (edited, truncated or swapped) is refused with a
:class:`CalibrationError` (a ``ValueError``) that says why.

The payload is a `skops.io <https://skops.readthedocs.io/en/stable/persistence.html>`_
archive: a JSON description of every object plus numpy arrays, loaded without
unpickling. Loading builds only the types of :func:`trusted_types` (the
estimators of powermodels, the data classes their fitted state holds, and a
vetted list of scikit-learn types: splitters, scorers and their metric
functions, optimiser state — on top of the numpy/scipy/scikit-learn types
skops trusts itself). A file naming any other type — a function such as
``os.system``, a class of someone else's package — is refused before
anything is built, so loading a stranger's calibration cannot run the
stranger's code.

Pickle (joblib) payloads are still written with ``format="joblib"`` and read
with ``trusted=True`` only: unpickling runs code chosen by whoever wrote the
file. Files of format 1 (before the safe format) are pickles and load only
with ``trusted=True``; re-save them to convert. The hash detects accidental
corruption and careless edits; it is *not* a signature — anyone able to write
the file can also rewrite the hash in its header.
"""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import io
import json
import platform
import struct
from pathlib import Path

import joblib

from .files import atomic_open

__all__ = ["FORMAT_VERSION", "CalibrationError", "input_schema", "load_calibration", "read_metadata",
           "save_calibration", "trusted_types"]

MAGIC = b"POWERMODELS-CALIBRATION\n"
#: 2: payload format in the header (skops by default); 1: joblib pickle payload only.
FORMAT_VERSION = 2
SKOPS = "skops"
JOBLIB = "joblib"

# Types outside powermodels a fitted estimator, pipeline or search may hold, each
# vetted: plain data holders whose loading runs no code of the file's choosing.
_VETTED_SKLEARN = (
    # the optimiser state MLPRegressor keeps (DVFSParameterPredictor)
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
    "sklearn.neural_network._stochastic_optimizers.SGDOptimizer",
    # what GridSearchCV / cross-validation keep: scorers and splitters
    "sklearn.metrics._scorer._PassthroughScorer",
    "sklearn.metrics._scorer._MultimetricScorer",
    *(f"sklearn.model_selection._split.{name}" for name in (
        "GroupKFold", "GroupShuffleSplit", "KFold", "LeaveOneGroupOut", "LeaveOneOut",
        "LeavePGroupsOut", "LeavePOut", "PredefinedSplit", "RepeatedKFold",
        "RepeatedStratifiedKFold", "ShuffleSplit", "StratifiedGroupKFold", "StratifiedKFold",
        "StratifiedShuffleSplit", "TimeSeriesSplit", "_CVIterableWrapper")),
)
# Former path -> current path of an estimator that a module split moved. A safe-format file
# names each class by the module it was defined in when the file was written; the old module
# still re-exports the class, so a file written before the move loads as it did.
_FORMER_PATHS = {
    "powermodels.models.smoothing.KalmanFilter1D": "powermodels.models.kalman.KalmanFilter1D",
}


class CalibrationError(ValueError):
    """A calibration file is unreadable, tampered with, unsafe or incompatible."""


def _type_name(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


@functools.lru_cache(maxsize=1)
def _trusted() -> tuple[str, ...]:
    import dataclasses
    import inspect
    import sys

    from sklearn.metrics import get_scorer, get_scorer_names

    from .utils import all_estimators

    names = set(_VETTED_SKLEARN)
    modules = set()
    for _, cls in all_estimators():
        names.add(_type_name(cls))
        modules.add(cls.__module__)
    names.update(former for former, current in _FORMER_PATHS.items() if current in names)
    # powermodels' data classes our estimator modules use (e.g. DVFSParams in a fitted DVFS
    # model, defined in models/dvfs_params.py and imported by the estimators' module)
    for module in modules:
        for _, cls in inspect.getmembers(sys.modules[module], inspect.isclass):
            if cls.__module__.startswith("powermodels.") and dataclasses.is_dataclass(cls):
                names.add(_type_name(cls))
    # the scorers of scikit-learn's named metrics and their metric functions
    for name in get_scorer_names():
        scorer = get_scorer(name)
        names.add(_type_name(type(scorer)))
        func = getattr(scorer, "_score_func", None)
        if func is not None:
            names.add(f"{func.__module__}.{func.__name__}")
    return tuple(sorted(names))


def trusted_types() -> list[str]:
    """Types the default loader builds besides those skops trusts itself.

    Every public estimator of powermodels (``powermodels.utils.all_estimators()``)
    and the path it had before a module split moved it (files written then
    name that path), the data classes defined in their modules, scikit-learn's named scorers
    with their metric functions, its cross-validation splitters and the MLP
    optimiser state. Nothing else — a file naming another type is refused.

    Returns
    -------
    list of str
        Fully qualified type names, sorted.
    """
    return list(_trusted())


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


def _skops_payload(obj, compress: int) -> bytes:
    import zipfile

    import skops.io as sio

    try:
        payload = sio.dumps(obj, compression=zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED,
                            compresslevel=compress or None)
    except (TypeError, NotImplementedError) as exc:
        raise ValueError(
            f"{_type_name(type(obj))} cannot be written in the safe format ({exc}); "
            "save with format='joblib' (a pickle, loadable only with trusted=True)"
        ) from exc
    unknown = sorted(set(sio.get_untrusted_types(data=payload)) - set(_trusted()))
    if unknown:
        raise ValueError(
            f"{_type_name(type(obj))} holds types the safe loader would refuse: {unknown}; "
            "save with format='joblib' (a pickle, loadable only with trusted=True)"
        )
    return payload


def save_calibration(obj, path, metadata: dict | None = None, *, compress: int = 3,
                     format: str = SKOPS) -> Path:  # noqa: A002 - the word users expect
    """Write a fitted estimator or pipeline with its metadata.

    Parameters
    ----------
    obj : object
        Usually a fitted estimator or ``Pipeline`` (or a dict/list of them).
    path : str or Path
        Destination file (parents are created). Written to a temporary file,
        ``fsync``-ed and renamed into place (:mod:`powermodels.files`): a
        failed write (full disk, kill) leaves the previous file as it was.
    metadata : dict, optional
        JSON-serialisable provenance. Recognised keys: ``device``,
        ``driver``, ``schema`` (list of input columns; defaults to the
        estimator's ``feature_names_in_``), anything else is kept as given.
        ``package_version``, ``sklearn_version``, ``python_version``,
        ``date`` (UTC, ISO 8601) and ``object`` are filled in.
    compress : int, default=3
        Compression level (0: none).
    format : {"skops", "joblib"}, default="skops"
        ``"skops"``: the safe format, loadable by anyone without running
        code. ``"joblib"``: a pickle, for objects the safe format cannot
        hold; loading it needs ``trusted=True``.

    Returns
    -------
    Path
        The written file.

    Raises
    ------
    ValueError
        If ``metadata`` is not a dict or not JSON-serialisable, ``format`` is
        unknown, or (``"skops"``) ``obj`` holds a type outside
        :func:`trusted_types` that the safe loader would refuse.
    """
    import sklearn

    if format not in (SKOPS, JOBLIB):
        raise ValueError(f"format must be {SKOPS!r} or {JOBLIB!r}, got {format!r}")
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
        object=_type_name(type(obj)),
    )
    try:
        json.dumps(meta)
    except TypeError as exc:
        raise ValueError(f"metadata must be JSON-serialisable: {exc}") from exc
    if format == SKOPS:
        payload = _skops_payload(obj, compress)
    else:
        buf = io.BytesIO()
        joblib.dump(obj, buf, compress=compress)
        payload = buf.getvalue()
    header = {"format_version": FORMAT_VERSION, "payload_format": format,
              "sha256": hashlib.sha256(payload).hexdigest(), "payload_bytes": len(payload),
              "metadata": meta}
    blob = json.dumps(header, sort_keys=True).encode()
    path = Path(path)
    # a temporary file renamed into place: a full disk or a kill mid-write leaves the previous file
    with atomic_open(path, "wb") as fh:
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
    version = header.get("format_version", 1)
    if not isinstance(header["metadata"], dict) or not isinstance(version, int) or isinstance(version, bool):
        raise CalibrationError(f"{path}: corrupt header (metadata must be an object and "
                               "format_version an integer)")
    return header, data[pos + n :]


def read_metadata(path) -> dict:
    """The metadata of a calibration file, without loading its payload."""
    return _read(path)[0]["metadata"]


def _load_skops(path, payload: bytes, trusted: bool):
    import zipfile

    import skops.io as sio

    try:
        found = sio.get_untrusted_types(data=payload)
    except (zipfile.BadZipFile, KeyError, ValueError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path}: corrupt skops payload ({exc})") from exc
    if not trusted:
        refused = sorted(set(found) - set(_trusted()))
        if refused:
            raise CalibrationError(
                f"{path}: refusing to load types outside powermodels' trusted list: {refused} "
                "(a calibration holds estimators and data only); load with trusted=True only if "
                "you trust whoever wrote the file"
            )
    try:
        return sio.loads(payload, trusted=list(found))
    except Exception as exc:  # skops raises many kinds on a malformed archive
        raise CalibrationError(f"{path}: corrupt skops payload ({type(exc).__name__}: {exc})") from exc


def load_calibration(path, *, expected_schema=None, return_metadata: bool = False,
                     trusted: bool = False):
    """Load a calibration file written by :func:`save_calibration`.

    The header is checked before the payload is read. A skops payload builds
    only the types of :func:`trusted_types` (and those skops trusts): a file
    crafted to run code is refused. A pickle payload (``format="joblib"`` or
    a format-1 file) is loaded only with ``trusted=True``.

    Parameters
    ----------
    path : str or Path
        The file.
    expected_schema : list of str, optional
        Input columns the caller will feed; refused if the file's schema
        differs.
    return_metadata : bool, default=False
        Also return the metadata dict.
    trusted : bool, default=False
        You trust whoever wrote the file: unpickle a pickle payload, and
        build any type a skops payload names. Unpickling runs the writer's code.

    Returns
    -------
    object or (object, dict)

    Raises
    ------
    CalibrationError
        Not a calibration file, newer file format, payload hash mismatch
        (tampered or corrupt), another major version of powermodels, a
        schema different from ``expected_schema``, a type outside the trusted
        list, or a pickle payload without ``trusted=True``.
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
    kind = header.get("payload_format", JOBLIB)  # format 1 files are joblib pickles
    if kind == SKOPS:
        obj = _load_skops(path, payload, trusted)
    elif kind == JOBLIB:
        if not trusted:
            old = " (format 1, written before the safe format)" if header.get("format_version", 1) < 2 else ""
            raise CalibrationError(
                f"{path}: the payload is a pickle{old}; unpickling runs code chosen by whoever wrote "
                "the file, so it loads only with trusted=True (then re-save it to get the safe format)"
            )
        obj = joblib.load(io.BytesIO(payload))
    else:
        raise CalibrationError(f"{path}: unknown payload format {kind!r}")
    return (obj, meta) if return_metadata else obj
