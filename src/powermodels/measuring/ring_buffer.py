"""Time-stamped columns in fixed-size chunks: constant-cost appends, trims and window searches.

The sampler appends one reading per tick for hours (2 kHz × 1 h = 7.2
million readings), while the main thread asks for short windows of it. A
Python list of reading objects costs ~270 B per reading, a window scan that
grows with the buffer and a trim that shifts the whole list; this buffer
instead keeps one preallocated numpy array per column in chunks of
``chunk_size`` rows:

* **append** writes one row into the newest chunk (a few array stores); a
  full chunk starts a new one, so nothing is ever copied or shifted;
* **trim** drops whole chunks from the front once their newest row is older
  than the retention horizon (or the row cap is exceeded) — a pointer
  move, whatever the buffer's length;
* **window** finds the chunks by a binary search over their first times and
  the rows inside them by :func:`numpy.searchsorted`: O(log n) to locate,
  O(rows returned) to copy.

One thread writes (the sampler thread that owns the buffer), any thread
reads. A reader takes a snapshot of the chunk list and of the newest chunk's
row count; rows below that count are final (the writer fills a row before it
bumps the count), and chunks are never reused, so a reader copies without
holding the writer up.
"""

from __future__ import annotations

import bisect
import math
import threading

import numpy as np

__all__ = ["ChunkedColumns"]


class _Chunk:
    """``size`` rows of every column; ``n`` of them written."""

    __slots__ = ("cols", "n", "size")

    def __init__(self, dtypes, size: int):
        self.cols = tuple(np.empty(size, dtype=d) for d in dtypes)
        self.n = 0
        self.size = size


class ChunkedColumns:
    """Columns of rows sorted by their first column (time), stored in chunks.

    Parameters
    ----------
    columns : dict of str to dtype
        Column names and dtypes; the first column is the time stamp (float,
        non-decreasing in append order).
    chunk_size : int, default=65536
        Rows per chunk (65,536 rows of the sampler's 52 B is 3.4 MB: a new
        chunk every ~33 s at 2 kHz).
    retention_s : float, default=inf
        Rows older than this behind the newest row may be dropped (whole
        chunks at a time, so up to one chunk more is kept).
    max_rows : int, optional
        Hard cap on the rows kept, whatever their time (again in whole chunks).
    """

    def __init__(self, columns: dict, chunk_size: int = 65536, retention_s: float = math.inf,
                 max_rows: int | None = None):
        if not columns:
            raise ValueError("ChunkedColumns: columns must name at least the time column")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 2:
            raise ValueError(f"ChunkedColumns: chunk_size must be an int >= 2, got {chunk_size!r}")
        if not retention_s > 0:
            raise ValueError(f"ChunkedColumns: retention_s must be > 0, got {retention_s!r}")
        self.names = tuple(columns)
        self.dtypes = tuple(np.dtype(d) for d in columns.values())
        self.chunk_size = chunk_size
        self.retention_s = float(retention_s)
        self.max_rows = max_rows
        self._lock = threading.Lock()  # guards the chunk list (rollover, trim, clear)
        self.clear()

    # -- writing (one thread) ----------------------------------------------

    @property
    def current(self) -> _Chunk:
        """The chunk being filled; a writer stores row ``current.n`` then bumps ``n``."""
        return self._current

    def append(self, *values) -> None:
        """Append one row (one value per column, in column order)."""
        chunk = self._current
        i = chunk.n
        for col, value in zip(chunk.cols, values, strict=True):
            col[i] = value
        chunk.n = i + 1
        if i + 1 == chunk.size:
            self.roll()

    def extend(self, columns) -> None:
        """Append many rows at once: a sequence of equal-length arrays, one per column."""
        arrays = [np.asarray(c) for c in columns]
        if len(arrays) != len(self.names) or len({a.shape for a in arrays}) != 1:
            raise ValueError(f"extend: expected {len(self.names)} equal-length columns")
        k, n = 0, arrays[0].shape[0]
        while k < n:
            chunk = self._current
            m = min(chunk.size - chunk.n, n - k)
            for col, a in zip(chunk.cols, arrays):
                col[chunk.n : chunk.n + m] = a[k : k + m]
            chunk.n += m
            k += m
            if chunk.n == chunk.size:
                self.roll()

    def roll(self) -> None:
        """Start a new chunk and drop the chunks the retention no longer needs (O(1) each)."""
        with self._lock:
            old = self._current
            if old.n == 0:
                return
            newest = old.cols[0][old.n - 1]
            self._firsts.append(float(old.cols[0][0]))
            self._current = _Chunk(self.dtypes, self.chunk_size)
            self._chunks.append(self._current)
            horizon = newest - self.retention_s
            cap = math.inf if self.max_rows is None else self.max_rows
            while len(self._chunks) > 1:
                head = self._chunks[0]
                if head.cols[0][head.n - 1] < horizon or (len(self._chunks) - 1) * self.chunk_size > cap:
                    # a list of ~100 chunks: popping its front moves ~100 pointers
                    del self._chunks[0]
                    del self._firsts[0]
                    self.dropped += head.n
                else:
                    break

    def clear(self) -> None:
        """Forget every row."""
        with self._lock:
            self._current = _Chunk(self.dtypes, self.chunk_size)
            self._chunks = [self._current]
            self._firsts = []  # first time of every chunk but the one being filled
            self.dropped = 0

    # -- reading (any thread) ----------------------------------------------

    def _snapshot(self):
        with self._lock:
            chunks = list(self._chunks)
            firsts = list(self._firsts)
        n_last = chunks[-1].n
        firsts.append(float(chunks[-1].cols[0][0]) if n_last else math.inf)
        return chunks, firsts, n_last

    def __len__(self) -> int:
        chunks, _, n_last = self._snapshot()
        return (len(chunks) - 1) * self.chunk_size + n_last

    def last_time(self) -> float:
        """Time of the newest row (``-inf`` when empty)."""
        chunk = self._current
        n = chunk.n
        if n:
            return float(chunk.cols[0][n - 1])
        with self._lock:
            if len(self._chunks) > 1:
                prev = self._chunks[-2]
                return float(prev.cols[0][prev.n - 1])
        return -math.inf

    def first_time(self) -> float:
        """Time of the oldest row kept (``inf`` when empty)."""
        chunks, firsts, n_last = self._snapshot()
        return firsts[0] if (len(chunks) > 1 or n_last) else math.inf

    def _locate(self, chunks, firsts, n_last, t, side):
        """(chunk index, row index) of the insertion point of ``t``: O(log rows)."""
        c = max(bisect.bisect_right(firsts, t) - 1, 0) if side == "right" else \
            max(bisect.bisect_left(firsts, t) - 1, 0)
        n = n_last if c == len(chunks) - 1 else chunks[c].n
        i = int(np.searchsorted(chunks[c].cols[0][:n], t, side))
        if i == n and c + 1 < len(chunks):  # past this chunk's end: the start of the next
            return c + 1, 0
        return c, i

    def window_bounds(self, lo: float = -math.inf, hi: float = math.inf):
        """The snapshot and the positions of the rows with ``lo <= t <= hi``."""
        chunks, firsts, n_last = self._snapshot()
        return chunks, n_last, self._locate(chunks, firsts, n_last, lo, "left"), \
            self._locate(chunks, firsts, n_last, hi, "right")

    def count(self, lo: float = -math.inf, hi: float = math.inf) -> int:
        """Number of rows with ``lo <= t <= hi`` (no copy)."""
        _, _, (c0, i0), (c1, i1) = self.window_bounds(lo, hi)
        return max((c1 - c0) * self.chunk_size + i1 - i0, 0)

    def window(self, lo: float = -math.inf, hi: float = math.inf) -> dict:
        """Copies of the columns over the rows with ``lo <= t <= hi``, by name."""
        chunks, n_last, (c0, i0), (c1, i1) = self.window_bounds(lo, hi)
        parts = []
        for c in range(c0, c1 + 1):
            a = i0 if c == c0 else 0
            b = i1 if c == c1 else (n_last if c == len(chunks) - 1 else chunks[c].n)
            if b > a:
                parts.append((chunks[c], a, b))
        out = {}
        for j, name in enumerate(self.names):
            if parts:
                out[name] = np.concatenate([ch.cols[j][a:b] for ch, a, b in parts])
            else:
                out[name] = np.empty(0, dtype=self.dtypes[j])
        return out

    def nbytes(self) -> int:
        """Bytes held by the chunks' arrays (allocated, written or not)."""
        chunks, _, _ = self._snapshot()
        return sum(col.nbytes for ch in chunks for col in ch.cols)
