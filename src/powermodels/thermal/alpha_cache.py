"""Learned α kept per (GPU UUID, workload, configuration) in the state folder.

α is a property of one board (three H100s: 0.29, 0.19, 0.18 %/°C for one GEMM),
so it is learned once per board and workload configuration (:mod:`.learning`,
≤ 10 s) and every later measurement takes it from here (~1 s). One JSON file
per GPU under ``<state>/alpha/`` (``$POWERMODELS_STATE_DIR``, see
:func:`powermodels.devices.journal.state_dir`); every write goes to a
temporary file renamed into place (atomic) under a file lock, so two
processes never interleave a read-modify-write and a crash never leaves half
a file.

An entry is used only when it is this GPU's and current. Ignored with an
:class:`AlphaCacheWarning` (and replaced by the next learning):

* **foreign** — the entry names another GPU UUID, workload or configuration
  than the key it is stored under (a file copied from another machine);
* **stale** — older than ``max_age_days`` (30: boards age, fans and paste
  change), written under another driver version (power management changes
  with it), or in another format;
* **unreadable** — a damaged file (the whole file is then ignored).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import tempfile
import warnings
from pathlib import Path

from .normalise import AlphaEstimate

__all__ = ["FORMAT_VERSION", "AlphaCache", "AlphaCacheWarning", "default_cache_dir"]

#: Version of the cache files' layout; entries of another version are stale.
FORMAT_VERSION = 1


class AlphaCacheWarning(UserWarning):
    """A cached α was ignored (foreign, stale or unreadable); it will be learned again."""


def default_cache_dir() -> Path:
    """``<state>/alpha`` (not created)."""
    from ..devices.journal import state_dir

    return state_dir() / "alpha"


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


class AlphaCache:
    """α per (GPU UUID, workload, configuration), one JSON file per GPU.

    Parameters
    ----------
    directory : path, optional
        Where the files live; :func:`default_cache_dir` when None.
    max_age_days : float, default=30
        Older entries are stale.
    """

    def __init__(self, directory=None, max_age_days: float = 30.0):
        self.directory = Path(directory) if directory is not None else default_cache_dir()
        if not (isinstance(max_age_days, (int, float)) and max_age_days > 0):
            raise ValueError(f"AlphaCache: max_age_days must be > 0, got {max_age_days!r}")
        self.max_age_days = float(max_age_days)

    # -- files ---------------------------------------------------------------

    def path(self, uuid: str) -> Path:
        """The file of GPU ``uuid`` (a hash of it: any UUID makes a safe file name)."""
        if not uuid:
            raise ValueError("AlphaCache: the GPU has no UUID to key α by")
        return self.directory / f"{hashlib.sha256(uuid.encode()).hexdigest()[:24]}.json"

    def _read(self, path: Path) -> dict:
        try:
            text = path.read_text()
        except FileNotFoundError:
            return {}
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("entries", {}), dict):
                raise ValueError("not an object with 'entries'")
        except ValueError as err:
            warnings.warn(f"α cache {path} is unreadable ({err}); ignoring it, α will be learned again",
                          AlphaCacheWarning, stacklevel=3)
            return {}
        return data

    @staticmethod
    def key(workload: str, config: str) -> str:
        return json.dumps([str(workload), str(config)])

    # -- use -----------------------------------------------------------------

    def get(self, uuid: str, workload: str, config: str, *, driver: str = "") -> AlphaEstimate | None:
        """The cached α of ``workload`` at ``config`` on GPU ``uuid``, or None.

        A foreign or stale entry is ignored with an :class:`AlphaCacheWarning`.
        """
        path = self.path(uuid)
        data = self._read(path)
        entry = data.get("entries", {}).get(self.key(workload, config))
        if entry is None:
            return None
        why = self._unusable(entry, uuid, workload, config, driver)
        if why:
            warnings.warn(f"α cache: ignoring the entry for {workload} [{config}] on {uuid} ({why}); "
                          "α will be learned again", AlphaCacheWarning, stacklevel=2)
            return None
        try:
            return AlphaEstimate.from_dict(entry["alpha"])
        except (TypeError, ValueError, KeyError) as err:
            warnings.warn(f"α cache: ignoring a damaged entry for {workload} [{config}] ({err})",
                          AlphaCacheWarning, stacklevel=2)
            return None

    def _unusable(self, entry, uuid, workload, config, driver) -> str:
        if not isinstance(entry, dict):
            return "not an object"
        if entry.get("format") != FORMAT_VERSION:
            return f"stale: format {entry.get('format')!r}, this version reads {FORMAT_VERSION}"
        if entry.get("uuid") != uuid:
            return f"foreign: it was learned on GPU {entry.get('uuid')!r}"
        if entry.get("workload") != workload or entry.get("config") != config:
            return f"foreign: it belongs to {entry.get('workload')!r} [{entry.get('config')!r}]"
        if driver and entry.get("driver") and entry.get("driver") != driver:
            return f"stale: learned under driver {entry.get('driver')}, this is {driver}"
        try:
            created = _dt.datetime.fromisoformat(entry["created"])
        except (KeyError, TypeError, ValueError):
            return "stale: no valid creation time"
        if created.tzinfo is None:
            created = created.replace(tzinfo=_dt.timezone.utc)
        age = (_now() - created).total_seconds() / 86400.0
        if not math.isfinite(age) or age > self.max_age_days or age < -1.0:
            return f"stale: learned {age:.0f} days ago (limit {self.max_age_days:g})"
        return ""

    def put(self, uuid: str, workload: str, config: str, alpha: AlphaEstimate, *, driver: str = "") -> Path:
        """Store ``alpha`` for ``workload`` at ``config`` on GPU ``uuid`` (atomic, locked)."""
        from filelock import FileLock

        path = self.path(uuid)
        path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(path) + ".lock"):
            data = self._read(path)
            entries = dict(data.get("entries", {}))
            entries[self.key(workload, config)] = {
                "format": FORMAT_VERSION, "uuid": uuid, "workload": str(workload), "config": str(config),
                "driver": driver, "created": _now().isoformat(timespec="seconds"),
                "alpha": alpha.as_dict(),
            }
            body = json.dumps({"format": FORMAT_VERSION, "uuid": uuid, "entries": entries}, indent=1,
                              allow_nan=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as f:
                    f.write(body)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
        return path

    def entries(self, uuid: str, *, driver: str = "") -> list[AlphaEstimate]:
        """Every usable α learned on GPU ``uuid`` (foreign and stale entries left out silently)."""
        out = []
        for entry in self._read(self.path(uuid)).get("entries", {}).values():
            if isinstance(entry, dict) and not self._unusable(entry, uuid, entry.get("workload"),
                                                              entry.get("config"), driver):
                try:
                    out.append(AlphaEstimate.from_dict(entry["alpha"]))
                except (TypeError, ValueError, KeyError):
                    continue
        return out
