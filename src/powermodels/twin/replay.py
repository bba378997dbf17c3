"""Replay a recording's schedule on a twin preset: the recording the twin would have made.

:func:`replay` walks ``phases.parquet`` (what ran when, idle included) on a
:class:`~powermodels.devices.simulated.SimulatedGPU` built from a preset and
returns a :class:`~powermodels.recording.Recording` with the same tables as a
real one — the NVML trace (polled every ``poll_s``, only the rows where a
reading changes), the energy counter, one row per timed batch, the schedule
as the twin ran it — so every measurement of :mod:`~powermodels.twin.metrics`
runs unchanged on both.

The twin's time is the recording's time: each entry starts at its ``t0_s``
(the twin idles through gaps) and runs until its ``t1_s``; ``burst`` and
``series`` entries launch their workload in batches separated by the
workload's host gap, ``pressure`` entries run it back to back untimed,
``idle`` entries idle, ``ladder`` entries alternate the workload with the
pressure load in the cycle the recording's own launches show
(:func:`ladder_cycles`; ``docs/recordings.md``, "The ladder part"). The twin starts at the recording's first temperature
reading (:meth:`~powermodels.devices.simulated.SimulatedGPU.start_at_temperature`:
the excess over its idle steady state sits on the slowest thermal pole).
The ambient temperature is the preset's unless ``ambient`` gives a profile
over time (e.g. :func:`~powermodels.twin.ambient.recorded_ambient`: the
recording's own inlet), which the twin follows between its steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from .. import schema
from ..counter_timing import counter_timing_before
from ..recording import PHASES_SPEC, Recording, downsample_trace, validate_recording_table
from .preset import TwinPreset, load_preset

__all__ = ["host_stalls", "ladder_cycles", "replay"]

#: trace columns a replay writes (those of a raw recording)
TRACE_COLUMNS = (schema.T_S, schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.SM_CLOCK_MHZ,
                 schema.MEM_CLOCK_MHZ, schema.TEMPERATURE_C, schema.THROTTLE_REASONS)
#: longest stretch simulated per call (bounds the work between progress reports and trace cuts)
CHUNK_S = 0.25


def replay(schedule, preset, *, seed: int = 0, poll_s: float = 1e-3, start_temperature_c: float | None = None,
           progress: Callable[[float, float], None] | None = None, ambient: pd.DataFrame | None = None,
           ambient_source: str | None = None, counter_timing: str = "seed") -> Recording:
    """Run a schedule on a twin preset and return the recording it makes.

    Parameters
    ----------
    schedule : Recording or pandas.DataFrame
        A recording (its ``phases`` are replayed and its first temperature
        reading sets the start) or a ``phases.parquet`` table.
    preset : TwinPreset or str
        The twin (a shipped name or a preset file).
    seed : int, default=0
        Seeds the twin's sensor phase and noise.
    poll_s : float, default=1e-3
        How often the twin's trace is polled (a real poller runs at ~0.5 ms;
        readings change every ~100 ms, so 1 ms loses nothing but when).
    start_temperature_c : float, optional
        Idle temperature at the start; default the recording's first reading,
        else the preset's idle steady state.
    progress : callable, optional
        Called as ``progress(done_s, total_s)`` after each schedule entry.
    ambient : pandas.DataFrame, optional
        ``t_s``, ``ambient_c``: the ambient temperature over time (linear
        between points, held beyond the ends), a boundary condition the
        twin follows (updated every ≤ 0.25 s); default the preset's constant.
    ambient_source : str, optional
        Where ``ambient`` came from, for the provenance.
    counter_timing : {"seed", "recorded"}, default="seed"
        When the twin's energy counter updates: the preset's period at a
        phase drawn from ``seed``, or (``schedule`` a recording) the
        recording's own period and phase, fitted to its counter updates
        before its first series
        (:func:`~powermodels.counter_timing.counter_timing_before`;
        session 28's candidate (c)).

    Returns
    -------
    Recording
        ``provenance`` names the preset, the seed and the schedule's source.
    """
    twin = load_preset(preset)
    if isinstance(schedule, Recording):
        phases, source = schedule.phases, schedule.name
        if start_temperature_c is None and schedule.has_trace:
            start_temperature_c = float(schedule.trace[schema.TEMPERATURE_C].iloc[0])
    else:
        phases, source = schedule, "phases table"
    validate_recording_table(phases, PHASES_SPEC, source)
    for name in sorted(set(phases.loc[phases[schema.PHASE_KIND] != "idle", schema.WORKLOAD])):
        twin.workload(name)  # every workload the schedule runs must be in the preset, before any work
    profile = None
    if ambient is not None:
        profile = (np.asarray(ambient[schema.T_S], float), np.asarray(ambient[schema.AMBIENT_C], float))
        if not (profile[0].size and np.all(np.isfinite(profile[1])) and np.all(np.diff(profile[0]) >= 0)):
            raise ValueError("replay: ambient needs finite ambient_c at increasing t_s, at least one row")
    if counter_timing not in ("seed", "recorded"):
        raise ValueError(f"replay: counter_timing must be 'seed' or 'recorded', got {counter_timing!r}")
    timing = None
    if counter_timing == "recorded":
        if not isinstance(schedule, Recording):
            raise ValueError("replay: counter_timing='recorded' needs a recording as the schedule (its counter's "
                             "updates are read), not a phases table")
        timing = counter_timing_before(schedule)
    gpu = twin.gpu(seed=seed, history_s=60.0,
                   ambient_c=None if profile is None else float(np.interp(0.0, *profile)),
                   energy_timing=None if timing is None else (timing["period_s"], timing["phase_s"]))
    if start_temperature_c is not None:
        gpu.start_at_temperature(start_temperature_c)
    run = _Run(gpu, twin, poll_s, profile)
    if isinstance(schedule, Recording):
        run.stalls = host_stalls(schedule)
        run.ladders = ladder_cycles(schedule)
    total = float(phases[schema.T1_S].max())
    for row in phases.itertuples(index=False):
        entry = row._asdict()
        run.until(float(entry[schema.T0_S]))
        run.entry(entry)
        if progress is not None:
            progress(gpu.now(), total)
    run.until(total)
    run.flush()
    provenance = {
        "gpu": f"twin {twin.name} (simulated)", "uuid": f"SIM-twin-{twin.name}-{seed}",
        "power_limit_w": twin.physics.power_limit_w, "max_sm_clock_mhz": twin.physics.sm_clock_max_mhz,
        "made_by": "powermodels.twin.replay", "preset": twin.name, "seed": seed,
        "schedule_from": source, "poll_s": poll_s,
        "ambient_c": twin.ambient_c if profile is None else float(np.interp(0.0, *profile)),
        "ambient": {"source": f"preset {twin.name} (constant)", "range_c": [twin.ambient_c] * 2}
        if profile is None else {"source": ambient_source or "given profile",
                                 "range_c": [float(profile[1].min()), float(profile[1].max())],
                                 "points": [[float(a), float(b)] for a, b in zip(*profile)]},
        "workloads": {k: {"launches_per_batch": w.launches_per_batch} for k, w in twin.workloads.items()},
        "counter_timing": {"source": "seed"} if timing is None else {"source": f"recorded ({source})", **timing},
        "simulated": True,
    }
    return Recording(run.trace_table(), run.energy_table(), run.launch_table(), phases.reset_index(drop=True),
                     provenance)


def host_stalls(rec: Recording, *, factor: float = 3.0, min_s: float = 5e-3) -> np.ndarray:
    """``(start_s, idle_s)`` of every batch that took far longer than its entry's others.

    A timed batch ``factor`` times longer than the median batch of its
    schedule entry, by more than ``min_s``, is a host stall (the launch
    waited on the host: the GPU idled, power dropped); a replay idles the
    excess at the batch's start, as the board did.
    """
    la = rec.launches
    if la.empty:
        return np.empty((0, 2))
    dur = (la[schema.END_S] - la[schema.START_S]).to_numpy(float)
    keys = la[[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT]].astype(str).agg("|".join, axis=1)
    med = pd.Series(dur).groupby(keys.to_numpy()).transform("median").to_numpy(float)
    stall = (dur > factor * med) & (dur - med > min_s)
    out = np.column_stack([la[schema.START_S].to_numpy(float)[stall], (dur - med)[stall]])
    return out[np.argsort(out[:, 0])]


def ladder_cycles(rec: Recording) -> dict:
    """The cycle each ``ladder`` entry of ``rec`` ran, read from its launches.

    A ladder step alternates two loads every few ms (the workload named in
    ``phases.parquet`` and the pressure load, whose batches are launch rows
    under its own name); the schedule row alone cannot say how many batches
    of each made one cycle, so the launches inside the entry do: the median
    run of consecutive batches of each load, in the order the entry began.

    Parameters
    ----------
    rec : Recording
        A recording with ``ladder`` entries and their launch rows.

    Returns
    -------
    dict
        ``{(phase, workload, repeat): ((name, batches, launches_per_batch), ...)}``,
        one item per load of the cycle, in order; empty without ladder entries.
    """
    ph, la = rec.phases, rec.launches
    out = {}
    for e in ph.loc[ph[schema.PHASE_KIND] == "ladder"].itertuples(index=False):
        e = e._asdict()
        key = (e[schema.RECORDING_PHASE], e[schema.WORKLOAD], int(e[schema.REPEAT]))
        inside = la.loc[(la[schema.RECORDING_PHASE] == key[0]) & (la[schema.REPEAT] == key[2])
                        & (la[schema.START_S] >= float(e[schema.T0_S]) - 1e-6)
                        & (la[schema.START_S] <= float(e[schema.T1_S]))].sort_values(schema.START_S)
        names = inside[schema.WORKLOAD].to_numpy()
        if key[1] not in set(names) or len(set(names)) != 2:
            raise ValueError(f"recording {rec.name}: ladder entry {key} needs launch rows of its workload and "
                             f"of one pressure load inside it, found {sorted(set(names))}")
        new_run = np.r_[True, names[1:] != names[:-1]]
        starts = np.flatnonzero(new_run)
        lengths = np.diff(np.r_[starts, len(names)])
        cycle = []
        for name in dict.fromkeys(names[starts]):  # first-seen order: the order the entry began
            runs = lengths[names[starts] == name]
            per = int(round(float(np.median(inside.loc[inside[schema.WORKLOAD] == name, schema.LAUNCHES]))))
            cycle.append((str(name), max(1, int(round(float(np.median(runs))))), max(1, per)))
        out[key] = tuple(cycle)
    return out


class _Run:
    """State of one replay: the twin, the trace cut so far, the launch rows."""

    def __init__(self, gpu, twin: TwinPreset, poll_s: float, ambient=None):
        self.gpu, self.twin, self.poll_s = gpu, twin, poll_s
        self.ambient = ambient  # (t_s, ambient_c) arrays, or None: the preset's constant
        self.traced_to = 0.0
        self.traces: list[pd.DataFrame] = []
        self.launches: list[dict] = []
        self.stalls = np.empty((0, 2))  # (start_s, idle_s) of the host's stalls inside timed entries
        self.next_stall = 0
        self.ladders: dict = {}  # ladder_cycles of the replayed recording
        self.batches: dict = {}  # next batch number per (workload, phase, repeat): a ladder's tail continues it

    def until(self, t: float) -> None:
        """Idle until ``t`` (cutting the trace as it goes)."""
        while self.gpu.now() < t - 1e-9:
            self.follow_ambient()
            self.gpu.idle(min(CHUNK_S, t - self.gpu.now()))
            self.cut()

    def follow_ambient(self) -> None:
        """Set the twin's ambient to the profile's value now (steps of ≤ CHUNK_S: the inlet moves slowly)."""
        if self.ambient is not None:
            self.gpu.ambient_c = float(np.interp(self.gpu.now(), *self.ambient))

    def cut(self, final: bool = False) -> None:
        """Trace the time simulated since the last cut (the twin keeps only 60 s of history).

        Samples stay on one grid (``traced_to + k·poll_s``) across cuts; a cut
        keeps its last sample for the next one, except the final cut.
        """
        n = math.floor((self.gpu.now() - self.traced_to) / self.poll_s + 1e-9)
        if n < 2:
            return
        end = self.traced_to + n * self.poll_s
        tr = self.gpu.trace(self.traced_to, end, sample_period_s=self.poll_s)
        self.traces.append(tr if final else tr.iloc[:-1])
        self.traced_to = end

    def flush(self) -> None:
        self.cut(final=True)

    def entry(self, e: dict) -> None:
        kind, t1 = e[schema.PHASE_KIND], float(e[schema.T1_S])
        if kind == "idle":
            self.until(t1)
            return
        if kind == "ladder":
            self.ladder(e)
            return
        tw = self.twin.workload(e[schema.WORKLOAD])
        timed = kind in ("burst", "series")
        n = tw.launches_per_batch if timed else 1
        gap = tw.gap_s if timed else 0.0
        bkey = (e[schema.WORKLOAD], e[schema.RECORDING_PHASE], int(e[schema.REPEAT]))
        batch = self.batches.get(bkey, 0)
        ph = self.gpu.physics
        # time per launch at the clock the GPU runs now (a capped load runs slower than at the top clock,
        # and a chunk sized at the top clock would run past the entry's end into the next one)
        per_launch = tw.workload.time_s(ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0])
        while True:
            now = self.gpu.now()
            while self.next_stall < len(self.stalls) and self.stalls[self.next_stall, 0] < now - 0.05:
                self.next_stall += 1  # a stall the twin ran past (it started the entry later than the board)
            i = self.next_stall
            stall = self.stalls[i] if i < len(self.stalls) and self.stalls[i, 0] < t1 else None
            if stall is not None and stall[0] <= now + 1e-3:
                self.next_stall += 1
                self.until(now + stall[1])  # the host stalled here: the GPU idled
                continue
            # run up to the next stall, if it falls inside this entry
            end = stall[0] if stall is not None else t1
            left = end - now
            if stall is not None and left < n * per_launch + gap:
                self.until(stall[0])
                continue
            per_batch = n * per_launch + gap
            if left < per_batch:
                break
            m = max(1, min(math.floor(left / per_batch), math.ceil(CHUNK_S / per_batch)))
            # the host gap falls between batches: spread over the batch's launches (energy is what counts)
            self.follow_ambient()
            se = self.gpu.run(tw.workload, launches=m * n, gap_s=gap / n)
            per_launch = float(se[-1, 1] - se[-1, 0])
            if timed:
                starts, ends = se[::n, 0], se[n - 1::n, 1]
                for s, t_end in zip(starts, ends):
                    self.launches.append({
                        schema.WORKLOAD: e[schema.WORKLOAD], schema.RECORDING_PHASE: e[schema.RECORDING_PHASE],
                        schema.REPEAT: int(e[schema.REPEAT]), schema.BATCH: batch, schema.START_S: float(s),
                        schema.END_S: float(t_end), schema.LAUNCHES: n,
                        schema.TIME_S: float(t_end - s - gap / n * (n - 1)) / n})
                    batch += 1
                self.batches[bkey] = batch
            if gap > 0:
                self.gpu.idle(gap / n)
            self.cut()
        self.until(t1)

    def ladder(self, e: dict) -> None:
        """A ``ladder`` entry: the cycle's loads in turn, back to back, every batch timed, until ``t1``.

        The real step queues both loads on one stream with no host sync inside
        a cycle, so the GPU runs them ~25 µs apart (below the twin's 0.2 ms
        step): the twin runs them with no gap. A host stall (see
        :func:`host_stalls`) idles the twin between cycles.
        """
        key = (e[schema.RECORDING_PHASE], e[schema.WORKLOAD], int(e[schema.REPEAT]))
        if key not in self.ladders:
            raise ValueError(f"twin replay: the 'ladder' entry {key} alternates its workload with the pressure "
                             "load in a cycle only the recording's launches give: replay the Recording, not "
                             "its phases table")
        cycle = [(name, self.twin.workload(name).workload, b, per) for name, b, per in self.ladders[key]]
        ph, t1 = self.gpu.physics, float(e[schema.T1_S])
        # a cycle's length at the top clock, then as the twin last ran it (the mix may run capped)
        length = sum(b * per * w.time_s(ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0]) for _, w, b, per in cycle)
        while True:
            now = self.gpu.now()
            while self.next_stall < len(self.stalls) and self.stalls[self.next_stall, 0] < now - 0.05:
                self.next_stall += 1
            if self.next_stall < len(self.stalls) and self.stalls[self.next_stall, 0] <= now + 1e-3:
                self.until(now + self.stalls[self.next_stall, 1])
                self.next_stall += 1
                continue
            if now + length > t1:
                break
            self.follow_ambient()
            for name, w, b, per in cycle:
                se = self.gpu.run(w, launches=b * per)
                bkey = (name, key[0], key[2])
                first = self.batches.get(bkey, 0)
                for j, (s, t_end) in enumerate(zip(se[::per, 0], se[per - 1::per, 1])):
                    self.launches.append({
                        schema.WORKLOAD: name, schema.RECORDING_PHASE: key[0], schema.REPEAT: key[2],
                        schema.BATCH: first + j, schema.START_S: float(s), schema.END_S: float(t_end),
                        schema.LAUNCHES: per, schema.TIME_S: float(t_end - s) / per})
                self.batches[bkey] = first + b
            length = self.gpu.now() - now
            if self.gpu.now() - self.traced_to >= CHUNK_S:
                self.cut()
        self.until(t1)

    def trace_table(self) -> pd.DataFrame:
        full = pd.concat(self.traces, ignore_index=True)
        full = full.drop_duplicates(schema.T_S, keep="first")
        small = downsample_trace(full[list(TRACE_COLUMNS)],
                                 columns=[c for c in TRACE_COLUMNS if c != schema.T_S])
        small[schema.SM_CLOCK_MHZ] = small[schema.SM_CLOCK_MHZ].round().astype("int16")
        small[schema.MEM_CLOCK_MHZ] = small[schema.MEM_CLOCK_MHZ].round().astype("int16")
        small[schema.TEMPERATURE_C] = small[schema.TEMPERATURE_C].round().astype("int16")
        self.full_energy = full.loc[full[schema.ENERGY_COUNTER_J].notna(), [schema.T_S, schema.ENERGY_COUNTER_J]]
        return small.reset_index(drop=True)

    def energy_table(self) -> pd.DataFrame:
        e = self.full_energy.reset_index(drop=True)
        return e

    def launch_table(self) -> pd.DataFrame:
        cols = [schema.WORKLOAD, schema.RECORDING_PHASE, schema.REPEAT, schema.BATCH, schema.START_S,
                schema.END_S, schema.LAUNCHES, schema.TIME_S]
        return pd.DataFrame(self.launches, columns=cols)
