"""The reference method (12 s back to back, counter from 2 s) on the simulated GPU."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from powermodels import schema
from powermodels.devices.simulated import PRESETS, SimulatedGPU
from powermodels.measuring.protocols import make_protocol
from powermodels.measuring.reference import reference_energy
from powermodels.measuring.runner import SimulatedRunner


def _runner(seed=0):
    preset = dataclasses.replace(PRESETS["hopper"], energy_jitter_s=0.02)
    return SimulatedRunner(SimulatedGPU(preset=preset, seed=seed))


@pytest.mark.parametrize("kernel", ["fp32", "stream_triad"])
def test_reference_matches_the_simulated_truth(kernel):
    runner = _runner(seed=1)
    t0 = runner.now()
    ref = reference_energy(runner, kernel)
    assert runner.now() - t0 == pytest.approx(12.0, abs=0.05)
    assert abs(ref.energy_j / ref.truth_energy_j - 1) < 0.001
    assert ref.uncertainty_j < 2e-4 * ref.energy_j
    assert 9.5 < ref.window_s <= 10.0
    assert ref.launches == pytest.approx(ref.window_s / ref.time_s, rel=1e-3)
    assert ref.power_w == pytest.approx(ref.energy_j * ref.launches / ref.window_s)
    assert ref.error(ref.energy_j * 1.01) == pytest.approx(0.01)
    assert set(ref.as_dict()) >= {"energy_j", "truth_energy_j", "wall_s"}


def test_cold_counter_run_reads_below_the_warm_reference_and_alpha_closes_the_gap():
    """What the counter protocol's number means on the simulated GPU (5 s thermal RC).

    A 1 s run from idle sees the die ~20 °C cooler than the 2–12 s reference,
    so its energy is lower by the leakage difference (thesis eq. 4.6); moved
    to the reference's temperature with the physical α (eq. 4.7) it agrees.
    """
    runner = _runner(seed=2)
    gpu = runner.gpu
    ph = gpu.physics
    alpha = ph.leakage_w * float(ph.relative_voltage(ph.sm_clock_max_mhz)) * ph.leakage_per_c
    cold = make_protocol("counter").measure(runner, "fp32").row
    runner.idle(10.0)
    ref = reference_energy(runner, "fp32")
    assert ref.temperature_c > cold[schema.TEMPERATURE_C] + 10
    assert -0.05 < ref.error(cold[schema.ENERGY_J]) < -0.01
    moved = make_protocol("counter", alpha_w_per_c=alpha, reference_temperature_c=ref.temperature_c)
    row = moved.measure(_runner(seed=2), "fp32").row
    assert abs(ref.error(row[schema.ENERGY_AT_REF_J])) < 0.002
    # the reference says its own thermal state and moves to any T_ref with the row's α
    assert ref.temperature_start_c < ref.temperature_c < ref.temperature_end_c
    at = ref.at_reference(cold[schema.TEMPERATURE_C], alpha)
    assert at[schema.ENERGY_AT_REF_J] < ref.energy_j
    assert abs(at[schema.ENERGY_AT_REF_J] / cold[schema.ENERGY_J] - 1) < 0.005


def test_reference_rejects_bad_durations_and_a_device_without_counter():
    with pytest.raises(ValueError, match="skip_s < duration_s"):
        reference_energy(_runner(), "fp32", duration_s=2.0, skip_s=2.0)
    with pytest.raises(ValueError, match="skip_s < duration_s"):
        reference_energy(_runner(), "fp32", duration_s=math.nan)
    runner = _runner()
    runner.gpu.read_energy_j = lambda: math.nan
    with pytest.raises(ValueError, match="no energy counter"):
        reference_energy(runner, "fp32")


def test_short_reference_for_tests_still_aligns():
    runner = _runner(seed=4)
    ref = reference_energy(runner, "sgemm", duration_s=3.0, skip_s=1.0)
    assert 1.5 < ref.window_s <= 2.0
    assert abs(ref.energy_j / ref.truth_energy_j - 1) < 0.005
    assert np.isfinite(ref.temperature_c)
