"""Power vs clock from windows whose clock moves, scored at a held-out clock band.

Thesis eq. 4.1, ``P(f) = P_static + a·f·V(f)²`` (§4.1.1), with α's temperature term (eq. 4.6/4.7,
§4.2.3), fitted on windows of one workload whose clock trajectory is known
(:mod:`~powermodels.natural_dvfs.clock_windows`). Over a window the mean power is

    P̄ = P_static + a·s·mean(g(f(t))) + α·(T̄ − T_ref),   g(f) = f·V(f)²,

with ``s`` the share of the window the workload's launches cover (between batches — the clock
probes, host gaps — the dynamic term is idle), linear in ``P_static`` and ``a`` for a given
voltage shape, however the clock moved inside the window. The settings are chosen by cross-validation on the training clocks only
(:func:`select_setting`):

* the form: ``linear`` (V constant, ``P = P_static + a·f``) or ``v2f`` (V rising linearly above
  a knee, the Kernel Tuner shape of :func:`~powermodels.models.voltage.relative_voltage`,
  knee and slope on a grid with the linear part solved at each point);
* the temperature term: ``alpha`` (the α fitted at constant clock, thesis §4.2.1) or ``none``;
* the windows fitted on: ``counter`` only, or ``counter+instant`` (with a free offset for the
  instant field), always *scored* on counter windows, the exact meter.

:func:`power_at_heldout_clocks` holds out the windows whose mean clock lies in a band, fits on
the rest (by default only windows that spend no time at clocks in the band: a window partly in
the band carries the band's power into the fit), and reports the
held-out MAPE per workload first, with how many windows were kept and why the others were not.

Windows shared with the ``ladder`` part's pressure load (:mod:`~powermodels.natural_dvfs.ladder_windows`)
add the companion's own term ``a_c·s_c·mean_c(g(f))``: one more linear unknown, fitted only where
such windows are among the training rows — or, where the table carries it (``companion_power_w``,
:mod:`~powermodels.natural_dvfs.mixed_heldout`), the companion's whole power over its own time
from the companion's own fit, subtracted in the fit and added in the prediction, the workload's
``P_static`` and α terms then covering the rest of the window (``1 − s_c``); only then is a mixed
window also a test window.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

from .. import schema
from ..models.voltage import relative_voltage
from .clock_windows import ClockWindows

__all__ = ["DEFAULT_BAND_MHZ", "fit_setting", "idle_arguments", "power_at_heldout_clocks",
           "predict_setting", "select_setting"]

#: The held-out band of issue 26 (the clocks an uncapped workload passes through after a pressure load).
DEFAULT_BAND_MHZ = (1500.0, 1800.0)

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
           p_static: float):
    """Least squares; returns ``([P_static, a, instant offset, a_companion], sse)``."""
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
    fixed = np.isfinite(p_static)  # P_static held at the measured idle power (thesis eq. 4.1's definition)
    A = np.column_stack(cols if fixed else [weight] + cols)
    target = y - p_static * weight if fixed else y
    coef, *_ = np.linalg.lstsq(A, target, rcond=None)
    sse = float(np.sum((A @ coef - target) ** 2))
    coef = np.r_[p_static, coef] if fixed else coef
    offset = coef[2] if has_offset else 0.0
    a_c = coef[-1] if (xc > 0).any() else 0.0
    return np.array([coef[0], coef[1], offset, a_c]), sse


def fit_setting(cw: ClockWindows, rows, setting: dict, *, alpha_w_per_c: float = math.nan,
                reference_temperature_c: float = math.nan, idle_w: float = math.nan,
                idle_temperature_c: float = math.nan) -> dict:
    """Fit one setting (``form``, ``temperature``, ``sources``, ``p_static``) on windows ``rows``.

    ``p_static="idle"`` holds ``P_static`` at the measured idle power ``idle_w`` (moved to
    ``T_ref`` with α when the temperature term is on), "free" fits it.

    Parameters
    ----------
    cw : ClockWindows
        The windows (:func:`~powermodels.natural_dvfs.clock_windows.clock_windows`).
    rows : array of int
        Positions in ``cw.table`` of the windows fitted on.
    setting : dict
        One of :func:`select_setting`'s settings (``schema.SETTING_*`` keys).
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock and ``T_ref`` (used with ``temperature="alpha"``).
    idle_w, idle_temperature_c : float, optional
        Measured idle power and its temperature (used with ``p_static="idle"``).

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
    if setting.get(schema.SETTING_P_STATIC, "free") == "idle":
        p_static = idle_w - (alpha * (idle_temperature_c - reference_temperature_c) if alpha else 0.0)
        if not np.isfinite(p_static):  # else the fit below would free P_static under the label "idle"
            raise ValueError(f"fit_setting: p_static='idle' needs a finite idle_w (got {idle_w!r})"
                             + (f" and, with the temperature term, idle_temperature_c (got {idle_temperature_c!r})"
                                if alpha else ""))
    if setting[schema.SETTING_FORM] == "linear":
        grid = [(math.nan, 0.0)]
    else:
        # the knee's grid spans the clocks of the windows fitted on (never the held-out ones)
        f = np.concatenate([cw.seg_clock_mhz[cw.seg_offset[i]:cw.seg_offset[i + 1]] for i in idx]) if idx.size \
            else np.array([])
        lo, hi = (np.nanpercentile(f, 1), np.nanpercentile(f, 99)) if f.size else (0.0, 1.0)
        grid = list(itertools.product(np.linspace(lo, hi, 16), _SLOPES_PER_GHZ))
    best = None
    for knee, slope in grid:
        coef, sse = _solve(cw, idx, y, instant, setting[schema.SETTING_FORM], knee, slope, p_static)
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


def _mape(y, p) -> float:
    y, p = np.asarray(y, float), np.asarray(p, float)
    return float(100 * np.mean(np.abs(p - y) / np.abs(y))) if y.size else math.nan


def _settings(alpha_w_per_c: float, has_instant: bool, idle_w: float, idle_temperature_c: float) -> list[dict]:
    temps = TEMPERATURES if np.isfinite(alpha_w_per_c) else ("none",)
    sources = SOURCES if has_instant else ("counter",)
    statics = STATICS if np.isfinite(idle_w) else ("free",)
    # the idle power moves to T_ref with α only at a known idle temperature
    return [{schema.SETTING_FORM: f, schema.SETTING_TEMPERATURE: t, schema.SETTING_SOURCES: s, schema.SETTING_P_STATIC: p}
            for f in FORMS for t in temps for s in sources for p in statics
            if not (p == "idle" and t == "alpha" and not np.isfinite(idle_temperature_c))]


def _instant_offset(cw: ClockWindows, train, params: dict) -> float:
    """The instant field's offset from the counter: fitted, else the median training residual."""
    if params[schema.INSTANT_OFFSET_W] or params[schema.SETTING_SOURCES] != "counter":
        return params[schema.INSTANT_OFFSET_W]
    inst = train[(cw.table[schema.WINDOW_SOURCE].to_numpy(object)[train] == "instant")]
    if not inst.size:
        return 0.0
    return float(np.median(cw.table[schema.POWER_W].to_numpy(float)[inst] - predict_setting(cw, inst, params)))


def select_setting(cw: ClockWindows, rows, *, alpha_w_per_c: float = math.nan,
                   reference_temperature_c: float = math.nan, idle_w: float = math.nan,
                   idle_temperature_c: float = math.nan, bin_mhz: float = 50.0,
                   min_folds: int = 3) -> tuple[dict, float, pd.DataFrame]:
    """Choose the setting by leave-one-clock-bin-out CV on windows ``rows`` (training clocks only).

    Folds are ``bin_mhz`` bins of the windows' mean clock. Each fold's windows — counter
    windows and instant readings, the latter with the instant field's offset (fitted, or the
    median residual of the training readings for a counter-only fit) — are predicted by a fit
    on every window outside the bin, and each fold's MAPE counts once: the many windows at the
    highest clock do not outweigh the few below it, and the instant readings, which reach the
    lowest clocks of each recovery, let the CV see the curve's shape there.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    rows : array of int
        Positions in ``cw.table`` of the training windows (never the held-out band's).
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock and ``T_ref``; without them only ``temperature="none"`` is tried.
    idle_w, idle_temperature_c : float, optional
        Measured idle power and its temperature; without them ``P_static`` is always fitted.
    bin_mhz : float, default=50
        Width of a fold (the windows' mean clock).
    min_folds : int, default=3
        Fewest folds for a CV.

    Returns
    -------
    (dict, float, DataFrame)
        The chosen setting, its CV MAPE (%), and every setting's CV MAPE. With fewer than
        ``min_folds`` bins the first setting (linear, α where known, counter, P_static free)
        is returned with a NaN score.
    """
    rows = np.asarray(rows)
    t = cw.table.iloc[rows]
    counter = (t[schema.WINDOW_SOURCE] == "counter").to_numpy()
    instant = ~counter
    bins = np.floor(t[schema.SM_CLOCK_MHZ].to_numpy(float) / bin_mhz)
    folds = np.unique(bins)
    settings = _settings(alpha_w_per_c, bool(instant.any()), idle_w, idle_temperature_c)
    if folds.size < min_folds:
        return settings[0], math.nan, pd.DataFrame()
    if not counter.any():
        raise ValueError(f"select_setting: none of the {rows.size} window(s) given is a counter window "
                         f"({schema.WINDOW_SOURCE}): no fold can be fitted")
    y_all = cw.table[schema.POWER_W].to_numpy(float)
    scores = []
    for s in settings:
        fold_mape = []
        for b in folds:
            train, test = rows[bins != b], rows[bins == b]
            if not counter[bins != b].any():
                continue
            params = fit_setting(cw, train, s, alpha_w_per_c=alpha_w_per_c,
                                 reference_temperature_c=reference_temperature_c, idle_w=idle_w,
                                 idle_temperature_c=idle_temperature_c)
            pred = predict_setting(cw, test, params) + instant[bins == b] * _instant_offset(cw, train, params)
            fold_mape.append(_mape(y_all[test], pred))
        scores.append({**s, schema.CV_MAPE_PCT: float(np.mean(fold_mape)) if fold_mape else math.nan})
    table = pd.DataFrame(scores)
    best = int(np.nanargmin(table[schema.CV_MAPE_PCT].to_numpy(float)))
    return settings[best], float(table[schema.CV_MAPE_PCT].iloc[best]), table



def idle_arguments(idle_w: float | None, idle_temperature_c: float | None) -> dict:
    """The measured idle power and its temperature as the fits take them (NaN when not measured).

    Parameters
    ----------
    idle_w, idle_temperature_c : float or None
        Idle power (W) and the temperature it was measured at (°C).

    Returns
    -------
    dict
        ``idle_w`` and ``idle_temperature_c`` for :func:`select_setting` and :func:`fit_setting`.
    """
    return {"idle_w": math.nan if idle_w is None else float(idle_w),
            "idle_temperature_c": math.nan if idle_temperature_c is None else float(idle_temperature_c)}

def power_at_heldout_clocks(cw: ClockWindows, *, band_mhz: tuple[float, float] = DEFAULT_BAND_MHZ,
                            alpha_w_per_c: float | None = None, reference_temperature_c: float | None = None,
                            idle_w: float | None = None, idle_temperature_c: float | None = None,
                            max_band_share: float = 0.0, min_train: int = 6, bin_mhz: float = 50.0,
                            workloads=None) -> pd.DataFrame:
    """Per workload: power at the held-out clock band predicted from the other clocks' windows.

    Parameters
    ----------
    cw : ClockWindows
        :func:`~powermodels.natural_dvfs.clock_windows.clock_windows` of a recording.
    band_mhz : (float, float)
        Held-out band: counter windows whose mean clock lies inside are the test set.
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock (thesis eq. 4.6) and ``T_ref``; without them only ``none`` is tried.
    idle_w, idle_temperature_c : float, optional
        Measured idle power and its temperature
        (:func:`~powermodels.natural_dvfs.clock_windows.idle_power`); without them ``P_static``
        is always fitted.
    max_band_share : float, default=0.0
        A training window may spend at most this share of its time at clocks in the band. Above 0
        the held-out figure is no longer held out: such a window's energy holds the band's power.
    min_train : int
        Least training counter windows for a fit.
    bin_mhz : float
        CV fold width (:func:`select_setting`).
    workloads : iterable of str, optional
        Only these workloads' rows (default: every workload).

    Returns
    -------
    DataFrame
        One row per workload, the held-out figure first: ``power_mape_pct`` (the counter windows
        in the band: the workload's own, and mixed windows of the ladder part only where the table
        holds their companion's term from the companion's own fit, ``companion_power_w``,
        :mod:`~powermodels.natural_dvfs.mixed_heldout`), ``test_windows`` (of them ``test_mixed``),
        ``train_windows`` (of them ``train_mixed`` shared with the ladder's pressure load,
        ``train_below_band`` / ``train_above_band`` below / above the band), then the CV's choice and score, the
        fitted parameters, the window counts and the main reason windows were dropped.
    """
    lo, hi = float(band_mhz[0]), float(band_mhz[1])
    if not lo < hi:
        raise ValueError(f"band_mhz must be (low, high) with low < high, got {band_mhz!r}")
    alpha = math.nan if alpha_w_per_c is None else float(alpha_w_per_c)
    t_ref = math.nan if reference_temperature_c is None else float(reference_temperature_c)
    idle = idle_arguments(idle_w, idle_temperature_c)
    if not np.isfinite(t_ref):
        alpha = math.nan
    table = cw.table
    if not len(table):
        return pd.DataFrame()
    f = table[schema.SM_CLOCK_MHZ].to_numpy(float)
    kept = table[schema.WINDOW_KEPT].to_numpy(bool)
    share = cw.band_share(lo, hi)
    temp_ok = np.isfinite(table[schema.TEMPERATURE_C].to_numpy(float)) | ~np.isfinite(alpha)
    mixed = (table[schema.COMPANION_SHARE].to_numpy(float) > 0) if schema.COMPANION_SHARE in table \
        else np.zeros(len(table), dtype=bool)
    # a mixed window is a test window only with its companion's term known from the companion's own fit
    known = np.isfinite(table[schema.COMPANION_POWER_W].to_numpy(float)) if schema.COMPANION_POWER_W in table \
        else np.zeros(len(table), dtype=bool)
    out = []
    for w, g in table.groupby(schema.WORKLOAD, sort=False):
        if workloads is not None and w not in set(workloads):
            continue
        idx = table.index.get_indexer(g.index)
        counter = (g[schema.WINDOW_SOURCE] == "counter").to_numpy()
        k = kept[idx] & temp_ok[idx]
        in_band = (f[idx] >= lo) & (f[idx] <= hi)
        # the held-out windows are the workload's own: a mixed window's power is partly the companion's
        test = idx[k & counter & in_band & (~mixed[idx] | known[idx])]
        train = idx[k & ~in_band & (share[idx] <= max_band_share)]
        reasons = g.loc[counter & ~kept[idx], schema.WINDOW_DROP_REASON].value_counts()
        row = {schema.WORKLOAD: w, schema.BAND_LO_MHZ: lo, schema.BAND_HI_MHZ: hi, schema.POWER_MAPE_PCT: math.nan,
               schema.POWER_BIAS_PCT: math.nan, schema.TEST_WINDOWS: int(test.size),
               schema.TEST_MIXED: int(mixed[test].sum()),
               schema.TRAIN_WINDOWS: int(np.sum(counter[np.isin(idx, train)])),
               schema.TRAIN_INSTANT: int(np.sum(~counter[np.isin(idx, train)])),
               schema.TRAIN_MIXED: int(np.sum(counter[np.isin(idx, train)] & mixed[idx][np.isin(idx, train)])),
               schema.TRAIN_BELOW_BAND: int(np.sum(counter[np.isin(idx, train)] & (f[idx] < lo)[np.isin(idx, train)])),
               schema.TRAIN_ABOVE_BAND: int(np.sum(counter[np.isin(idx, train)] & (f[idx] > hi)[np.isin(idx, train)])),
               schema.FORM_CV: "", schema.TEMPERATURE_CV: "", schema.SOURCES_CV: "", schema.P_STATIC_CV: "",
               schema.CV_MAPE_PCT: math.nan, schema.COUNTER_WINDOWS: int(counter.sum()),
               schema.COUNTER_KEPT: int((counter & kept[idx]).sum()),
               schema.INSTANT_KEPT: int((~counter & kept[idx]).sum()),
               schema.KEPT_CLOCK_LO_MHZ: float(np.nanmin(f[idx[k & counter]])) if (k & counter).any() else math.nan,
               schema.DROPPED_PRESSURE: int(reasons.filter(like="pressure").sum()),
               schema.MAIN_DROP_REASON: reasons.index[0] if len(reasons) else "", schema.NOTE: ""}
        n_train_counter = row[schema.TRAIN_WINDOWS]
        if test.size == 0:
            row[schema.NOTE] = f"no kept counter window's mean clock lies in {lo:.0f}–{hi:.0f} MHz"
        elif n_train_counter < min_train:
            row[schema.NOTE] = f"only {n_train_counter} training counter window(s) (< {min_train})"
        else:
            setting, cv, _ = select_setting(cw, train, alpha_w_per_c=alpha, reference_temperature_c=t_ref,
                                            bin_mhz=bin_mhz, **idle)
            params = fit_setting(cw, train, setting, alpha_w_per_c=alpha, reference_temperature_c=t_ref, **idle)
            y = table[schema.POWER_W].to_numpy(float)[test]
            p = predict_setting(cw, test, params)
            # the windows the chosen setting was fitted on: instant readings above the band do not
            # keep a counter-only fit from extrapolating it (H200 GPU-25027b10's pressure GEMM)
            fitted = train if setting[schema.SETTING_SOURCES] != "counter" else \
                train[table[schema.WINDOW_SOURCE].to_numpy(object)[train] == "counter"]
            train_lo = np.nanmin(f[fitted]) if fitted.size else math.nan
            train_hi = np.nanmax(f[fitted]) if fitted.size else math.nan
            row.update({schema.POWER_MAPE_PCT: _mape(y, p), schema.POWER_BIAS_PCT: float(100 * np.mean((p - y) / y)),
                        schema.FORM_CV: setting[schema.SETTING_FORM],
                        schema.TEMPERATURE_CV: setting[schema.SETTING_TEMPERATURE],
                        schema.SOURCES_CV: setting[schema.SETTING_SOURCES],
                        schema.P_STATIC_CV: setting[schema.SETTING_P_STATIC], schema.CV_MAPE_PCT: cv,
                        **{c: params[c] for c in (schema.FIT_P_STATIC_W, schema.FIT_A_W_PER_MHZ, schema.FIT_KNEE_MHZ,
                                                  schema.FIT_SLOPE_PER_GHZ)},
                        schema.NOTE: "" if train_lo < lo < hi < train_hi else
                        f"no training window {'below' if not train_lo < lo else 'above'} the band: "
                        "the band is extrapolated"})
        out.append(row)
    return pd.DataFrame(out)
