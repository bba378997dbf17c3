"""The board's level state, fitted from real recordings' burst levels and their twins' (session 29).

A real H200's power at a fixed clock and die temperature is not one number: each top-clock burst of a raw
recording's natural part, brought to one die temperature, sits on a level of its own, and consecutive bursts share
theirs more often than chance (:func:`powermodels.series_vs_bursts.level_persistence`; ``benchmarks/burst_levels.py``).
The simulated GPU can carry such a state (:class:`~powermodels.devices.physics.GPUPhysics`'s ``core_level_sd`` and
``core_level_keep``: at each load start the level is kept with probability *k*, else drawn from N(0, σ), and
multiplies the core dynamic power). :func:`fit_level_state` reads σ and *k* by the method of moments:

* the twin without a level state shows what the reading itself spreads (counter steps, the die's residual after the
  leakage slope), so the board's own level variance is the real one less the twin's, ``v = sd_real² − sd_twin²``
  (medians over the recordings, in % of the burst power);
* a load's total power moves by σ times its core-dynamic share *s* (:func:`core_dynamic_share`), so
  ``σ = √v / s``;
* the reading's noise is independent from burst to burst, so the levels' own lag-1 correlation is the observed one
  times ``sd_real² / v``; between two bursts of a workload lie two load starts (its capped pressure entry and its
  own), so ``k = √ρ``.

Fitted on 23 H200s' fp32 GEMM (σ 0.86 %, *k* 0.42), this board-wide state **failed** its rule (session 29,
docs/twin-sessions.md): replayed, it spread the FMA loop and the triad as much as the fp32 GEMM, where the real boards
spread the fp32 GEMM most and the triad not at all. Its *k* also reads low: the lag-1 correlation of a recording's
16 bursts is biased down by about ``(1 + 4ρ)/n``, and the fit takes it at face value (a Monte Carlo of the fitted
process gives 0.03 where the boards read 0.14, which needs *k* ≈ 0.6). It is kept for re-scoring against a later
candidate.

No hardware is touched: the inputs are tables and twin presets.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import schema
from .twin.preset import TwinPreset

__all__ = ["LOAD_STARTS_BETWEEN_BURSTS", "core_dynamic_share", "fit_level_state"]

#: load starts between two consecutive bursts of one workload in a raw recording: its pressure entry's and its own
LOAD_STARTS_BETWEEN_BURSTS = 2


def core_dynamic_share(preset: TwinPreset, workload: str, temperature_c: float) -> float:
    """The share of ``workload``'s power that is core dynamic power, on ``preset`` at its top clocks.

    Parameters
    ----------
    preset : TwinPreset
        A twin preset with ``workload`` among its workloads.
    workload : str
        The workload's name.
    temperature_c : float
        Die temperature, °C (leakage and the load's own slope, DSO eq. 1 as in physics.py).

    Returns
    -------
    float
        ``Bc·a / (A + Bc·a + Bm·m)`` at the top SM and memory clocks.
    """
    if workload not in preset.workloads:
        raise ValueError(f"core_dynamic_share: {preset.name} has no workload {workload!r} "
                         f"(it has {sorted(preset.workloads)})")
    physics, one = preset.physics, preset.workloads[workload].workload
    base, core, mem = (float(v) for v in physics.power_terms(physics.sm_clock_max_mhz, physics.mem_clocks_mhz[0],
                                                              temperature_c))
    return core * one.activity / (base + core * one.activity + mem * one.mem_activity)


def fit_level_state(real: pd.DataFrame, twin: pd.DataFrame, shares) -> dict:
    """σ and *k* of the level state from one workload's burst levels, real and twin.

    Parameters
    ----------
    real, twin : DataFrame
        :func:`~powermodels.series_vs_bursts.level_persistence` rows of one workload: real recordings, and twins
        without a level state replaying them.
    shares : array-like of float
        That workload's core-dynamic share of its burst power on each twin (:func:`core_dynamic_share`).

    Returns
    -------
    dict
        ``core_level_sd`` (σ, a fraction) and ``core_level_keep`` (*k*), the physics fields, and what they came
        from: ``real_sd_pct``, ``twin_sd_pct``, ``real_lag1``, ``level_lag1`` (corrected), ``core_share``, and
        the ``recordings`` / ``twins`` counts.

    Raises
    ------
    ValueError
        Empty tables, more than one workload, or shares not in (0, 1].
    """
    for name, table in (("real", real), ("twin", twin)):
        if table.empty:
            raise ValueError(f"fit_level_state: no {name} rows")
    workloads = set(real[schema.WORKLOAD]) | set(twin[schema.WORKLOAD])
    if len(workloads) != 1:
        raise ValueError(f"fit_level_state: fit one workload at a time, got {sorted(workloads)}")
    shares = np.asarray(shares, dtype=float)
    if shares.size == 0 or not np.all((shares > 0) & (shares <= 1)):
        raise ValueError("fit_level_state: core-dynamic shares must lie in (0, 1]")
    real_sd = float(real[schema.LEVEL_SD_PCT].median())
    twin_sd = float(twin[schema.LEVEL_SD_PCT].median())
    real_lag1 = float(real[schema.LEVEL_LAG1_CORR].median())
    excess = real_sd ** 2 - twin_sd ** 2
    share = float(np.median(shares))
    if excess <= 0:
        # the boards spread no more than the reading does: no level state to fit
        sigma, level_lag1, keep = 0.0, float("nan"), 0.0
    else:
        sigma = math.sqrt(excess) / 100.0 / share
        level_lag1 = min(max(real_lag1 * real_sd ** 2 / excess, 0.0), 1.0)
        keep = level_lag1 ** (1.0 / LOAD_STARTS_BETWEEN_BURSTS)
    return {"core_level_sd": sigma, "core_level_keep": keep, "workload": workloads.pop(),
            "real_sd_pct": real_sd, "twin_sd_pct": twin_sd, "real_lag1": real_lag1, "level_lag1": level_lag1,
            "core_share": share, "recordings": len(real), "twins": len(twin)}
