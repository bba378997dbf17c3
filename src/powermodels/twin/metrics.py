"""Measurements that hold a twin against a real GPU, computed the same way on both recordings.

Every function takes a :class:`~powermodels.recording.Recording` (real, or
made by :func:`~powermodels.twin.replay.replay`) and reads only what a real
recording has: NVML readings, the energy counter, timed launches and the
schedule. Comparing the same function's output on the two recordings is the
validation (:mod:`~powermodels.twin.compare`).

* :func:`counter_updates` / :func:`energy_between` — the energy counter as
  a piecewise-linear function of time through its updates;
* :func:`warmup_energy_per_launch` — energy per launch in each second of a
  back-to-back series (the warm-up from idle);
* :func:`reading_at_seconds` — a reading (temperature) every second of a
  schedule entry (the cooling after a load);
* :func:`implied_clock` / :func:`clock_recovery` — the real SM clock from a
  clock-reference workload's launch times (time ∝ 1/clock), and how long it
  and NVML's clock reading take to recover after a power-capped load;
* :func:`update_period` — a reading's update period;
* :func:`cap_overshoot` — how far a power-capped load runs above its
  settled power at its start, and for how long;
* :func:`ladder_steps` — each ``ladder`` step's power, clock and the two
  loads' shares (the workload alternating with the pressure load).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import clock_events, energy_counter, schema
from ..natural_dvfs.clock_windows import local_grid_updates
from ..recording import Recording

__all__ = ["BURST_SETTLE_S", "bursts_after_pressure", "cap_overshoot", "cap_starts", "capped_series", "clock_recovery", "counter_updates", "energy_between",
           "implied_clock", "ladder_steps", "merge_late_updates", "probe_clock_recovery", "reading_at_seconds",
           "reading_series", "update_period", "warmup_energy_per_launch"]

#: seconds at a burst's start in which its clock and power still rise from the capped pressure entry before it: a
#: burst's own level is read after them (``series_vs_bursts``, ``calibrate_board(read="bursts")``; session 28)
BURST_SETTLE_S = 0.4


def counter_updates(rec: Recording) -> tuple[np.ndarray, np.ndarray]:
    """Times and values of the energy counter: the first read, then the first read showing each new value.

    Each update is at its bracket's upper end (the read that first shows the
    value), except after a stalled read: an update whose bracket is wider than
    twice the median is placed by
    :func:`powermodels.natural_dvfs.clock_windows.local_grid_updates` (a line
    through its neighbours, clipped into the bracket). Before session 11 a
    read that stalled 10–120 ms put its update that late, so ~100 ms of energy
    landed in the wrong second — up to 2.9 % of a warm-up second's energy per
    launch on the H100 GPU-5bad9bd9's recording, and 18 kW spikes in the
    power overlay. The narrow brackets keep the upper end: every fit and score
    made before stays as it was where no read stalled. The recording's first
    read is kept in front of them as the anchor of the interpolation
    (:func:`energy_between` from the recording's start), though its value may
    be older than the read — where the protocols, which difference two
    updates, leave it out.
    """
    lo, hi, joules = energy_counter.counter_updates(rec.energy)
    width = hi - lo
    stalled = width > energy_counter.STALLED_BRACKET_FACTOR * np.median(width) if width.size else width.astype(bool)
    if stalled.any():
        placed, grid_joules, _ = local_grid_updates(rec.energy)
        if placed.size == hi.size and np.array_equal(grid_joules, joules):  # the same updates, placed
            hi = np.where(stalled, placed, hi)
    first = rec.energy.loc[np.isfinite(rec.energy[schema.ENERGY_COUNTER_J].to_numpy(float))].iloc[:1]
    return (np.r_[first[schema.T_S].to_numpy(float), hi],
            np.r_[first[schema.ENERGY_COUNTER_J].to_numpy(float), joules])


def energy_between(rec: Recording, a, b) -> np.ndarray:
    """Energy (J) between times ``a`` and ``b``, the counter interpolated linearly between updates."""
    t, e = counter_updates(rec)
    return np.interp(np.asarray(b, float), t, e) - np.interp(np.asarray(a, float), t, e)


def launches_between(rec: Recording, a: float, b: float, workload: str | None = None) -> float:
    """Launches run in ``[a, b]``, a batch counted pro rata of its overlap
    (:func:`powermodels.energy_counter.launches_inside` over the batches)."""
    la = rec.launches if workload is None else rec.launches.loc[rec.launches[schema.WORKLOAD] == workload]
    return energy_counter.launches_inside(la[[schema.START_S, schema.END_S]].to_numpy(float), a, b,
                                          counts=la[schema.LAUNCHES].to_numpy(float))


def _entry(rec: Recording, workload: str, kind: str, phase: str | None = None) -> pd.Series:
    rows = rec.phase_rows(phase=phase, workload=workload, kind=kind)
    if rows.empty:
        raise ValueError(f"recording {rec.name}: no {kind!r} entry of workload {workload!r} in phases.parquet")
    return rows.iloc[0]


def warmup_energy_per_launch(rec: Recording, workload: str, seconds: int = 25,
                             phase: str | None = None) -> pd.DataFrame:
    """Energy per launch in each whole second of ``workload``'s ``series`` entry.

    Returns
    -------
    DataFrame
        ``second`` (0 = the first second), ``energy_j`` per launch, the
        temperature reading at the second's end, and the ``launches`` counted in
        the second (a batch pro rata; a second with none reads a huge
        ``energy_j``, so a caller that cares checks them).
    """
    row = _entry(rec, workload, "series", phase)
    t0 = float(row[schema.T0_S])
    n = min(seconds, int(np.floor(float(row[schema.T1_S]) - t0)))
    a = t0 + np.arange(n)
    energy = energy_between(rec, a, a + 1.0)
    counts = np.array([launches_between(rec, x, x + 1.0, workload) for x in a])
    temp = reading_series(rec, schema.TEMPERATURE_C, a + 1.0) if rec.has_trace else np.full(n, np.nan)
    return pd.DataFrame({schema.SECOND: np.arange(n), schema.ENERGY_J: energy / np.maximum(counts, 1e-12),
                         schema.TEMPERATURE_C: temp, schema.LAUNCHES: counts})


def reading_series(rec: Recording, column: str, t) -> np.ndarray:
    """The last value of a trace column at or before each time (what a poller saw then)."""
    tr = rec.require_trace(f"the {column} reading")
    i = np.searchsorted(tr[schema.T_S].to_numpy(float), np.asarray(t, float), side="right") - 1
    return tr[column].to_numpy(float)[np.clip(i, 0, len(tr) - 1)]


def reading_at_seconds(rec: Recording, workload: str, kind: str, column: str = schema.TEMPERATURE_C,
                       seconds: int = 30, phase: str | None = None) -> pd.DataFrame:
    """A reading every second from the start of an entry (e.g. the cooling ``idle`` after a load)."""
    row = _entry(rec, workload, kind, phase)
    t0 = float(row[schema.T0_S])
    n = min(seconds, int(np.floor(float(row[schema.T1_S]) - t0))) + 1
    s = np.arange(n)
    return pd.DataFrame({"second": s, column: reading_series(rec, column, t0 + s)})


def implied_clock(rec: Recording, workload: str, max_clock_mhz: float | None = None) -> pd.DataFrame:
    """The SM clock each launch of a clock-reference workload ran at: ``f_max · t_fast / t``.

    For a kernel whose time is ∝ 1/clock (a dependent FMA chain), the time of
    a launch gives the mean real clock over it. ``t_fast`` is the 5th
    percentile of the workload's launch times (the launches at the top clock).
    """
    la = rec.launches.loc[rec.launches[schema.WORKLOAD] == workload]
    if la.empty:
        raise ValueError(f"recording {rec.name}: no launches of the clock workload {workload!r}")
    f_max = float(max_clock_mhz or rec.provenance["max_sm_clock_mhz"])
    t = la[schema.TIME_S].to_numpy(float)
    t_fast = float(np.percentile(t, 5))
    out = la[[schema.RECORDING_PHASE, schema.REPEAT, schema.START_S, schema.END_S]].copy()
    out[schema.SM_CLOCK_MHZ] = np.minimum(f_max * t_fast / t, f_max)
    return out.reset_index(drop=True)


def bursts_after_pressure(rec: Recording, workload: str) -> list[tuple[int, float, float]]:
    """``(repeat, t0_s, t1_s)`` of every ``burst`` of ``workload`` that directly follows a ``pressure`` entry."""
    ph = rec.phases.reset_index(drop=True)
    kind, name = ph[schema.PHASE_KIND].to_numpy(), ph[schema.WORKLOAD].to_numpy()
    return [(int(ph[schema.REPEAT].iloc[i]), float(ph[schema.T0_S].iloc[i]), float(ph[schema.T1_S].iloc[i]))
            for i in range(1, len(ph)) if name[i] == workload and kind[i] == "burst" and kind[i - 1] == "pressure"]


def clock_recovery(rec: Recording, clock_workload: str, *, target_mhz: float = 1950.0,
                   repeats=None) -> pd.DataFrame:
    """How long the clock takes to recover after each pressure (power-capped) entry.

    For every ``burst`` of ``clock_workload`` that directly follows a
    ``pressure`` entry: the time from the burst's start to the end of the
    first launch at or above ``target_mhz`` (the real clock, from
    :func:`implied_clock`), and to the first NVML clock reading at or above
    it.

    Returns
    -------
    DataFrame
        ``repeat``, ``start_mhz`` (implied clock of the first launch),
        ``real_s``, ``reading_s`` (NaN where the reading never got there
        within the burst), ``lag_s`` (= reading_s − real_s).
    """
    clocks = implied_clock(rec, clock_workload)
    # without NVML readings (a recording without trace.parquet) the reading's times are NaN
    tr_t = rec.trace[schema.T_S].to_numpy(float) if rec.has_trace else np.empty(0)
    tr_f = rec.trace[schema.SM_CLOCK_MHZ].to_numpy(float) if rec.has_trace else np.empty(0)
    rows = []
    for rep, t0, t1 in bursts_after_pressure(rec, clock_workload):
        if repeats is not None and rep not in set(repeats):
            continue
        c = clocks.loc[(clocks[schema.START_S] >= t0) & (clocks[schema.END_S] <= t1)]
        if c.empty:
            continue
        up = c.loc[c[schema.SM_CLOCK_MHZ] >= target_mhz]
        real = float(up[schema.END_S].iloc[0] - t0) if len(up) else np.nan
        sel = (tr_t >= t0) & (tr_t <= t1) & (tr_f >= target_mhz)
        reading = float(tr_t[sel][0] - t0) if sel.any() else np.nan
        rows.append({schema.REPEAT: rep, "start_mhz": float(c[schema.SM_CLOCK_MHZ].iloc[0]),
                     "real_s": real, "reading_s": reading, "lag_s": reading - real})
    return pd.DataFrame(rows, columns=[schema.REPEAT, "start_mhz", "real_s", "reading_s", "lag_s"])


def probe_clock_recovery(rec: Recording, clock_workload: str, *, target_mhz: float = 1950.0) -> pd.DataFrame:
    """Clock recovery after each pressure entry from the on-GPU clock probes (``probes.parquet``).

    Like :func:`clock_recovery`, from the probes instead of launch times:
    for every ``burst`` of ``clock_workload`` right after a ``pressure``
    entry, the probed clock at its start (``start_mhz``, the first probe)
    and the time from the burst's start to the first probe at or above
    ``target_mhz`` (``real_s``). The probes are scaled so that the
    workload's steady top clock (their highest decile) reads the board's
    top clock: a probe's cycles-over-timer clock can be off by a fixed
    factor (0.75 % high on the H100 of ``datasets/h100-probe-2026-11-25``).
    """
    if rec.probes is None or rec.probes.empty:
        raise ValueError(f"recording {rec.name}: has no probes.parquet, so the probed clock recovery "
                         "cannot be measured")
    pr = rec.probes.loc[rec.probes[schema.WORKLOAD] == clock_workload]
    t = pr[schema.T_S].to_numpy(float)
    f = pr[schema.PROBE_CLOCK_MHZ].to_numpy(float)
    if f.size:  # on the probe's scale the steady top clock (its highest decile) reads the board's top clock
        f = f * float(rec.provenance["max_sm_clock_mhz"]) / float(np.median(f[f >= np.percentile(f, 90)]))
    rows = []
    for rep, t0, t1 in bursts_after_pressure(rec, clock_workload):
        inside = (t >= t0) & (t <= t1)
        if not inside.any():
            continue
        up = inside & (f >= target_mhz)
        rows.append({schema.REPEAT: rep, "start_mhz": float(f[inside][0]),
                     "real_s": float(t[up][0] - t0) if up.any() else np.nan})
    return pd.DataFrame(rows, columns=[schema.REPEAT, "start_mhz", "real_s"])


def update_period(rec: Recording, column: str, t0: float = -np.inf, t1: float = np.inf) -> float:
    """A reading's update period (s): intervals between its changes, missed updates counted as multiples.

    Readings that repeat a value hide an update; an interval near ``k``
    times the shortest common interval counts as ``k`` periods.
    """
    tr = rec.require_trace(f"the update period of the {column} reading")
    sel = (tr[schema.T_S] >= t0) & (tr[schema.T_S] <= t1)
    t = tr.loc[sel, schema.T_S].to_numpy(float)
    v = tr.loc[sel, column].to_numpy(float)
    changes = t[1:][np.diff(v) != 0]
    d = np.diff(changes)
    if d.size == 0:
        return float("nan")
    base = float(np.percentile(d, 25))
    k = np.maximum(np.rint(d / base), 1.0)
    close = np.abs(d / (k * base) - 1.0) <= 0.2
    return float(d[close].sum() / k[close].sum()) if close.any() else base


def series_entries(rec: Recording, workload: str, kind: str = "series") -> list[int]:
    """Positions in ``rec.phases`` (in schedule order) of ``workload``'s ``kind`` entries.

    A recording made with ``gpu_raw_recording.py --parts capstarts`` has several
    ``series`` of its capped load, one per start from idle; others have one.
    """
    ph = rec.phases.reset_index(drop=True)
    return [int(i) for i in ph.index[(ph[schema.WORKLOAD] == workload) & (ph[schema.PHASE_KIND] == kind)]]


#: the 1 s window of :func:`cap_overshoot` slides in steps of this (s): its settling time's resolution
SETTLING_STEP_S = 0.1


def settling_error(real_s: float, twin_s: float) -> float:
    """The twin's settling time relative to the real one, both floored at :data:`SETTLING_STEP_S`.

    A start that never leaves the band settles in 0 s, which the window cannot tell from 0.1 s.
    Unfloored, a twin that also read 0 s had error −100 % (H200 GPU-ef3dd380's raw start, session 14)
    and one that read 0.1 s +10⁸.
    """
    return max(float(twin_s), SETTLING_STEP_S) / max(float(real_s), SETTLING_STEP_S) - 1.0


def cap_overshoot(rec: Recording, workload: str, *, kind: str = "series", settle_band: float = 0.01,
                  steady_from_s: float = 5.0, entry: int = 0) -> dict:
    """A power-capped entry's start: how far above its settled power it runs, and for how long.

    Power is the energy counter's mean over a sliding 1 s window, every
    0.1 s; ``settled`` is its mean from ``steady_from_s`` to the end.
    ``entry`` picks which of the workload's ``kind`` entries (0: the first;
    :func:`series_entries` lists them).

    Returns
    -------
    dict
        ``settled_w``, ``first_second_w`` (mean over the first second),
        ``overshoot_w`` (first_second_w − settled_w), ``peak_w`` (highest 1 s
        mean), ``settling_s`` (start of the last 1 s window outside
        settled ± ``settle_band``, before ``steady_from_s``).
    """
    entries = series_entries(rec, workload, kind)
    if not 0 <= entry < len(entries):
        raise ValueError(f"recording {rec.name}: workload {workload!r} has {len(entries)} {kind!r} entries, "
                         f"no entry {entry}")
    row = rec.phases.reset_index(drop=True).iloc[entries[entry]]
    t0, t1 = float(row[schema.T0_S]), float(row[schema.T1_S])
    if t1 - t0 < steady_from_s + 1.0:
        raise ValueError(f"recording {rec.name}: {workload!r}'s {kind!r} entry {entry} lasts {t1 - t0:.1f} s; "
                         f"its settled power is read from {steady_from_s:g} s on (≥ {steady_from_s + 1:g} s needed)")
    a = t0 + np.arange(0.0, t1 - t0 - 1.0, SETTLING_STEP_S)
    p = energy_between(rec, a, a + 1.0)
    settled = float(energy_between(rec, t0 + steady_from_s, t1) / (t1 - t0 - steady_from_s))
    outside = np.flatnonzero((np.abs(p / settled - 1.0) > settle_band) & (a - t0 < steady_from_s))
    return {schema.SETTLED_W: settled, schema.FIRST_SECOND_W: float(p[0]), schema.OVERSHOOT_W: float(p[0] - settled),
            schema.PEAK_W: float(p.max()), schema.SETTLING_S: float(a[outside[-1]] - t0 + 1.0) if outside.size else 0.0}


def ladder_steps(rec: Recording, *, skip_s: float = 0.2) -> pd.DataFrame:
    """Each ``ladder`` step (two loads alternating every few ms): its power, clock and the loads' shares.

    The step's first ``skip_s`` is left out (the clock drops into the mix there).

    Returns
    -------
    DataFrame
        One row per ``ladder`` entry: ``phase``, ``workload``, ``repeat``,
        ``t0_s``/``t1_s`` (the part measured), ``power_w`` (the energy
        counter's mean), ``sm_clock_mhz`` (median NVML clock reading, NaN
        without a trace), ``clock_mhz`` (median on-GPU probe, NaN without
        probes), ``launch_coverage`` (share of the part the workload's
        launches cover) and ``companion_share`` (the other load's).
    """
    ph = rec.phases
    rows = []
    for e in ph.loc[ph[schema.PHASE_KIND] == "ladder"].itertuples(index=False):
        e = e._asdict()
        a, b = float(e[schema.T0_S]) + skip_s, float(e[schema.T1_S])
        if b <= a:
            continue
        la = rec.launches
        la = la.loc[(la[schema.RECORDING_PHASE] == e[schema.RECORDING_PHASE]) & (la[schema.REPEAT] == e[schema.REPEAT])]
        own = la[schema.WORKLOAD] == e[schema.WORKLOAD]

        def share(sel):  # the launches' time inside [a, b] (each batch weighted by its duration) / (b - a)
            iv = la.loc[sel, [schema.START_S, schema.END_S]].to_numpy(float)
            return energy_counter.launches_inside(iv, a, b, counts=iv[:, 1] - iv[:, 0]) / (b - a) if len(iv) else 0.0

        clock = (float(np.median(reading_series(rec, schema.SM_CLOCK_MHZ, np.arange(a, b, 0.01))))
                 if rec.has_trace else np.nan)
        probe = np.nan
        if rec.probes is not None and len(rec.probes):
            pt = rec.probes[schema.T_S].to_numpy(float)
            inside = (pt >= a) & (pt <= b)
            probe = float(np.median(rec.probes[schema.PROBE_CLOCK_MHZ].to_numpy(float)[inside])) if inside.any() \
                else np.nan
        rows.append({schema.RECORDING_PHASE: e[schema.RECORDING_PHASE], schema.WORKLOAD: e[schema.WORKLOAD],
                     schema.REPEAT: int(e[schema.REPEAT]), schema.T0_S: a, schema.T1_S: b,
                     schema.POWER_W: float(energy_between(rec, np.array([a]), np.array([b]))[0]) / (b - a),
                     schema.SM_CLOCK_MHZ: clock, schema.PROBE_CLOCK_MHZ: probe,
                     schema.LAUNCH_COVERAGE: share(own), schema.COMPANION_SHARE: share(~own)})
    return pd.DataFrame(rows)


def merge_late_updates(t: np.ndarray, e: np.ndarray, share: float = 0.6) -> tuple[np.ndarray, np.ndarray]:
    """Drop each update that the next one follows within ``share`` of the median period (a late publication).

    The two intervals around it become one, whose mean power is exact. Regular updates of the H100s and the
    H200 come 0.083–0.13 s apart (0.1st to 99.9th percentile); the late ones are followed after 0.01–0.05 s.
    """
    if t.size < 3:
        return t, e
    short = np.diff(t) < share * float(np.median(np.diff(t)))
    keep = np.ones(t.size, bool)
    # update i (i < n−1) goes when the interval after it is short; the first one too (then no interval
    # is merged: the span before it was not measured)
    keep[:-1] = ~short
    return t[keep], e[keep]


def capped_series(real: Recording, workloads=None) -> list[str]:
    """The workloads whose ``series`` ran power-capped on ``real`` (NVML's software power-cap reason)."""
    if not real.has_trace:
        return []
    series = real.phase_rows(kind="series")
    names = dict.fromkeys(workloads if workloads is not None else series[schema.WORKLOAD])  # once each
    out = []
    for w in names:
        row = series.loc[series[schema.WORKLOAD] == w].iloc[0]
        inside = real.trace.loc[(real.trace[schema.T_S] >= row[schema.T0_S])
                                & (real.trace[schema.T_S] <= row[schema.T1_S])]
        if schema.THROTTLE_REASONS not in inside:
            continue
        # a recording may store the reasons bit field as float (session 5's): the bits are whole numbers
        reasons = inside[schema.THROTTLE_REASONS].fillna(0).to_numpy().astype(np.int64)
        if (reasons & clock_events.SW_POWER_CAP).any():
            out.append(w)
    return out


def cap_starts(rec: Recording, workload: str, **kwargs) -> pd.DataFrame:
    """:func:`cap_overshoot` for every ``series`` entry of ``workload``, one row each (``entry``, ``t0_s``).

    One capped start is one draw of a spread: where the ~100 ms counter updates fall
    against the start, and the controller's ±50–100 W swings, move its overshoot and
    settling time by more than ±25 % (docs/twin.md, session 12: ten starts from idle on
    one board). A recording with several starts gives their median and range.

    Each row also has ``rest_s``, the idle entry right before the start (NaN if another entry
    came before it), and ``start_temperature_c``, the die reading at the start (NaN without a
    trace): whether a start depends on how long or how cool the board rested (session 14: on
    two H200s neither 5–120 s of rest nor the reading moved it).
    """
    ph = rec.phases.reset_index(drop=True)
    rows = []
    for k, i in enumerate(series_entries(rec, workload)):
        t0 = float(ph[schema.T0_S].iloc[i])
        before = ph.iloc[i - 1] if i > 0 else None
        rest = (float(before[schema.T1_S] - before[schema.T0_S])
                if before is not None and before[schema.PHASE_KIND] == "idle" else np.nan)
        temp = float(reading_series(rec, schema.TEMPERATURE_C, [t0])[0]) if rec.has_trace else np.nan
        rows.append({"entry": k, schema.T0_S: t0, schema.REST_S: rest, schema.START_TEMPERATURE_C: temp,
                     **cap_overshoot(rec, workload, entry=k, **kwargs)})
    return pd.DataFrame(rows)
