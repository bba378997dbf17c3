"""NVML's clock reading characterised as a sensor against probed (simulated) and kernel-time (real) clocks."""

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import EXAMPLE_WORKLOADS, PRESETS, SimulatedGPU
from powermodels.sensor.clock_reading import characterize_clock_reading, reading_clock_uncertainty_mhz

RAW = Path(__file__).resolve().parents[2] / "datasets" / "h100" / "raw-2026-11-25"


def test_recovers_the_simulated_readings_delay():
    preset = replace(PRESETS["hopper"], clock_period_s=0.1, clock_delay_s=0.04)
    gpu = SimulatedGPU(preset=preset, seed=2, physics=GPUPhysics(power_limit_w=400, clock_period_s=0.01,
                                                                 clock_recovery_mhz_per_s=5000))
    probe = gpu.clock_probe()
    t0 = gpu.now()
    times = []
    for cycle in range(8):
        # a full-activity load above the 400 W limit pulls the clock down; under the light
        # "stream" load that follows it climbs back in 10 ms steps, probed after every launch
        gpu.run(EXAMPLE_WORKLOADS["gemm"], 60)
        for _ in range(80):
            gpu.run(EXAMPLE_WORKLOADS["stream"], 1)
            probe.enqueue()
            times.append(gpu.now())
    probes = probe.collect()
    trace = gpu.trace(t0, gpu.now(), sample_period_s=1e-3)
    sensor = characterize_clock_reading(trace[schema.T_S], trace[schema.SM_CLOCK_MHZ], np.array(times),
                                        probes[schema.PROBE_CLOCK_MHZ].to_numpy())
    assert sensor.update_period_s == pytest.approx(0.1, abs=0.005)
    assert sensor.delay_s == pytest.approx(0.04, abs=0.011)
    assert sensor.median_error_mhz <= sensor.naive_median_error_mhz


@pytest.mark.skipif(not RAW.is_dir(), reason="datasets/h100/raw-2026-11-25 not present")
def test_real_h100_reading_against_the_fma_loop_clock():
    from powermodels.natural_dvfs.launch_clocks import attribute_clocks
    from powermodels.recording import read_recording

    rec = read_recording(RAW)
    clocks = attribute_clocks(rec, clock_reference="cupy_fma_loop")
    fma = clocks.loc[clocks[schema.WORKLOAD] == "cupy_fma_loop"].sort_values(schema.START_S)
    tr = rec.trace
    sensor = characterize_clock_reading(tr[schema.T_S], tr[schema.SM_CLOCK_MHZ], fma[schema.START_S],
                                        fma[schema.SM_CLOCK_MHZ])
    assert sensor.update_period_s == pytest.approx(0.1, abs=0.01)
    natural = fma.loc[fma[schema.RECORDING_PHASE] == "natural"]
    clock, low, high = reading_clock_uncertainty_mhz(tr[schema.T_S], tr[schema.SM_CLOCK_MHZ],
                                                     natural[schema.START_S], natural[schema.END_S], sensor)
    truth = natural[schema.SM_CLOCK_MHZ].to_numpy()
    # the interval holds the clock the FMA loop ran at for most launches: 86 % on this board
    assert np.mean((truth >= low) & (truth <= high)) > 0.8


def test_the_horizon_is_not_the_lag_column_and_the_old_name_warns():
    """Two things were called lag: the sensor's delay + window + period and the row's delay + window."""
    from powermodels.sensor.clock_reading import ClockReadingSensor

    sensor = ClockReadingSensor(0.1, 0.02, 0.03, math.nan, math.nan, math.nan, 0)
    assert sensor.horizon_s == pytest.approx(0.15)
    with pytest.warns(DeprecationWarning, match="horizon_s"):
        assert sensor.lag_s == sensor.horizon_s
