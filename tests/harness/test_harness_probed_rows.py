"""Rows say the clock their launches ran at: probed on the GPU where a probe runs, else NVML's reading."""

import numpy as np
import pytest

import powermodels
from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.runner import make_runner


@pytest.mark.parametrize("protocol", ["counter", "naive", "steady_state", "good_practice"])
def test_measure_rows_carry_the_probed_clock(protocol):
    # a 400 W board: fp32 holds the cap, so the clock is far below the 1980 MHz the reading starts at
    gpu = SimulatedGPU(physics=GPUPhysics(power_limit_w=400), seed=4)
    row = powermodels.measure("fp32", device=gpu, protocol=protocol).row
    assert row[schema.CLOCK_SOURCE] == "probe"
    assert row[schema.SM_CLOCK_MHZ] < 1900 and row[schema.CLOCK_UNCERTAINTY_MHZ] >= row[schema.CLOCK_RANGE_MHZ] / 2


def test_probed_clocks_bracket_a_span_inside_one_run():
    runner = make_runner(SimulatedGPU(seed=0))
    iv = runner.run("fp32", None, 20)
    inner = runner.probed_clocks(iv[5, 0], iv[10, 1])  # no probe inside: the run's two ends bracket it
    assert inner.size == 2 and np.all(inner == 1980.0)
    assert runner.probed_clocks(iv[-1, 1] + 1.0, iv[-1, 1] + 2.0).size == 0  # after every probe
    runner.probe_clocks(False)
    runner.run("fp32", None, 2)
    assert runner.probed_clocks(0.0, 1e9).size == 0


def test_energy_meter_rows_say_the_clock_is_nvmls_reading():
    from powermodels.devices.simulated import EXAMPLE_WORKLOADS

    gpu = SimulatedGPU(seed=0)
    meter = powermodels.EnergyMeter(gpu)
    meter.begin_window("work")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=100)
    row = meter.end_window("work").as_row()
    meter.close()
    assert row[schema.CLOCK_SOURCE] == "nvml" and row[schema.CLOCK_UNCERTAINTY_MHZ] >= 15.0
