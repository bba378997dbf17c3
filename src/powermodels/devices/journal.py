"""The settings journal: what a GPU's settings were before powermodels changed them.

A :class:`~powermodels.devices.base.SettingsGuard` restores the previous
clocks and power limit on every exit a Python process can see: normal exit,
exceptions, Ctrl-C, interpreter exit, and SIGTERM/SIGHUP. After ``SIGKILL``
(a batch scheduler's second signal, the OOM killer, a node losing power)
nothing runs in the process, and the GPU would keep its locked clocks. So
before a guard changes anything, it writes the previous settings to this
journal — one JSON file per GPU, keyed by the GPU's UUID, under the user's
state directory — and clears its entry after a successful restore. A later
guard on the same GPU, or ``powermodels restore``, finds entries whose
process is gone and puts those settings back.

Location: ``$POWERMODELS_STATE_DIR`` if set, else
``$XDG_STATE_HOME/powermodels``, else ``~/.local/state/powermodels``; the
journal files are ``<state>/restore/<uuid>.json``. Every write goes to a
temporary file that is renamed into place (``os.replace`` is atomic), under a
file lock so two processes never interleave a read-modify-write.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import socket
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = [
    "STATE_DIR_ENV",
    "Entry",
    "Journal",
    "journal_dir",
    "pending_journals",
    "process_alive",
    "state_dir",
]

#: Environment variable that overrides the state directory (tests, shared machines).
STATE_DIR_ENV = "POWERMODELS_STATE_DIR"


def state_dir() -> Path:
    """The user's powermodels state directory (not created)."""
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "powermodels"


def journal_dir() -> Path:
    """Where the per-GPU journal files live."""
    return state_dir() / "restore"


def _safe_name(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", key) or "unknown"


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None


def process_alive(pid: int, host: str, start: str | None) -> bool:
    """Whether the process that wrote an entry still runs.

    A process on another host cannot be checked; the GPU is attached to this
    host, so that process cannot be using it and counts as gone. A pid that
    exists but started at another time was reused by a new process: gone.
    """
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        pass
    except OSError:
        return False
    if start is not None:
        now = _process_start(int(pid))
        if now is not None and now != start:
            return False
    return True


@dataclass
class Entry:
    """One guard's record: the settings before it changed ``keys``.

    Attributes
    ----------
    guard_id : str
        Unique per guard (pid, object id and a counter).
    pid, host, start : int, str, str or None
        The process that wrote it (``start``: its start time, Linux).
    previous : dict
        ``Settings`` fields before the change (``None``: the driver default).
    keys : list of str
        The settings the guard changes.
    device : str
        The GPU's name, for messages.
    created : str
        UTC time the entry was written.
    """

    guard_id: str
    pid: int
    host: str
    start: str | None
    previous: dict
    keys: list
    device: str = ""
    created: str = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc)
                         .isoformat(timespec="seconds"))

    @classmethod
    def mine(cls, guard_id: str, previous: dict, keys, device: str = "") -> Entry:
        pid = os.getpid()
        return cls(guard_id, pid, socket.gethostname(), _process_start(pid), dict(previous),
                   list(keys), device)

    def alive(self) -> bool:
        return process_alive(self.pid, self.host, self.start)

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host} (since {self.created})"


_locks: dict[tuple[int, str], object] = {}
_locks_guard = threading.RLock()  # re-entrant: a signal handler may look up while the main thread does


def _file_lock(path: Path):
    # One FileLock object per path and process: it is re-entrant, so a signal
    # handler that restores while the main thread holds the lock does not
    # deadlock; a forked child needs its own.
    from filelock import FileLock

    key = (os.getpid(), str(path))
    with _locks_guard:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = FileLock(str(path), thread_local=False)
        return lock


class Journal:
    """The journal of one GPU (``key``: its UUID)."""

    def __init__(self, key: str):
        self.key = key
        self.path = journal_dir() / f"{_safe_name(key)}.json"

    @contextmanager
    def locked(self):
        """Hold the journal's file lock (for a read-modify-write across processes)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(self.path.with_name(self.path.name + ".lock")):
            yield self

    def entries(self) -> list[Entry]:
        """The entries, oldest first; an unreadable file counts as empty (and is kept aside)."""
        try:
            data = json.loads(self.path.read_text())
            return [Entry(**e) for e in data["entries"]]
        except FileNotFoundError:
            return []
        except (OSError, ValueError, KeyError, TypeError):
            bad = self.path.with_name(self.path.name + ".corrupt")
            os.replace(self.path, bad)  # keep it for a human, do not act on it
            return []

    def _write(self, entries: list[Entry]) -> None:
        if not entries:
            self.path.unlink(missing_ok=True)
            return
        data = {"gpu": self.key, "entries": [asdict(e) for e in entries]}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w") as fh:
            json.dump(data, fh, indent=1)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)

    def add(self, entry: Entry) -> None:
        """Append ``entry`` (call under :meth:`locked`)."""
        self._write([*self.entries(), entry])

    def remove(self, guard_ids) -> None:
        """Drop the entries of ``guard_ids`` (call under :meth:`locked`)."""
        drop = set(guard_ids)
        self._write([e for e in self.entries() if e.guard_id not in drop])


def original_settings(entries: list[Entry]) -> dict:
    """For every setting any entry changed, its value before the first of them changed it."""
    out: dict = {}
    for entry in entries:  # oldest first
        for key in entry.keys:
            out.setdefault(key, entry.previous.get(key))
    return out


def pending_journals() -> list[Journal]:
    """Every GPU with a journal file (for ``powermodels restore``)."""
    folder = journal_dir()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        try:
            key = json.loads(path.read_text()).get("gpu", path.stem)
        except (OSError, ValueError, AttributeError):
            key = path.stem
        out.append(Journal(str(key)))
    return out
