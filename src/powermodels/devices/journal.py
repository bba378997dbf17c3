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
temporary file that is ``fsync``-ed and renamed into place
(:mod:`powermodels.files`), under a file lock so two processes never
interleave a read-modify-write. Reading changes nothing; entries are checked
one by one, so a damaged entry (or a truncated file) never hides a good one;
damage is reported, and copied aside before the next write (see :class:`Journal`).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import math
import re
import shutil
import socket
import threading
import warnings
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..files import write_json

__all__ = [
    "STATE_DIR_ENV",
    "Entry",
    "Journal",
    "journal_dir",
    "entry_from_dict",
    "safe_name",
    "pending_journals",
    "process_alive",
    "set_aside_journals",
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


def safe_name(key: str) -> str:
    """``key`` as a file name: every character outside ``A-Za-z0-9._-`` becomes ``_``."""
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


#: The settings an entry may record (the fields of ``devices.base.Settings``).
SETTING_KEYS = ("sm_clock_mhz", "mem_clock_mhz", "power_limit_w")


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def entry_from_dict(data) -> Entry:
    """One journal entry from its JSON object, checked field by field.

    Fields this version does not know are ignored (a newer powermodels may
    add some); every known field must have its type.

    Raises
    ------
    ValueError
        One line naming the first bad field and its value.
    """
    if not isinstance(data, dict):
        raise ValueError(f"entry is not an object: {data!r:.80}")
    checks = {
        "guard_id": lambda v: isinstance(v, str) and v != "",
        "pid": lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0,
        "host": lambda v: isinstance(v, str),
        "start": lambda v: v is None or isinstance(v, str),
        "previous": lambda v: isinstance(v, dict) and all(
            k in SETTING_KEYS and (x is None or (_is_number(x) and x > 0)) for k, x in v.items()),
        "keys": lambda v: isinstance(v, list) and v != [] and all(k in SETTING_KEYS for k in v),
        "device": lambda v: isinstance(v, str),
        "created": lambda v: isinstance(v, str),
    }
    required = ("guard_id", "pid", "host", "start", "previous", "keys")
    for name in required:
        if name not in data:
            raise ValueError(f"entry {data.get('guard_id', '?')!r}: field {name!r} is missing")
    for name, ok in checks.items():
        if name in data and not ok(data[name]):
            raise ValueError(f"entry {data.get('guard_id', '?')!r}: field {name!r} has a bad value "
                             f"{data[name]!r:.80}")
    return Entry(**{k: data[k] for k in checks if k in data})


def _salvage(text: str) -> list:
    """The complete JSON objects inside a damaged journal's ``entries`` list (a truncated file)."""
    decoder = json.JSONDecoder()
    at = text.find('"entries"')
    if at < 0:
        return []
    pos = text.find("[", at)
    found = []
    while pos >= 0:
        pos = text.find("{", pos + 1)
        if pos < 0:
            break
        try:
            obj, stop = decoder.raw_decode(text, pos)
        except ValueError:
            continue
        if isinstance(obj, dict) and "guard_id" in obj:
            found.append(obj)
            pos = stop - 1
    return found


class Journal:
    """The journal of one GPU (``key``: its UUID).

    Reading never changes the file. Entries are checked one by one: a bad or
    unreadable entry is reported (:meth:`read`, and a ``RuntimeWarning`` from
    :meth:`entries`) and skipped, never hiding the good ones — even in a
    truncated file, every complete entry is recovered. The next write (a
    guard adding or removing its entry) first copies the damaged file to
    ``<name>.corrupt-<UTC time>`` beside it, loudly, and then writes the good
    entries back; ``powermodels restore`` lists such copies until a person
    deletes them.
    """

    def __init__(self, key: str, path: Path | None = None):
        self.key = key
        self.path = Path(path) if path is not None else journal_dir() / f"{safe_name(key)}.json"

    @contextmanager
    def locked(self):
        """Hold the journal's file lock (for a read-modify-write across processes)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(self.path.with_name(self.path.name + ".lock")):
            yield self

    def read(self) -> tuple[list[Entry], list[str]]:
        """The good entries, oldest first, and one line per problem found; changes nothing."""
        if self.path.is_dir():
            return [], [f"{self.path}: is a folder, not a journal file; not read"]
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return [], []
        except (OSError, UnicodeDecodeError) as err:
            return [], [f"{self.path}: cannot be read ({err})"]
        problems = []
        try:
            data = json.loads(text)
        except ValueError as err:
            raw = _salvage(text)
            problems.append(f"{self.path}: damaged JSON ({err}); {len(raw)} complete "
                            f"entr{'y' if len(raw) == 1 else 'ies'} recovered from it")
        else:
            raw = data.get("entries") if isinstance(data, dict) else None
            if not isinstance(raw, list):
                return [], [f"{self.path}: not a journal (no list of entries): {text[:80]!r}"]
        good = []
        for i, item in enumerate(raw):
            try:
                good.append(entry_from_dict(item))
            except ValueError as err:
                problems.append(f"{self.path}: entry {i + 1} skipped: {err}")
        return good, problems

    def entries(self) -> list[Entry]:
        """The good entries, oldest first (each problem is warned about; the file is not changed)."""
        good, problems = self.read()
        for line in problems:
            warnings.warn(f"settings journal: {line}", RuntimeWarning, stacklevel=2)
        return good

    def _set_aside(self, problems: list[str]) -> Path:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
        aside = self.path.with_name(f"{self.path.name}.corrupt-{stamp}")
        if self.path.is_dir():
            os.replace(self.path, aside)
        else:
            shutil.copyfile(self.path, aside)  # the damaged original, byte for byte, for a person
        warnings.warn(f"settings journal: {'; '.join(problems)}; the damaged file is kept as {aside} "
                      "(not acted on: check it by hand, then delete it)", RuntimeWarning, stacklevel=3)
        return aside

    def _write(self, entries: list[Entry]) -> None:
        _, problems = self.read()
        if problems and self.path.exists():
            self._set_aside(problems)
        if not entries:
            if self.path.is_dir():
                return
            self.path.unlink(missing_ok=True)
            return
        data = {"gpu": self.key, "entries": [asdict(e) for e in entries]}
        write_json(self.path, data, indent=1)

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
    """Every GPU with a journal file (for ``powermodels restore``), damaged ones included."""
    folder = journal_dir()
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        key = path.stem
        try:
            data = json.loads(path.read_text())
            if isinstance(data, dict) and isinstance(data.get("gpu"), str) and \
                    safe_name(data["gpu"]) == path.stem:
                key = data["gpu"]
        except (OSError, ValueError):
            pass
        out.append(Journal(key, path))
    return out


def set_aside_journals() -> list[Path]:
    """Damaged journal files kept aside (``*.json.corrupt*``), waiting for a person to look."""
    folder = journal_dir()
    if not folder.is_dir():
        return []
    return sorted(folder.glob("*.json.corrupt*"))
