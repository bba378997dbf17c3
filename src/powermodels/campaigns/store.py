"""The append-only store of a campaign's finished runs, flat in the number of runs.

Every finished run adds two files and nothing is ever rewritten: its trace
(``traces/<key>.parquet``) first, then its run-table row (``runs/<key>.json``,
a few hundred bytes) — the row is the commit marker. Both are written to a
temporary name starting with ``.`` and renamed into place (``os.replace`` is
atomic), so a run killed at any instant, even by ``SIGKILL``, has either its
row (finished) or no row (measured again on resume, its trace overwritten).

.. code-block:: text

    out/
      metadata.json          device, driver, settings, protocol, the spec
      runs/<key>.json        one run-table row per finished run (commit marker)
      traces/<key>.parquet   its trace table; traces/ is a parquet dataset
      runs.parquet           the whole run table, written once every planned run is finished
      board_probe/           a spec's board probe: a campaign folder of its own (campaigns.boards)

What each step reads, so that a campaign's cost stays flat in its size:

* resume — the *names* in ``runs/`` (:meth:`CampaignStore.finished_keys`), never a file;
* the run table — the small row files only, never a trace;
* traces — one file at a time (:meth:`CampaignStore.iter_traces`), or all of
  them as a dataset: ``pd.read_parquet(out / "traces")`` or
  ``pyarrow.dataset.dataset(out / "traces")`` (files starting with ``.`` — the
  temporary ones — are ignored by both). No step concatenates every trace.

Folders written before this layout (``runs/<key>.parquet`` one-row parts,
``traces.parquet``) still load: old row parts count as finished and are read
alongside the new ones.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from ..files import atomic_open, write_json

__all__ = ["CampaignStore", "existing_campaign_folder"]

RUNS = "runs"
TRACES = "traces"
RUN_TABLE_FILE = "runs.parquet"
PROBE_DIR = "board_probe"  # the board probe's own campaign (:mod:`.boards`), set aside with the runs on restart
INDEX = "_index.parquet"  # in runs/: the rows gathered so far (a cache; "_": never a run key)
KEY = "__key__"  # the run key, as a column of the index
STAMP = "__stamp__"  # the row file's modification time (ns) when indexed: a newer file wins
CORRUPT = "_corrupt"  # in runs/: unreadable row files set aside (never a run key: "_")
INDEX_AFTER = 64  # rows not in the index before it is rewritten (reading 64 rows: ~3 ms)


def _json_value(value):
    """numpy scalars and other leftovers as plain JSON values (NaN stays NaN)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (pd.Timestamp, pd.Timedelta)):
        return str(value)
    raise TypeError(f"run row: cannot store a value of type {type(value).__name__}: {value!r}")


def atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    """Write ``df`` to ``path`` atomically and durably (:func:`powermodels.files.atomic_open`)."""
    with atomic_open(path) as fh:
        df.to_parquet(fh, index=False)


def atomic_json(data: Mapping, path: Path, *, indent: int | None = 2, default=_json_value) -> None:
    """Write ``data`` as JSON to ``path`` atomically and durably (:func:`powermodels.files.write_json`)."""
    write_json(path, dict(data), indent=indent, default=default)


def existing_campaign_folder(out_dir: str | os.PathLike) -> Path:
    """``out_dir`` as a Path, or a one-line error naming it when it is not a folder.

    For readers: a mistyped path must not read as a campaign with no finished
    run (an existing folder with none still gives an empty table).
    """
    out = Path(out_dir)
    if not out.is_dir():
        what = "is not a folder" if out.exists() else "does not exist"
        raise FileNotFoundError(f"campaign folder {str(out)!r} {what}: give the --out of a campaign "
                                "(powermodels campaign SPEC --out FOLDER)")
    return out


class CampaignStore:
    """The folder of one campaign: append finished runs, list and read them.

    Parameters
    ----------
    out_dir : path
        The campaign folder.
    create : bool, default=False
        Create ``runs/`` and ``traces/`` and delete temporary files left by a
        killed write. Only the process that runs the campaign should pass
        True; readers leave the folder untouched.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> store = CampaignStore(tempfile.mkdtemp(), create=True)
    >>> store.write_run("k1", {"kernel": "fp32", "run_id": "k1"},
    ...                 pd.DataFrame({"run_id": ["k1"], "t_s": [0.0]}))
    >>> sorted(store.finished_keys()), len(store.run_table())
    (['k1'], 1)
    """

    def __init__(self, out_dir: str | os.PathLike, *, create: bool = False):
        self.out = Path(out_dir)
        self.runs_dir = self.out / RUNS
        self.traces_dir = self.out / TRACES
        self.create = bool(create)
        if create:
            self.runs_dir.mkdir(parents=True, exist_ok=True)
            self.traces_dir.mkdir(parents=True, exist_ok=True)
            for folder in (self.out, self.runs_dir, self.traces_dir):
                # a write cut short by a kill: never renamed, never counted
                for entry in os.scandir(folder):
                    if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                        Path(entry.path).unlink(missing_ok=True)

    # ------------------------------------------------------------------ write
    def write_run(self, key: str, row: Mapping, trace: pd.DataFrame) -> None:
        """Commit one finished run: its trace, then its row (the commit marker)."""
        if not isinstance(key, str) or not key or os.sep in key or key.startswith((".", "_")):
            raise ValueError(f"campaign store: invalid run key {key!r}")
        atomic_parquet(trace, self.traces_dir / f"{key}.parquet")
        atomic_json(row, self.runs_dir / f"{key}.json", indent=None)

    # ------------------------------------------------------------------- read
    def _row_files(self, stamps: dict | None = None) -> dict[str, str]:
        """key → row file name; new ``.json`` rows win over old one-row ``.parquet`` parts.

        With ``stamps`` (a dict), also fills key → the file's modification time in ns.
        """
        if not self.runs_dir.is_dir():
            return {}
        files: dict[str, str] = {}
        with os.scandir(self.runs_dir) as entries:  # names only, unless stamps are asked for
            for entry in entries:
                name = entry.name
                if name.startswith((".", "_")):
                    continue
                stem, dot, ext = name.rpartition(".")
                if dot and ext == "json" or (ext == "parquet" and stem not in files):
                    files[stem] = name
                    if stamps is not None:
                        try:
                            stamps[stem] = entry.stat().st_mtime_ns
                        except OSError:  # removed meanwhile: stamp -1 never matches the index
                            stamps[stem] = -1
        return files

    def finished_keys(self) -> set[str]:
        """Keys of the finished runs, from the file names alone (no file is opened)."""
        return set(self._row_files())

    def _read_index(self) -> pd.DataFrame | None:
        path = self.runs_dir / INDEX
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return None
        cached = getattr(self, "_index_cache", None)
        if cached is not None and cached[0] == stamp:  # read once per store while unchanged
            return cached[1]
        try:
            table = pd.read_parquet(path)
        except Exception:  # only a cache: the row files are the truth
            return None
        self._index_cache = (stamp, table)
        # an index without the files' stamps (older versions) cannot tell a re-measured run
        return table if KEY in table.columns and STAMP in table.columns else None

    def _read_row(self, key: str, name: str) -> pd.DataFrame | dict | None:
        """One row file: a dict (JSON) or a one-row frame (old layout); None if unreadable.

        An unreadable file (truncated, empty, not a JSON object) is reported
        with a warning naming it; the campaign's own process (``create=True``)
        also moves it to ``runs/_corrupt/``, so the run counts as not
        finished and is measured again.
        """
        path = self.runs_dir / name
        try:
            if name.endswith(".json"):
                with open(path) as fh:
                    row = json.load(fh)
                if isinstance(row, dict):
                    return row
                raise ValueError(f"a run row must be a JSON object, got {type(row).__name__}")
            return pd.read_parquet(path)
        except FileNotFoundError:
            return None
        except Exception as err:  # noqa: BLE001 - any unreadable file is set aside the same way
            import warnings

            what = f"{type(err).__name__}: {str(err)[:200]}"
            if self.create:
                import datetime as _dt

                aside = self.runs_dir / CORRUPT / f"{name}.{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%S%fZ}"
                aside.parent.mkdir(exist_ok=True)
                os.replace(path, aside)
                warnings.warn(f"campaign store: run file {path} is unreadable ({what}); moved to {aside}, "
                              "the run will be measured again", RuntimeWarning, stacklevel=3)
            else:
                warnings.warn(f"campaign store: run file {path} is unreadable ({what}); left out "
                              "(resuming the campaign measures it again)", RuntimeWarning, stacklevel=3)
            return None

    def run_table(self, keys: Iterable[str] | None = None, *, update_index: bool = False) -> pd.DataFrame:
        """The run table of the finished runs (of ``keys`` only if given), sorted by key.

        Reads no trace. Rows already gathered in the index (``runs/_index.parquet``,
        a cache of the row files) come from it in one read, as long as the
        file's modification time is the one indexed; rows committed or
        rewritten since (a run deleted and measured again) are opened one by
        one, so the index never returns a stale row. An unreadable row file
        is left out with a warning (:meth:`_read_row`). An empty DataFrame
        when nothing is finished.

        Parameters
        ----------
        keys : iterable of str, optional
            Only these runs.
        update_index : bool, default=False
            Rewrite the index when at least ``INDEX_AFTER`` rows were added or
            changed since (the campaign's process asks at the end of every
            invocation; fewer rows cost less to read than the rewrite).
        """
        stamps: dict[str, int] = {}
        files = self._row_files(stamps)
        wanted = set(files) if keys is None else set(keys) & set(files)
        if not wanted:
            return pd.DataFrame()
        frames, have = [], set()
        index = self._read_index()
        if index is not None:
            # plain set lookups: Series.isin on arrow strings takes ~0.2 s for 10,000 keys
            indexed = index[KEY].tolist()
            indexed_stamps = index[STAMP].tolist()
            keep = np.fromiter((k in wanted and stamps.get(k) == st
                                for k, st in zip(indexed, indexed_stamps, strict=True)),
                               dtype=bool, count=len(indexed))
            index = index.loc[keep]
            have = {k for k, kept in zip(indexed, keep, strict=True) if kept}
            if len(index):
                frames.append(index)
        new = sorted(wanted - have)
        records, record_keys = [], []
        for key in new:
            row = self._read_row(key, files[key])
            if row is None:
                continue
            if isinstance(row, dict):
                records.append(row)
                record_keys.append(key)
            else:  # a one-row part of the old layout
                frames.append(row.assign(**{KEY: key, STAMP: stamps[key]}))
        if records:
            frames.append(pd.DataFrame.from_records(records).assign(
                **{KEY: record_keys, STAMP: [stamps[k] for k in record_keys]}))
        if not frames:
            return pd.DataFrame()
        if len(frames) == 1 and not new:
            table = frames[0].reset_index(drop=True)  # the index alone: written in key order
        else:
            table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
            table = table.sort_values(KEY, kind="stable").reset_index(drop=True)
        if update_index and keys is None and len(new) >= INDEX_AFTER:
            atomic_parquet(table, self.runs_dir / INDEX)
        return table.drop(columns=[KEY, STAMP])

    def trace_path(self, key: str) -> Path:
        return self.traces_dir / f"{key}.parquet"

    def iter_traces(self, keys: Iterable[str] | None = None) -> Iterator[pd.DataFrame]:
        """Trace tables of the finished runs (or of ``keys``), one at a time, in key order."""
        finished = self.finished_keys()
        for key in sorted(finished if keys is None else set(keys) & finished):
            path = self.trace_path(key)
            if path.exists():
                yield pd.read_parquet(path)

    def trace_table(self, keys: Iterable[str] | None = None) -> pd.DataFrame:
        """Every finished run's trace in one table — holds them all in memory.

        For large campaigns prefer :meth:`iter_traces` or reading ``traces/``
        as a parquet dataset with a filter.
        """
        parts = list(self.iter_traces(keys))
        return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()

    # ----------------------------------------------------------- consolidate
    def write_run_table(self, runs: pd.DataFrame) -> Path:
        """Write the whole run table to ``runs.parquet`` (atomically); its path."""
        path = self.out / RUN_TABLE_FILE
        atomic_parquet(runs, path)
        return path

