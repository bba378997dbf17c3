"""Issue 26's power target, read from one table: ≤ 3 % MAPE at held-out clocks, per workload.

The figure is :func:`~powermodels.natural_dvfs.mixed_heldout.mixed_power_at_heldout_clocks`' held-out
MAPE at the fixed band (``band_rule`` "fixed", ``CalibrationRun.power_clock``): energy-counter
windows whose mean probed clock lies in the held-out band, per workload — the ladder's mixed
windows included, each load by its own time —, predicted by eq. 4.1 fitted without them. ``calibrate``'s report and
``benchmarks/gpu_natural_dvfs.py``'s ``checks.json`` both read the target from
:func:`power_target`, so they cannot disagree (the H100 run of 2026-11-27 had the report at
2.18 % / 2.77 % and ``checks.json`` ``false`` from the per-configuration band's 2 constant-clock
blocks). A workload without a test window is not scored, and an unscored workload is never a pass:
the target holds only when every workload is scored and within the limit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema

__all__ = ["power_target", "power_target_line", "target_verdict"]



def target_verdict(mapes, n_unscored: int, limit_pct: float) -> bool | None:
    """An every-workload target from the scored workloads' MAPEs: met, missed or not established.

    Parameters
    ----------
    mapes : iterable of float
        The scored workloads' held-out MAPE (%); a NaN counts as a miss.
    n_unscored : int
        How many workloads have no test point.
    limit_pct : float
        The target's limit (%).

    Returns
    -------
    bool or None
        False when a scored workload misses (or is NaN); True when every workload is scored and
        within the limit; None otherwise — an unscored workload is never a pass.
    """
    mapes = [float(x) for x in mapes]
    if any(not np.isfinite(x) or x > limit_pct for x in mapes):
        return False
    return True if mapes and not n_unscored else None

def power_target(power_clock: pd.DataFrame, limit_pct: float = 3.0) -> dict:
    """Whether power at held-out clocks is within ``limit_pct`` MAPE for every workload.

    Parameters
    ----------
    power_clock : DataFrame
        The fixed band's table (``CalibrationRun.power_clock``,
        :func:`~powermodels.natural_dvfs.mixed_heldout.mixed_power_at_heldout_clocks`).
    limit_pct : float, default=3.0
        The target's MAPE limit (issue 26).

    Returns
    -------
    dict
        ``passed``: True when every workload has test windows and a MAPE ≤ ``limit_pct``; False
        when a scored workload misses it; None when none misses it but some (or all) are not
        scored. ``scored``: per workload ``mape_pct``, ``test_windows``, ``train_windows``,
        ``train_mixed``, ``train_below_band``, ``note``; ``unscored``: per workload, why;
        ``band_mhz``, ``limit_pct``.
    """
    scored, unscored = {}, {}
    band = [math.nan, math.nan]
    for r in power_clock.to_dict("records") if len(power_clock) else []:
        band = [float(r[schema.BAND_LO_MHZ]), float(r[schema.BAND_HI_MHZ])]
        mape = float(r[schema.POWER_MAPE_PCT])
        if int(r[schema.TEST_WINDOWS]) > 0 and np.isfinite(mape):
            scored[r[schema.WORKLOAD]] = {
                "mape_pct": mape, "test_windows": int(r[schema.TEST_WINDOWS]),
                "train_windows": int(r[schema.TRAIN_WINDOWS]), "train_mixed": int(r[schema.TRAIN_MIXED]),
                "train_below_band": int(r[schema.TRAIN_BELOW_BAND]), "note": str(r[schema.NOTE])}
        else:
            unscored[r[schema.WORKLOAD]] = str(r[schema.NOTE]) or "no test window"
    passed = target_verdict([v["mape_pct"] for v in scored.values()], len(unscored), limit_pct)
    return {"passed": passed, "limit_pct": float(limit_pct), "band_mhz": band, "scored": scored,
            "unscored": unscored}


def power_target_line(target: dict) -> str:
    """:func:`power_target` in one sentence (the report's line)."""
    lo, hi = target["band_mhz"]
    verdict = {True: "met", False: "missed", None: "not established"}[target["passed"]]
    scored = "; ".join(f"{w} {v['mape_pct']:.2f} % on {v['test_windows']} window(s)"
                       f" (trained on {v['train_windows']}, {v['train_mixed']} mixed, {v['train_below_band']} below "
                       f"the band)" for w, v in target["scored"].items()) or "none"
    line = (f"Target: power ≤ {target['limit_pct']:g} % MAPE at held-out clocks {lo:.0f}–{hi:.0f} MHz for every "
            f"workload — {verdict} ({len(target['scored'])} of {len(target['scored']) + len(target['unscored'])} "
            f"workload(s) scored). Scored: {scored}.")
    if target["unscored"]:
        line += " Not scored (no test window): " + ", ".join(target["unscored"]) + "."
    return line
