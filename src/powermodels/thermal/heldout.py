"""Rows of a real run re-scored with another α method: issue 19's targets on values a run recorded.

A run of ``benchmarks/gpu_thermal.py`` keeps, per workload, cold / warm / hot
measurements and the 12 s reference, each with its raw energy per launch,
power, time per launch, window temperature, reference temperature and the α it
used (``thermal_rows.csv``). :func:`rescore_rows` recomputes ``energy_at_ref_j``
of those rows with the α a method gives, in the run's order, as the method
would have run online; :func:`implied_alpha` says which relative α brings the
three states within a tolerance of each other and of the reference — what
the rows themselves imply, for judging a method, never for tuning one.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from .alpha import board_alpha, board_prior, shrunk_alpha, with_board_prior
from .normalise import FIXED_CLOCK, POWER_CAPPED, AlphaEstimate, assumed_alpha, normalise

__all__ = ["STATES", "cached_fits", "heldout_table", "implied_alpha", "rescore_rows", "state_figures"]

#: The thermal states whose figures must agree (issue 19), and the reference's name.
STATES = ("cold", "warm", "hot")


def _spread(values) -> float:
    v = np.asarray(values, dtype=float)
    return float((v.max() - v.min()) / v.mean())


def state_figures(rows: pd.DataFrame, column: str = schema.ENERGY_AT_REF_J) -> dict:
    """Spread of ``column`` over the cold/warm/hot rows of one workload and its worst gap to the reference (%)."""
    states = rows[rows[schema.THERMAL_STATE].isin(STATES)]
    ref = rows[rows[schema.THERMAL_STATE] == "reference"]
    out = {schema.SPREAD_PCT: 100 * _spread(states[column]) if len(states) == len(STATES) else math.nan,
           schema.WORST_VS_REF_PCT: math.nan}
    if len(ref) and len(states):
        gap = states[column].to_numpy(dtype=float) / float(ref[column].iloc[0]) - 1
        out[schema.WORST_VS_REF_PCT] = float(100 * gap[np.argmax(np.abs(gap))])
    return out


def implied_alpha(rows: pd.DataFrame, *, spread_pct: float = 1.0, ref_pct: float = 2.0,
                  grid_per_c=np.linspace(0.0, 1.5, 1501)) -> dict:
    """The least-squares relative slope of the four rows' energy on temperature, and the range of relative
    α (%/°C) that meets both targets on them (``(nan, nan)`` when none does)."""
    used = rows[rows[schema.THERMAL_STATE].isin((*STATES, "reference"))]
    temp = used[schema.TEMPERATURE_C].to_numpy(dtype=float)
    energy = used[schema.ENERGY_J].to_numpy(dtype=float)
    slope = np.polyfit(temp - temp.mean(), energy, 1)[0] / energy.mean()
    t_ref = float(rows[schema.REFERENCE_TEMPERATURE_C].iloc[0])
    # every grid value at once (state_figures' spread and worst gap on each column; a loop over the
    # grid with DataFrames took ~25 s per workload)
    grid = np.asarray(grid_per_c, dtype=float)
    at_ref = energy[:, None] * (1 - grid[None, :] / 100 * (temp[:, None] - t_ref))
    state = used[schema.THERMAL_STATE].to_numpy()
    states, ref = at_ref[np.isin(state, STATES)], at_ref[state == "reference"]
    meets = np.zeros(grid.size, dtype=bool)
    if len(states) == len(STATES) and len(ref):
        spread = 100 * (states.max(axis=0) - states.min(axis=0)) / states.mean(axis=0)
        gap = states / ref[0] - 1
        worst = 100 * np.take_along_axis(gap, np.argmax(np.abs(gap), axis=0)[None, :], axis=0)[0]
        meets = (spread <= spread_pct) & (np.abs(worst) <= ref_pct)
    ok = grid[meets]
    return {schema.SLOPE_PCT_PER_C: float(100 * slope),
            schema.MEETS_PCT_PER_C: (float(ok.min()), float(ok.max())) if ok.size else (math.nan, math.nan)}


def _row_estimate(row, source: str) -> AlphaEstimate:
    return AlphaEstimate(float(row[schema.CORRECTION_ALPHA_W_PER_C]), float(row[schema.ALPHA_UNCERTAINTY_W_PER_C]),
                         source, regime=str(row[schema.ALPHA_REGIME]), power_w=float(row[schema.POWER_W]),
                         sm_clock_mhz=float(row[schema.SM_CLOCK_MHZ]),
                         reference_temperature_c=float(row[schema.REFERENCE_TEMPERATURE_C]),
                         pooled=1 if source == "pooled" else 0)


def rescore_rows(rows: pd.DataFrame, *, pool: bool = True, fits: dict | None = None,
                 temperature_column: str = schema.TEMPERATURE_C) -> tuple[pd.DataFrame, dict]:
    """``rows`` (one run, in its order) with ``energy_at_ref_j`` recomputed by the shrinkage method.

    Online, a workload's own learned fixed-clock α is cached as fitted and the row uses it shrunk
    toward the board's prior (:func:`~.alpha.shrunk_alpha`, :func:`~.alpha.board_prior`: the
    board's earlier learned α at this clock, else the assumption). A row whose α equals an earlier
    workload's was pooled online and is re-pooled (:func:`~.alpha.board_alpha`). A capped workload
    (``alpha_regime = power_capped``) takes the capped regime's model: its own capped fit (``fits``)
    shrunk toward the capped prior, else that prior (:func:`~.normalise.assumed_alpha` in the capped
    regime); other α are kept. The reference row takes its workload's α. ``pool=False`` shrinks toward the
    assumption alone (the board's earlier fits left out of the prior).

    ``fits`` (workload → :class:`~.normalise.AlphaEstimate`, the run's ``alpha_cache.json``: what
    each warm-up fitted, before shrinkage) are used as the workloads' own α where given: a run
    recorded with the shrinkage method (session 5 on) stores the *shrunk* α in its rows, and
    shrinking that again would score another method than the one that ran. ``temperature_column``
    is the row temperature α moves from (another column scores a variant, e.g. the window's last
    reading).

    Returns
    -------
    rows : pandas.DataFrame
        ``rows`` with ``energy_at_ref_j`` (and the α columns) recomputed.
    alphas : dict
        Workload → the :class:`~.normalise.AlphaEstimate` its rows now use.
    """
    out, alphas = [], {}
    board: list[AlphaEstimate] = []
    for _, group in rows.groupby(schema.WORKLOAD, sort=False):
        first = group[group[schema.THERMAL_STATE].isin(STATES)].iloc[0]
        own = _row_estimate(first, str(first[schema.ALPHA_SOURCE]))
        fit = (fits or {}).get(first[schema.WORKLOAD])
        if fit is not None and fit.regime == FIXED_CLOCK and fit.source in ("learned", "pooled"):
            own = fit if fit.source == "learned" else replace(own, source="pooled", pooled=max(fit.pooled, 1))
        fixed = own.regime == FIXED_CLOCK and own.source in ("learned", "pooled")
        # (runs before `pooled` was a source recorded a pool as `learned`: its α equals an earlier fit's)
        was_pooled = own.source == "pooled" or any(math.isclose(own.alpha_w_per_c, b.alpha_w_per_c, rel_tol=1e-9)
                                                   for b in board)
        if fixed and was_pooled:
            alpha = board_alpha(board, own.sm_clock_mhz, own.power_w) or own
        elif fixed:
            alpha = shrunk_alpha(own, board_prior(board if pool else [], own.power_w, own.sm_clock_mhz))
            board.append(own)
        elif own.regime == POWER_CAPPED and own.source in ("assumed", "learned"):
            # the capped regime's own model: a capped fit shrunk toward the capped prior, else that prior
            fit = fit if fit is not None and fit.regime == POWER_CAPPED and fit.source == "learned" else None
            alpha = with_board_prior(fit, [], own.power_w) if fit is not None else assumed_alpha(own.power_w,
                                                                                                  POWER_CAPPED)
        else:
            alpha = own
        alphas[first[schema.WORKLOAD]] = alpha
        for _, row in group.iterrows():
            fields = normalise(energy_j=row[schema.ENERGY_J], power_w=row[schema.POWER_W], time_s=row[schema.TIME_S],
                               temperature_c=row[temperature_column], alpha=alpha,
                               reference_temperature_c=row[schema.REFERENCE_TEMPERATURE_C])
            out.append({**row.to_dict(), **fields})
    return pd.DataFrame(out), alphas


def heldout_table(rows: pd.DataFrame, *, power_limit_w: float = math.nan, fits: dict | None = None) -> pd.DataFrame:
    """Per workload of one run: the recorded α and figures beside :func:`rescore_rows`' (issue 19's targets).

    Columns: ``workload``, ``regime``, α recorded / now / implied by the rows and the range meeting
    both targets (%/°C), raw spread, recorded and re-scored at-ref spread and worst gap to the
    reference (%), whether each meets 1 % / 2 %, and for capped work whether the rows' power was at
    ``power_limit_w`` (:data:`~.spans.CAP_POWER_TOLERANCE`; a row away from it was not settled).
    """
    from .spans import CAP_POWER_TOLERANCE

    rows = rows[rows[schema.THERMAL_STATE].isin((*STATES, "reference"))]
    new, alphas = rescore_rows(rows, fits=fits)
    out = []
    for w, g in rows.groupby(schema.WORKLOAD, sort=False):
        power = float(g[schema.POWER_W].iloc[0])
        raw, old = state_figures(g, schema.ENERGY_J), state_figures(g)
        now = state_figures(new[new[schema.WORKLOAD] == w])
        imp = implied_alpha(g)
        states = g[g[schema.THERMAL_STATE].isin(STATES)]
        at_limit = (states[schema.POWER_W].astype(float) - power_limit_w).abs() <= CAP_POWER_TOLERANCE * power_limit_w
        out.append({
            schema.WORKLOAD: w, schema.HELDOUT_REGIME: str(g[schema.ALPHA_REGIME].iloc[0]),
            schema.ALPHA_RECORDED_PCT_PER_C: 100 * float(g[schema.CORRECTION_ALPHA_W_PER_C].iloc[0]) / power,
            schema.ALPHA_NOW_PCT_PER_C: 100 * alphas[w].alpha_w_per_c / power,
            schema.ALPHA_IMPLIED_PCT_PER_C: imp[schema.SLOPE_PCT_PER_C],
            schema.ALPHA_MEETING_PCT_PER_C: "%.2f–%.2f" % imp[schema.MEETS_PCT_PER_C],
            schema.RAW_SPREAD_PCT: raw[schema.SPREAD_PCT],
            schema.RECORDED_SPREAD_PCT: old[schema.SPREAD_PCT], schema.RECORDED_VS_REF_PCT: old[schema.WORST_VS_REF_PCT],
            schema.RECORDED_MEETS: old[schema.SPREAD_PCT] <= 1 and abs(old[schema.WORST_VS_REF_PCT]) <= 2,
            schema.NOW_SPREAD_PCT: now[schema.SPREAD_PCT], schema.NOW_VS_REF_PCT: now[schema.WORST_VS_REF_PCT],
            schema.NOW_MEETS: now[schema.SPREAD_PCT] <= 1 and abs(now[schema.WORST_VS_REF_PCT]) <= 2,
            schema.CAPPED_ROWS_AT_LIMIT: f"{int(at_limit.sum())}/{len(states)}"
            if str(g[schema.ALPHA_REGIME].iloc[0]) != FIXED_CLOCK and math.isfinite(power_limit_w) else "",
        })
    return pd.DataFrame(out)


def cached_fits(path) -> dict:
    """Workload → the α a run cached (``alpha_cache.json`` as ``benchmarks/gpu_thermal.py`` writes it:
    the α cache's files by name); {} when the run has none (session 4 kept no cache)."""
    import json
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        return {}
    out = {}
    for body in json.loads(path.read_text()).values():
        for entry in body.get("entries", {}).values():
            out[entry["workload"]] = AlphaEstimate.from_dict(entry["alpha"])
    return out
