"""The held-out clock band of a calibration: time and power refitted without it and scored there.

Each configuration's clock range loses its middle (``band``, fractions of the range); the time
curve is fitted to one point per training clock (:mod:`powermodels.workflows.time_curves`), its
form and the fewest launches a fitted point needs chosen by leave-one-clock-out CV on the training
clocks only (:func:`~powermodels.workflows.time_curves.select_time_fit`), and scored on the band's
launches — the held-out figure, reported first. Power vs clock (eq. 4.1) is refitted on the
training clocks' power rows and scored on the band's; energy = fitted power × the chosen time form.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema
from ..models import FrequencyPowerModel
from .time_curves import clock_points, fit_time_form, select_time_fit

__all__ = ["held_out_first", "validate_band"]


def _band_split(clocks: np.ndarray, band: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    lo = np.nanmin(clocks) + band[0] * (np.nanmax(clocks) - np.nanmin(clocks))
    hi = np.nanmin(clocks) + band[1] * (np.nanmax(clocks) - np.nanmin(clocks))
    test = (clocks >= lo) & (clocks <= hi)
    return ~test, test


def _mape(y, pred) -> float:
    y, pred = np.asarray(y, float), np.asarray(pred, float)
    return float(100.0 * np.mean(np.abs(pred - y) / np.abs(y))) if y.size else math.nan


def held_out_first(validation: pd.DataFrame) -> pd.DataFrame:
    """The chosen form's held-out MAPE and the choice right after the band (the figure to quote).

    Parameters
    ----------
    validation : DataFrame
        Rows of :func:`validate_band`.

    Returns
    -------
    DataFrame
        The same columns, the band, its held-out figure and the CV's choice first.
    """
    first = [c for c in (schema.GROUP, schema.BAND_LO_MHZ, schema.BAND_HI_MHZ, schema.TRAIN_ROWS, schema.TEST_ROWS,
                         schema.TIME_MAPE_SELECTED_PCT, schema.TIME_FORM_CV, schema.TIME_MIN_LAUNCHES,
                         schema.TIME_CV_MAPE_PCT) if c in validation]
    return validation[first + [c for c in validation.columns if c not in first]]


def validate_band(time_rows: pd.DataFrame, power_rows, group: str, band, step_mhz: float) -> dict:
    """Hold out the middle band of the clocks: time MAPE (eq. 4.5, DSO eq. 2, the CV's choice), energy there.

    Parameters
    ----------
    time_rows : DataFrame
        One group's timed launches (``sm_clock_mhz``, ``mem_clock_mhz``, ``time_s``, ``launches``).
    power_rows : DataFrame or None
        The group's power rows (``sm_clock_mhz``, ``power_w``), or None (no power figure).
    group : str
        The group's name (the row's ``group``).
    band : (float, float)
        The held-out band as fractions of the group's clock range.
    step_mhz : float
        Clock points are this wide (:func:`~powermodels.workflows.time_curves.clock_points`).

    Returns
    -------
    dict
        One validation row: the band, train/test rows, the time MAPEs (rational, DSO, the CV's),
        the CV's form and fewest launches, and power and energy in the band (NaN without them).
    """
    time_rows = time_rows.reset_index(drop=True)
    f = time_rows[schema.SM_CLOCK_MHZ].to_numpy(float)
    train, test = _band_split(f, band)
    row = {schema.GROUP: group, schema.BAND_LO_MHZ: float(f[test].min()) if test.any() else math.nan,
           schema.BAND_HI_MHZ: float(f[test].max()) if test.any() else math.nan, schema.TRAIN_ROWS: int(train.sum()),
           schema.TEST_ROWS: int(test.sum())}
    no_power = {schema.ENERGY_MEASURED_J: math.nan, schema.ENERGY_PREDICTED_J: math.nan,
                schema.ENERGY_ERROR_PCT: math.nan, schema.POWER_TEST_ROWS: 0, schema.POWER_MAPE_PCT: math.nan}
    if test.sum() < 1 or train.sum() < 4 or np.unique(np.round(f[train])).size < 3:
        return {**row, schema.TIME_MAPE_RATIONAL_PCT: math.nan, schema.TIME_MAPE_DSO_PCT: math.nan,
                schema.TIME_FORM_CV: "", schema.TIME_MIN_LAUNCHES: math.nan, schema.TIME_CV_MAPE_PCT: math.nan,
                schema.TIME_MAPE_SELECTED_PCT: math.nan, **no_power}
    X = time_rows[[schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]].reset_index(drop=True)
    y = time_rows[schema.TIME_S].to_numpy(float)
    # one point per training clock (time_curves: a per-launch fit fits the clocks the controller
    # preferred); the form and the fewest launches a point needs are chosen by CV on those
    # points, so the band is never seen
    points = clock_points(time_rows.loc[train], step_mhz)
    form, fewest, cv = select_time_fit(points)
    points = points.loc[points[schema.LAUNCHES] >= fewest]
    mapes = {name: _mape(y[test], fit_time_form(name, points)(X.loc[test])) for name in ("rational", "dso")}
    row.update({schema.TIME_MAPE_RATIONAL_PCT: mapes["rational"], schema.TIME_MAPE_DSO_PCT: mapes["dso"],
                schema.TIME_FORM_CV: form, schema.TIME_MIN_LAUNCHES: fewest,
                schema.TIME_CV_MAPE_PCT: cv.get(f"{form}≥{fewest}", math.nan),
                schema.TIME_MAPE_SELECTED_PCT: mapes[form], **no_power})
    selected = fit_time_form(form, points)
    if power_rows is not None and len(power_rows):
        pf = power_rows[schema.SM_CLOCK_MHZ].to_numpy(float)
        p = power_rows[schema.POWER_W].to_numpy(float)
        lo, hi = row[schema.BAND_LO_MHZ], row[schema.BAND_HI_MHZ]
        p_test = (pf >= lo) & (pf <= hi)
        p_train = ~p_test
        if p_test.any() and np.unique(np.round(pf[p_train])).size >= 3:
            pmodel = FrequencyPowerModel().fit(pf[p_train, None], p[p_train])
            row.update({schema.POWER_TEST_ROWS: int(p_test.sum()),
                        schema.POWER_MAPE_PCT: _mape(p[p_test], pmodel.predict_at(pf[p_test]))})
            f_band = f[test]
            measured = float(np.mean(p[p_test])) * float(np.mean(y[test]))
            predicted = float(np.mean(pmodel.predict_at(f_band) * selected(X.loc[test])))
            row.update({schema.ENERGY_MEASURED_J: measured, schema.ENERGY_PREDICTED_J: predicted,
                        schema.ENERGY_ERROR_PCT: 100.0 * (predicted - measured) / measured})
    return row
