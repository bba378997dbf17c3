"""Raw recordings: read, validate and write the folder a recording script leaves.

A raw recording keeps what a run table throws away: the full-rate NVML trace
beside every timed launch, on one host clock (``t_s``, seconds from the
recording's start). It is a folder of

``trace.parquet``
    one row per NVML poll: instant and average power, SM and memory clock,
    temperature, throttle reasons (readings repeat between sensor updates);
``energy.parquet``
    one row per read of the total energy counter;
``launches.parquet``
    one row per timed batch of launches (CUDA events mapped onto ``t_s``);
``phases.parquet``
    the schedule: what ran when, idle included;
``provenance.json``
    the GPU, its UUID, driver, power limit, maximum SM clock, how it was made;
``probes.parquet`` (optional)
    an on-GPU clock probe: SM cycles over global-timer nanoseconds.

:func:`read_recording` returns a :class:`Recording`; a missing file or column
is a one-line :class:`RecordingError` naming it. :func:`write_recording`
writes the same folder (the simulated GPU's replay writes one, and recorders
can use it). Column names come from :mod:`powermodels.schema`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from . import schema
from .files import replace_folder
from .schema import Column, TableSpec

__all__ = [
    "ENERGY_SPEC",
    "LAUNCHES_SPEC",
    "PHASES_SPEC",
    "PROBES_SPEC",
    "PROVENANCE_KEYS",
    "TRACE_SPEC",
    "Recording",
    "RecordingError",
    "downsample_trace",
    "read_recording",
    "write_recording",
]


class RecordingError(ValueError):
    """A recording folder that cannot be read: names the file and what is wrong."""


def _power(name: str, what: str) -> Column:
    return Column(name, "float", "W", 0.0, 1e5, False, what)


TRACE_SPEC = TableSpec(
    name="trace.parquet",
    required=(
        Column(schema.T_S, "float", "s", description="host clock"),
        _power(schema.POWER_INSTANT_W, "NVML instant power (field 186)"),
        Column(schema.SM_CLOCK_MHZ, "float", "MHz", 0.0, 1e4, False, "NVML SM clock reading"),
        Column(schema.TEMPERATURE_C, "float", "°C", -50.0, 150.0, False, "GPU temperature"),
    ),
    optional=(
        _power(schema.POWER_AVERAGE_W, "NVML average power (field 185)"),
        Column(schema.MEM_CLOCK_MHZ, "float", "MHz", 0.0, 1e5, False, "memory clock reading"),
        Column(schema.THROTTLE_REASONS, "int", "bitmask", 0, None, False, "NVML clock-event reasons"),
        Column(schema.READ_S, "float", "s", 0.0, None, False, "duration of the poll"),
    ),
    time_column=schema.T_S,
    min_rows=2,
)

ENERGY_SPEC = TableSpec(
    "energy.parquet", (Column(schema.T_S, "float", "s", description="middle of the counter read"),
                       Column(schema.ENERGY_COUNTER_J, "float", "J", 0.0, None, False, "total energy counter")),
    (Column(schema.READ_S, "float", "s", 0.0, None, False, "duration of the read"),),
    time_column=schema.T_S, min_rows=2)

#: what identifies a schedule entry (phases.parquet) and the launches made in it
_SCHEDULE_KEYS = (
    Column(schema.RECORDING_PHASE, "str", description="protocol part"),
    Column(schema.WORKLOAD, "str", description="workload name ('-' for idle)"),
    Column(schema.REPEAT, "int", "", None, None, False, "cycle within the phase (-1 for idle)"),
)

LAUNCHES_SPEC = TableSpec(
    name="launches.parquet",
    required=(
        *_SCHEDULE_KEYS,
        Column(schema.BATCH, "int", "", 0, None, False, "batch index"),
        Column(schema.START_S, "float", "s", description="first launch start (host clock)"),
        Column(schema.END_S, "float", "s", description="last launch end (host clock)"),
        Column(schema.LAUNCHES, "int", "", 1, None, False, "launches in the batch"),
        Column(schema.TIME_S, "float", "s", 0.0, None, False, "kernel time per launch"),
    ),
    min_rows=0,
)

PHASES_SPEC = TableSpec(
    name="phases.parquet",
    required=(
        *_SCHEDULE_KEYS,
        Column(schema.PHASE_KIND, "str", description="idle / pressure / burst / series"),
        Column(schema.T0_S, "float", "s", description="start"),
        Column(schema.T1_S, "float", "s", description="end"),
    ),
    time_column=schema.T0_S,
    min_rows=1,
)

PROBES_SPEC = TableSpec(
    name="probes.parquet",
    required=(
        Column(schema.T_S, "float", "s", description="host time of the probe"),
        Column(schema.WORKLOAD, "str", description="workload the probe ran beside"),
        Column(schema.BATCH, "int", "", 0, None, False, "batch index"),
        Column(schema.PROBE_CLOCK_MHZ, "float", "MHz", 0.0, 1e4, False, "cycles / elapsed"),
        Column(schema.PROBE_CYCLES, "float", "cycles", 0.0, None, False, "SM cycles"),
        Column(schema.PROBE_ELAPSED_NS, "float", "ns", 0.0, None, False, "global-timer ns"),
    ),
    min_rows=0,
)

#: what ``provenance.json`` must say (the twin and calibrations key on them)
PROVENANCE_KEYS = ("gpu", "uuid", "power_limit_w", "max_sm_clock_mhz")

#: phase kinds a schedule may use
PHASE_KINDS = ("idle", "pressure", "burst", "series", "ladder")  # ladder: natural_recording.Ladder

_FILES = {"trace": TRACE_SPEC, "energy": ENERGY_SPEC, "launches": LAUNCHES_SPEC,
          "phases": PHASES_SPEC}


@dataclass
class Recording:
    """A raw recording: its tables on one host clock and its provenance.

    Attributes
    ----------
    trace, energy, launches, phases : pandas.DataFrame
        The tables of ``trace.parquet``, ``energy.parquet``, ``launches.parquet``
        and ``phases.parquet`` (see :data:`TRACE_SPEC` ...).
    provenance : dict
        ``provenance.json``: at least :data:`PROVENANCE_KEYS`.
    probes : pandas.DataFrame or None
        ``probes.parquet`` where the recording has one.
    path : pathlib.Path or None
        The folder it was read from.
    """

    trace: pd.DataFrame
    energy: pd.DataFrame
    launches: pd.DataFrame
    phases: pd.DataFrame
    provenance: dict = field(default_factory=dict)
    probes: pd.DataFrame | None = None
    path: Path | None = None

    @property
    def has_trace(self) -> bool:
        """Whether the recording has NVML readings (a folder read with ``trace_optional`` may not)."""
        return len(self.trace) > 0

    def require_trace(self, what: str) -> pd.DataFrame:
        """The trace; a one-line :class:`RecordingError` saying ``what`` needs it when there is none."""
        if not self.has_trace:
            raise RecordingError(f"recording {self.name}: has no trace.parquet (no NVML readings), "
                                 f"so {what} cannot be measured")
        return self.trace

    @property
    def name(self) -> str:
        """A short name: the folder's name, else the GPU's."""
        return self.path.name if self.path is not None else str(self.provenance.get("gpu", "recording"))

    @property
    def board(self) -> str:
        """The board it was recorded on: its UUID, else the recording's name.

        A written recording always has its UUID (:data:`PROVENANCE_KEYS`); one
        built in memory without it is named by :attr:`name` (its folder, else its
        GPU's name), which tells boards apart only as far as those names do.
        """
        return str(self.provenance.get("uuid", self.name))

    @property
    def workloads(self) -> list[str]:
        """Workloads that ran timed launches, in order of first appearance."""
        return list(dict.fromkeys(self.launches[schema.WORKLOAD]))

    @property
    def duration_s(self) -> float:
        """End of the schedule on the host clock."""
        return float(self.phases[schema.T1_S].max())

    def window(self, t0: float, t1: float) -> Recording:
        """The part of the recording in ``[t0, t1)`` on the same clock (nothing shifted)."""
        def cut(df, start, end=None):
            end = start if end is None else end
            return df.loc[(df[end] >= t0) & (df[start] < t1)].reset_index(drop=True)
        return replace(
            self, trace=cut(self.trace, schema.T_S), energy=cut(self.energy, schema.T_S),
            launches=cut(self.launches, schema.START_S, schema.END_S),
            phases=cut(self.phases, schema.T0_S, schema.T1_S),
            probes=None if self.probes is None else cut(self.probes, schema.T_S))

    def phase_rows(self, *, phase: str | None = None, workload: str | None = None,
                   kind: str | None = None) -> pd.DataFrame:
        """Schedule entries matching every given field."""
        rows = self.phases
        for column, value in ((schema.RECORDING_PHASE, phase), (schema.WORKLOAD, workload),
                              (schema.PHASE_KIND, kind)):
            if value is not None:
                rows = rows.loc[rows[column] == value]
        return rows


def _error(where: Path, message: str) -> RecordingError:
    return RecordingError(f"recording {where}: {message}")


def _read_table(folder: Path, stem: str, spec: TableSpec) -> pd.DataFrame:
    path = folder / f"{stem}.parquet"
    try:
        df = pd.read_parquet(path)
    except (OSError, ValueError) as err:  # pyarrow raises ArrowInvalid (a ValueError) on junk
        raise _error(folder, f"{path.name} cannot be read ({' '.join(str(err).split())[:200]})") from None
    return validate_recording_table(df, spec, folder)


def validate_recording_table(df: pd.DataFrame, spec: TableSpec, where: Path | str = "") -> pd.DataFrame:
    """Check one table of a recording; a :class:`RecordingError` names the file and column.

    Besides :func:`powermodels.schema.validate_table` (missing columns listed
    together, dtypes, ranges, sorted time): launches end after they start, the
    schedule's entries end after they start, the energy counter never falls.
    """
    missing = [c.name for c in spec.required if c.name not in df.columns]
    if missing:
        raise _error(Path(where), f"{spec.name} lacks column(s) {', '.join(missing)} "
                                  f"(has {', '.join(map(str, df.columns)) or 'none'})")
    try:
        schema.validate_table(df, spec)
    except ValueError as err:
        raise _error(Path(where), str(err)) from None
    if spec is LAUNCHES_SPEC and len(df):
        bad = df[schema.END_S].to_numpy(float) < df[schema.START_S].to_numpy(float)
        if bad.any():
            raise _error(Path(where), f"launches.parquet: {int(bad.sum())} batch(es) end before they "
                                      f"start (first at row {int(np.argmax(bad))})")
    if spec is PHASES_SPEC:
        bad = df[schema.T1_S].to_numpy(float) < df[schema.T0_S].to_numpy(float)
        if bad.any():
            raise _error(Path(where), f"phases.parquet: entry {int(np.argmax(bad))} ends before it starts")
        unknown = sorted(set(df[schema.PHASE_KIND]) - set(PHASE_KINDS))
        if unknown:
            raise _error(Path(where), f"phases.parquet: column 'kind' has unknown value(s) {unknown} "
                                      f"(known: {', '.join(PHASE_KINDS)})")
    if spec is ENERGY_SPEC:
        drop = np.diff(df[schema.ENERGY_COUNTER_J].to_numpy(float)) < 0
        if drop.any():
            raise _error(Path(where), f"energy.parquet: column 'energy_counter_j' falls at row "
                                      f"{int(np.argmax(drop)) + 1} (a counter never decreases)")
    return df


def _read_provenance(folder: Path) -> dict:
    path = folder / "provenance.json"
    try:
        data = json.loads(path.read_text())
    except OSError:
        raise _error(folder, "provenance.json cannot be read") from None
    except json.JSONDecodeError as err:
        raise _error(folder, f"provenance.json is not JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise _error(folder, f"provenance.json holds a {type(data).__name__}, expected an object")
    missing = [k for k in PROVENANCE_KEYS if k not in data]
    if missing:
        raise _error(folder, f"provenance.json lacks key(s) {', '.join(missing)}")
    for key in ("power_limit_w", "max_sm_clock_mhz"):  # null where the board did not say
        value = data[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise _error(folder, f"provenance.json: {key} is {value!r}, expected a number or null")
    return data


def read_recording(path, *, probes: bool = True, trace_optional: bool = False) -> Recording:
    """Read and validate a raw recording folder.

    Parameters
    ----------
    path : str or os.PathLike
        The folder.
    probes : bool, default=True
        Read ``probes.parquet`` where there is one.
    trace_optional : bool, default=False
        Accept a folder without ``trace.parquet`` (e.g. one whose NVML trace was lost); its
        ``trace`` is then an empty table with the required columns.

    Returns
    -------
    Recording

    Raises
    ------
    RecordingError
        One line naming what is missing or wrong: the folder, a file, a
        column, a provenance key.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise RecordingError(f"recording {folder}: no such folder")
    no_trace = trace_optional and not (folder / "trace.parquet").is_file()
    files = {stem: spec for stem, spec in _FILES.items() if not (no_trace and stem == "trace")}
    missing = [f"{stem}.parquet" for stem in files if not (folder / f"{stem}.parquet").is_file()]
    if not (folder / "provenance.json").is_file():
        missing.append("provenance.json")
    if missing:
        raise _error(folder, f"missing file(s) {', '.join(missing)}")
    tables = {stem: _read_table(folder, stem, spec) for stem, spec in files.items()}
    if no_trace:
        tables["trace"] = pd.DataFrame({c.name: pd.Series(dtype=float) for c in TRACE_SPEC.required})
    probe_path = folder / "probes.parquet"
    probe_table = _read_table(folder, "probes", PROBES_SPEC) if probes and probe_path.is_file() else None
    return Recording(**tables, provenance=_read_provenance(folder), probes=probe_table, path=folder)


def write_recording(recording: Recording, path, *, extra: Mapping[str, bytes] | None = None) -> Path:
    """Write ``recording`` as a folder :func:`read_recording` reads back.

    Every table is validated first, so nothing invalid is written. The files are
    written as one set (:func:`~powermodels.files.replace_folder`): a save that stops
    half way leaves the folder's previous recording, never a mix of old and new files.

    Parameters
    ----------
    recording : Recording
    path : str or os.PathLike
        The folder (created; a previous recording in it is replaced as a whole, other
        files in it are kept).
    extra : mapping of str to bytes, optional
        Further files to write beside the tables (e.g. a README).

    Returns
    -------
    pathlib.Path
        The folder.
    """
    folder = Path(path)
    tables: dict[str, tuple[pd.DataFrame, TableSpec]] = {
        stem: (getattr(recording, stem), spec) for stem, spec in _FILES.items()}
    if recording.probes is not None:
        tables["probes"] = (recording.probes, PROBES_SPEC)
    for df, spec in tables.values():
        validate_recording_table(df, spec, folder)
    missing = [k for k in PROVENANCE_KEYS if k not in recording.provenance]
    if missing:
        raise _error(folder, f"provenance lacks key(s) {', '.join(missing)}")
    text = json.dumps(recording.provenance, indent=1, default=_json_default) + "\n"

    def write(tmp: Path) -> None:
        for stem, (df, _) in tables.items():
            df.to_parquet(tmp / f"{stem}.parquet", index=False)
        for name, data in (extra or {}).items():
            (tmp / name).write_bytes(data)
        (tmp / "provenance.json").write_text(text)

    # the files are one set: a save stopped half way (a crash, SIGKILL, a full disk) must not leave
    # new launches beside an old trace, nor an older save's probes beside a recording without any
    owned = [f"{stem}.parquet" for stem in (*_FILES, "probes")] + ["provenance.json", *(extra or {})]
    return replace_folder(folder, write, owned)


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"provenance value of type {type(value).__name__} is not JSON")


def downsample_trace(trace: pd.DataFrame, columns: Iterable[str] | None = None, *,
                     brackets: bool = False) -> pd.DataFrame:
    """Keep the rows of a trace where a reading changes (and the first and last).

    NVML readings change on a ~100 ms grid; a poller at ~2 kHz repeats each
    value ~200 times. Keeping the first row of every change loses no reading
    (only when the poller first saw it, to within one poll) and makes the
    trace ~100× smaller, small enough to commit.

    Parameters
    ----------
    trace : pandas.DataFrame
        A recording's trace table.
    columns : iterable of str, optional
        Readings whose changes are kept; default every column except
        ``t_s`` and ``read_s``.
    brackets : bool, default=False
        Also keep the row before each change (the last read of the old value). An energy
        counter's update is placed between those two reads
        (:func:`~powermodels.energy_counter.counter_updates`); without it the update's lower
        bracket becomes the previous change, ~100 ms earlier, and a counter window computed from
        the kept rows moves by half that. Keeps about twice the rows.
    """
    cols = [c for c in (columns if columns is not None else trace.columns)
            if c not in (schema.T_S, schema.READ_S)]
    values = trace[cols]
    keep = np.ones(len(trace), dtype=bool)
    if len(trace) > 1:
        # a reading NVML does not give (NaN in every row: no average power on some boards) repeats
        # too: NaN != NaN would keep every row of such a trace
        before = values.shift(1).iloc[1:]
        now = values.iloc[1:]
        keep[1:] = ((now != before) & ~(now.isna() & before.isna())).to_numpy().any(axis=1)
        if brackets:
            keep[:-1] |= keep[1:].copy()
        keep[-1] = True
    return trace.loc[keep].reset_index(drop=True)
