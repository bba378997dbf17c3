"""Power vs clock from windows whose clock moves, scored at a held-out clock band.

Thesis eq. 4.1, ``P(f) = P_static + a·f·V(f)²`` (§4.1.1), with α's temperature term (eq. 4.6/4.7,
§4.2.3), fitted on windows of one workload whose clock trajectory is known
(:mod:`~powermodels.natural_dvfs.clock_windows`). Over a window the mean power is

    P̄ = P_static + a·s·mean(g(f(t))) + α·(T̄ − T_ref),   g(f) = f·V(f)²,

with ``s`` the share of the window the workload's launches cover (between batches — the clock
probes, host gaps — the dynamic term is idle), linear in ``P_static`` and ``a`` for a given
voltage shape, however the clock moved inside the window
(:func:`~powermodels.natural_dvfs.power_fit.fit_setting`). The settings are chosen by
cross-validation on the training clocks only
(:func:`~powermodels.natural_dvfs.setting_cv.select_setting`, leave-one-bin-out):

* the form: ``linear`` (V constant, ``P = P_static + a·f``) or ``v2f`` (V rising linearly above
  a knee, the Kernel Tuner shape of :func:`~powermodels.models.voltage.relative_voltage`,
  knee and slope on a grid with the linear part solved at each point);
* the temperature term: ``alpha`` (the α fitted at constant clock, thesis §4.2.1) or ``none``;
* the windows fitted on: ``counter`` only, or ``counter+instant`` (with a free offset for the
  instant field), always *scored* on counter windows, the exact meter;
* ``P_static``: ``free`` (fitted) or ``idle`` (held at the idle power).

``extrapolation_rules`` (opt-in, **off by default**) adds three rules for a band outside the
training clocks: a free ``P_static`` held within 0 … the idle power
(:func:`~powermodels.natural_dvfs.power_fit.p_static_bounds`), CV folds towards the band
(``cv_folds`` in the table), and the ``v2f`` knee's grid down to the band's low edge. On the seven
real ladder recordings of 2026-11-27 they made 15 of 21 held-out cells worse (within 3 %: 10 of
21 → 7; H100 GPU-a8fc3d71 fp32 17.83 → 2.92 %, but H200 GPU-25027b10 FMA 2.82 → 36.36 %;
docs/calibration.md, "Extrapolating to the band"), so the default is the fit without them.

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

import math

import numpy as np
import pandas as pd

from .. import schema
from .clock_windows import ClockWindows
from .power_fit import fit_setting, mape_pct, predict_setting
from .setting_cv import CV_FOLDS, extrapolation_side, select_setting

# fit_setting, predict_setting and select_setting live in power_fit / setting_cv since session 9;
# named here too, where the fits' callers have always found them
__all__ = ["DEFAULT_BAND_MHZ", "fit_setting", "idle_arguments", "power_at_heldout_clocks",
           "predict_setting", "select_setting"]

#: The held-out band of issue 26 (the clocks an uncapped workload passes through after a pressure load).
DEFAULT_BAND_MHZ = (1500.0, 1800.0)


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
                            workloads=None, extrapolation_rules: bool = False) -> pd.DataFrame:
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
    extrapolation_rules : bool, default=False
        The three opt-in rules for a band outside the training clocks (the module's docstring:
        off by default, they made most real cells worse).

    Returns
    -------
    DataFrame
        One row per workload, the held-out figure first: ``power_mape_pct`` (the counter windows
        in the band: the workload's own, and mixed windows of the ladder part only where the table
        holds their companion's term from the companion's own fit, ``companion_power_w``,
        :mod:`~powermodels.natural_dvfs.mixed_heldout`), ``test_windows`` (of them ``test_mixed``),
        ``train_windows`` (of them ``train_mixed`` shared with the ladder's pressure load,
        ``train_below_band`` / ``train_above_band`` below / above the band), then the CV's choice,
        score and folds (``cv_folds``: "leave-one-bin-out" unless ``extrapolation_rules``), the fitted parameters, the window counts and the main reason windows were dropped.
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
               schema.CV_MAPE_PCT: math.nan, schema.CV_FOLDS: "", schema.COUNTER_WINDOWS: int(counter.sum()),
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
                                            bin_mhz=bin_mhz, band_mhz=(lo, hi),
                                            extrapolation_rules=extrapolation_rules, **idle)
            params = fit_setting(cw, train, setting, alpha_w_per_c=alpha, reference_temperature_c=t_ref,
                                 knee_floor_mhz=lo if extrapolation_rules else math.nan,
                                 bound_p_static=extrapolation_rules, **idle)
            y = table[schema.POWER_W].to_numpy(float)[test]
            p = predict_setting(cw, test, params)
            # the windows the chosen setting was fitted on: instant readings above the band do not
            # keep a counter-only fit from extrapolating it (H200 GPU-25027b10's pressure GEMM)
            fitted = train if setting[schema.SETTING_SOURCES] != "counter" else \
                train[table[schema.WINDOW_SOURCE].to_numpy(object)[train] == "counter"]
            train_lo = np.nanmin(f[fitted]) if fitted.size else math.nan
            train_hi = np.nanmax(f[fitted]) if fitted.size else math.nan
            row.update({schema.POWER_MAPE_PCT: mape_pct(y, p), schema.POWER_BIAS_PCT: float(100 * np.mean((p - y) / y)),
                        schema.FORM_CV: setting[schema.SETTING_FORM],
                        schema.TEMPERATURE_CV: setting[schema.SETTING_TEMPERATURE],
                        schema.SOURCES_CV: setting[schema.SETTING_SOURCES],
                        schema.P_STATIC_CV: setting[schema.SETTING_P_STATIC], schema.CV_MAPE_PCT: cv,
                        schema.CV_FOLDS: CV_FOLDS[{"": 0, "below": 1, "above": 2}[
                            extrapolation_side(f[train], (lo, hi)) if extrapolation_rules else ""]],
                        **{c: params[c] for c in (schema.FIT_P_STATIC_W, schema.FIT_A_W_PER_MHZ, schema.FIT_KNEE_MHZ,
                                                  schema.FIT_SLOPE_PER_GHZ)},
                        schema.NOTE: "" if train_lo < lo < hi < train_hi else
                        f"no training window {'below' if not train_lo < lo else 'above'} the band: "
                        "the band is extrapolated"})
        out.append(row)
    return pd.DataFrame(out)
