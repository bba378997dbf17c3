"""Thesis eq. 4.1 fitted on windows whose clock moves: one setting, ``P_static`` optionally within its physical range.

A window's mean power (:mod:`~powermodels.natural_dvfs.clock_power`) is

    P̄ = w·P_static + a·s·mean(g(f(t))) + α·(T̄ − T_ref)·w,   g(f) = f·V(f)²,

(thesis eq. 4.1, §4.1.1, with α's term of eq. 4.6/4.7, §4.2.3; ``s`` the share of the window the
workload's launches cover, ``w`` the share its static term covers: 1, or ``1 − s_c`` beside a
ladder companion whose own power is known), linear in ``P_static`` and ``a`` for a given voltage
shape. :func:`fit_setting` solves it by least squares for one setting (form, temperature term,
windows, ``P_static``), :func:`predict_setting` predicts windows from the fit.

Three rules for a band outside the training clocks (session 9) are **opt-in, off by default**
(``bound_p_static`` and ``knee_floor_mhz`` here, the third in
:mod:`~powermodels.natural_dvfs.setting_cv`; one switch, ``extrapolation_rules``, from
:func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks` up to ``powermodels
calibrate --from DIR --power-extrapolation-rules``): on the seven real ladder recordings they made
15 of 21 held-out cells worse (docs/calibration.md, "Extrapolating to the band"). Off, a free
``P_static`` is the unbounded least-squares intercept and the knee's grid spans the training
clocks only, as before session 9.

**P_static is a physical quantity, so a fitted one may be held to its range** (``bound_p_static``):
the chip's static power at ``T_ref`` is not negative, and not above the measured idle power at
that temperature — the idle chip draws its static power plus the clock tree's, so
``0 ≤ P_static ≤ P_idle`` (:func:`p_static_bounds`: with the temperature term the idle power moved
to ``T_ref`` by α, without it the idle power as measured, since that setting's power does not
depend on temperature; without a measured idle power only ``P_static ≥ 0``). A ``free`` fit is
the least-squares fit under these bounds: the objective is a convex quadratic and only
``P_static`` is bounded, so when the unconstrained optimum lies outside the range the constrained
one lies on the bound it crossed, and the fit is solved again with ``P_static`` held there (at
every knee and slope of the ``v2f`` grid). Why: over a narrow clock range a free intercept is not
the chip's static power but the tangent's, and extrapolated it goes wrong — on the H100
GPU-a8fc3d71 (``datasets/h100-2026-11-27/natural_dvfs_ladder_a8fc3d71``) the FMA loop's training
windows all lay at 1,800–2,000 MHz, the chosen linear fit put ``P_static`` at −2,640 W with
``a`` = 1.54 W/MHz, and its prediction 300 MHz down, at 1,500–1,800 MHz, missed by 17.8 %.

**The voltage's knee may lie below the training clocks** (``knee_floor_mhz``): the ``v2f`` form's
knee grid (:func:`~powermodels.models.voltage.relative_voltage`: V flat below the knee, rising
linearly above) spanned only the training windows' clocks, so a band below them was predicted
with V held flat — the one place the board's V(f) is known to keep falling. With ``P_static``
bounded, the local slope of a steep V²f curve must then come from V rising inside the training
range, and the flat V below overshoots the band (simulated here: a V²f curve with its knee at
1,400 MHz, trained at 1,800–2,000 MHz, +24 % at 1,500–1,800 MHz). ``knee_floor_mhz`` (the band's
low edge, passed by :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`)
extends the grid down so that V may keep its slope through the band.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import schema
from ..models.voltage import relative_voltage
from .clock_windows import ClockWindows

__all__ = ["FORMS", "SOURCES", "STATICS", "TEMPERATURES", "fit_setting", "mape_pct", "p_static_bounds",
           "predict_setting"]

FORMS = ("linear", "v2f")
TEMPERATURES = ("alpha", "none")
SOURCES = ("counter", "counter+instant")
STATICS = ("free", "idle")
_SLOPES_PER_GHZ = (0.25, 0.5, 1.0, 1.5, 2.0)


def _g(form: str, knee: float, slope: float):
    if form == "linear":
        return lambda f: f
    return lambda f: f * relative_voltage(f, knee, slope) ** 2


def _companion_x(cw: ClockWindows, rows: np.ndarray, g) -> np.ndarray:
    """The companion's term ``s_c·mean_c(g(f))`` of each window (0 outside mixed windows)."""
    if schema.COMPANION_SHARE not in cw.table:
        return np.zeros(np.size(rows))
    share = cw.table[schema.COMPANION_SHARE].to_numpy(float)[rows]
    return np.where(share > 0, np.nan_to_num(cw.mean_of(g, rows, companion=True)) * share, 0.0)


def _known(cw: ClockWindows, rows: np.ndarray) -> np.ndarray | None:
    """The companion's term of each window from the companion's own fit (``companion_power_w``), if given."""
    if schema.COMPANION_POWER_W not in cw.table:
        return None
    return np.nan_to_num(cw.table[schema.COMPANION_POWER_W].to_numpy(float)[rows])


def _own_weight(cw: ClockWindows, rows: np.ndarray) -> np.ndarray:
    """The share of each window the workload's static (and α) term covers: ``1 − s_c`` where the
    companion's own power is known (it brings its own ``P_static``), else 1."""
    rows = np.asarray(rows)
    if schema.COMPANION_POWER_W not in cw.table:
        return np.ones(rows.size)
    known = np.isfinite(cw.table[schema.COMPANION_POWER_W].to_numpy(float)[rows])
    return 1.0 - np.where(known, cw.table[schema.COMPANION_SHARE].to_numpy(float)[rows], 0.0)


def _solve(cw: ClockWindows, rows: np.ndarray, y: np.ndarray, instant: np.ndarray, form, knee, slope,
           p_static: float, bounds: tuple[float, float] = (-math.inf, math.inf)):
    """Least squares, ``P_static`` held at ``p_static`` (finite) or fitted within ``bounds``;
    returns ``([P_static, a, instant offset, a_companion], sse)``."""
    coef, sse = _lstsq(cw, rows, y, instant, form, knee, slope, p_static)
    lo, hi = bounds
    if not np.isfinite(p_static) and not lo <= coef[0] <= hi:
        # one bounded coordinate of a convex quadratic: outside the range, the optimum is on the bound crossed
        return _lstsq(cw, rows, y, instant, form, knee, slope, lo if coef[0] < lo else hi)
    return coef, sse


def _lstsq(cw: ClockWindows, rows: np.ndarray, y: np.ndarray, instant: np.ndarray, form, knee, slope,
           p_static: float):
    """Unbounded least squares, ``P_static`` held at ``p_static`` where finite."""
    g = _g(form, knee, slope)
    x = cw.mean_of(g, rows) * cw.table[schema.LAUNCH_COVERAGE].to_numpy(float)[rows]
    known = _known(cw, rows)
    if known is not None:  # the companion's power is known (mixed_heldout): no a_c of its own here
        y, xc = y - known, np.zeros_like(x)
    else:
        xc = _companion_x(cw, rows, g)
    weight = _own_weight(cw, rows)
    cols = [x]
    has_offset = bool(instant.any() and (~instant).any())
    if has_offset:
        cols.append(instant.astype(float))
    if (xc > 0).any():  # mixed windows (ladder_windows): the companion's own a_c
        cols.append(xc)
    fixed = np.isfinite(p_static)  # P_static held: at the measured idle power (thesis eq. 4.1), or at a bound
    A = np.column_stack(cols if fixed else [weight] + cols)
    target = y - p_static * weight if fixed else y
    coef, *_ = np.linalg.lstsq(A, target, rcond=None)
    sse = float(np.sum((A @ coef - target) ** 2))
    coef = np.r_[p_static, coef] if fixed else coef
    offset = coef[2] if has_offset else 0.0
    a_c = coef[-1] if (xc > 0).any() else 0.0
    return np.array([coef[0], coef[1], offset, a_c]), sse


def p_static_bounds(idle_w: float = math.nan, idle_temperature_c: float = math.nan, alpha_w_per_c: float = 0.0,
                    reference_temperature_c: float = math.nan) -> tuple[float, float]:
    """The physical range of eq. 4.1's ``P_static`` at ``T_ref``: ``(0, idle power there)``.

    Parameters
    ----------
    idle_w, idle_temperature_c : float
        Measured idle power (W) and its temperature (°C); NaN when not measured.
    alpha_w_per_c : float, default=0
        The setting's temperature term (0 when off): the idle power is moved to ``T_ref`` by it.
    reference_temperature_c : float
        ``T_ref`` (used with a nonzero ``alpha_w_per_c``).

    Returns
    -------
    (float, float)
        ``(0, P_idle)``; the upper bound is ``inf`` when the idle power (or, with α, its
        temperature) is unknown.
    """
    shift = alpha_w_per_c * (idle_temperature_c - reference_temperature_c) if alpha_w_per_c else 0.0
    hi = idle_w - shift
    return 0.0, float(hi) if np.isfinite(hi) else math.inf


def fit_setting(cw: ClockWindows, rows, setting: dict, *, alpha_w_per_c: float = math.nan,
                reference_temperature_c: float = math.nan, idle_w: float = math.nan,
                idle_temperature_c: float = math.nan, knee_floor_mhz: float = math.nan,
                bound_p_static: bool = False) -> dict:
    """Fit one setting (``form``, ``temperature``, ``sources``, ``p_static``) on windows ``rows``.

    ``p_static="idle"`` holds ``P_static`` at the measured idle power ``idle_w`` (moved to
    ``T_ref`` with α when the temperature term is on), "free" fits it: unbounded by default, or
    with ``bound_p_static`` within its physical range (:func:`p_static_bounds`: ``0 ≤ P_static ≤``
    that idle power).

    Parameters
    ----------
    cw : ClockWindows
        The windows (:func:`~powermodels.natural_dvfs.clock_windows.clock_windows`).
    rows : array of int
        Positions in ``cw.table`` of the windows fitted on.
    setting : dict
        One of :func:`~powermodels.natural_dvfs.setting_cv.select_setting`'s settings (``schema.SETTING_*`` keys).
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock and ``T_ref`` (used with ``temperature="alpha"``).
    idle_w, idle_temperature_c : float, optional
        Measured idle power and its temperature (``p_static="idle"``'s value and, with
        ``bound_p_static``, "free"'s upper bound; without them a bounded ``P_static`` is only held ≥ 0).
    knee_floor_mhz : float, optional
        The ``v2f`` knee's grid reaches down to this clock when it lies below the windows'
        clocks (the held-out band's low edge: the voltage may keep falling through the band).
        NaN (default): the grid spans the windows' clocks only.
    bound_p_static : bool, default=False
        Hold a "free" ``P_static`` within :func:`p_static_bounds` (an opt-in extrapolation rule,
        see the module); off, it is the unbounded least-squares intercept.

    Returns
    -------
    dict
        ``p_static_w``, ``a_w_per_mhz``, ``knee_mhz``, ``slope_per_ghz``, ``instant_offset_w``
        and the setting; ``a`` multiplies ``f·V(f)²`` (MHz), ``P_static`` is at ``T_ref``.

    Raises
    ------
    ValueError
        When no counter window is among ``rows`` (the fit's scale is the counter's), or
        ``p_static="idle"`` without a finite ``idle_w`` (and ``idle_temperature_c`` with α).
    """
    t = cw.table.iloc[np.asarray(rows)]
    if setting[schema.SETTING_SOURCES] == "counter":
        t = t.loc[t[schema.WINDOW_SOURCE] == "counter"]
    idx = cw.table.index.get_indexer(t.index)
    if not (t[schema.WINDOW_SOURCE] == "counter").any():
        raise ValueError(f"fit_setting: none of the {len(rows)} window(s) given is a counter window "
                         f"({schema.WINDOW_SOURCE}), the meter the fit is scaled to")
    y = t[schema.POWER_W].to_numpy(float)
    alpha = alpha_w_per_c if setting[schema.SETTING_TEMPERATURE] == "alpha" else 0.0
    if alpha:
        y = y - alpha * (t[schema.TEMPERATURE_C].to_numpy(float) - reference_temperature_c) * _own_weight(cw, idx)
    instant = (t[schema.WINDOW_SOURCE] == "instant").to_numpy()
    p_static = math.nan
    physical = p_static_bounds(idle_w, idle_temperature_c, alpha, reference_temperature_c)
    # off by default: on the seven real ladder recordings the bound made more cells worse than better
    bounds = physical if bound_p_static else (-math.inf, math.inf)
    if setting.get(schema.SETTING_P_STATIC, "free") == "idle":
        p_static = physical[1]
        if not np.isfinite(p_static):  # else the fit below would free P_static under the label "idle"
            raise ValueError(f"fit_setting: p_static='idle' needs a finite idle_w (got {idle_w!r})"
                             + (f" and, with the temperature term, idle_temperature_c (got {idle_temperature_c!r})"
                                if alpha else ""))
    if setting[schema.SETTING_FORM] == "linear":
        grid = [(math.nan, 0.0)]
    else:
        # the knee's grid spans the clocks of the windows fitted on (never the held-out ones' power),
        # and with a knee_floor_mhz (opt-in) down to the band's low edge where the band lies below
        # them: a knee held inside the training clocks makes V flat exactly where the fit is used
        f = np.concatenate([cw.seg_clock_mhz[cw.seg_offset[i]:cw.seg_offset[i + 1]] for i in idx]) if idx.size \
            else np.array([])
        lo, hi = (np.nanpercentile(f, 1), np.nanpercentile(f, 99)) if f.size else (0.0, 1.0)
        lo = min(lo, knee_floor_mhz) if np.isfinite(knee_floor_mhz) else lo
        grid = list(itertools.product(np.linspace(lo, hi, 16), _SLOPES_PER_GHZ))
    best = None
    for knee, slope in grid:
        coef, sse = _solve(cw, idx, y, instant, setting[schema.SETTING_FORM], knee, slope, p_static, bounds)
        if best is None or sse < best[0]:
            best = (sse, coef, knee, slope)
    _, coef, knee, slope = best
    return {**setting, schema.FIT_P_STATIC_W: float(coef[0]), schema.FIT_A_W_PER_MHZ: float(coef[1]),
            schema.FIT_KNEE_MHZ: float(knee), schema.FIT_SLOPE_PER_GHZ: float(slope),
            schema.INSTANT_OFFSET_W: float(coef[2]), schema.FIT_COMPANION_A_W_PER_MHZ: float(coef[3]),
            schema.CORRECTION_ALPHA_W_PER_C: float(alpha), schema.REFERENCE_TEMPERATURE_C: float(reference_temperature_c)}


def predict_setting(cw: ClockWindows, rows, params: dict) -> np.ndarray:
    """Predicted measured power of windows ``rows`` (the temperature term added back; counter scale).

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    rows : array of int
        Positions in ``cw.table`` of the windows to predict.
    params : dict
        A fit of :func:`fit_setting`.

    Returns
    -------
    ndarray
        Mean power of each window, W (an instant reading's offset not included).
    """
    rows = np.asarray(rows)
    g = _g(params[schema.SETTING_FORM], params[schema.FIT_KNEE_MHZ], params[schema.FIT_SLOPE_PER_GHZ])
    x = cw.mean_of(g, rows) * cw.table[schema.LAUNCH_COVERAGE].to_numpy(float)[rows]
    weight = _own_weight(cw, rows)
    p = params[schema.FIT_P_STATIC_W] * weight + params[schema.FIT_A_W_PER_MHZ] * x
    known = _known(cw, rows)
    if known is not None:  # the companion's power over its own time, from its own fit (mixed_heldout)
        p = p + known
    elif params.get(schema.FIT_COMPANION_A_W_PER_MHZ):  # a mixed window's companion load (ladder_windows)
        p = p + params[schema.FIT_COMPANION_A_W_PER_MHZ] * _companion_x(cw, rows, g)
    if params[schema.CORRECTION_ALPHA_W_PER_C]:
        temp = cw.table[schema.TEMPERATURE_C].to_numpy(float)[rows]
        p = p + params[schema.CORRECTION_ALPHA_W_PER_C] * (temp - params[schema.REFERENCE_TEMPERATURE_C]) * weight
    return p



def mape_pct(y, p) -> float:
    """Mean absolute percentage error of ``p`` against ``y`` (%); NaN when empty."""
    y, p = np.asarray(y, float), np.asarray(p, float)
    return float(100 * np.mean(np.abs(p - y) / np.abs(y))) if y.size else math.nan
