"""SimulatedGPU: physics ground truth and the emulated sensor (Yang §IV, DSO eq. 2, thesis eq. 4.5)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.base import Device, Settings, SettingsChangeRefused
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.sensor_emulation import SensorPreset
from powermodels.devices.simulated import (
    EXAMPLE_WORKLOADS,
    PRESETS,
    THROTTLE_SW_POWER_CAP,
    SimulatedGPU,
    SimulatedWorkload,
)
from powermodels.models.voltage import relative_voltage

FP32 = EXAMPLE_WORKLOADS["fp32"]


def plateaus(values: np.ndarray, low: float, high: float, tol: float = 0.05):
    """Fractions of readings at the low plateau, the high plateau and clearly in between."""
    span = high - low
    x = (values - low) / span
    return (x < tol).mean(), (x > 1 - tol).mean(), ((x > 0.25) & (x < 0.75)).mean()


@pytest.fixture(scope="module")
def aliasing_run():
    """Hopper preset, 50 ms on / 48 ms off (98 ms period) for ~5.9 s after 2 s idle."""
    gpu = SimulatedGPU(preset="hopper", seed=3)
    gpu.idle(2.0)
    on = gpu.square_wave(0.050, 0.048, periods=60)
    start, end = float(on[0, 0]), gpu.now()
    return gpu, on, start, end, gpu.trace(start, end, sample_period_s=1e-3, run_id="sq")


def test_is_a_device_with_h100_clocks_and_limits():
    gpu = SimulatedGPU()
    assert isinstance(gpu, Device)
    clocks = gpu.supported_clocks()
    assert sorted(clocks) == [1800.0, 2619.0]
    sm = clocks[2619.0]
    assert sm[0] == 1980.0 and sm[-1] == 345.0 and len(sm) == 110
    assert np.allclose(-np.diff(sm), 15.0)
    assert gpu.power_limits_w() == (200.0, 700.0, 700.0)
    assert gpu.current_settings() == Settings()
    assert gpu.info.kind == "simulated"
    assert gpu.sensor is PRESETS["hopper"]


def test_trace_is_a_valid_trace_table(aliasing_run):
    _gpu, _, _, _, trace = aliasing_run
    schema.validate_trace_table(trace)
    assert schema.REFERENCE_POWER_W not in trace  # no meter asked for
    counter = trace[schema.ENERGY_COUNTER_J]
    # the counter is read on its own slower cadence (~4 ms)
    assert 0.2 < counter.notna().mean() < 0.3


def test_instant_reading_aliases_between_three_plateaus(aliasing_run):
    gpu, _on, start, end, trace = aliasing_run
    truth = gpu.truth(start, end)
    p = truth[schema.REFERENCE_POWER_W].to_numpy()
    low, high = np.percentile(p, 2), np.percentile(p, 98)
    # one value per sensor update (the reading holds between updates)
    n = np.floor((trace[schema.T_S] - gpu._phase) / gpu.sensor.update_period_s)
    per_update = trace.groupby(n)[schema.POWER_INSTANT_W].first().to_numpy()
    sensed = (per_update - gpu.sensor.offset_w) / gpu.sensor.gain
    at_low, at_high, middle = plateaus(sensed, low, high)
    assert at_low > 0.1 and at_high > 0.1 and middle > 0.1, (at_low, at_high, middle)
    # ... while the 1 s average stays near the true mean
    avg = trace[schema.POWER_AVERAGE_W].to_numpy()[trace[schema.T_S].to_numpy() > start + 1.0]
    true_mean = gpu.true_energy_j(start, end) / (end - start)
    assert np.all(np.abs(avg / gpu.sensor.gain - true_mean) < 0.1 * true_mean)


def test_energy_counter_tracks_true_energy_on_square_wave(aliasing_run):
    gpu, _, _start, _end, trace = aliasing_run
    rows = trace.dropna(subset=[schema.ENERGY_COUNTER_J])
    t, c = rows[schema.T_S].to_numpy(), rows[schema.ENERGY_COUNTER_J].to_numpy()
    # the counter's own update instants bracket the run
    period, phase = gpu.sensor.energy_period_s, gpu._energy_phase
    u0 = phase + np.floor((t[0] - phase) / period + 1e-9) * period
    u1 = phase + np.floor((t[-1] - phase) / period + 1e-9) * period
    counted = c[-1] - c[0]
    truth = gpu.true_energy_j(u0, u1)
    assert abs(counted - truth) < 2e-3  # exact to the mJ between its updates
    # a user who only sees the trace dates each update by the first read showing it:
    # that energy is within 0.5 % of the integrated truth over the same span
    changed = np.flatnonzero(np.diff(c) > 0) + 1
    first, last = changed[0], changed[-1]
    estimate = c[last] - c[first]
    truth = gpu.true_energy_j(t[first], t[last])
    assert abs(estimate - truth) < 0.005 * truth


def test_average_reading_ramps_over_one_second_on_a_step():
    gpu = SimulatedGPU(preset="hopper", seed=1)
    gpu.idle(2.0)
    s, e = gpu.step(3.0)
    trace = gpu.trace(s - 0.5, e, sample_period_s=5e-3)
    t = trace[schema.T_S].to_numpy() - s
    avg = trace[schema.POWER_AVERAGE_W].to_numpy()
    inst = trace[schema.POWER_INSTANT_W].to_numpy()
    idle, full = avg[t < 0].mean(), inst[(t > 1.5) & (t < 2.0)].mean()
    level = (avg - idle) / (full - idle)
    # instant follows within one update + window; the average needs ~1 s
    assert ((inst[(t > 0.15) & (t < 0.5)] - idle) / (full - idle)).min() > 0.9
    assert np.all(level[(t > 0.15) & (t < 0.3)] < 0.35)
    assert 0.3 < np.median(level[(t > 0.5) & (t < 0.6)]) < 0.7
    assert level[(t > 1.15) & (t < 1.5)].min() > 0.9


def test_energy_is_conserved():
    gpu = SimulatedGPU(seed=2, reference_meter=True)
    gpu.idle(0.3)
    spans = gpu.run(EXAMPLE_WORKLOADS["tiny"], launches=20000, gap_s=5e-6)
    gpu.square_wave(0.013, 0.007, periods=20)
    gpu.idle(0.25)
    end = gpu.now()
    truth = gpu.truth(0.0, end)
    grid = truth[schema.REFERENCE_POWER_W].sum() * gpu.physics.fine_step_s
    assert abs(grid - gpu.true_energy_j(0.0, end)) < 1e-6 * grid
    # counter between two of its own update instants = integral of the truth
    t0, t1 = 0.1, end - 0.1
    c0, c1 = gpu._counter_at(np.array([t0, t1]))
    p, ph = gpu.sensor.energy_period_s, gpu._energy_phase
    u0, u1 = (ph + np.floor((np.array([t0, t1]) - ph) / p + 1e-9) * p)
    assert abs((c1 - c0) - gpu.true_energy_j(u0, u1)) < 2e-3
    # sub-grid kernels: 10 µs launches, 5 µs gaps keep the SMs 2/3 busy at activity 0.9
    dur = spans[:, 1] - spans[:, 0]
    assert np.allclose(dur, EXAMPLE_WORKLOADS["tiny"].time_s(1980, 2619))
    busy = gpu.truth(spans[0, 0], spans[-1, 1])[schema.LOAD_ACTIVITY].mean()
    assert busy == pytest.approx(0.9 * 10 / 15, rel=1e-3)
    # the reference meter reads the truth plus small noise
    trace = gpu.trace(0.0, end, sample_period_s=2e-4)
    true_at = np.interp(trace[schema.T_S], truth[schema.T_S] + gpu.physics.fine_step_s / 2,
                        truth[schema.REFERENCE_POWER_W])
    err = trace[schema.REFERENCE_POWER_W].to_numpy() - true_at
    assert np.median(np.abs(err)) < 2.0


def test_locked_clock_sets_kernel_time_by_its_law():
    gpu = SimulatedGPU()
    dso = SimulatedWorkload("mixed", core_work=6.0, mem_work=9.0, t0_s=1e-4, activity=0.8,
                            mem_activity=0.6)
    rational = SimulatedWorkload("rat", time_model="rational", rational=(0.02, 0.002, 0.004, 0.0005),
                                 activity=0.7)
    for f, fm in [(1200.0, 2619.0), (705.0, 2619.0), (1980.0, 1800.0)]:
        with gpu.settings_guard(sm_clock_mhz=f, mem_clock_mhz=fm, allow_changes=True):
            spans = gpu.run(dso, launches=5)
            expected = 1e-4 + max(9.0 / fm, 6.0 / f)  # DSO eq. 2
            assert np.allclose(spans[:, 1] - spans[:, 0], expected, rtol=1e-9)
            spans = gpu.run(rational, launches=3, gap_s=1e-3)
            expected = 0.02 / (1 + 0.002 * f) + 0.004 / (1 + 0.0005 * f)  # thesis eq. 4.5
            assert np.allclose(spans[:, 1] - spans[:, 0], expected, rtol=1e-9)
            assert np.allclose(np.diff(spans[:, 0]), expected + 1e-3)
            truth = gpu.truth(spans[0, 0], spans[-1, 1])
            assert (truth[schema.SM_CLOCK_MHZ] == f).all()
            assert (truth[schema.MEM_CLOCK_MHZ] == fm).all()
            assert gpu.read().sm_clock_mhz == f
    # restored after the guard: boost clock and default memory clock again
    assert gpu.current_settings() == Settings()
    spans = gpu.run(dso, launches=2)
    assert np.allclose(spans[:, 1] - spans[:, 0], dso.time_s(1980.0, 2619.0))


def test_settings_are_restored_after_an_exception_and_need_opt_in():
    gpu = SimulatedGPU()
    with pytest.raises(SettingsChangeRefused):
        with gpu.settings_guard(sm_clock_mhz=900.0):
            pass
    with pytest.raises(RuntimeError, match="boom"):
        with gpu.settings_guard(sm_clock_mhz=900.0, power_limit_w=400.0, allow_changes=True):
            assert gpu.current_settings() == Settings(900.0, None, 400.0)
            raise RuntimeError("boom")
    assert gpu.current_settings() == Settings()
    assert gpu.power_limits_w()[2] == 700.0


def test_power_limit_throttles_the_clock():
    gpu = SimulatedGPU()
    free = gpu.run(FP32, launches=20)
    with gpu.settings_guard(power_limit_w=350.0, allow_changes=True):
        capped = gpu.run(FP32, launches=20)
        truth = gpu.truth(capped[2, 0], capped[-1, 1])
    assert truth[schema.SM_CLOCK_MHZ].max() < 1980.0
    assert (truth[schema.THROTTLE_REASONS] & THROTTLE_SW_POWER_CAP).all()
    assert truth[schema.REFERENCE_POWER_W].mean() < 352.0
    # a lower clock makes the compute-bound launches slower by f_boost / f_capped
    f_capped = truth[schema.SM_CLOCK_MHZ].median()
    ratio = np.median(capped[:, 1] - capped[:, 0]) / np.median(free[:, 1] - free[:, 0])
    assert ratio == pytest.approx(1980.0 / f_capped, rel=1e-6)
    after = gpu.run(FP32, launches=50)
    assert gpu.truth(after[-5, 0], after[-1, 1])[schema.SM_CLOCK_MHZ].min() == 1980.0


def test_full_load_heats_the_die_and_leakage_follows():
    gpu = SimulatedGPU()
    gpu.idle(0.5)
    s, e = gpu.step(3.0)
    truth = gpu.truth(s, e)
    temp = truth[schema.TEMPERATURE_C].to_numpy()
    assert 10.0 < temp[-1] - temp[0] < 25.0  # DESIGN: 31 -> 48 °C in 3 s on the real H100
    p = truth[schema.REFERENCE_POWER_W].to_numpy()
    assert p[-1] > p[0] + 5.0  # leakage rises with temperature at a fixed clock
    assert (truth[schema.SM_CLOCK_MHZ] == 1980.0).all()  # FP32 runs unthrottled


def test_deterministic_under_seed():
    def record(seed):
        gpu = SimulatedGPU(preset="ga100", seed=seed, reference_meter=True)
        gpu.idle(0.2)
        gpu.square_wave(0.03, 0.02, periods=10, amplitude=0.7)
        gpu.run(EXAMPLE_WORKLOADS["stream"], launches=30, gap_s=1e-3)
        return gpu.trace(0.0, gpu.now(), sample_period_s=1e-3)

    a, b, c = record(7), record(7), record(8)
    pd.testing.assert_frame_equal(a, b)
    assert not np.array_equal(a[schema.POWER_INSTANT_W], c[schema.POWER_INSTANT_W])


def test_readings_do_not_change_after_the_fact():
    gpu = SimulatedGPU(seed=4)
    gpu.run(FP32, launches=37, gap_s=3.3e-4)
    end = gpu.now()
    before = gpu.trace(0.0, end, 1e-3)
    gpu.run(FP32, launches=10)
    pd.testing.assert_frame_equal(before, gpu.trace(0.0, end, 1e-3))
    reading = gpu.read()
    assert reading.t_s == gpu.now()
    assert np.isfinite([reading.power_instant_w, reading.power_average_w, reading.power_usage_w]).all()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_follow_yang_fig14(name):
    p = PRESETS[name]
    expected = {"volta": (0.020, 0.010), "turing": (0.100, 0.100), "ga100": (0.100, 0.025),
                "hopper": (0.100, 0.025), "ada": (0.100, 0.100)}[name]
    assert (p.update_period_s, p.instant_window_s) == expected
    if name in ("ga100", "hopper", "ada"):
        assert p.average_window_s == 1.0
    # usage: the 1 s average on Ampere-and-newer except GA100 (NVML docs, Yang Fig. 14)
    assert p.usage == ("average" if name in ("hopper", "ada") else "instant")
    gpu = SimulatedGPU(preset=name)
    gpu.idle(1.2)
    trace = gpu.trace(0.0, gpu.now(), 1e-3)
    inst = trace[schema.POWER_INSTANT_W].to_numpy()
    changes = np.flatnonzero(np.diff(inst) != 0)
    assert np.median(np.diff(changes)) == pytest.approx(p.update_period_s * 1e3, abs=1)


def test_voltage_knee_width_zero_is_the_kernel_tuner_shape():
    ph = GPUPhysics(voltage_knee_width_mhz=0.0)
    f = np.linspace(345, 1980, 50)
    assert np.allclose(ph.relative_voltage(f), relative_voltage(f, ph.voltage_knee_mhz,
                                                               ph.voltage_slope_per_ghz))
    soft = GPUPhysics()
    assert np.all(soft.relative_voltage(f) >= ph.relative_voltage(f))
    assert np.allclose(soft.relative_voltage([345, 1980]), ph.relative_voltage([345, 1980]), atol=1e-3)


def test_workload_time_laws():
    w = SimulatedWorkload(core_work=10.0, mem_work=20.0, t0_s=1e-3)
    assert w.time_s(1000.0, 2619.0) == pytest.approx(1e-3 + 10.0 / 1000.0)
    assert w.time_s(1980.0, 1000.0) == pytest.approx(1e-3 + 20.0 / 1000.0)
    f = np.array([500.0, 1500.0])
    assert np.allclose(w.time_s(f, 2619.0), 1e-3 + np.maximum(20.0 / 2619.0, 10.0 / f))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: SimulatedGPU(preset="pascal"), "preset"),
        (lambda: SimulatedGPU(seed=-1), "seed"),
        (lambda: SimulatedGPU(ambient_c=float("nan")), "ambient_c"),
        (lambda: SimulatedGPU(physics="h100"), "physics"),
        (lambda: SimulatedWorkload(activity=1.5, core_work=1.0), "activity"),
        (lambda: SimulatedWorkload(core_work=-1.0), "core_work"),
        (lambda: SimulatedWorkload(), "core_work"),
        (lambda: SimulatedWorkload(time_model="roofline", core_work=1.0), "time_model"),
        (lambda: SimulatedWorkload(time_model="rational"), "rational"),
        (lambda: SimulatedGPU().run(FP32, launches=0), "launches"),
        (lambda: SimulatedGPU().run("fp32"), "workload"),
        (lambda: SimulatedGPU().run(FP32, gap_s=-1.0), "gap_s"),
        (lambda: SimulatedGPU().idle(float("inf")), "seconds"),
        (lambda: SimulatedGPU().square_wave(-0.05, 0.05, 3), "on_s"),
        (lambda: SimulatedGPU().square_wave(0.05, 0.05, 2.5), "periods"),
        (lambda: SimulatedGPU().step(1.0, amplitude=2.0), "amplitude"),
        (lambda: SimulatedGPU().trace(0.0, 1.0), "end_s"),
        (lambda: SimulatedGPU().true_energy_j(-1.0, 5.0), "end_s"),
        (lambda: FP32.time_s(0.0, 2619.0), "sm_clock_mhz"),
        (lambda: SensorPreset("x", 0.1, -0.025), "instant_window_s"),
        (lambda: GPUPhysics(thermal_tau_s=0.0), "thermal_tau_s"),
        (lambda: GPUPhysics(p0_w=float("nan")), "p0_w"),
        (lambda: GPUPhysics(p0_w=-1.0), "p0_w"),
        (lambda: SensorPreset("x", 0.1, 0.025, delay_s=-0.01), "delay_s"),
        (lambda: SensorPreset("x", 0.1, 0.025, offset_w=float("inf")), "offset_w"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_presets_allow_zero_and_negative_where_meaningful():
    # p0_w may be 0, an offset any sign, the 1 s average may be absent
    assert GPUPhysics(p0_w=0.0).p0_w == 0.0
    preset = SensorPreset("x", 0.1, 0.025, None, offset_w=-3.0, delay_s=0.0, noise_w=0.0)
    assert preset.offset_w == -3.0 and preset.average_window_s is None


@pytest.mark.parametrize(("kwargs", "name"), [({"sm_clock_mhz": 2500.0}, "sm_clock_mhz"),
                                             ({"mem_clock_mhz": 1234.0}, "mem_clock_mhz"),
                                             ({"power_limit_w": 50.0}, "power_limit_w")])
def test_bad_settings_raise_and_leave_settings_unchanged(kwargs, name):
    gpu = SimulatedGPU()
    with pytest.raises(ValueError, match=name):
        with gpu.settings_guard(allow_changes=True, **kwargs):
            pass
    assert gpu.current_settings() == Settings()


def test_trace_sample_period_is_validated():
    gpu = SimulatedGPU()
    gpu.idle(0.1)
    with pytest.raises(ValueError, match="sample_period_s"):
        gpu.trace(0.0, 0.1, sample_period_s=0.0)
    with pytest.raises(ValueError, match="sample_period_s"):
        gpu.trace(0.0, 0.1, sample_period_s=1.0)


def test_custom_preset_with_delay_shifts_the_step_response():
    delayed = dataclasses.replace(PRESETS["turing"], delay_s=0.2, noise_w=0.0)
    gpu = SimulatedGPU(preset=delayed, seed=0)
    gpu.idle(1.0)
    s, _ = gpu.step(1.0)
    trace = gpu.trace(s, s + 0.9, 1e-3)
    inst = trace[schema.POWER_INSTANT_W].to_numpy()
    t = trace[schema.T_S].to_numpy() - s
    idle = inst[0]
    assert np.all(inst[t < 0.19] < idle + 1.0)  # nothing shows before the delay
    assert inst[t > 0.45].min() > idle + 300.0
