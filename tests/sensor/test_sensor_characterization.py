"""Sensor characterisation: estimators on synthetic signals and on every SimulatedGPU preset."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.sensor import report
from powermodels.sensor._series import counter_power, robust_update_period
from powermodels.sensor.gain import SteadyStateGain
from powermodels.sensor.transient import StepResponse
from powermodels.sensor.update_period import UpdatePeriod
from powermodels.sensor.window import BoxcarWindow, boxcar_mean, cumulative_integral

simulated = pytest.importorskip("powermodels.devices.simulated")

# Tolerances the characterisation achieves on the simulated presets (stated in docs/sensor.md).
TOL_UPDATE = 0.02        # relative
TOL_SHORT_WINDOW = 0.10  # relative, windows < update period (sampled at update/50)
TOL_LONG_WINDOW = 0.05   # relative, the 1 s average window (fitted on the step)
TOL_DELAY_SHORT_S = 0.003
TOL_DELAY_LONG_S = 0.015


def _sensor_trace(t, load, update_s, window_s, delay_s=0.0, phase_s=0.0137):
    C = cumulative_integral(t, load)
    upd = np.floor((t - phase_s) / update_s) * update_s + phase_s
    return boxcar_mean(C, upd, window_s, delay_s)


# ---------------------------------------------------------------- update period

def test_update_period_is_robust_to_repeated_values():
    t = np.arange(0, 3, 1e-3)
    reading = np.floor(t / 0.1).astype(float)
    reading[np.isin(reading, [3, 7, 8, 15, 22])] -= 1  # those updates repeat the last value
    est = UpdatePeriod().fit(t[:, None], reading)
    assert est.update_period_s_ == pytest.approx(0.1, rel=1e-3)
    assert est.n_updates_ < 29


def test_robust_update_period_counts_double_intervals():
    u = np.cumsum([0.1, 0.1, 0.2, 0.1, 0.3, 0.1])
    assert robust_update_period(u)[0] == pytest.approx(0.1)


def test_update_period_needs_changes():
    t = np.arange(0, 1, 1e-3)
    with pytest.raises(ValueError, match="changed fewer than 3 times"):
        UpdatePeriod().fit(t[:, None], np.ones_like(t))


def test_update_period_names_missing_column():
    df = pd.DataFrame({schema.T_S: [0.0, 1.0, 2.0]})
    with pytest.raises(ValueError, match="power_instant_w"):
        UpdatePeriod().fit(df)


# ---------------------------------------------------------------- boxcar window

@pytest.mark.parametrize(("window_s", "delay_s"), [(0.025, 0.0), (0.025, 0.03), (0.1, 0.005)])
def test_boxcar_window_recovers_window_and_delay(window_s, delay_s):
    t = np.arange(0, 8, 1e-3)
    runs = []
    for k, period in enumerate((0.0667, 0.08, 0.125)):
        load = (np.floor(t / (period / 2)) % 2).astype(float)
        reading = 100 + 200 * _sensor_trace(t, load, 0.1, window_s, delay_s)
        runs.append(pd.DataFrame({schema.RUN_ID: f"r{k}", schema.T_S: t + 10 * k,
                                  schema.POWER_INSTANT_W: reading, schema.LOAD_ACTIVITY: load}))
    est = BoxcarWindow(max_window_s=0.5).fit(pd.concat(runs, ignore_index=True))
    assert est.window_s_ == pytest.approx(window_s, rel=0.02)
    assert est.delay_s_ == pytest.approx(delay_s, abs=1e-3)
    assert est.sampled_fraction_ == pytest.approx(min(1, window_s / 0.1), rel=0.02)
    assert est.loss_curve_.shape == (est.n_windows, 2)
    lo, hi = est.window_interval_s_
    assert lo <= est.window_s_ <= hi and lo < window_s * 1.02 and hi > window_s * 0.98
    assert not est.interval_is_wide()
    cmp = est.comparison(pd.concat(runs, ignore_index=True))
    assert np.corrcoef(cmp[schema.POWER_W], cmp[schema.REFERENCE_POWER_W])[0, 1] > 0.99


def test_boxcar_window_delay_spread_absorbs_per_run_sync_offsets():
    # each run's load clock is off by a different few ms (real GPU: per-run event sync)
    t = np.arange(0, 8, 1e-3)
    runs = []
    for k, (period, offset) in enumerate(((0.0667, 0.0), (0.08, 0.006), (0.125, 0.012))):
        load = (np.floor(t / (period / 2)) % 2).astype(float)
        reading = 100 + 200 * _sensor_trace(t, load, 0.1, 0.025, delay_s=0.004 + offset)
        runs.append(pd.DataFrame({schema.RUN_ID: f"r{k}", schema.T_S: t + 10 * k,
                                  schema.POWER_INSTANT_W: reading, schema.LOAD_ACTIVITY: load}))
    df = pd.concat(runs, ignore_index=True)
    spread = BoxcarWindow(max_window_s=0.5, max_delay_s=0.05, delay_spread_s=0.01).fit(df)
    assert spread.window_s_ == pytest.approx(0.025, rel=0.06)  # 1 ms sampling: ±1.5 ms
    assert spread.run_delays_s_ == pytest.approx([0.004, 0.010, 0.016], abs=2e-3)
    joint = BoxcarWindow(max_window_s=0.5, max_delay_s=0.05).fit(df)
    assert joint.loss_ > 10 * spread.loss_


def test_boxcar_window_interval_is_the_search_range_with_too_few_updates():
    # three runs of 0.4 s: ~4 updates each, as many as the parameters (delay, z mean and scale per run)
    t = np.arange(0, 0.4, 1e-3)
    runs = []
    for k, period in enumerate((0.0667, 0.08, 0.125)):
        load = (np.floor(t / (period / 2)) % 2).astype(float)
        reading = 100 + 200 * _sensor_trace(t, load, 0.1, 0.025)
        runs.append(pd.DataFrame({schema.RUN_ID: f"r{k}", schema.T_S: t + 10 * k,
                                  schema.POWER_INSTANT_W: reading, schema.LOAD_ACTIVITY: load}))
    est = BoxcarWindow(max_window_s=0.2, max_delay_s=0.05, discard_s=0.0).fit(pd.concat(runs))
    assert est.window_interval_s_[1] == pytest.approx(0.2)
    assert est.window_interval_s_[0] < 0.005
    assert est.interval_is_wide()


def test_boxcar_window_rejects_bad_parameters():
    t = np.arange(0, 3, 1e-3)
    with pytest.raises(ValueError, match="max_window_s"):
        BoxcarWindow(max_window_s=0).fit(np.c_[t, t], t)


# ---------------------------------------------------------------- step response

def _step(kind):
    t = np.arange(0, 6, 1e-3)
    load = ((t >= 2.0) & (t < 5.0)).astype(float)
    ref = None
    if kind == "instant":
        reading = 80 + 300 * _sensor_trace(t, load, 0.1, 0.025)
    elif kind == "linear":
        reading = 80 + 300 * _sensor_trace(t, load, 0.1, 1.0)
    elif kind == "logarithmic":
        lag = np.where(t >= 2.0, 1 - np.exp(-(t - 2.0) / 0.08), 0.0) * (t < 5.0)
        reading = 80 + 300 * _sensor_trace(t, lag, 0.015, 0.015)
    else:  # the load itself rises slowly; the reading follows it at each update
        slow = np.clip((t - 2.0) / 0.5, 0, 1) * (t < 5.0)
        ref = 80 + 300 * slow
        reading = 80 + 300 * _sensor_trace(t, slow, 0.1, 0.025)
    cols = {schema.RUN_ID: "s", schema.T_S: t, schema.POWER_INSTANT_W: reading,
            schema.LOAD_ACTIVITY: load}
    if ref is not None:
        cols[schema.REFERENCE_POWER_W] = ref
    return pd.DataFrame(cols)


@pytest.mark.parametrize(("kind", "number", "rise"), [
    ("instant", 1, (0.0, 0.1)), ("slow-load", 2, (0.3, 0.5)),
    ("linear", 3, (0.7, 0.85)), ("logarithmic", 4, (0.12, 0.22))])
def test_step_response_kinds(kind, number, rise):
    df = _step(kind)
    ref = schema.REFERENCE_POWER_W if schema.REFERENCE_POWER_W in df.columns else None
    est = StepResponse(reference_column=ref).fit(df)
    assert est.response_kind_ == number, est.response_kind_name_
    assert rise[0] <= est.rise_time_s_ <= rise[1]
    assert est.onset_s_ == pytest.approx(2.0, abs=2e-3)
    assert 0 <= est.delay_s_ <= 0.3


# ---------------------------------------------------------------- gain, counter

def test_steady_state_gain_from_staircase():
    t = np.arange(0, 12, 1e-3)
    ref = 100 + 50 * np.floor(t / 2.0)          # six 2-second levels
    reading = 1.04 * _sensor_trace(t, ref, 0.1, 1.0) - 3.0
    X = pd.DataFrame({schema.RUN_ID: "g", schema.T_S: t, schema.POWER_AVERAGE_W: reading,
                      schema.REFERENCE_POWER_W: ref})
    est = SteadyStateGain(power_column=schema.POWER_AVERAGE_W, window_s=1.0).fit(X)
    assert est.gain_ == pytest.approx(1.04, rel=1e-3)
    assert est.offset_w_ == pytest.approx(-3.0, abs=0.3)
    assert np.allclose(est.correct(reading[-1]), ref[-1], rtol=1e-3)


def test_steady_state_gain_needs_two_levels():
    t = np.arange(0, 4, 1e-3)
    X = np.c_[t, np.full_like(t, 100.0)]
    with pytest.raises(ValueError, match="two or more load levels"):
        SteadyStateGain().fit(X, np.floor(t * 10))


def test_counter_power_is_mean_power_between_changes():
    t = np.arange(0, 2, 1e-3)
    energy = np.floor(t / 0.1) * 0.1 * 50.0    # 50 W, counter updated every 100 ms
    counter = np.where(np.arange(t.size) % 4 == 0, 1e5 + energy, np.nan)
    df = pd.DataFrame({schema.RUN_ID: "c", schema.T_S: t, schema.ENERGY_COUNTER_J: counter})
    out = counter_power(df)
    p = out[schema.COUNTER_POWER_W].dropna()
    assert len(out) == len(df)
    assert np.allclose(p, 50.0, rtol=0.05)


# ---------------------------------------------------------------- simulated presets (the CI evidence)

def _record(preset, seed=3, reference=False, seconds=3.0):
    from powermodels.commands.characterize import record
    from powermodels.measuring.runner import SimulatedRunner

    gpu = simulated.SimulatedGPU(preset=preset, seed=seed, reference_meter=reference)
    sample = min(1e-3, gpu.sensor.update_period_s / 50)
    square, step, _ = record(SimulatedRunner(gpu, sample_period_s=sample), seconds=seconds,
                             log=lambda m: None)
    return gpu.sensor, square, step


@pytest.mark.parametrize("preset", ["volta", "turing", "ga100", "hopper", "ada"])
def test_characterization_recovers_each_preset(preset):
    sensor, square, step = _record(preset)
    fields = (schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.ENERGY_COUNTER_J)
    result = report.characterize_traces(square, step, fields=fields)
    inst = result.row(schema.POWER_INSTANT_W)
    assert inst[schema.UPDATE_PERIOD_S] == pytest.approx(sensor.update_period_s, rel=TOL_UPDATE)
    assert inst[schema.WINDOW_S] == pytest.approx(sensor.instant_window_s, rel=TOL_SHORT_WINDOW)
    assert inst[schema.DELAY_S] == pytest.approx(sensor.delay_s, abs=TOL_DELAY_SHORT_S)
    assert inst[schema.RESPONSE_KIND] == "instant"
    assert inst[schema.SAMPLED_FRACTION] == pytest.approx(
        min(1, sensor.instant_window_s / sensor.update_period_s), rel=TOL_SHORT_WINDOW)
    if sensor.average_window_s is None:
        assert schema.POWER_AVERAGE_W in result.skipped
    else:
        avg = result.row(schema.POWER_AVERAGE_W)
        assert avg[schema.WINDOW_S] == pytest.approx(sensor.average_window_s, rel=TOL_LONG_WINDOW)
        assert avg[schema.DELAY_S] == pytest.approx(sensor.delay_s, abs=TOL_DELAY_LONG_S)
        assert avg[schema.RESPONSE_KIND] == "linear"
    counter = result.row(schema.ENERGY_COUNTER_J)
    assert counter[schema.UPDATE_PERIOD_S] == pytest.approx(sensor.energy_period_s, rel=TOL_UPDATE)
    assert counter[schema.SAMPLED_FRACTION] == pytest.approx(1.0, abs=0.05)
    assert inst[schema.WINDOW_LO_S] <= sensor.instant_window_s <= inst[schema.WINDOW_HI_S]
    assert result.warnings() == []   # 3 s runs of a noise-free simulated sensor identify every window


def test_characterization_recovers_a_delay_and_the_gain():
    preset = dataclasses.replace(simulated.PRESETS["hopper"], delay_s=0.03)
    sensor, square, step = _record(preset, seed=5, reference=True)
    result = report.characterize_traces(square, step, reference_column=schema.REFERENCE_POWER_W,
                                        fields=(schema.POWER_INSTANT_W,))
    inst = result.row(schema.POWER_INSTANT_W)
    assert inst[schema.WINDOW_S] == pytest.approx(0.025, rel=TOL_SHORT_WINDOW)
    assert inst[schema.DELAY_S] == pytest.approx(0.03, abs=TOL_DELAY_SHORT_S)
    assert inst[schema.GAIN] == pytest.approx(sensor.gain, rel=0.005)
    assert inst[schema.OFFSET_W] == pytest.approx(sensor.offset_w, abs=2.0)


def test_attach_load_marks_the_launches():
    df = pd.DataFrame({schema.RUN_ID: "a", schema.T_S: np.arange(0, 1, 0.01),
                       schema.POWER_INSTANT_W: 1.0})
    out = report.attach_load(df, [[0.2, 0.4], [0.6, 0.605]])
    load = out[schema.LOAD_ACTIVITY].to_numpy()
    assert load[25] == 1.0 and load[10] == 0.0
    assert load.sum() * 0.01 == pytest.approx(0.205)


def test_characterize_command_writes_report(tmp_path):
    from powermodels.cli import main

    rc = main(["characterize", "--device", "simulated", "--preset", "turing", "--seconds", "2.5",
               "--out", str(tmp_path)])
    assert rc == 0
    text = (tmp_path / "report.md").read_text()
    assert "power_instant_w" in text and "| update_period [ms]" in text
    assert "| window_lo [ms] | window_hi [ms] |" in text and "warning" not in text


def test_characterize_command_warns_of_an_unidentified_window(tmp_path, monkeypatch, capsys):
    from powermodels.cli import main

    # pretend the traces left the window open (real: tests/sensor/test_sensor_real_h200.py)
    monkeypatch.setattr(BoxcarWindow, "interval_is_wide", lambda self: True)
    assert main(["characterize", "--device", "simulated", "--preset", "volta", "--seconds", "1",
                 "--step-seconds", "0.5", "--out", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "warning: power_instant_w: window" in err and "record longer runs (characterize --seconds" in err
    assert "**warning: power_instant_w" in (tmp_path / "report.md").read_text()
    table = pd.read_csv(tmp_path / "characterization.csv")
    assert set(table[schema.SENSOR_FIELD]) >= {schema.POWER_INSTANT_W, schema.ENERGY_COUNTER_J}
    pytest.importorskip("matplotlib")
    assert (tmp_path / "loss_curve.png").stat().st_size > 0


def test_steady_state_gain_takes_a_fitted_negative_delay():
    # BoxcarWindow may fit a slightly negative delay (clock offset); the gain must accept it
    t = np.arange(0, 12, 1e-3)
    ref = 100 + 50 * np.floor(t / 2.0)
    reading = 1.04 * _sensor_trace(t, ref, 0.1, 0.025) - 3.0
    X = pd.DataFrame({schema.RUN_ID: "g", schema.T_S: t, schema.POWER_INSTANT_W: reading,
                      schema.REFERENCE_POWER_W: ref})
    est = SteadyStateGain(settle_s=0.5, window_s=0.025, delay_s=-0.002).fit(X)
    assert est.gain_ == pytest.approx(1.04, rel=1e-3)
    with pytest.raises(ValueError, match="delay_s"):
        SteadyStateGain(delay_s=float("nan")).fit(X)
    with pytest.raises(ValueError, match="window_s"):
        SteadyStateGain(window_s=-1.0).fit(X)
