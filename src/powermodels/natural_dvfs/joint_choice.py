"""Per load, the held-out power fit its CV chose: its own, or the joint one (opt-in).

:func:`joint_band` runs :func:`~powermodels.natural_dvfs.joint_power.joint_cv` once per held-out
band on every load's training windows; :func:`choose_fit` then gives a load's row of
:func:`~powermodels.natural_dvfs.mixed_heldout.mixed_power_at_heldout_clocks` the joint fit where
its CV beats the load's own fit, with both fits' figures kept in the row. Opt-in
(``joint_fit=True``): on seven real ladder recordings it made 12 of 28 held-out cells worse
(:mod:`~powermodels.natural_dvfs.joint_power`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import schema
from .clock_windows import ClockWindows
from .joint_power import (
    JointFit,
    fit_joint,
    joint_cv,
    joint_training_rows,
    predict_joint,
    usable_windows,
    window_companions,
)
from .power_fit import mape_pct

__all__ = ["JointBand", "choose_fit", "joint_band"]


@dataclass
class JointBand:
    """The joint fit's CV for one band, and its fits (one per setting, made when first asked for)."""

    rows: np.ndarray
    cv: pd.DataFrame
    band_mhz: tuple[float, float]
    alpha_w_per_c: float
    reference_temperature_c: float
    fits: dict = field(default_factory=dict)

    def fit(self, cw: ClockWindows, companion_of: dict, form: str, temperature: str) -> JointFit:
        """The fit of one setting on every training window of the band."""
        if (form, temperature) not in self.fits:
            self.fits[form, temperature] = fit_joint(cw, self.rows, companion_of, form=form, temperature=temperature,
                                                     alpha_w_per_c=self.alpha_w_per_c,
                                                     reference_temperature_c=self.reference_temperature_c)
        return self.fits[form, temperature]


def joint_band(cw: ClockWindows, companion_of: dict, band_mhz: tuple[float, float], *,
               alpha_w_per_c: float = math.nan, reference_temperature_c: float = math.nan,
               max_band_share: float = 0.0, min_train: int = 6, bin_mhz: float = 50.0) -> JointBand | None:
    """:func:`joint_cv` on the band's training windows (:func:`joint_training_rows`), or None.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    companion_of : dict of str to str
        As :func:`fit_joint`.
    band_mhz : (float, float)
        The held-out band.
    alpha_w_per_c, reference_temperature_c : float, optional
        α and ``T_ref``.
    max_band_share, min_train, bin_mhz
        As :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`.

    Returns
    -------
    JointBand or None
        None with fewer than ``min_train`` training windows or too few clock bins for a CV.
    """
    rows = joint_training_rows(cw, companion_of, band_mhz, alpha_w_per_c=alpha_w_per_c,
                               max_band_share=max_band_share)
    if rows.size < min_train:
        return None
    cv = joint_cv(cw, rows, companion_of, alpha_w_per_c=alpha_w_per_c,
                  reference_temperature_c=reference_temperature_c, bin_mhz=bin_mhz)
    if not len(cv):
        return None
    return JointBand(rows=rows, cv=cv, band_mhz=(float(band_mhz[0]), float(band_mhz[1])),
                     alpha_w_per_c=alpha_w_per_c, reference_temperature_c=reference_temperature_c)


def choose_fit(row: dict, cw: ClockWindows, companion_of: dict, joint: JointBand | None) -> dict:
    """A load's held-out row with the fit its CV chose: its own (as given) or the joint one.

    The joint fit is chosen when its best setting's CV MAPE for the load is below the own fit's
    (or the own fit has none); the held-out windows are then the load's kept counter windows in the
    band, a mixed one wherever its companion is known. Both fits' CV and held-out figures are kept
    in the row (``cv_mape_own_pct`` …), the choice reads the CV alone.

    Parameters
    ----------
    row : dict
        One row of :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks` (its own fit).
    cw : ClockWindows
        The windows.
    companion_of : dict of str to str
        As :func:`fit_joint`.
    joint : JointBand or None
        :func:`joint_band` for the row's band.

    Returns
    -------
    dict
        The row, with ``power_fit_cv`` ("own" or "joint") and both fits' figures.
    """
    row = {**row, schema.POWER_FIT_CV: "own", schema.CV_MAPE_OWN_PCT: row.get(schema.CV_MAPE_PCT, math.nan),
           schema.CV_MAPE_JOINT_PCT: math.nan, schema.POWER_MAPE_OWN_PCT: row.get(schema.POWER_MAPE_PCT, math.nan),
           schema.POWER_MAPE_JOINT_PCT: math.nan}
    w = row[schema.WORKLOAD]
    if joint is None:
        return row
    cv = joint.cv.loc[(joint.cv[schema.WORKLOAD] == w) & np.isfinite(joint.cv[schema.CV_MAPE_PCT].to_numpy(float))]
    if not len(cv):
        return row
    best = cv.iloc[int(np.argmin(cv[schema.CV_MAPE_PCT].to_numpy(float)))]
    fit = joint.fit(cw, companion_of, best[schema.FORM_CV], best[schema.TEMPERATURE_CV])
    t = cw.table
    lo, hi = joint.band_mhz
    f = t[schema.SM_CLOCK_MHZ].to_numpy(float)
    test = np.flatnonzero(usable_windows(cw, companion_of, joint.alpha_w_per_c) & (t[schema.WORKLOAD] == w).to_numpy()
                          & (f >= lo) & (f <= hi))
    _, share = window_companions(cw, test, companion_of)  # the companion's share (0 in a pure window)
    p = predict_joint(cw, test, companion_of, fit)
    ok = np.isfinite(p)
    y = t[schema.POWER_W].to_numpy(float)[test][ok]
    mape = mape_pct(y, p[ok])
    row[schema.CV_MAPE_JOINT_PCT] = float(best[schema.CV_MAPE_PCT])
    row[schema.POWER_MAPE_JOINT_PCT] = mape
    own_cv = float(row[schema.CV_MAPE_OWN_PCT]) if row[schema.CV_MAPE_OWN_PCT] is not None else math.nan
    if not ok.any() or (np.isfinite(own_cv) and own_cv <= row[schema.CV_MAPE_JOINT_PCT]):
        return row
    row.update({schema.POWER_FIT_CV: "joint", schema.POWER_MAPE_PCT: mape,
                schema.POWER_BIAS_PCT: float(100 * np.mean((p[ok] - y) / y)),
                schema.TEST_WINDOWS: int(ok.sum()), schema.TEST_MIXED: int((share[ok] > 0).sum()),
                schema.FORM_CV: fit.form, schema.TEMPERATURE_CV: fit.temperature, schema.SOURCES_CV: "counter",
                schema.P_STATIC_CV: "free", schema.CV_MAPE_PCT: row[schema.CV_MAPE_JOINT_PCT],
                schema.FIT_P_STATIC_W: fit.p_static_w.get(w, math.nan),
                schema.FIT_A_W_PER_MHZ: fit.a_w_per_mhz.get(w, math.nan),
                schema.FIT_KNEE_MHZ: fit.knee_mhz, schema.FIT_SLOPE_PER_GHZ: fit.slope_per_ghz})
    return row
