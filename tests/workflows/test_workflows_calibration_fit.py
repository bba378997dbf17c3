"""fit_calibration and correct_row on tables with known curves (no device)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.workflows.calibration_apply import (
    CORRECTED_ENERGY_J,
    CORRECTED_POWER_W,
    CalibrationExtrapolationWarning,
    check_device,
    correct_row,
)
from powermodels.workflows.calibration_fit import fit_calibration, group_key

ALPHA = 0.8


def _power(f, temp, scale):
    return scale * (60.0 + 0.18 * f) + ALPHA * (temp - 40.0)


def _tables(rng, kernels=(("fp32", 1.0, 19.8), ("gemm", 1.3, 9.9)), narrow=("stream",)):
    """Natural-DVFS-like launches and samples: moving clocks for ``kernels``, one clock for ``narrow``."""
    launches, samples = [], []
    for name, scale, work in kernels:
        f = rng.choice(np.arange(1110, 1981, 15), 400).astype(float)
        temp = 40 + rng.uniform(0, 15, f.size)
        launches.append(pd.DataFrame({schema.KERNEL: name, schema.CONFIG: "default", schema.TIME_S: work / f,
                                      schema.SM_CLOCK_MHZ: f, schema.MEM_CLOCK_MHZ: 2619.0,
                                      schema.TEMPERATURE_C: temp}))
        samples.append(pd.DataFrame({schema.KERNEL: name, schema.CONFIG: "default",
                                     schema.POWER_W: _power(f, temp, scale) + rng.normal(0, 0.5, f.size),
                                     schema.SM_CLOCK_MHZ: f, schema.TEMPERATURE_C: temp}))
    for name in narrow:
        temp = np.linspace(40, 50, 200)
        f = np.full(200, 1980.0)
        launches.append(pd.DataFrame({schema.KERNEL: name, schema.CONFIG: "default", schema.TIME_S: 2e-3,
                                      schema.SM_CLOCK_MHZ: f, schema.MEM_CLOCK_MHZ: 2619.0,
                                      schema.TEMPERATURE_C: temp}))
        samples.append(pd.DataFrame({schema.KERNEL: name, schema.CONFIG: "default",
                                     schema.POWER_W: _power(f, temp, 0.7) + rng.normal(0, 0.5, f.size),
                                     schema.SM_CLOCK_MHZ: f, schema.TEMPERATURE_C: temp}))
    return pd.concat(launches, ignore_index=True), pd.concat(samples, ignore_index=True)


@pytest.fixture(scope="module")
def calibration():
    launches, samples = _tables(np.random.default_rng(0))
    return fit_calibration(None, launches, samples, reference_clock_mhz=1500.0, reference_temperature_c=40.0)


def test_identified_groups_are_fitted_and_the_single_clock_one_is_not(calibration):
    ident = calibration.identifiability.set_index([schema.GROUP, "quantity"])
    for g in (group_key("fp32", "default"), group_key("gemm", "default")):
        assert ident.loc[(g, "power"), "identified"] and ident.loc[(g, "time"), "identified"]
    stream = ident.loc[(group_key("stream", "default"), "power")]
    assert not stream["identified"]
    assert "not identified" in stream["reason"] and "1980" in stream["reason"]
    assert group_key("stream", "default") not in calibration.power_models.estimators_
    assert set(calibration.time_models.estimators_) == {group_key("fp32", "default"), group_key("gemm", "default")}


def test_alpha_is_recovered_at_a_stable_clock(calibration):
    assert calibration.temperature is not None
    assert calibration.temperature.alpha_w_per_c_ == pytest.approx(ALPHA, rel=0.05)


def test_held_out_band_time_and_energy(calibration):
    v = calibration.validation.set_index(schema.GROUP)
    assert len(v) == 2
    assert (v["time_mape_rational_pct"] < 1.0).all()
    assert (v["time_mape_dso_pct"] < 1.0).all()
    assert (v["energy_error_pct"].abs() < 5.0).all()


def test_per_config_beats_global_on_power(calibration):
    c = calibration.comparison
    power = c.loc[c["quantity"] == "power"].set_index([schema.MODEL, schema.HELD_OUT])[schema.MAPE_PCT]
    assert power[("per-group", "clocks")] < power[("global", "clocks")]


def test_correct_row_moves_power_to_reference_clock_and_temperature(calibration):
    meta = calibration.metadata()
    models = calibration.models()
    row = {schema.KERNEL: "fp32", schema.CONFIG: "default", schema.SM_CLOCK_MHZ: 1800.0,
           schema.TEMPERATURE_C: 50.0, schema.POWER_W: _power(1800.0, 50.0, 1.0), schema.TIME_S: 19.8 / 1800}
    out = correct_row(row, models, meta)
    assert out[CORRECTED_POWER_W] == pytest.approx(_power(1500.0, 40.0, 1.0), rel=0.01)
    assert out[CORRECTED_ENERGY_J] == pytest.approx(_power(1500.0, 40.0, 1.0) * 19.8 / 1500, rel=0.01)
    assert out[schema.CORRECTION_POWER_CURVE] == "per-config"
    assert "time model" in out[schema.CORRECTION_TIME_SOURCE]


def test_unknown_kernel_uses_the_global_curve_and_measured_time(calibration):
    row = {schema.KERNEL: "mine", schema.CONFIG: "x", schema.SM_CLOCK_MHZ: 1500.0,
           schema.TEMPERATURE_C: 45.0, schema.POWER_W: 300.0, schema.TIME_S: 1e-3}
    out = correct_row(row, calibration.models(), calibration.metadata())
    assert out[schema.CORRECTION_POWER_CURVE] == "global"
    assert out[schema.CORRECTION_TIME_SOURCE].startswith("measured")
    assert out[CORRECTED_POWER_W] == pytest.approx(300.0 - ALPHA * 5.0, rel=0.02)


def test_extrapolation_warns(calibration):
    row = {schema.KERNEL: "fp32", schema.CONFIG: "default", schema.SM_CLOCK_MHZ: 600.0,
           schema.TEMPERATURE_C: 90.0, schema.POWER_W: 200.0, schema.TIME_S: 0.03}
    with pytest.warns(CalibrationExtrapolationWarning) as caught:
        correct_row(row, calibration.models(), calibration.metadata())
    text = " ".join(str(w.message) for w in caught)
    assert "600 MHz" in text and "90.0 °C" in text


def test_in_range_row_does_not_warn(calibration):
    row = {schema.KERNEL: "fp32", schema.CONFIG: "default", schema.SM_CLOCK_MHZ: 1500.0,
           schema.TEMPERATURE_C: 45.0, schema.POWER_W: 350.0, schema.TIME_S: 0.0132}
    with warnings.catch_warnings():
        warnings.simplefilter("error", CalibrationExtrapolationWarning)
        correct_row(row, calibration.models(), calibration.metadata())


def test_other_gpu_model_is_refused_unless_allowed():
    meta = {"device": "NVIDIA H100 80GB HBM3"}
    with pytest.raises(ValueError, match="H100.*H200|allow_other_device"):
        check_device(meta, "NVIDIA H200")
    check_device(meta, "NVIDIA H200", allow_other_device=True)
    check_device(meta, "NVIDIA H100 80GB HBM3")


def test_nothing_identified_says_so():
    launches, samples = _tables(np.random.default_rng(1), kernels=(), narrow=("stream", "fp32"))
    cal = fit_calibration(None, launches, samples)
    assert cal.power_models is None and cal.time_models is None
    assert any("no workload's power curve" in n for n in cal.notes)
    row = {schema.KERNEL: "stream", schema.CONFIG: "default", schema.SM_CLOCK_MHZ: 1500.0,
           schema.TEMPERATURE_C: 45.0, schema.POWER_W: 300.0, schema.TIME_S: 1e-3}
    with pytest.raises(ValueError, match="no power curve"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CalibrationExtrapolationWarning)
            correct_row(row, cal.models(), cal.metadata())


@pytest.mark.parametrize("bad, match", [
    (dict(), "no data"),
    (dict(launches=pd.DataFrame({schema.KERNEL: ["a"]})), "column 'config' is missing"),
    (dict(samples=pd.DataFrame(), launches=None), "column"),
])
def test_bad_input_is_a_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        fit_calibration(**bad)
