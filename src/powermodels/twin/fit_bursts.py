"""Bursts after a power-capped load: time since each began, and their power at the top clock.

After a cap load the H100's clock climbs back within ~0.15 s and then stays a
bin or two below the top (~1965 MHz) for a while although NVML reads 1980 MHz
(the clock-reference workload's launch times show it). A fit that takes those
bursts as top-clock data sees too little power: :func:`burst_power_at_top_clock`
brings each such interval's power to the top clock with a first fit's physics.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..devices.physics import GPUPhysics
from ..recording import Recording
from . import metrics

__all__ = ["burst_power_at_top_clock", "since_burst"]


def since_burst(rec: Recording, rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (launches) with ``since_s``: time from the start of the burst after a pressure entry."""
    ph = rec.phases.reset_index(drop=True)
    starts = [float(ph[schema.T0_S].iloc[i]) for i in range(1, len(ph))
              if ph[schema.PHASE_KIND].iloc[i] == "burst" and ph[schema.PHASE_KIND].iloc[i - 1] == "pressure"]
    s = rows[schema.START_S].to_numpy(float)
    starts = np.asarray(starts)
    j = np.searchsorted(starts, s, side="right") - 1
    out = rows.copy()
    out[schema.SINCE_S] = np.where(j >= 0, s - starts[np.clip(j, 0, None)], np.inf) if starts.size else np.inf
    return out


def burst_power_at_top_clock(recs, clock_workload, iv: pd.DataFrame, physics: GPUPhysics, workloads: dict,
                              report, *, scale_from_data: bool = False) -> pd.DataFrame | None:
    """``iv`` with each burst interval's power raised to what it would draw at the top clock.

    The real clock over a burst after a cap load is the clock workload's
    median trajectory (its launch times, 50 ms bins of time since the burst
    began); an interval's clock is the trajectory at its middle. The power
    it would draw at the top clock adds ``P(f_max) − P(f)`` of the
    workload's first-fit activity at the interval's die temperature.
    None when there is no clock workload or no burst ran below the top.

    ``scale_from_data``: the correction is scaled by ``k`` (clipped to
    ``[0, 1]``), the least-squares factor that makes each fitted workload's
    bursts draw what its series draws at the top clock (medians of power less
    α·T, α the first fit's; workloads with ≥ 5 such burst and ≥ 20 series
    intervals): the board's own power one bin below the top instead of the
    V(f) model's. ``report["burst_clock"]`` gives ``k`` and each workload's
    deficit and correction.
    """
    if clock_workload is None:
        return None
    f_max = physics.sm_clock_max_mhz
    c = pd.concat([since_burst(r, metrics.implied_clock(r, clock_workload)) for r in recs])
    c = c.loc[np.isfinite(c[schema.SINCE_S])]
    if c.empty:
        return None
    k = np.floor(c[schema.SINCE_S].to_numpy(float) / 0.05).astype(int)
    traj = pd.Series(c[schema.SM_CLOCK_MHZ].to_numpy(float)).groupby(k).median()
    burst = (iv[schema.PHASE_KIND] == "burst").to_numpy() & iv[schema.WORKLOAD].isin(list(workloads)).to_numpy()
    mid = iv[schema.SINCE_S].to_numpy(float) + iv[schema.DT_S].to_numpy(float) / 2.0
    f = traj.reindex(np.floor(mid / 0.05).astype(int)).to_numpy(float)
    f = np.where(burst & np.isfinite(f), np.minimum(f, f_max), f_max)
    # only where NVML reads the top clock (what the leakage fit takes as the top clock)
    low = (f < f_max - 1.0) & (iv[schema.SM_CLOCK_MHZ].to_numpy(float) >= f_max)
    if not low.any():
        return None
    fm = physics.mem_clocks_mhz[0]
    out = iv.copy()
    add = np.zeros(len(iv))
    for i in np.flatnonzero(low):
        w = workloads[iv[schema.WORKLOAD].iloc[i]].workload
        t = float(iv["die_c"].iloc[i])
        add[i] = float(physics.power_w(f_max, fm, t, w.activity, w.mem_activity)
                       - physics.power_w(f[i], fm, t, w.activity, w.mem_activity))
    scale, evidence = 1.0, {}
    if scale_from_data:
        scale, evidence = _scale_from_series(iv, low, add, f_max, list(workloads),
                                             float(report["leakage"]["alpha_w_per_c"]))
    out[schema.POWER_W] = out[schema.POWER_W] + scale * add
    out[schema.SM_CLOCK_MHZ] = np.where(low, f_max, out[schema.SM_CLOCK_MHZ])
    report["burst_clock"] = {"scale": scale, "scale_from": evidence if scale_from_data else "the V(f) model","intervals_below_top": int(low.sum()), "median_clock_mhz": float(np.median(f[low])),
                             "median_added_w": float(np.median(scale * add[low])),
                             "trajectory_mhz": {int(b * 50): float(v) for b, v in traj.items() if b < 20}}
    return out


def _scale_from_series(iv: pd.DataFrame, low: np.ndarray, add: np.ndarray, f_max: float, names, alpha: float):
    """Least-squares scale of the burst correction from workloads seen in bursts and in a series."""
    y = iv[schema.POWER_W].to_numpy(float) - alpha * iv["die_c"].to_numpy(float)
    top = (iv[schema.SM_CLOCK_MHZ].to_numpy(float) >= f_max) & (iv[schema.SINCE_S].to_numpy(float) > 0.3)
    series = (iv[schema.PHASE_KIND] == "series").to_numpy()
    num = den = 0.0
    evidence = {}
    for w in names:
        is_w = (iv[schema.WORKLOAD] == w).to_numpy()
        b, s = is_w & low & top, is_w & top & series
        if b.sum() >= 5 and s.sum() >= 20:
            deficit, corr = float(np.median(y[s]) - np.median(y[b])), float(np.median(add[b]))
            num, den = num + corr * deficit, den + corr * corr
            evidence[w] = {"deficit_w": deficit, "model_correction_w": corr}
    return (float(np.clip(num / den, 0.0, 1.0)) if den > 0 else 1.0), evidence
