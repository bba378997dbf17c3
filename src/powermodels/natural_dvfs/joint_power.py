"""Power at held-out clocks from one fit over every load of a recording: the board's voltage curve shared.

Thesis eq. 4.1 (§4.1.1), ``P(f) = P_static + a·f·V(f)²``, has one voltage curve ``V(f)`` per
board: the activity ``a`` is the workload's, the voltage the chip's at that clock. The per-load
fits of :mod:`~powermodels.natural_dvfs.clock_power` and
:mod:`~powermodels.natural_dvfs.mixed_heldout` give each load its own voltage shape and fit the
ladder's pressure load on its own pure windows only — all capped, at 1,409–1,514 MHz on the H100
GPU-84fc649a, so its curve through the 1,500–1,800 MHz band is extrapolated upward from a
100 MHz range — and then hold that extrapolation fixed in every mixed window.

Here one least-squares fit covers every load's training windows at once:

    P̄ = (1 − s_c)·P_static,w + a_w·s·mean_w(g(f)) + s_c·(P_static,c + a_c·mean_c(g(f))) + α·(T̄ − T_ref),
    g(f) = f·V(f)²,

for a window of workload ``w`` that shares ``s_c`` of its time with the ladder's pressure load
``c`` (``s_c = 0`` in a pure window; ``s`` the share ``w``'s launches cover). Each load keeps its
own ``P_static`` and ``a`` (one shared static term was worse on the real mixed windows, see
:mod:`~powermodels.natural_dvfs.mixed_heldout`), while ``V(f)``'s knee and slope are the
board's, one grid point for all loads, and a mixed window constrains *both* loads' terms: the
pressure's curve is then fitted on mixed windows above the band as well as on its capped windows
below it, and the band becomes an interpolation for it too.

:func:`joint_cv` scores the joint settings (form ``linear`` or ``v2f`` with the knee on the
training clocks' grid, temperature term ``alpha`` or ``none``; counter windows only, the exact
meter) by leave-one-clock-bin-out CV on the training windows only — each 50 MHz bin of window
clocks, every load's windows in it, predicted by a fit on the other bins — and reports each load's
CV MAPE, so that :func:`~powermodels.natural_dvfs.mixed_heldout.mixed_power_at_heldout_clocks`
(through :mod:`~powermodels.natural_dvfs.joint_choice`) can choose per load between its own
fit and the joint one by that CV alone. The rule was fixed, with its tests on synthetic windows,
before any real recording was scored with it.

**Opt-in, off by default** (``joint_fit=True``; ``powermodels calibrate --from DIR
--power-joint-fit``): on seven real ladder recordings of 2026-11-27/28 (four H100 and H200
recordings of sessions 8–9; the natural-DVFS and raw recordings of H100 GPU-84fc649a, made before
the rule was written and never scored before it was fixed; and H100 GPU-48507455, recorded after
it) the CV took the joint fit for 20 of 28 loads and the held-out band got worse in 12
cells and better in 8; within 3 %: 12 of 28 cells with each load's own fit, 8 with the CV's choice
(docs/calibration.md, "One fit over every load"). The CV on the training clocks scores
interpolation between the uncapped loads' top clock and the capped mixes; the band's mixed windows
ask for each load's power where neither load ran alone.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import schema
from ..models.voltage import relative_voltage
from .clock_windows import ClockWindows
from .power_fit import mape_pct

__all__ = ["JOINT_SETTINGS", "JointFit", "fit_joint", "joint_cv", "joint_training_rows", "predict_joint",
           "usable_windows", "window_companions"]

#: The joint fit's settings (form, temperature term), the CV's candidates.
JOINT_SETTINGS = tuple(itertools.product(("linear", "v2f"), ("alpha", "none")))
_KNEES = 16
_SLOPES_PER_GHZ = (0.25, 0.5, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class JointFit:
    """One eq. 4.1 fit over several loads with one voltage curve.

    Attributes
    ----------
    form, temperature : str
        The setting (``linear``/``v2f``, ``alpha``/``none``).
    knee_mhz, slope_per_ghz : float
        The board's voltage shape (:func:`~powermodels.models.voltage.relative_voltage`); NaN and
        0 for ``linear``.
    p_static_w, a_w_per_mhz : dict of str to float
        Each fitted load's ``P_static`` (W, at ``T_ref``) and ``a`` (W per MHz·V²).
    alpha_w_per_c, reference_temperature_c : float
        The temperature term used (0 when ``none``) and ``T_ref``.
    """

    form: str
    temperature: str
    knee_mhz: float
    slope_per_ghz: float
    p_static_w: dict = field(default_factory=dict)
    a_w_per_mhz: dict = field(default_factory=dict)
    alpha_w_per_c: float = 0.0
    reference_temperature_c: float = math.nan


def _g(form: str, knee: float, slope: float):
    if form == "linear":
        return lambda f: f
    return lambda f: f * relative_voltage(f, knee, slope) ** 2


def window_companions(cw: ClockWindows, rows, companion_of: dict) -> tuple[np.ndarray, np.ndarray]:
    """Each window's companion load ('' for a pure window, or one whose companion is unknown) and its share.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    rows : array of int
        Positions in ``cw.table``.
    companion_of : dict of str to str
        The ladder's companion of each workload with mixed windows.

    Returns
    -------
    (ndarray of str, ndarray of float)
        The companion's name and ``s_c`` (0 where there is none).
    """
    rows = np.asarray(rows)
    t = cw.table
    share = t[schema.COMPANION_SHARE].to_numpy(float)[rows] if schema.COMPANION_SHARE in t \
        else np.zeros(rows.size)
    share = np.nan_to_num(share)
    names = t[schema.WORKLOAD].to_numpy(object)[rows]
    comp = np.array([companion_of.get(w, "") if s > 0 else "" for w, s in zip(names, share, strict=True)], dtype=object)
    return comp, np.where(comp != "", share, 0.0)


@dataclass(frozen=True)
class _Layout:
    """What the design of windows ``rows`` needs besides the voltage shape (computed once per fit)."""

    rows: np.ndarray
    names: np.ndarray
    comp: np.ndarray
    s_c: np.ndarray
    coverage: np.ndarray

    @classmethod
    def of(cls, cw: ClockWindows, rows: np.ndarray, companion_of: dict) -> _Layout:
        comp, s_c = window_companions(cw, rows, companion_of)
        return cls(rows=rows, names=cw.table[schema.WORKLOAD].to_numpy(object)[rows], comp=comp, s_c=s_c,
                   coverage=cw.table[schema.LAUNCH_COVERAGE].to_numpy(float)[rows])


def _design(cw: ClockWindows, lay: _Layout, loads: list[str], g) -> np.ndarray:
    """Columns ``[P_static,L, a_L for L in loads]`` of the windows (the module's equation)."""
    x_own = cw.mean_of(g, lay.rows) * lay.coverage
    x_comp = np.where(lay.s_c > 0, np.nan_to_num(cw.mean_of(g, lay.rows, companion=True)) * lay.s_c, 0.0)
    cols = []
    for load in loads:
        own, beside = lay.names == load, lay.comp == load
        cols.append(np.where(own, 1.0 - lay.s_c, 0.0) + np.where(beside, lay.s_c, 0.0))
        cols.append(np.where(own, x_own, 0.0) + np.where(beside, x_comp, 0.0))
    return np.column_stack(cols)


def _temperature_term(cw: ClockWindows, rows: np.ndarray, alpha: float, t_ref: float) -> np.ndarray:
    if not alpha:
        return np.zeros(rows.size)
    return alpha * (cw.table[schema.TEMPERATURE_C].to_numpy(float)[rows] - t_ref)


def fit_joint(cw: ClockWindows, rows, companion_of: dict, *, form: str = "linear", temperature: str = "none",
              alpha_w_per_c: float = math.nan, reference_temperature_c: float = math.nan) -> JointFit:
    """Fit the module's equation by least squares on windows ``rows`` (every load at once).

    Parameters
    ----------
    cw : ClockWindows
        The windows (:func:`~powermodels.natural_dvfs.clock_windows.clock_windows`).
    rows : array of int
        Positions in ``cw.table`` of the training windows (counter windows; any load).
    companion_of : dict of str to str
        The ladder's companion of each workload with mixed windows
        (:func:`~powermodels.natural_dvfs.ladder_windows.companions`).
    form : {"linear", "v2f"}
        ``v2f``: the voltage's knee and slope on a grid over the training clocks, one for all loads.
    temperature : {"alpha", "none"}
        ``alpha``: α's term (thesis eq. 4.6/4.7, §4.2.3) with the given α, subtracted before the fit.
    alpha_w_per_c, reference_temperature_c : float
        α at constant clock and ``T_ref`` (needed with ``temperature="alpha"``).

    Returns
    -------
    JointFit
        Only loads with a window among ``rows`` (their own or beside them) are fitted.

    Raises
    ------
    ValueError
        For an unknown form or temperature, or ``alpha`` without a finite α and ``T_ref``.
    """
    if (form, temperature) not in JOINT_SETTINGS:
        raise ValueError(f"fit_joint: (form, temperature) must be one of {JOINT_SETTINGS}, got {(form, temperature)!r}")
    alpha = 0.0
    if temperature == "alpha":
        if not (np.isfinite(alpha_w_per_c) and np.isfinite(reference_temperature_c)):
            raise ValueError("fit_joint: temperature='alpha' needs a finite alpha_w_per_c and reference_temperature_c")
        alpha = float(alpha_w_per_c)
    rows = np.asarray(rows)
    lay = _Layout.of(cw, rows, companion_of)
    loads = list(dict.fromkeys([*lay.names, *(c for c in lay.comp if c)]))
    y = cw.table[schema.POWER_W].to_numpy(float)[rows] - _temperature_term(cw, rows, alpha, reference_temperature_c)
    if form == "linear":
        grid = [(math.nan, 0.0)]
    else:
        # the knee's grid spans the clocks of the windows fitted on, as the per-load v2f fit's does
        f = np.concatenate([cw.seg_clock_mhz[cw.seg_offset[i]:cw.seg_offset[i + 1]] for i in rows]) if rows.size \
            else np.array([1.0])
        grid = list(itertools.product(np.linspace(np.nanpercentile(f, 1), np.nanpercentile(f, 99), _KNEES),
                                      _SLOPES_PER_GHZ))
    best = None
    for knee, slope in grid:
        A = _design(cw, lay, loads, _g(form, knee, slope))
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        sse = float(np.sum((A @ coef - y) ** 2))
        if best is None or sse < best[0]:
            best = (sse, coef, knee, slope)
    _, coef, knee, slope = best
    return JointFit(form=form, temperature=temperature, knee_mhz=float(knee), slope_per_ghz=float(slope),
                    p_static_w={L: float(coef[2 * i]) for i, L in enumerate(loads)},
                    a_w_per_mhz={L: float(coef[2 * i + 1]) for i, L in enumerate(loads)},
                    alpha_w_per_c=alpha, reference_temperature_c=float(reference_temperature_c))


def predict_joint(cw: ClockWindows, rows, companion_of: dict, fit: JointFit) -> np.ndarray:
    """Mean power of windows ``rows`` (W) from a :func:`fit_joint`; NaN where a load in the window was not fitted.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    rows : array of int
        Positions in ``cw.table``.
    companion_of : dict of str to str
        As :func:`fit_joint`.
    fit : JointFit
        The fit.

    Returns
    -------
    ndarray
    """
    rows = np.asarray(rows)
    loads = list(fit.p_static_w)
    coef = np.array([v for L in loads for v in (fit.p_static_w[L], fit.a_w_per_mhz[L])])
    lay = _Layout.of(cw, rows, companion_of)
    A = _design(cw, lay, loads, _g(fit.form, fit.knee_mhz, fit.slope_per_ghz))
    p = A @ coef + _temperature_term(cw, rows, fit.alpha_w_per_c, fit.reference_temperature_c)
    fitted = np.array([n in fit.p_static_w and (not c or c in fit.p_static_w) for n, c in zip(lay.names, lay.comp, strict=True)],
                      bool)
    return np.where(fitted, p, np.nan)


def usable_windows(cw: ClockWindows, companion_of: dict, alpha_w_per_c: float = math.nan) -> np.ndarray:
    """Windows the joint fit can train on or be scored on: kept counter windows, each load known.

    A mixed window whose companion is not in ``companion_of`` is left out (its second load is
    not known), and with a finite α so is a window without a temperature (α's term needs it).

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    companion_of : dict of str to str
        As :func:`fit_joint`.
    alpha_w_per_c : float, optional
        α at constant clock.

    Returns
    -------
    ndarray of bool
        One per row of ``cw.table``.
    """
    t = cw.table
    temp_ok = np.isfinite(t[schema.TEMPERATURE_C].to_numpy(float)) | ~np.isfinite(alpha_w_per_c)
    comp, _ = window_companions(cw, np.arange(len(t)), companion_of)
    share = np.nan_to_num(t[schema.COMPANION_SHARE].to_numpy(float)) if schema.COMPANION_SHARE in t \
        else np.zeros(len(t))
    return (t[schema.WINDOW_KEPT].to_numpy(bool) & (t[schema.WINDOW_SOURCE] == "counter").to_numpy() & temp_ok
            & ((share <= 0) | (comp != "")))


def joint_training_rows(cw: ClockWindows, companion_of: dict, band_mhz: tuple[float, float], *,
                        alpha_w_per_c: float = math.nan, max_band_share: float = 0.0) -> np.ndarray:
    """Every load's training counter windows for a band: kept, mean clock outside it, no time in it.

    The same rule as each load's own fit
    (:func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`), on
    :func:`usable_windows`.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    companion_of : dict of str to str
        As :func:`fit_joint`.
    band_mhz : (float, float)
        The held-out band.
    alpha_w_per_c : float, optional
        When finite, windows without a temperature are left out (α's term needs it).
    max_band_share : float, default=0
        Most time a training window may spend at clocks in the band.

    Returns
    -------
    ndarray of int
    """
    lo, hi = band_mhz
    f = cw.table[schema.SM_CLOCK_MHZ].to_numpy(float)
    sel = (usable_windows(cw, companion_of, alpha_w_per_c) & ~((f >= lo) & (f <= hi))
           & (cw.band_share(lo, hi) <= max_band_share))
    return np.flatnonzero(sel)


def joint_cv(cw: ClockWindows, rows, companion_of: dict, *, alpha_w_per_c: float = math.nan,
             reference_temperature_c: float = math.nan, bin_mhz: float = 50.0,
             min_folds: int = 3) -> pd.DataFrame:
    """Each load's leave-one-clock-bin-out CV MAPE under every joint setting (training windows only).

    Each ``bin_mhz`` bin of the windows' mean clock — every load's windows in it — is predicted by
    :func:`fit_joint` on the other bins; a load's score is the mean over the bins holding its own
    windows of the MAPE there (a mixed window counts for its workload), as
    :func:`~powermodels.natural_dvfs.setting_cv.select_setting` scores a load's own fit.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    rows : array of int
        The training counter windows (:func:`joint_training_rows`).
    companion_of : dict of str to str
        As :func:`fit_joint`.
    alpha_w_per_c, reference_temperature_c : float, optional
        α and ``T_ref``; without them only ``temperature="none"`` is tried.
    bin_mhz : float, default=50
        Fold width.
    min_folds : int, default=3
        Fewest bins for a CV (else an empty table).

    Returns
    -------
    DataFrame
        One row per (setting, load): ``form_cv``, ``temperature_cv``, ``workload``,
        ``cv_mape_pct`` (NaN where no fold scored the load).
    """
    rows = np.asarray(rows)
    f = cw.table[schema.SM_CLOCK_MHZ].to_numpy(float)[rows]
    bins = np.floor(f / bin_mhz)
    if np.unique(bins).size < min_folds:
        return pd.DataFrame(columns=[schema.FORM_CV, schema.TEMPERATURE_CV, schema.WORKLOAD, schema.CV_MAPE_PCT])
    names = cw.table[schema.WORKLOAD].to_numpy(object)[rows]
    y = cw.table[schema.POWER_W].to_numpy(float)[rows]
    has_alpha = np.isfinite(alpha_w_per_c) and np.isfinite(reference_temperature_c)
    out = []
    for form, temperature in JOINT_SETTINGS:
        if temperature == "alpha" and not has_alpha:
            continue
        per_load: dict[str, list[float]] = {}
        for b in np.unique(bins):
            test = bins == b
            fit = fit_joint(cw, rows[~test], companion_of, form=form, temperature=temperature,
                            alpha_w_per_c=alpha_w_per_c, reference_temperature_c=reference_temperature_c)
            p = predict_joint(cw, rows[test], companion_of, fit)
            for load in np.unique(names[test]):
                m = (names[test] == load) & np.isfinite(p)
                if m.any():
                    per_load.setdefault(load, []).append(mape_pct(y[test][m], p[m]))
        for load in dict.fromkeys(names):
            scores = per_load.get(load, [])
            out.append({schema.FORM_CV: form, schema.TEMPERATURE_CV: temperature, schema.WORKLOAD: load,
                        schema.CV_MAPE_PCT: float(np.mean(scores)) if scores else math.nan})
    return pd.DataFrame(out)
