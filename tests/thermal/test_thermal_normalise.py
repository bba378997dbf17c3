"""Thesis eq. 4.7 on a row, α's uncertainty carried, the reference temperature checked."""

import math

import pytest

from powermodels import schema
from powermodels.thermal.launch import check_launch_mode, launch_bound, launch_mode
from powermodels.thermal.normalise import AlphaEstimate, assumed_alpha, check_reference_temperature, normalise


def test_normalise_moves_power_and_energy_by_alpha_times_delta_t():
    alpha = AlphaEstimate(2.0, 0.5, "learned")
    out = normalise(energy_j=1.0, power_w=500.0, time_s=2e-3, temperature_c=70.0, alpha=alpha,
                    reference_temperature_c=60.0, energy_uncertainty_j=0.004)
    assert out[schema.POWER_AT_REF_W] == pytest.approx(480.0)          # 500 − 2·10
    assert out[schema.ENERGY_AT_REF_J] == pytest.approx(1.0 - 20.0 * 2e-3)
    # α's share: t·|ΔT|·σα = 2e-3·10·0.5 = 0.01 J; the window's 0.004 J scaled to E_ref
    own = 0.004 * out[schema.ENERGY_AT_REF_J] / 1.0
    assert out[schema.ENERGY_AT_REF_UNCERTAINTY_J] == pytest.approx(math.hypot(own, 0.01))
    assert out[schema.ALPHA_SOURCE] == "learned"
    assert out[schema.REFERENCE_TEMPERATURE_C] == 60.0
    assert set(out) <= set(schema.RUN_TABLE.columns)


def test_normalise_without_temperature_gives_nan_figures():
    out = normalise(energy_j=1.0, power_w=500.0, time_s=2e-3, temperature_c=math.nan,
                    alpha=AlphaEstimate(2.0, 0.5, "file"), reference_temperature_c=60.0)
    assert math.isnan(out[schema.ENERGY_AT_REF_J]) and out[schema.ALPHA_SOURCE] == "file"


@pytest.mark.parametrize("bad", ["hot", "nan", float("inf"), -60, 300, None, "60C"])
def test_bad_reference_temperature_is_a_one_line_error(bad):
    with pytest.raises(ValueError) as err:
        check_reference_temperature(bad, "--ref-temperature")
    msg = str(err.value)
    assert "--ref-temperature" in msg and "\n" not in msg and repr(bad) in msg


def test_reference_temperature_accepts_numeric_text():
    assert check_reference_temperature("55.5") == 55.5


def test_assumed_alpha_is_relative_to_power_and_wide():
    a = assumed_alpha(400.0)
    assert a.source == "assumed" and a.relative_per_c == pytest.approx(0.0025)
    assert a.uncertainty_w_per_c / a.alpha_w_per_c > 0.4
    with pytest.raises(ValueError, match="power_w"):
        assumed_alpha(0.0)


def test_alpha_estimate_refuses_unknown_source_and_roundtrips():
    with pytest.raises(ValueError, match="source"):
        AlphaEstimate(1.0, 0.1, "guessed")
    a = AlphaEstimate(1.0, 0.1, "learned", power_w=400.0, temperature_min_c=40, temperature_max_c=50)
    assert AlphaEstimate.from_dict(a.as_dict()) == a


def test_launch_mode_and_bound():
    assert launch_mode(1) == "back_to_back" and launch_mode(64) == "graph"
    assert launch_mode(64, as_called=True) == "as_called"
    assert check_launch_mode("as-called") == "as_called"
    with pytest.raises(ValueError, match="as-called"):
        check_launch_mode("eager")
    # issue 19's H100 numbers: 5.8 µs on the device, 10.6 µs per call as called
    assert launch_bound(10.6e-6, 5.8e-6)
    assert not launch_bound(2.66e-3, 2.65e-3)
    assert not launch_bound(math.nan, 1e-6)
