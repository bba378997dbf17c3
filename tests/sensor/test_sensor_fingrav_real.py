"""FinGraV profile under a boxcar sensor (issue 15 item 5), end to end on the simulated GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.runner import SimulatedRunner
from powermodels.sensor.fingrav_window import window_profile

CONFIG = {"block_size_x": 1024, "nr_outer": 64, "nr_inner": 1024}


@pytest.fixture(scope="module")
def session():
    gpu = SimulatedGPU(preset="hopper", seed=1)
    runner = SimulatedRunner(gpu, sample_period_s=5e-4)
    rng = np.random.default_rng(0)
    s0, _ = runner.idle(1.0)
    runs = []
    for _ in range(300):
        runner.idle(float(rng.uniform(0.06, 0.16)))
        iv = runner.run("fp32", CONFIG, launches=2)
        runs.append([iv[0, 0], iv[-1, 1]])
    _, t1 = runner.idle(0.3)
    return gpu, runner.trace(s0, t1, run_id="s"), np.array(runs), s0, t1


def test_profile_matches_the_simulated_truth(session):
    gpu, trace, runs, s0, _t1 = session
    bin_s = 5e-4
    prof, base, info = window_profile(trace, runs, window_s=gpu.sensor.instant_window_s,
                                      delay_s=0.0, bin_s=bin_s)
    assert info["golden"] == 300 and info["readings"] > 50
    run_s = info["run_s"]
    # true mean power over a run, the instant sensor's gain and offset applied
    true_w = np.mean([gpu.true_energy_j(a, b) / (b - a) for a, b in runs[:20]])
    s = gpu.sensor
    inside = prof[schema.TOI_S].between(bin_s, run_s - bin_s)
    got = float(prof.loc[inside, schema.POWER_W].mean())
    assert got == pytest.approx(s.gain * true_w + s.offset_w, rel=0.03)
    # between runs: the idle power
    idle_w = gpu.true_energy_j(s0, s0 + 0.05) / 0.05
    assert base == pytest.approx(s.gain * idle_w + s.offset_w, rel=0.05)


def test_window_profile_errors(session):
    _gpu, trace, runs, *_ = session
    with pytest.raises(ValueError, match="three or more runs"):
        window_profile(trace, runs[:2], window_s=0.025, delay_s=0.0, bin_s=5e-4)
    with pytest.raises(ValueError, match="must be > 0"):
        window_profile(trace, runs, window_s=0.0, delay_s=0.0, bin_s=5e-4)
    with pytest.raises(ValueError, match="missing"):
        window_profile(pd.DataFrame({schema.T_S: [0.0, 1.0, 2.0]}), runs, window_s=0.025,
                       delay_s=0.0, bin_s=5e-4)
    with pytest.raises(ValueError, match="readings cover a run"):
        window_profile(trace, runs[:5], window_s=0.025, delay_s=0.0, bin_s=1e-5)
