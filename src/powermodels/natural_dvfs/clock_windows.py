"""Power windows of one workload over a known, moving clock trajectory.

Under natural DVFS an uncapped workload runs below its highest clock only while the power-cap
controller recovers after a pressure load: ~100–150 ms, in 10–20 ms clock steps
(``datasets/h100-2026-11-25-raw``). A window in which the clock holds still is then rare, but
the power of a window is the mean of ``P(f(t))`` over it, and every timed batch's clock is known
(:mod:`~powermodels.natural_dvfs.launch_clocks`: probed on the GPU, or implied by a reference
kernel's own time). With thesis eq. 4.1, ``P = P_static + a·f·V(f)²``, a window's mean power is
``P_static + a·mean(f·V(f)²)`` — linear in the unknowns whatever the clock did inside it, so
:mod:`~powermodels.natural_dvfs.clock_power` fits on such windows directly.

Two kinds of window (``window_source``):

``counter``
    the energy between two updates of the total-energy counter (every ~100 ms on Hopper,
    placed by :func:`local_grid_updates`): exact;
``instant``
    one update of NVML's instant power field (186), the boxcar mean of power over a window of
    ``instant_window_s`` ending ``instant_delay_s`` before the update (Yang §IV-C; the H100
    defaults are the medians of five runs of ``powermodels characterize``'s instant-window fit,
    ``../shared/data/h100-2026-11-24/sensor_window``: 18.4 ms, 10.0 ms).

A window is kept when one workload's launches cover it (``min_coverage``) — or, inside the
workload's ``ladder`` phases, its launches and the pressure launches alternating with them
(:mod:`~powermodels.natural_dvfs.ladder_windows`: a *mixed* window, each load's share and clock
trajectory kept) —, every batch it
overlaps has a known clock, and it does not overlap a pressure load: the pressure GEMM's power
is not the workload's, and it is not pinned to the cap over 100 ms (620–770 W on GPU-620707cb),
so a window straddling its end cannot be split into the two loads' shares. Dropped windows keep
their reason (``window_drop_reason``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import energy_counter, schema
from ..sensor.clock_reading import held_mean
from .counter_windows import counter_updates
from .ladder_windows import companion_probes, companions, covered, covered_mask

__all__ = ["INSTANT_DELAY_S", "INSTANT_WINDOW_S", "ClockWindows", "clock_windows", "idle_power", "local_grid_updates",
           "pressure_power"]

#: The instant field's boxcar window and delay on an H100 (medians of five characterisation runs,
#: ``../shared/data/h100-2026-11-24/sensor_window/sensor_window_nvml.md``).
INSTANT_WINDOW_S = 0.0184
INSTANT_DELAY_S = 0.0100

_DROP_PRESSURE = "overlaps a pressure load (its power is not this workload's)"
_DROP_COVERAGE = "the workload's launches cover less than the window"
_DROP_BRACKET = "a counter update's time is uncertain (its read bracket is too wide)"
_DROP_CLOCK = "the clock trajectory has a gap (no probe or known batch clock)"


@dataclass
class ClockWindows:
    """Windows and the clock trajectory inside each.

    Attributes
    ----------
    table : DataFrame
        One row per candidate window: ``workload, window_source, window_start_s, window_end_s,
        power_w, sm_clock_mhz`` (time-weighted mean clock), ``clock_range_mhz``,
        ``launch_coverage`` (the share of the window the workload's launches cover),
        ``companion_share`` (the companion load's share in a mixed window, else 0),
        ``temperature_c``, ``phase``, ``window_kept``, ``window_drop_reason``.
    seg_clock_mhz, seg_seconds : ndarray
        The kept windows' trajectories, concatenated: the clock interpolated between the
        clock points on a fine grid, as seconds spent at each clock (rounded to 1 MHz).
    seg_offset : ndarray
        Row ``i`` of ``table`` owns segments ``seg_offset[i]:seg_offset[i + 1]`` (none when
        dropped). A mixed window's segments are the workload's own time only.
    comp_seg_clock_mhz, comp_seg_seconds, comp_seg_offset : ndarray
        The same for the companion load's time in mixed windows (none in the others; the
        table's ``companion_share`` is its share of the window).
    """

    table: pd.DataFrame
    seg_clock_mhz: np.ndarray
    seg_seconds: np.ndarray
    seg_offset: np.ndarray
    comp_seg_clock_mhz: np.ndarray = field(default_factory=lambda: np.array([]))
    comp_seg_seconds: np.ndarray = field(default_factory=lambda: np.array([]))
    comp_seg_offset: np.ndarray | None = None

    def _segments(self, companion: bool):
        if not companion:
            return self.seg_clock_mhz, self.seg_seconds, self.seg_offset
        off = self.comp_seg_offset if self.comp_seg_offset is not None else np.zeros(len(self.table) + 1, int)
        return self.comp_seg_clock_mhz, self.comp_seg_seconds, off

    def _sums(self, func, rows, companion: bool) -> tuple[np.ndarray, np.ndarray]:
        f, sec, off = self._segments(companion)
        cum = np.concatenate([[0.0], np.cumsum(func(f) * sec)])
        cum_t = np.concatenate([[0.0], np.cumsum(sec)])
        lo, hi = off[rows], off[rows + 1]
        return cum[hi] - cum[lo], cum_t[hi] - cum_t[lo]

    def mean_of(self, func, rows=None, *, companion: bool = False) -> np.ndarray:
        """Time-weighted mean of ``func(clock)`` over each window's trajectory (NaN if dropped).

        ``companion``: over the companion load's time in each mixed window instead (NaN where
        there is none).
        """
        rows = np.arange(len(self.table)) if rows is None else np.asarray(rows)
        g, dt = self._sums(func, rows, companion)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(dt > 0, g / dt, np.nan)

    def band_share(self, lo_mhz: float, hi_mhz: float) -> np.ndarray:
        """Share of each window's time at clocks inside ``[lo_mhz, hi_mhz]`` (both loads' time)."""
        def in_band(f):
            return ((f >= lo_mhz) & (f <= hi_mhz)).astype(float)

        rows = np.arange(len(self.table))
        g, dt = self._sums(in_band, rows, False)
        gc, dtc = self._sums(in_band, rows, True)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(dt + dtc > 0, (g + gc) / (dt + dtc), np.nan)


def _usable_clock(clocks: pd.DataFrame) -> np.ndarray:
    """Batches whose clock is known as a mean over the batch, even if it moved inside it.

    A reference-kernel batch's clock is implied by its own time — unless it waited inside
    (slower than its neighbours, which ``attribute_clocks`` marks); an NVML-read batch's
    clock is known only where the reading held (kept).
    """
    f = clocks[schema.SM_CLOCK_MHZ].to_numpy(float)
    kept = clocks[schema.CLOCK_KEPT].to_numpy(bool)
    src = clocks[schema.CLOCK_SOURCE].to_numpy(object)
    waited = clocks[schema.CLOCK_DROP_REASON].astype(str).str.contains("as long as its neighbours").to_numpy()
    return np.isfinite(f) & (kept | ((src == "kernel_time") & ~waited))


def _trajectory(recording, clocks: pd.DataFrame, workload, spans=None) -> tuple[np.ndarray, np.ndarray]:
    """Points ``(t, f)`` of one workload's clock: its probes, else its batches' known clocks.

    Probes are taken as they are (each a ~20 µs measurement at its time), not through the
    batches they bracket, so a probe whose neighbour was lost still places the clock. Inside
    the workload's ladder ``spans`` the companion's probes join them (one chip, one clock).
    """
    probes = recording.probes
    if probes is not None and len(probes):
        p = probes.loc[probes[schema.WORKLOAD] == workload]
        if spans is not None and len(p):
            p = pd.concat([p, companion_probes(recording, workload, spans)])
        if len(p):
            p = p.sort_values(schema.T_S)
            return p[schema.T_S].to_numpy(float), p[schema.PROBE_CLOCK_MHZ].to_numpy(float)
    g = clocks.loc[(clocks[schema.WORKLOAD] == workload).to_numpy() & _usable_clock(clocks)]
    g = g.sort_values(schema.START_S)
    mid = 0.5 * (g[schema.START_S].to_numpy(float) + g[schema.END_S].to_numpy(float))
    return mid, g[schema.SM_CLOCK_MHZ].to_numpy(float)


def _instant_updates(trace: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Times and values of the instant field's updates (where the reading changes)."""
    if schema.POWER_INSTANT_W not in trace or len(trace) < 2:
        return np.array([]), np.array([])
    t = trace[schema.T_S].to_numpy(float)
    v = trace[schema.POWER_INSTANT_W].to_numpy(float)
    new = np.flatnonzero(np.diff(v) != 0) + 1
    return t[new], v[new]


def _update_brackets(energy: pd.DataFrame) -> np.ndarray:
    """Width of each counter update's read bracket (s), in :func:`counter_updates`' order.

    A table that kept only the first read of each value has no bracket: its widths are 0.
    """
    t = energy[schema.T_S].to_numpy(float)
    new = np.flatnonzero(np.diff(energy[schema.ENERGY_COUNTER_J].to_numpy(float)) != 0) + 1
    width = t[new] - t[new - 1]
    if width.size >= 2 and np.median(width) > 0.5 * np.median(np.diff(t[new])):
        return np.zeros(width.size)
    return width


def local_grid_updates(energy: pd.DataFrame, half_width: int = 10) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counter updates placed on a *local* regular grid: ``(t_s, energy_j, uncertainty_s)``.

    Where :func:`~powermodels.natural_dvfs.counter_windows.counter_updates` finds no single grid
    (the update period drifts, or the phase jumps: GPU-620707cb, H200 GPU-168e6658), each update
    is placed by a straight line through the bracket midpoints of its ``half_width`` neighbours
    on each side whose brackets are narrow (≤ 2× the median), indexed by whole update periods,
    and clipped into its own bracket. A read that stalled (a bracket of 10–120 ms, ~1 % of the
    updates on the H100 recordings, most often when a burst starts) is then placed to within
    the neighbours' scatter instead of at its bracket's midpoint. ``uncertainty_s`` is the
    placement's half-range: the neighbours' residual scatter (RMS), at most half the bracket.

    Parameters
    ----------
    energy : DataFrame
        A recording's energy-counter reads (``t_s``, ``energy_counter_j``).
    half_width : int, default=10
        Neighbouring updates on each side that place an update.

    Returns
    -------
    (ndarray, ndarray, ndarray)
        Each update's time (s), the counter's value there (J) and the time's uncertainty (s).
    """
    u, e, how = counter_updates(energy)
    t = energy[schema.T_S].to_numpy(float)
    new = np.flatnonzero(np.diff(energy[schema.ENERGY_COUNTER_J].to_numpy(float)) != 0) + 1
    width = _update_brackets(energy)
    if how == "grid" or new.size < 2 * half_width + 2 or not width.any():
        return u, e, np.minimum(width / 2, 5e-4) if how == "grid" else width / 2
    lo, hi = t[new - 1], t[new]
    mid = 0.5 * (lo + hi)
    narrow = width <= energy_counter.STALLED_BRACKET_FACTOR * np.median(width)
    period = float(np.median(np.diff(mid[narrow])))
    k = np.concatenate([[0.0], np.cumsum(np.maximum(np.round(np.diff(mid) / period), 1.0))])
    placed, unc = mid.copy(), width / 2
    for j in range(mid.size):
        a, b = max(0, j - half_width), min(mid.size, j + half_width + 1)
        sel = np.arange(a, b)[narrow[a:b] & (np.arange(a, b) != j)]
        if sel.size < 4:
            continue
        coef = np.polyfit(k[sel], mid[sel], 1)
        rms = float(np.sqrt(np.mean((np.polyval(coef, k[sel]) - mid[sel]) ** 2)))
        placed[j] = np.clip(np.polyval(coef, k[j]), lo[j], hi[j])
        unc[j] = min(unc[j], max(rms, 1e-4))
    return placed, e, unc


def _candidate_windows(recording, sources, window_s, delay_s, max_bracket_s) -> list[tuple]:
    """``(source, start, end, power, uncertain)`` per kind of window."""
    out = []
    if "counter" in sources and len(recording.energy):
        u, e, unc = local_grid_updates(recording.energy)
        if u.size >= 2:
            uncertain = np.maximum(unc[:-1], unc[1:]) > max_bracket_s / 2
            out.append(("counter", u[:-1], u[1:], np.diff(e) / np.diff(u), uncertain))
    if "instant" in sources:
        t, v = _instant_updates(recording.trace)
        if t.size:
            out.append(("instant", t - delay_s - window_s, t - delay_s, v, np.zeros(t.size, dtype=bool)))
    return out


def clock_windows(recording, clocks: pd.DataFrame, *, sources=("counter", "instant"),
                  min_coverage: float = 0.95, instant_window_s: float = INSTANT_WINDOW_S,
                  instant_delay_s: float = INSTANT_DELAY_S, max_gap_s: float = 0.005,
                  pressure_guard_s: float = 0.005, max_bracket_s: float = 0.01,
                  step_s: float = 5e-4) -> ClockWindows:
    """Every window one workload's launches touch, its clock trajectory, kept or dropped.

    Parameters
    ----------
    recording : Recording
        A raw recording (:func:`powermodels.recording.read_recording`).
    clocks : DataFrame
        :func:`~powermodels.natural_dvfs.launch_clocks.attribute_clocks` of the recording.
    sources : tuple of {"counter", "instant"}
        Which windows to build.
    min_coverage : float
        Least share of a window the workload's launches must cover (the rest is the clock
        probes and host gaps between batches, ~1 % on the H100 recordings; the same share in
        training and held-out windows).
    instant_window_s, instant_delay_s : float
        The instant field's boxcar window and delay (``powermodels characterize``).
    max_gap_s : float
        Longest stretch of a window without a clock point (probe or known batch): the clock
        is interpolated linearly between points, so a longer gap could hide a 10–20 ms step.
    step_s : float
        The trajectory is sampled on this grid inside each window.
    max_bracket_s : float
        A counter window is dropped when either update bounding it is placed
        (:func:`local_grid_updates`) to worse than ± half this: its length, hence its power,
        is uncertain (placed at their brackets' midpoints, stalled reads on GPU-620707cb
        gave pairs of 1,270 W and 450 W around a capped 700 W).
    pressure_guard_s : float
        A window must also keep this far from a pressure load: the instant window's delay is
        known only to ±4 ms (5.5–13.4 ms over the five H100 runs), a counter update to
        about half the ~4.6 ms between counter reads.

    Returns
    -------
    ClockWindows
    """
    unknown = set(sources) - {"counter", "instant"}
    if unknown:
        raise ValueError(f"clock_windows: unknown window source(s) {sorted(unknown)} (counter, instant)")
    if not 0 <= min_coverage <= 1:
        raise ValueError(f"clock_windows: min_coverage must be in [0, 1], got {min_coverage!r}")
    phases = recording.phases
    pressure = (phases.loc[phases[schema.PHASE_KIND] == "pressure", [schema.T0_S, schema.T1_S]].to_numpy(float)
                if phases is not None and len(phases) else np.empty((0, 2)))
    pressure = pressure[np.argsort(pressure[:, 0])] if len(pressure) else pressure
    trace = recording.trace
    tt = trace[schema.T_S].to_numpy(float) if len(trace) else np.array([])
    temp = trace[schema.TEMPERATURE_C].to_numpy(float) if len(trace) else np.array([])
    rows, seg_f, seg_t, counts = [], [], [], []
    names = pd.unique(clocks[schema.WORKLOAD])
    mixed = companions(recording, names)
    trajectories = {w: _trajectory(recording, clocks, w, mixed[w][1] if w in mixed else None) for w in names}
    comp_f, comp_t, comp_counts = [], [], []
    for source, w0, w1, power, uncertain in _candidate_windows(recording, sources, instant_window_s,
                                                               instant_delay_s, max_bracket_s):
        for w, idx in clocks.groupby(schema.WORKLOAD, sort=False).groups.items():
            g = clocks.loc[idx].sort_values(schema.START_S)
            tp, fp = trajectories[w]
            s = g[schema.START_S].to_numpy(float)
            en = g[schema.END_S].to_numpy(float)
            phase = g[schema.RECORDING_PHASE].to_numpy(object)
            comp = mixed[w][0] if w in mixed else np.empty((0, 2))
            comp_cover = covered(comp, w0, w1) / (w1 - w0)
            # windows that reach into the workload's launches at all
            j0 = np.searchsorted(en, w0, side="right")
            j1 = np.searchsorted(s, w1, side="left")
            for i in np.flatnonzero(j1 > j0):
                a, b = j0[i], j1[i]
                ov = np.minimum(en[a:b], w1[i]) - np.maximum(s[a:b], w0[i])
                own = ov.sum() / (w1[i] - w0[i])
                cc = float(comp_cover[i])
                cover = own + cc
                k = np.searchsorted(pressure[:, 0], w1[i] + pressure_guard_s) - 1 if len(pressure) else -1
                # the trajectory's points around the window: one at or before its start, one at
                # or after its end, none further apart than max_gap_s
                q0 = np.searchsorted(tp, w0[i], side="right") - 1
                q1 = np.searchsorted(tp, w1[i], side="left")
                reason = ""
                if k >= 0 and pressure[k, 1] + pressure_guard_s > w0[i]:
                    reason = _DROP_PRESSURE
                elif uncertain[i]:
                    reason = _DROP_BRACKET
                elif cover < min_coverage:
                    reason = _DROP_COVERAGE
                elif q0 < 0 or q1 >= tp.size or np.diff(tp[q0:q1 + 1]).max(initial=0) > max_gap_s:
                    reason = _DROP_CLOCK
                if (cover < 0.5 or own < 0.05) and reason != _DROP_PRESSURE:
                    continue  # a window the workload barely touches is no candidate of its own
                n = nc = 0
                fw = fp[max(q0, 0):q1 + 1]
                if not reason:
                    grid = np.linspace(w0[i], w1[i], max(int(np.ceil((w1[i] - w0[i]) / step_s)), 2) + 1)
                    mid = 0.5 * (grid[1:] + grid[:-1])
                    fw = np.interp(mid, tp[q0:q1 + 1], fp[q0:q1 + 1])
                    own_t = np.ones(mid.size, dtype=bool)
                    if cc > 0:  # a mixed window: each load's trajectory over its own time
                        on_comp = covered_mask(comp, mid)
                        own_t = ~on_comp
                        comp_bins, comp_inv = np.unique(np.round(fw[on_comp]), return_inverse=True)
                        comp_f.append(comp_bins)
                        comp_t.append(np.bincount(comp_inv, weights=np.diff(grid)[on_comp]))
                        nc = comp_bins.size
                    # the trajectory kept as time per clock (to 1 MHz): means of any f(clock) stay
                    # exact to well within the probe's resolution, and the fits stay fast
                    clock_bins, inverse = np.unique(np.round(fw[own_t]), return_inverse=True)
                    seg_f.append(clock_bins)
                    seg_t.append(np.bincount(inverse, weights=np.diff(grid)[own_t]))
                    n = clock_bins.size
                counts.append(n)
                comp_counts.append(nc)
                rows.append({schema.WORKLOAD: w, schema.WINDOW_SOURCE: source, schema.WINDOW_START_S: w0[i],
                             schema.WINDOW_END_S: w1[i], schema.POWER_W: power[i],
                             schema.SM_CLOCK_MHZ: float(np.mean(fw)) if fw.size else np.nan,
                             schema.CLOCK_RANGE_MHZ: float(np.ptp(fw)) if fw.size else np.nan,
                             schema.LAUNCH_COVERAGE: float(min(own, 1.0)), schema.COMPANION_SHARE: cc,
                             schema.RECORDING_PHASE: str(phase[a]), schema.WINDOW_KEPT: not reason,
                             schema.WINDOW_DROP_REASON: reason})
    cols = [schema.WORKLOAD, schema.WINDOW_SOURCE, schema.WINDOW_START_S, schema.WINDOW_END_S, schema.POWER_W,
            schema.SM_CLOCK_MHZ, schema.CLOCK_RANGE_MHZ, schema.LAUNCH_COVERAGE, schema.COMPANION_SHARE,
            schema.TEMPERATURE_C,
            schema.RECORDING_PHASE,
            schema.WINDOW_KEPT, schema.WINDOW_DROP_REASON]
    table = pd.DataFrame(rows, columns=[c for c in cols if c != schema.TEMPERATURE_C])
    table.insert(cols.index(schema.TEMPERATURE_C), schema.TEMPERATURE_C,
                 held_mean(tt, temp, table[schema.WINDOW_START_S].to_numpy(float),
                           table[schema.WINDOW_END_S].to_numpy(float)) if tt.size and len(table)
                 else np.full(len(table), np.nan))
    return ClockWindows(table=table,
                        seg_clock_mhz=np.concatenate(seg_f) if seg_f else np.array([]),
                        seg_seconds=np.concatenate(seg_t) if seg_t else np.array([]),
                        seg_offset=np.concatenate([[0], np.cumsum(counts)]).astype(int),
                        comp_seg_clock_mhz=np.concatenate(comp_f) if comp_f else np.array([]),
                        comp_seg_seconds=np.concatenate(comp_t) if comp_t else np.array([]),
                        comp_seg_offset=np.concatenate([[0], np.cumsum(comp_counts)]).astype(int))


def pressure_power(recording) -> pd.DataFrame:
    """The pressure load's counter windows: is its power pinned at the cap over 100 ms?

    The spread of these windows' power says how well a window that straddles the pressure's
    end could be split (it cannot, on the H100s measured).

    Parameters
    ----------
    recording : Recording
        A raw recording with ``pressure`` phases.

    Returns
    -------
    DataFrame
        One row per counter window lying wholly inside a pressure phase after its first second
        (the cap's settling): ``window_start_s``, ``window_end_s``, ``power_w``.
    """
    phases = recording.phases
    if phases is None or not len(phases) or not len(recording.energy):
        return pd.DataFrame(columns=[schema.WINDOW_START_S, schema.WINDOW_END_S, schema.POWER_W])
    u, e, _ = local_grid_updates(recording.energy)
    p = np.diff(e) / np.diff(u)
    rows = []
    for t0, t1 in phases.loc[phases[schema.PHASE_KIND] == "pressure", [schema.T0_S, schema.T1_S]].to_numpy(float):
        inside = np.flatnonzero((u[:-1] >= t0 + 1.0) & (u[1:] <= t1))
        rows += [{schema.WINDOW_START_S: u[i], schema.WINDOW_END_S: u[i + 1], schema.POWER_W: p[i]} for i in inside]
    return pd.DataFrame(rows, columns=[schema.WINDOW_START_S, schema.WINDOW_END_S, schema.POWER_W])


def idle_power(recording, settle_s: float = 2.0) -> tuple[float, float]:
    """The idle power and temperature: medians over counter windows inside idle phases.

    Thesis eq. 4.1 names ``P_static`` the idle power; the recording's idle spells (after
    ``settle_s``, the last load's tail) measure it.

    Parameters
    ----------
    recording : Recording
        A raw recording with ``idle`` phases.
    settle_s : float, default=2
        Start of the read within each idle phase.

    Returns
    -------
    (float, float)
        Idle power (W) and temperature (°C); ``(nan, nan)`` without idle windows.
    """
    phases = recording.phases
    if phases is None or not len(phases) or not len(recording.energy):
        return math.nan, math.nan
    u, e, _ = local_grid_updates(recording.energy)
    p = np.diff(e) / np.diff(u)
    inside = np.zeros(p.size, dtype=bool)
    for t0, t1 in phases.loc[phases[schema.PHASE_KIND] == "idle", [schema.T0_S, schema.T1_S]].to_numpy(float):
        inside |= (u[:-1] >= t0 + settle_s) & (u[1:] <= t1)
    if not inside.any():
        return math.nan, math.nan
    trace = recording.trace
    temp = math.nan
    if len(trace):
        temp = float(np.nanmedian(held_mean(trace[schema.T_S].to_numpy(float), trace[schema.TEMPERATURE_C].to_numpy(float),
                                            u[:-1][inside], u[1:][inside])))
    return float(np.median(p[inside])), temp
