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
    """The chosen form's held-out MAPE and the choice right after the band (the figure to quote)."""
    first = [c for c in (schema.GROUP, "band_lo_mhz", "band_hi_mhz", "train_rows", "test_rows",
                         "time_mape_selected_pct", "time_form_cv", "time_min_launches", "time_cv_mape_pct") if c in validation]
    return validation[first + [c for c in validation.columns if c not in first]]


def validate_band(time_rows: pd.DataFrame, power_rows, group: str, band, step_mhz: float) -> dict:
    """Hold out the middle band of the clocks: time MAPE (eq. 4.5, DSO eq. 2, the CV's choice), energy there."""
    time_rows = time_rows.reset_index(drop=True)
    f = time_rows[schema.SM_CLOCK_MHZ].to_numpy(float)
    train, test = _band_split(f, band)
    row = {schema.GROUP: group, "band_lo_mhz": float(f[test].min()) if test.any() else math.nan,
           "band_hi_mhz": float(f[test].max()) if test.any() else math.nan, "train_rows": int(train.sum()),
           "test_rows": int(test.sum())}
    if test.sum() < 1 or train.sum() < 4 or np.unique(np.round(f[train])).size < 3:
        return {**row, "time_mape_rational_pct": math.nan, "time_mape_dso_pct": math.nan,
                "time_form_cv": "", "time_min_launches": math.nan, "time_cv_mape_pct": math.nan,
                "time_mape_selected_pct": math.nan,
                "energy_measured_j": math.nan, "energy_predicted_j": math.nan, "energy_error_pct": math.nan,
                "power_test_rows": 0, "power_mape_pct": math.nan}
    X = time_rows[[schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]].reset_index(drop=True)
    y = time_rows[schema.TIME_S].to_numpy(float)
    # one point per training clock (time_curves: a per-launch fit fits the clocks the controller
    # preferred); the form and the fewest launches a point needs are chosen by CV on those
    # points, so the band is never seen
    points = clock_points(time_rows.loc[train], step_mhz)
    form, fewest, cv = select_time_fit(points)
    points = points.loc[points[schema.LAUNCHES] >= fewest]
    row["time_mape_rational_pct"] = _mape(y[test], fit_time_form("rational", points)(X.loc[test]))
    row["time_mape_dso_pct"] = _mape(y[test], fit_time_form("dso", points)(X.loc[test]))
    row["time_form_cv"] = form
    row["time_min_launches"] = fewest
    row["time_cv_mape_pct"] = cv.get(f"{form}≥{fewest}", math.nan)
    row["time_mape_selected_pct"] = row[f"time_mape_{form}_pct"]
    selected = fit_time_form(form, points)
    row.update(energy_measured_j=math.nan, energy_predicted_j=math.nan, energy_error_pct=math.nan,
               power_test_rows=0, power_mape_pct=math.nan)
    if power_rows is not None and len(power_rows):
        pf = power_rows[schema.SM_CLOCK_MHZ].to_numpy(float)
        p = power_rows[schema.POWER_W].to_numpy(float)
        lo, hi = row["band_lo_mhz"], row["band_hi_mhz"]
        p_test = (pf >= lo) & (pf <= hi)
        p_train = ~p_test
        if p_test.any() and np.unique(np.round(pf[p_train])).size >= 3:
            pmodel = FrequencyPowerModel().fit(pf[p_train, None], p[p_train])
            row.update(power_test_rows=int(p_test.sum()),
                       power_mape_pct=_mape(p[p_test], pmodel.predict_at(pf[p_test])))
            f_band = f[test]
            measured = float(np.mean(p[p_test])) * float(np.mean(y[test]))
            predicted = float(np.mean(pmodel.predict_at(f_band) * selected(X.loc[test])))
            row.update(energy_measured_j=measured, energy_predicted_j=predicted,
                       energy_error_pct=100.0 * (predicted - measured) / measured)
    return row
