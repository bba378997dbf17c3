"""Atomic, durable writes for every file a user keeps (calibrations, journals, metadata, run files).

A file written in place is destroyed by whatever stops the write half way:
a full disk, a file-size limit, ``SIGKILL``, a power cut. Every file
powermodels keeps is therefore written the same way:

1. to a temporary file in the destination's folder (its name starts with
   ``.`` and ends with ``.tmp``, so pyarrow datasets and globs for the real
   names skip it);
2. flushed and ``fsync``-ed, so its bytes are on the disk;
3. renamed over the destination with :func:`os.replace` (atomic on POSIX:
   a reader sees the old file or the new one, never a mix);
4. the folder ``fsync``-ed, so the rename itself survives a power cut.

If anything fails before the rename (``OSError: No space left on device``,
``EFBIG``, an exception while producing the contents), the temporary file is
removed and the destination keeps its previous contents untouched.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "a.json"
>>> _ = write_json(path, {"x": 1})
>>> path.read_text()
'{\\n  "x": 1\\n}'
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

__all__ = ["atomic_open", "replace_folder", "temporary_name", "write_bytes", "write_json", "write_text"]

_counter = itertools.count()
_counter_lock = threading.Lock()


def temporary_name(path: str | os.PathLike) -> Path:
    """A unique temporary name beside ``path`` (same folder: the rename stays on one filesystem)."""
    path = Path(path)
    with _counter_lock:
        n = next(_counter)
    # leading "." — pyarrow datasets, pd.read_parquet(dir) and "*.json" globs skip it
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.{n}.tmp")


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # a folder that cannot be opened (some network filesystems): the rename stands
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb", *, encoding: str | None = None,
                make_parents: bool = True) -> Iterator:
    """Open a temporary file that replaces ``path`` when the block ends without an error.

    Parameters
    ----------
    path : str or PathLike
        The destination.
    mode : {"wb", "w"}, default="wb"
        Binary or text.
    encoding : str, optional
        Text mode only (default UTF-8).
    make_parents : bool, default=True
        Create the destination's folder.

    Yields
    ------
    file object
        Write to it; ``path`` is replaced (after ``fsync``) only once the
        block ends normally. An exception inside the block, or one raised by
        the flush or ``fsync`` (a full disk), removes the temporary file and
        leaves ``path`` as it was.
    """
    if mode not in ("wb", "w"):
        raise ValueError(f"atomic_open: mode must be 'wb' or 'w', got {mode!r}")
    path = Path(path)
    if make_parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_name(path)
    kwargs = {} if mode == "wb" else {"encoding": encoding or "utf-8"}
    try:
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_folder(path.parent)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and durably; returns the path."""
    with atomic_open(path, "wb") as fh:
        fh.write(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str, *, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` atomically and durably; returns the path."""
    return write_bytes(path, text.encode(encoding))


def write_json(path: str | os.PathLike, data, *, indent: int | None = 2, default=None,
               sort_keys: bool = False) -> Path:
    """Write ``data`` as JSON to ``path`` atomically and durably; returns the path.

    The JSON text is built before the temporary file is opened, so a value
    that cannot be serialised raises without touching the disk.
    """
    text = json.dumps(data, indent=indent, default=default, sort_keys=sort_keys)
    return write_text(path, text)


def replace_folder(path: str | os.PathLike, write: Callable[[Path], object], names: Iterable[str]) -> Path:
    """Write a set of files into the folder ``path`` as one: a reader finds all old or all new, never a mix.

    ``write(tmp)`` writes the new files into a fresh temporary folder beside ``path``. Then the
    entries of an existing ``path`` that are not in ``names`` (what this set owns: files of an
    older set that the new one lacks are dropped with it) move into the new folder, the old
    folder is renamed aside, the new one renamed to ``path``, and the old one removed. A crash
    while writing leaves ``path`` as it was; a crash between the two renames (two system calls)
    leaves no ``path`` and both complete sets beside it under hidden names.

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    write : callable
        Called with the temporary folder; writes the new set into it.
    names : iterable of str
        The names the set owns in ``path`` (written or not by this ``write``).

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    path, owned = Path(path), set(names)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp, aside = temporary_name(path), temporary_name(path)
    tmp.mkdir()
    moved: list[str] = []
    try:
        write(tmp)
        for entry in tmp.iterdir():  # the bytes on the disk before the renames make them visible
            with open(entry, "rb") as fh:
                os.fsync(fh.fileno())
        _fsync_folder(tmp)
        if path.exists():
            for entry in sorted(path.iterdir()):
                if entry.name not in owned and not (tmp / entry.name).exists():
                    os.replace(entry, tmp / entry.name)
                    moved.append(entry.name)
            os.replace(path, aside)
        os.replace(tmp, path)
    except BaseException:
        if aside.exists() and not path.exists():
            os.replace(aside, path)
        for name in moved:  # give the entries that were not this set's back to the old folder
            with contextlib.suppress(OSError):
                os.replace(tmp / name, path / name)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)
    _fsync_folder(path.parent)
    return path
