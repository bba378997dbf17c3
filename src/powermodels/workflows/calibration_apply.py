"""Correct a measurement to the calibration's reference clock and temperature (thesis eq. 4.2–4.4, 4.7).

``powermodels measure --calibration FILE`` and ``powermodels.measure(..., calibration=FILE)``
call :func:`correct_row` on the run-table row they measured:

* power at the reference clock: ``P_ref = P − P̂(f) + P̂(f_ref)`` (eq. 4.2) with the row's own
  configuration's power curve when the calibration identified it, else the global curve;
* power at the reference temperature: ``P_corr = P_ref − α·(T − T_ref)`` (eq. 4.7);
* energy: ``P_corr · T̂(f_ref)`` with the configuration's time model (eq. 4.4) when calibrated,
  else ``P_corr · t`` with the measured time (eq. 4.3) — the row says which.

A clock or temperature outside the calibrated range is an extrapolation and warns. A file made on
another GPU model is refused unless ``allow_other_device=True``.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from .. import schema
from .calibration_fit import group_key

__all__ = ["CalibrationExtrapolationWarning", "check_device", "correct_row", "correct_table", "load",
           "load_for_device"]

#: Row keys :func:`correct_row` adds (names from :mod:`powermodels.schema`).
CORRECTED_POWER_W = schema.CORRECTED_POWER_W
CORRECTED_ENERGY_J = schema.CORRECTED_ENERGY_J


class CalibrationExtrapolationWarning(UserWarning):
    """A correction used a clock or temperature outside the calibrated range."""


def load(path, *, trusted: bool = False) -> tuple[dict, dict]:
    """Models and metadata of a ``powermodels calibrate`` file.

    Raises
    ------
    ValueError
        When the file is not a thesis calibration (another kind of calibration file).
    """
    from ..io import load_calibration

    models, meta = load_calibration(path, return_metadata=True, trusted=trusted)
    if not isinstance(models, dict) or meta.get("kind") != "powermodels-thesis-calibration":
        raise ValueError(f"{path}: not a `powermodels calibrate` file (it holds {meta.get('object')})")
    return models, meta


def check_device(meta: dict, device_name: str, *, allow_other_device: bool = False) -> None:
    """Refuse a calibration made on another GPU model (``allow_other_device`` overrides)."""
    made_on = meta.get("device")
    if made_on and device_name and made_on != device_name and not allow_other_device:
        raise ValueError(f"calibration was made on {made_on!r}, this is {device_name!r}: corrections do "
                         "not transfer between GPU models (pass allow_other_device=True / "
                         "--allow-other-device to use it anyway)")


def load_for_device(path, device_name: str, *, allow_other_device: bool = False,
                    trusted: bool = False) -> tuple[dict, dict]:
    """:func:`load` then :func:`check_device` — before a measurement, so a wrong file fails fast."""
    models, meta = load(path, trusted=trusted)
    check_device(meta, device_name, allow_other_device=allow_other_device)
    return models, meta


def _predict_power(models: dict, group: str, f: float) -> tuple[float, str] | None:
    grouped = models.get("power")
    if grouped is not None and group in getattr(grouped, "estimators_", {}):
        return float(grouped.estimators_[group].predict_at(f)), "per-config"
    glob = models.get("power_global")
    if glob is not None:
        return float(glob.predict_at(f)), "global"
    return None


def correct_row(row: dict, models: dict, meta: dict) -> dict:
    """``row`` plus its power and energy at the reference clock and temperature.

    Parameters
    ----------
    row : dict
        A run-table row (``kernel, config, power_w, time_s, sm_clock_mhz, temperature_c``).
    models, meta : dict
        From :func:`load`.

    Returns
    -------
    dict
        ``row`` with ``corrected_power_w``, ``corrected_energy_j``, the reference clock and
        temperature, and which power curve, α and time source were used (schema columns).
    """
    for key in (schema.POWER_W, schema.TIME_S, schema.SM_CLOCK_MHZ, schema.TEMPERATURE_C):
        if key not in row or not np.isfinite(float(row[key])):
            raise ValueError(f"correct_row: the row has no finite {key!r}")
    f, temp = float(row[schema.SM_CLOCK_MHZ]), float(row[schema.TEMPERATURE_C])
    f_ref = float(meta["reference_clock_mhz"])
    t_ref = float(meta["reference_temperature_c"])
    lo, hi = meta["clock_range_mhz"]
    tlo, thi = meta["temperature_range_c"]
    step = 15.0
    if not lo - step <= f <= hi + step:
        warnings.warn(f"clock {f:.0f} MHz is outside the calibrated {lo:.0f}–{hi:.0f} MHz: the power "
                      "correction extrapolates", CalibrationExtrapolationWarning, stacklevel=2)
    if not tlo - 1.0 <= temp <= thi + 1.0:
        warnings.warn(f"temperature {temp:.1f} °C is outside the calibrated {tlo:.1f}–{thi:.1f} °C: the "
                      "temperature correction extrapolates", CalibrationExtrapolationWarning, stacklevel=2)
    group = group_key(row.get(schema.KERNEL), row.get(schema.CONFIG))
    power = float(row[schema.POWER_W])
    curve = _predict_power(models, group, f)
    if curve is None:
        if abs(f - f_ref) > step:
            raise ValueError(f"the calibration identified no power curve, and this run's clock "
                             f"({f:.0f} MHz) is not the reference ({f_ref:.0f} MHz): cannot correct it")
        power_ref, how = power, "at reference clock"
    else:
        at_ref = _predict_power(models, group, f_ref)
        power_ref, how = power - curve[0] + at_ref[0], curve[1]
    temperature = models.get("temperature")
    alpha = float(temperature.alpha_w_per_c_) if temperature is not None else math.nan
    corrected = power_ref - alpha * (temp - t_ref) if np.isfinite(alpha) else power_ref
    time_models = models.get("time")
    if time_models is not None and group in getattr(time_models, "estimators_", {}):
        t = float(time_models.estimators_[group].predict_at(f_ref))
        time_source = "time model at reference clock (eq. 4.4)"
    else:
        t = float(row[schema.TIME_S])
        time_source = "measured time (eq. 4.3)"
    return {**row, CORRECTED_POWER_W: corrected, CORRECTED_ENERGY_J: corrected * t,
            schema.REFERENCE_CLOCK_MHZ: f_ref, schema.REFERENCE_TEMPERATURE_C: t_ref,
            schema.CORRECTION_POWER_CURVE: how, schema.CORRECTION_ALPHA_W_PER_C: alpha,
            schema.CORRECTION_TIME_SOURCE: time_source}


def correct_table(runs: pd.DataFrame, models: dict, meta: dict) -> pd.DataFrame:
    """:func:`correct_row` over every row of a run table."""
    return pd.DataFrame([correct_row(r, models, meta) for r in runs.to_dict(orient="records")])
