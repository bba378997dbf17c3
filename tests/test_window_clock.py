"""The clock of a window where no probe runs: NVML's reading modelled as a sensor (period, delay, window)."""

from dataclasses import replace

import numpy as np
import pytest

from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import EXAMPLE_WORKLOADS, PRESETS, SimulatedGPU
from powermodels.meter import EnergyMeter
from powermodels.meter.window_clock import window_clock
from powermodels.sensor.clock_reading import uncharacterised_clock_reading


def _lagging_gpu():
    """An H100-like board: the clock reading updates every 100 ms and shows the clock of 40 ms before."""
    preset = replace(PRESETS["hopper"], clock_period_s=0.1, clock_delay_s=0.04)
    return SimulatedGPU(preset=preset, seed=2, physics=GPUPhysics(power_limit_w=400, control_step_s=0.01,
                                                                  clock_recovery_mhz_per_s=5000))


def test_a_window_in_a_clock_recovery_gets_the_clock_its_readings_describe():
    gpu = _lagging_gpu()
    meter = EnergyMeter(gpu)
    gpu.idle(1.0)
    gpu.run(EXAMPLE_WORKLOADS["gemm"], 200)       # above the limit: the clock drops to ~1,460 MHz
    meter.begin_window("w")
    gpu.run(EXAMPLE_WORKLOADS["stream"], 150)     # light load: the clock climbs back within the window
    r = meter.end_window("w", wait_clock=True)
    truth = gpu.truth(r.start_s, r.end_s)[schema.SM_CLOCK_MHZ].to_numpy(float)
    row = r.as_row()
    assert row[schema.CLOCK_SOURCE] == "nvml" and r.clock_covered
    assert row[schema.CLOCK_READING_PERIOD_S] == pytest.approx(0.1)
    assert row[schema.CLOCK_READING_LAG_S] == pytest.approx(0.04)
    # the midrange of the readings seen between start and end (the lagging reading's 1,470 and
    # 1,980 MHz) was 1,718 MHz, 11 % below the true mean; the readings the sensor model says
    # describe the window give it within 3 %, inside its uncertainty, and their range holds
    # every true clock
    assert row[schema.SM_CLOCK_MHZ] == pytest.approx(truth.mean(), rel=0.03)
    assert abs(row[schema.SM_CLOCK_MHZ] - truth.mean()) <= row[schema.CLOCK_UNCERTAINTY_MHZ]
    assert r.sm_clock_min_mhz <= truth.min() and truth.max() <= r.sm_clock_max_mhz


def test_a_program_row_says_how_its_clock_was_read(tmp_path):
    from powermodels.measuring.program import ProgramWorkload, measure_program

    gpu = _lagging_gpu()
    program = ProgramWorkload(["python", "-c", "pass"], simulated=0.5)
    m = measure_program(program, gpu, repeats=1, idle_s=0.5)
    row = m.table.iloc[0]
    assert row[schema.CLOCK_SOURCE] == "nvml"
    assert row[schema.CLOCK_READING_PERIOD_S] == pytest.approx(0.1)
    assert row[schema.CLOCK_READING_LAG_S] == pytest.approx(0.04)
    assert np.isfinite(row[schema.SM_CLOCK_MHZ]) and row[schema.CLOCK_UNCERTAINTY_MHZ] >= 15


class _Log:
    """A counter log of polled readings, as a real GPU's (no sensor preset on the device)."""

    def __init__(self, t, f, now):
        self.t, self.f, self._now = np.asarray(t, float), np.asarray(f, float), now

    def conditions(self, lo, hi):
        m = (self.t >= lo) & (self.t <= hi)
        return {schema.T_S: self.t[m], schema.SM_CLOCK_MHZ: self.f[m]}

    def history_start(self):
        return float(self.t[0])

    def update_period_s(self):
        return 0.1

    def now(self):
        return self._now


def test_an_uncharacterised_reading_bounds_delay_and_window_by_one_period():
    # polled every 5 ms; the reading updates every 100 ms: 1,980 until 1.0 s, then 1,500, then 1,800
    t = np.arange(0.0, 2.0, 0.005)
    f = np.where(t < 1.0, 1980.0, np.where(t < 1.3, 1500.0, 1800.0))
    f[(t > 0.2) & (t < 0.4)] = 1965.0  # changes on the 100 ms grid give the period
    f[(t > 0.5) & (t < 0.6)] = 1950.0
    sensor = uncharacterised_clock_reading(t, f)
    assert sensor.update_period_s == pytest.approx(0.1, abs=0.006)
    assert sensor.delay_s == 0 and sensor.window_s == pytest.approx(sensor.update_period_s)
    assert sensor.updates_scored == 0  # not scored against a reference clock
    # a window [1.0, 1.2]: its mean is of the values published up to one period after it (all
    # 1,500 MHz); its range also takes the next value (1,800 MHz at 1.3 s, < 1.2 s + 2 periods)
    clock = window_clock(_Log(t, f, now=2.0), object(), 1.0, 1.2)
    assert clock.covered and clock.low_mhz == 1500.0 and clock.high_mhz == 1800.0
    assert clock.clock_mhz == pytest.approx(1500.0)
    # measured too early, the readings that describe its end are not all published yet
    assert not window_clock(_Log(t[t <= 1.25], f[t <= 1.25], now=1.25), object(), 1.0, 1.2).covered
