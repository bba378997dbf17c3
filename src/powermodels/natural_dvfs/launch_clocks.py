"""The clock each launch of a recording ran at, and whether it is known well enough to fit on.

NVML's SM-clock reading is a sensor with a ~100 ms update period that lags the real clock
(DESIGN.md, ``datasets/h100-2026-11-25-raw``): attributing a 1–3 ms launch to the reading
misses a held-out clock band by 4–14 %. Three sources, best first, give each timed batch of
a :class:`~powermodels.recording.Recording` its clock (``clock_source``):

``probe``
    the on-GPU probes (:mod:`powermodels.devices.clock_probe`) before and after the batch
    on its stream: the clock is their mean, ``clock_range_mhz`` their difference; the
    batch is kept when both exist and agree within half a clock step (the clock did not
    move during it).
``kernel_time``
    a *reference* workload whose time is ∝ 1/clock (a dependent-FMA loop): its clock is
    ``f_max · t_ref / t``, with ``t_ref`` its median time where NVML read ``f_max`` stably.
    Kept when the neighbouring launches imply the same clock within half a step. Only the
    reference workload's own launches get this clock (another kernel draws another power,
    so the controller moves the clock differently under it).
``nvml``
    the reading, modelled as a sensor: a launch is kept only when the reading did not
    change from ``margin`` before its start to ``margin`` after its end (``margin`` =
    1.5 update periods, so at least one update on each side agrees); its uncertainty is
    half the range the reading spanned over that interval plus half a clock step.

Every batch gets ``clock_kept`` and, when dropped, ``clock_drop_reason``; nothing is
silently discarded.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema
from ..devices.clock_probe import CLOCK_STEP_MHZ
from ..sensor.clock_reading import held_mean

__all__ = ["attribute_clocks", "find_clock_reference", "launch_clock_summary", "reading_update_period_s",
           "stable_reading"]

#: Hopper's SM-clock step (supported graphics clocks are 15 MHz apart).
DEFAULT_CLOCK_STEP_MHZ = CLOCK_STEP_MHZ


def reading_update_period_s(trace: pd.DataFrame, column: str = schema.POWER_INSTANT_W) -> float:
    """Median time between changes of a reading (its update period; ~0.1 s on Hopper)."""
    t = trace[schema.T_S].to_numpy(float)
    v = trace[column].to_numpy(float)
    changes = t[1:][np.diff(v) != 0]
    if changes.size < 3:
        return 0.1
    return float(np.median(np.diff(changes)))


def _change_counts(trace: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    t = trace[schema.T_S].to_numpy(float)
    v = trace[column].to_numpy(float)
    cum = np.concatenate([[0], np.cumsum(np.diff(v) != 0)])
    return t, v, cum


def stable_reading(trace: pd.DataFrame, start_s, end_s, margin_s: float,
                   column: str = schema.SM_CLOCK_MHZ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The reading over each ``[start − margin, end + margin]``: (value, constant?, range).

    A window that reaches outside the trace is not constant (the reading there is unknown).
    """
    start = np.asarray(start_s, float) - margin_s
    end = np.asarray(end_s, float) + margin_s
    if len(trace) == 0:  # no trace (lost, or never recorded): nothing is known from the reading
        nan = np.full(start.shape, np.nan)
        return nan, np.zeros(start.shape, dtype=bool), nan
    t, v, cum = _change_counts(trace, column)
    i0 = np.clip(np.searchsorted(t, start, side="right") - 1, 0, len(t) - 1)
    i1 = np.clip(np.searchsorted(t, end, side="right") - 1, 0, len(t) - 1)
    inside = (start >= t[0]) & (end <= t[-1])
    constant = (cum[i1] == cum[i0]) & inside
    # range of the readings over the window, by a running max/min over the change points
    lo = np.empty(len(start))
    hi = np.empty(len(start))
    for k in range(len(start)):
        seg = v[i0[k]:i1[k] + 1]
        lo[k], hi[k] = seg.min(), seg.max()
    mid = v[np.clip(np.searchsorted(t, 0.5 * (start + end), side="right") - 1, 0, len(t) - 1)]
    return mid, constant, hi - lo


def _mean_reading(trace: pd.DataFrame, column: str, start, end) -> np.ndarray:
    """Time-weighted mean of a held reading over each ``[start, end]`` (NaN without a trace)."""
    if column not in trace or len(trace) == 0:
        return np.full(len(start), np.nan)
    return held_mean(trace[schema.T_S].to_numpy(float), trace[column].to_numpy(float), start, end)


def find_clock_reference(recording, margin_s: float | None = None, max_spread: float = 0.003,
                         step_mhz: float = DEFAULT_CLOCK_STEP_MHZ) -> str | None:
    """The workload whose time is most nearly ∝ 1/clock where NVML read a stable clock.

    A candidate needs stable-reading launches at ≥ 2 clocks at least one step apart, and
    a relative median absolute deviation of ``time × clock`` ≤ ``max_spread``; the one
    with the smallest is returned (None when no workload qualifies).
    """
    trace, launches = recording.trace, recording.launches
    margin = 1.5 * reading_update_period_s(trace) if margin_s is None else margin_s
    best, best_spread = None, math.inf
    for w, rows in launches.groupby(schema.WORKLOAD, sort=False):
        f, ok, _ = stable_reading(trace, rows[schema.START_S], rows[schema.END_S], margin)
        f, tt = f[ok], rows[schema.TIME_S].to_numpy(float)[ok]
        if f.size < 10 or np.ptp(f) < step_mhz - 1e-6:
            continue
        product = f * tt
        spread = float(np.median(np.abs(product / np.median(product) - 1)))
        # both clocks must hold many launches, or a few outliers could qualify a kernel
        values, counts = np.unique(np.round(f / step_mhz), return_counts=True)
        if np.sort(counts)[-2] < 5:
            continue
        # the time ratio between the two most common clocks must follow the clocks
        top = values[np.argsort(counts)[-2:]] * step_mhz
        t_top = [np.median(tt[np.round(f / step_mhz) * step_mhz == c]) for c in top]
        ratio_error = abs((t_top[0] / t_top[1]) / (top[1] / top[0]) - 1)
        if spread <= max_spread and ratio_error <= max_spread and spread < best_spread:
            best, best_spread = str(w), spread
    return best


def attribute_clocks(recording, *, clock_reference: str | None = None, step_mhz: float = DEFAULT_CLOCK_STEP_MHZ,
                     margin_s: float | None = None, max_clock_mhz: float | None = None) -> pd.DataFrame:
    """Give every timed batch of ``recording`` its clock, spread, source and whether it is kept.

    Parameters
    ----------
    recording : Recording
        A raw recording (:func:`powermodels.recording.read_recording`).
    clock_reference : str, optional
        Workload whose time gives the clock of its own launches (``kernel_time``) where
        the recording has no probes for it.
    step_mhz : float
        Clock step: probes or neighbours closer than half of it read one clock.
    margin_s : float, optional
        NVML source: how long before and after a launch the reading must hold (default
        1.5 update periods of the trace).
    max_clock_mhz : float, optional
        The highest SM clock (``kernel_time`` scale); default the provenance's
        ``max_sm_clock_mhz``, else the highest reading.

    Returns
    -------
    DataFrame
        ``launches.parquet``'s columns plus ``sm_clock_mhz``, ``clock_range_mhz``,
        ``clock_uncertainty_mhz``, ``clock_source``, ``clock_kept``, ``clock_drop_reason``,
        ``mem_clock_mhz`` and ``temperature_c`` (NVML means over the batch).
    """
    trace = recording.trace
    out = recording.launches.copy().reset_index(drop=True)
    start = out[schema.START_S].to_numpy(float)
    end = out[schema.END_S].to_numpy(float)
    margin = 1.5 * reading_update_period_s(trace) if margin_s is None else float(margin_s)
    f_max = max_clock_mhz or recording.provenance.get("max_sm_clock_mhz") or float(trace[schema.SM_CLOCK_MHZ].max())
    n = len(out)
    clock = np.full(n, np.nan)
    spread = np.full(n, np.nan)
    unc = np.full(n, np.nan)
    source = np.full(n, "nvml", dtype=object)
    kept = np.zeros(n, dtype=bool)
    reason = np.full(n, "", dtype=object)

    # NVML for everything first; better sources overwrite it
    f_nv, constant, rng = stable_reading(trace, start, end, margin)
    clock[:] = f_nv
    spread[:] = rng
    unc[:] = rng / 2 + step_mhz / 2
    kept[:] = constant
    reason[~constant] = (f"NVML clock reading changed within {margin * 1e3:.0f} ms of the launch "
                         "(a lagging 100 ms sensor: the launch's clock is unknown)" if len(trace)
                         else "no probe and no NVML trace: the launch's clock is unknown")

    probed = np.zeros(n, dtype=bool)
    probes = recording.probes
    if probes is not None and len(probes):
        for w, idx in out.groupby(schema.WORKLOAD, sort=False).groups.items():
            p = probes.loc[probes[schema.WORKLOAD] == w].sort_values(schema.T_S)
            if not len(p):
                continue
            idx = np.asarray(idx)
            pt = p[schema.T_S].to_numpy(float)
            pf = p[schema.PROBE_CLOCK_MHZ].to_numpy(float)
            pu = pf * 32.0 / p[schema.PROBE_ELAPSED_NS].to_numpy(float)
            b = np.searchsorted(pt, start[idx], side="right") - 1   # last probe before the start
            a = np.searchsorted(pt, end[idx], side="left")          # first probe after the end
            bb, aa = np.clip(b, 0, len(pt) - 1), np.clip(a, 0, len(pt) - 1)
            # a probe brackets the batch only if it ran right next to it (within the batch's own
            # length, at least 1 ms): the probe after a burst's last batch is the next burst's
            near = np.maximum(end[idx] - start[idx], 1e-3)
            have = ((b >= 0) & (a < len(pt)) & (start[idx] - pt[bb] <= near) & (pt[aa] - end[idx] <= near))
            fb, fa = pf[bb], pf[aa]
            probed[idx] = True
            source[idx] = "probe"
            clock[idx] = np.where(have, 0.5 * (fb + fa), np.nan)
            spread[idx] = np.where(have, np.abs(fa - fb), np.nan)
            unc[idx] = np.where(have, np.maximum(pu[bb], pu[aa]) + np.abs(fa - fb) / 2, np.nan)
            ok = have & (np.abs(fa - fb) <= step_mhz / 2)
            kept[idx] = ok
            reason[idx] = np.where(~have, "no probe before or after the batch",
                                   np.where(ok, "", "the clock moved during the batch (probes disagree "
                                                    "by more than half a clock step)"))

    if clock_reference is not None and clock_reference in set(out[schema.WORKLOAD]):
        idx = np.flatnonzero((out[schema.WORKLOAD] == clock_reference).to_numpy() & ~probed)
        if idx.size:
            t = out[schema.TIME_S].to_numpy(float)[idx]
            at_max = constant[idx] & (np.abs(f_nv[idx] - f_max) < step_mhz / 2)
            # the fastest launches the reading puts at f_max: the reading also shows f_max
            # for a while after the clock has dropped a step (seen on the H100 recording)
            t_ref = float(np.percentile(t[at_max] if at_max.any() else t, 5))
            # neighbours in time order (within one batch sequence) must imply the same clock
            order = idx[np.argsort(start[idx])]
            fo = pd.Series(f_max * t_ref / out[schema.TIME_S].to_numpy(float)[order])
            gap = np.diff(start[order], prepend=-np.inf) > 0.05  # a new burst starts
            prev = fo.shift(1).where(~gap, np.nan)
            nxt = fo.shift(-1).where(~np.r_[gap[1:], True], np.nan)
            dev = np.fmax((prev - fo).abs(), (nxt - fo).abs()).to_numpy()
            ok = np.isfinite(dev) & (dev <= step_mhz / 2)
            fast = t[at_max & (t <= t_ref * (1 + 0.5 * step_mhz / f_max))]
            rel = float(np.median(np.abs(fast / t_ref - 1))) if fast.size > 2 else 0.0
            clock[order] = fo.to_numpy()
            spread[order] = dev
            unc[order] = fo.to_numpy() * rel + np.nan_to_num(dev) / 2
            source[order] = "kernel_time"
            kept[order] = ok
            reason[order] = np.where(ok, "", "a neighbouring launch implies another clock (the clock "
                                             "moved around this launch)")

    # a launch far slower than its neighbours waited inside (host hiccup, another process):
    # its interval is not the kernel's, whatever the clock
    slow = _slower_than_neighbours(out)
    kept &= ~slow
    reason[slow] = "the launch took over 1.5x as long as its neighbours (the GPU waited inside it)"

    out[schema.SM_CLOCK_MHZ] = clock
    out[schema.CLOCK_RANGE_MHZ] = spread
    out[schema.CLOCK_UNCERTAINTY_MHZ] = unc
    out[schema.CLOCK_SOURCE] = source
    out[schema.CLOCK_KEPT] = kept
    out[schema.CLOCK_DROP_REASON] = np.where(kept, "", reason)
    out[schema.MEM_CLOCK_MHZ] = _mean_reading(trace, schema.MEM_CLOCK_MHZ, start, end)
    out[schema.TEMPERATURE_C] = _mean_reading(trace, schema.TEMPERATURE_C, start, end)
    return out


def _slower_than_neighbours(launches: pd.DataFrame, factor: float = 1.5, half_width: int = 3) -> np.ndarray:
    """Batches whose time per launch exceeds ``factor`` × the median of their workload's neighbours."""
    slow = np.zeros(len(launches), dtype=bool)
    for _, idx in launches.groupby(schema.WORKLOAD, sort=False).groups.items():
        idx = np.asarray(idx)
        idx = idx[np.argsort(launches[schema.START_S].to_numpy(float)[idx])]
        t = pd.Series(launches[schema.TIME_S].to_numpy(float)[idx])
        around = t.rolling(2 * half_width + 1, center=True, min_periods=2).median()
        slow[idx] = (t > factor * around).to_numpy()
    return slow


def launch_clock_summary(clocks: pd.DataFrame) -> pd.DataFrame:
    """Per workload and source: batches kept and dropped, the kept clock range, why dropped."""
    rows = []
    for (w, src), g in clocks.groupby([schema.WORKLOAD, schema.CLOCK_SOURCE], sort=False):
        k = g[schema.CLOCK_KEPT].to_numpy(bool)
        f = g[schema.SM_CLOCK_MHZ].to_numpy(float)[k]
        reasons = g.loc[~k, schema.CLOCK_DROP_REASON].value_counts()
        rows.append({schema.WORKLOAD: w, schema.CLOCK_SOURCE: src, "batches": len(g), "kept": int(k.sum()),
                     "dropped": int((~k).sum()),
                     "kept_clock_lo_mhz": float(f.min()) if f.size else math.nan,
                     "kept_clock_hi_mhz": float(f.max()) if f.size else math.nan,
                     "main_drop_reason": reasons.index[0] if len(reasons) else ""})
    return pd.DataFrame(rows)
