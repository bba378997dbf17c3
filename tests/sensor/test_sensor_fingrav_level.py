"""FinGraV's steady-state power from the NVIDIA sensors (fingrav_level), on the simulated GPU."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.runner import SimulatedRunner
from powermodels.sensor.fingrav_level import counter_baseline, counter_run_energy, inside_level
from powermodels.sensor.fingrav_window import window_profile

CONFIG = {"block_size_x": 1024, "nr_outer": 64, "nr_inner": 1024}


@pytest.fixture(scope="module")
def session():
    """1 s idle, then 60 runs of 40 executions (~90 ms) at random gaps."""
    gpu = SimulatedGPU(preset="hopper", seed=3)
    runner = SimulatedRunner(gpu, sample_period_s=5e-4)
    rng = np.random.default_rng(1)
    t0, _ = runner.idle(1.0)
    idle_end = runner.now()
    runs = []
    for _ in range(60):
        runner.idle(float(rng.uniform(0.06, 0.16)))
        iv = runner.run("fp32", CONFIG, launches=40)
        runs.append([iv[0, 0], iv[-1, 1]])
    _, t1 = runner.idle(0.4)
    return gpu, runner.trace(t0, t1, run_id="s"), np.array(runs), t0, idle_end


def test_counter_baseline_and_run_energy_match_the_truth(session):
    gpu, trace, runs, t0, idle_end = session
    base, se = counter_baseline(trace, t0 + 0.1, idle_end)
    true_idle = gpu.true_energy_j(t0 + 0.1, idle_end) / (idle_end - t0 - 0.1)
    assert base == pytest.approx(true_idle, rel=0.02) and se >= 0
    got = counter_run_energy(trace, runs, base, baseline_se_w=se)
    true_excess = np.mean([gpu.true_energy_j(a, b) - true_idle * (b - a) for a, b in runs])
    assert got["runs"] == 60 and got["energy_j"] == pytest.approx(true_excess, rel=0.05)


def test_inside_level_reads_the_steady_power(session):
    gpu, trace, runs, _t0, _idle_end = session
    s = gpu.sensor
    readings, level = inside_level(trace, runs, window_s=s.instant_window_s, delay_s=0.0,
                                   after_s=0.01, margin_s=0.002)
    assert level["n"] >= 10
    a, b = runs[0]
    steady = gpu.true_energy_j(a + 0.02, b) / (b - a - 0.02)
    assert level["power_w"] == pytest.approx(s.gain * steady + s.offset_w, rel=0.03)
    # every kept window lies inside its run, after the skipped start
    assert (readings[schema.TOI_S] > 0.01).all()


def test_window_profile_with_a_measured_baseline_reports_bin_errors(session):
    gpu, trace, runs, t0, idle_end = session
    base, _ = counter_baseline(trace, t0 + 0.1, idle_end)
    prof, got_base, _ = window_profile(trace, runs, window_s=gpu.sensor.instant_window_s,
                                       delay_s=0.0, bin_s=0.01, baseline_w=base)
    assert got_base == base
    assert (prof[schema.POWER_SE_W] > 0).all() and np.isfinite(prof[schema.POWER_SE_W]).all()


def test_errors(session):
    _gpu, trace, runs, t0, _idle_end = session
    with pytest.raises(ValueError, match="counter update"):
        counter_baseline(trace, t0, t0 + 0.05)
    with pytest.raises(ValueError, match="energy_counter_j"):
        counter_run_energy(trace.drop(columns=[schema.ENERGY_COUNTER_J]), runs, 100.0)
    with pytest.raises(ValueError, match="before the first run"):
        counter_run_energy(trace[trace[schema.T_S] > runs[0, 0] + 0.001], runs, 100.0)
    with pytest.raises(ValueError, match="window_s"):
        inside_level(trace, runs, window_s=0.0, delay_s=0.0)
    with pytest.raises(ValueError, match="power_instant_w"):
        inside_level(pd.DataFrame({schema.T_S: [0.0]}), runs, window_s=0.02, delay_s=0.0)


@pytest.mark.shared_data
def test_real_h100_ssp_level_matches_the_counter(shared_data):
    """Raw H100 recording: readings wholly inside a series, 50–600 ms from idle, read the counter's
    power over the same span within 1 % (docs/sensor.md, "FinGraV on the H100")."""
    raw = shared_data / "h100-2026-11-25-raw"
    if not raw.is_dir():
        pytest.skip(f"{raw} is absent")
    tr = pd.read_parquet(raw / "trace.parquet", columns=[schema.T_S, schema.POWER_INSTANT_W])
    en = pd.read_parquet(raw / "energy.parquet", columns=[schema.T_S, schema.ENERGY_COUNTER_J])
    ph = pd.read_parquet(raw / "phases.parquet")
    both = pd.concat([tr, en], ignore_index=True).sort_values(schema.T_S, kind="stable")
    for r in ph[ph[schema.PHASE_KIND] == "series"].itertuples():
        span = np.array([[r.t0_s, r.t0_s + 0.6]])
        _, lvl = inside_level(both, span, window_s=0.0223, delay_s=0.01, after_s=0.05, margin_s=0.004)
        counter, _ = counter_baseline(both, r.t0_s + 0.05, r.t0_s + 0.6)
        assert lvl["n"] >= 3
        assert lvl["power_w"] == pytest.approx(counter, rel=0.01), r.workload
