"""The thermal fields a protocol adds to a row; α from a calibration file or the caller."""

import math

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.temperature import TemperatureCorrection
from powermodels.thermal.normalise import AlphaEstimate
from powermodels.thermal.row import alpha_from_calibration, given_alpha, thermal_fields


def trace(temps):
    t = np.linspace(0.0, 1.0, len(temps))
    return pd.DataFrame({schema.RUN_ID: "r", schema.T_S: t, schema.POWER_INSTANT_W: 500.0,
                         schema.TEMPERATURE_C: np.asarray(temps, float)})


def test_fields_carry_start_end_and_the_stored_reference_of_a_learned_alpha():
    alpha = AlphaEstimate(1.5, 0.2, "learned", reference_temperature_c=55.0)
    f = thermal_fields(trace([50, 52, 54, 57]), 0.0, 1.0, energy_j=1.0, power_w=500.0, time_s=2e-3,
                       temperature_c=53.0, alpha=alpha)
    assert (f[schema.TEMPERATURE_START_C], f[schema.TEMPERATURE_END_C]) == (50.0, 57.0)
    assert f[schema.REFERENCE_TEMPERATURE_C] == 55.0
    assert f[schema.ENERGY_AT_REF_J] == pytest.approx(1.0 + 1.5 * 2 * 2e-3)
    named = thermal_fields(trace([50, 57]), 0.0, 1.0, energy_j=1.0, power_w=500.0, time_s=2e-3,
                           temperature_c=53.0, alpha=alpha, reference_temperature_c=60)
    assert named[schema.REFERENCE_TEMPERATURE_C] == 60.0
    with pytest.raises(ValueError, match="reference_temperature_c"):
        thermal_fields(trace([50, 57]), 0.0, 1.0, energy_j=1.0, power_w=500.0, time_s=2e-3,
                       temperature_c=53.0, alpha=alpha, reference_temperature_c="warm")


def test_without_any_temperature_nothing_is_moved():
    f = thermal_fields(trace([math.nan, math.nan]), 0.0, 1.0, energy_j=1.0, power_w=500.0, time_s=2e-3,
                       temperature_c=math.nan, alpha=AlphaEstimate(1.0, 0.1, "assumed"))
    assert math.isnan(f[schema.ENERGY_AT_REF_J]) and f[schema.ALPHA_SOURCE] == "assumed"


def test_alpha_from_a_calibration_file_keeps_its_uncertainty():
    rng = np.random.default_rng(0)
    temp = np.linspace(40, 70, 50)
    runs = pd.DataFrame({schema.POWER_W: 400 + 1.2 * temp + rng.normal(0, 0.5, 50), schema.TEMPERATURE_C: temp})
    model = TemperatureCorrection().fit(runs)
    alpha, t_ref = alpha_from_calibration({"temperature": model}, {"reference_temperature_c": 45.0})
    assert alpha.source == "file" and alpha.alpha_w_per_c == pytest.approx(1.2, abs=0.05)
    assert alpha.uncertainty_w_per_c == pytest.approx(model.alpha_stderr_w_per_c_)
    assert t_ref == 45.0
    assert alpha_from_calibration({}, {}) == (None, None)


@pytest.mark.parametrize("bad", [(math.nan, 0.0), (1.0, -0.1), ("x", 0.0)])
def test_given_alpha_is_checked(bad):
    with pytest.raises(ValueError, match="alpha"):
        given_alpha(*bad)
