"""Power from the energy counter over windows of one workload at one known clock.

The instant power field averages only ~25 ms of every 100 ms update (Yang §IV-C) and its
clock is the lagging NVML reading; the total-energy counter integrates everything. On an
H100 it updates every 100.00 ms on a regular grid (``datasets/h100-2026-11-25-raw``: a
straight line through the update brackets lies inside 99.9 % of them), so the energy
between two updates over the grid period is the mean power of that window, exactly.

:func:`counter_updates` finds the update times (each bracketed by the last read showing
the old value and the first showing the new one, then placed on the fitted grid);
:func:`counter_windows` keeps the windows that one workload's launches cover and whose
launches all ran at one known clock (:mod:`powermodels.natural_dvfs.launch_clocks`);
:func:`counter_blocks` joins consecutive such windows into blocks of about a second (for
the temperature slope, whose regression wants independent points).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..measuring.runner import merge_intervals
from ..sensor import covered_time
from ..sensor.clock_reading import held_mean
from .launch_clocks import DEFAULT_CLOCK_STEP_MHZ

__all__ = ["counter_blocks", "counter_updates", "counter_windows"]

SINCE_START_S = schema.SINCE_START_S
WINDOW_START_S = schema.WINDOW_START_S
WINDOW_END_S = schema.WINDOW_END_S
STRETCH = schema.STRETCH


def counter_updates(energy: pd.DataFrame, grid_tolerance_s: float = 5e-4) -> tuple[np.ndarray, np.ndarray, str]:
    """Times and values of the counter's updates: ``(t_s, energy_j, how)``.

    ``how`` is ``"grid"`` when a regular grid fitted to the bracket midpoints lies inside
    ≥ 95 % of the brackets (then each update is the grid time, clipped into its bracket),
    else ``"bracket"`` (the midpoints). A table that kept only the first read of each new
    value (brackets as wide as the period) uses those reads as the brackets' both ends.
    """
    t = energy[schema.T_S].to_numpy(float)
    e = energy[schema.ENERGY_COUNTER_J].to_numpy(float)
    new = np.flatnonzero(np.diff(e) != 0) + 1
    if new.size < 2:
        return t[new], e[new], "bracket"
    lo, hi = t[new - 1], t[new]
    period = float(np.median(np.diff(hi)))
    if np.median(hi - lo) > 0.5 * period:
        # only the first read of each new value was kept (a downsampled copy): the bracket is
        # lost, the update lies within one read interval before that read
        lo = hi
    mid = 0.5 * (lo + hi)
    k = np.round((mid - mid[0]) / period)
    if np.unique(k).size == k.size and k.size >= 4:
        coef = np.polyfit(k, mid, 1)
        grid = np.polyval(coef, k)
        inside = (grid >= lo - grid_tolerance_s) & (grid <= hi + grid_tolerance_s)
        if inside.mean() >= 0.95:
            return np.clip(grid, lo, hi), e[new], "grid"
    return mid, e[new], "bracket"


def counter_windows(recording, clocks: pd.DataFrame, *, min_coverage: float = 0.98,
                    step_mhz: float = DEFAULT_CLOCK_STEP_MHZ, gap_s: float = 0.05) -> pd.DataFrame:
    """One row per counter window covered by one workload's launches at one known clock.

    Parameters
    ----------
    recording : Recording
    clocks : DataFrame
        :func:`~powermodels.natural_dvfs.launch_clocks.attribute_clocks` of the recording.
    min_coverage : float
        Least share of the window the workload's launches must cover.
    step_mhz : float
        Kept launches in one window must agree within half a step.
    gap_s : float
        A pause longer than this starts a new stretch of launches (``since_start_s``).

    Returns
    -------
    DataFrame
        ``workload, window_start_s, window_end_s, power_w, sm_clock_mhz, temperature_c,
        since_start_s, phase`` (the schedule phase the window lies in).
    """
    u, e, _how = counter_updates(recording.energy)
    cols = [schema.WORKLOAD, WINDOW_START_S, WINDOW_END_S, schema.POWER_W, schema.SM_CLOCK_MHZ,
            schema.TEMPERATURE_C, SINCE_START_S, STRETCH, schema.RECORDING_PHASE]
    if u.size < 2 or not len(clocks):  # (an empty trace leaves only the temperatures NaN)
        return pd.DataFrame(columns=cols)
    w0, w1 = u[:-1], u[1:]
    power = np.diff(e) / np.diff(u)
    trace = recording.trace
    tt = trace[schema.T_S].to_numpy(float)
    temp = trace[schema.TEMPERATURE_C].to_numpy(float)
    rows = []
    for w, g in clocks.groupby(schema.WORKLOAD, sort=False):
        g = g.sort_values(schema.START_S)
        iv = merge_intervals(g[[schema.START_S, schema.END_S]].to_numpy(float), tol_s=2e-4)
        share = covered_time(w0, w1, iv) / (w1 - w0)
        # a stretch ends at a pause longer than gap_s: a host hiccup of a few tenths of a ms
        # between batches (several per 25 s series on the H100 and H200) does not reset the die's
        # thermal history, and α leaves out the first settle_s of every stretch
        stretches = merge_intervals(iv, tol_s=gap_s)
        for i in np.flatnonzero(share >= min_coverage):
            s = g[schema.START_S].to_numpy(float)
            en = g[schema.END_S].to_numpy(float)
            j0 = np.searchsorted(en, w0[i], side="right")
            j1 = np.searchsorted(s, w1[i], side="left")
            part = g.iloc[j0:j1]
            if not len(part) or not part[schema.CLOCK_KEPT].all():
                continue
            f = part[schema.SM_CLOCK_MHZ].to_numpy(float)
            if np.ptp(f) > step_mhz / 2:
                continue
            dur = np.minimum(part[schema.END_S].to_numpy(float), w1[i]) - np.maximum(
                part[schema.START_S].to_numpy(float), w0[i])
            # the stretch this window belongs to began at the start of its merged interval
            k = np.searchsorted(stretches[:, 0], w0[i], side="right") - 1
            rows.append({schema.WORKLOAD: w, WINDOW_START_S: w0[i], WINDOW_END_S: w1[i],
                         schema.POWER_W: power[i], schema.SM_CLOCK_MHZ: float(np.average(f, weights=dur)),
                         schema.TEMPERATURE_C: (float(held_mean(tt, temp, w0[i], w1[i])) if len(temp)
                                                else np.nan),
                         SINCE_START_S: w0[i] - stretches[k, 0], STRETCH: int(k),
                         schema.RECORDING_PHASE: str(part[schema.RECORDING_PHASE].iloc[0])})
    return pd.DataFrame(rows, columns=cols)


def counter_blocks(windows: pd.DataFrame, *, block_s: float = 1.0,
                   step_mhz: float = DEFAULT_CLOCK_STEP_MHZ) -> pd.DataFrame:
    """Join consecutive windows of one workload, stretch and clock into blocks of ≤ ``block_s``.

    Block power is total energy over total time; clock, temperature and ``since_start_s``
    are time-weighted means (``since_start_s``: the block's start).
    """
    if not len(windows):
        return windows.copy()
    out = []
    for w, g in windows.groupby(schema.WORKLOAD, sort=False):
        g = g.sort_values(WINDOW_START_S)
        s = g[WINDOW_START_S].to_numpy(float)
        en = g[WINDOW_END_S].to_numpy(float)
        bucket = np.round(g[schema.SM_CLOCK_MHZ].to_numpy(float) / step_mhz)
        stretch = g[STRETCH].to_numpy()
        block = np.zeros(len(g), dtype=int)
        b, t0 = 0, s[0]
        for i in range(1, len(g)):
            if (abs(s[i] - en[i - 1]) > 1e-6 or bucket[i] != bucket[i - 1] or en[i] - t0 > block_s + 1e-6
                    or stretch[i] != stretch[i - 1]):
                b, t0 = b + 1, s[i]
            block[i] = b
        g = g.assign(_dt=en - s, _e=g[schema.POWER_W].to_numpy(float) * (en - s), _block=block)
        for _, blk in g.groupby("_block"):
            dt = blk["_dt"].to_numpy()
            out.append({schema.WORKLOAD: w, WINDOW_START_S: blk[WINDOW_START_S].iloc[0],
                        WINDOW_END_S: blk[WINDOW_END_S].iloc[-1], schema.POWER_W: blk["_e"].sum() / dt.sum(),
                        schema.SM_CLOCK_MHZ: float(np.average(blk[schema.SM_CLOCK_MHZ], weights=dt)),
                        schema.TEMPERATURE_C: float(np.average(blk[schema.TEMPERATURE_C], weights=dt)),
                        SINCE_START_S: float(blk[SINCE_START_S].iloc[0]), STRETCH: int(blk[STRETCH].iloc[0]),
                        schema.RECORDING_PHASE: blk[schema.RECORDING_PHASE].iloc[0], schema.WINDOWS: len(blk)})
    return pd.DataFrame(out)
