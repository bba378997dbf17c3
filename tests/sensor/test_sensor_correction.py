"""Energy correction (naive / good practice / window-aware) and FinGraV profiles."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.sensor import fingrav
from powermodels.sensor.correction import (
    delag,
    discard_rise,
    good_practice_energy,
    naive_energy,
    overlap_fraction,
    phase_shift_gaps,
    window_aware_energy,
)
from powermodels.sensor.window import boxcar_mean, cumulative_integral

P_IDLE, P_ON = 80.0, 400.0


def _run(launch_s, launches, *, window_s=0.025, update_s=0.1, gap_s=0.0, phase_s=0.0371,
         gain=1.0, offset_w=0.0, noise_w=0.0, seed=0):
    """A trace of ``launches`` constant-power launches seen by a boxcar sensor."""
    tick = 1e-4  # the load lives on this grid, so the intervals are exact
    n_on, n_period = round(launch_s / tick), round((launch_s + gap_s) / tick)
    t = np.arange(round((2.5 + launches * (launch_s + gap_s)) / tick)) * tick
    first = round(1.0 / tick)
    k0 = first + np.arange(launches) * n_period
    iv = np.c_[k0 * tick, (k0 + n_on) * tick]
    on = np.zeros(t.size, bool)
    for a in k0:
        on[a + 1:a + n_on + 1] = True   # sample k covers (t[k-1], t[k]]
    power = np.where(on, P_ON, P_IDLE)
    C = cumulative_integral(t, power)
    upd = np.floor((t - phase_s) / update_s) * update_s + phase_s
    rng = np.random.default_rng(seed)
    noise = rng.normal(0, noise_w, np.unique(upd).size)[np.unique(upd, return_inverse=True)[1]]
    reading = gain * boxcar_mean(C, upd, window_s, 0.0) + offset_w + noise
    df = pd.DataFrame({schema.RUN_ID: "r", schema.T_S: t, schema.POWER_INSTANT_W: reading})
    return df[::10].reset_index(drop=True), iv   # sampled every 1 ms


def test_window_aware_is_exact_where_naive_is_not():
    trace, iv = _run(0.1, 1)                     # one 100 ms launch, 25 ms of each 100 ms seen
    truth = P_ON * 0.1
    naive = naive_energy(trace, iv)
    ours = window_aware_energy(trace, iv, window_s=0.025)
    assert abs(naive.energy_j / truth - 1) > 0.2
    assert ours.energy_j == pytest.approx(truth, rel=1e-3)
    assert ours.launches == 1 and ours.n_readings >= 2


def test_window_aware_uses_partial_windows_and_gain():
    trace, iv = _run(0.003, 40, window_s=1.0, gain=1.05, offset_w=-2.0)   # 1 s average field
    ours = window_aware_energy(trace, iv, window_s=1.0, gain=1.05, offset_w=-2.0)
    assert ours.energy_per_launch_j == pytest.approx(P_ON * 0.003, rel=1e-3)


def test_window_aware_uncertainty_covers_the_noise():
    errors, sigmas = [], []
    for seed in range(30):
        trace, iv = _run(0.01, 50, noise_w=3.0, seed=seed, phase_s=0.013 * seed)
        est = window_aware_energy(trace, iv, window_s=0.025)
        errors.append(est.energy_j - P_ON * 0.5)
        sigmas.append(est.uncertainty_j)
    z = np.asarray(errors) / np.asarray(sigmas)
    assert np.all(np.isfinite(z))
    assert 0.4 < np.std(z) < 2.0                 # the stated 1-sigma is about right


def test_window_aware_needs_a_reading_over_the_run():
    trace, iv = _run(0.1, 1)
    with pytest.raises(ValueError, match="no reading's window overlaps"):
        window_aware_energy(trace[trace[schema.T_S] < 1.03], iv, window_s=0.025)


def test_good_practice_discards_and_shifts():
    trace, iv = _run(0.05, 64, window_s=0.1)
    gp = good_practice_energy(trace, iv, rise_s=0.25, shift_s=0.05)
    assert gp.launches == int(discard_rise(iv, 0.25).sum()) < 64
    assert gp.energy_per_launch_j == pytest.approx(P_ON * 0.05, rel=0.02)
    with pytest.raises(ValueError, match="rise time"):
        good_practice_energy(trace, iv[:2], rise_s=10.0, shift_s=0.0)


def test_helpers():
    assert overlap_fraction([0.0, 1.0], [1.0, 2.0], [[0.5, 1.5]]) == pytest.approx([0.5, 0.5])
    gaps = phase_shift_gaps(64, 8, 0.025)
    assert np.count_nonzero(gaps) == 7 and gaps[7] == 0.025 and gaps[-1] == 0.0
    df = pd.DataFrame({schema.T_S: [1.0, 2.0]})
    assert delag(df, 0.5)[schema.T_S].tolist() == [0.5, 1.5]
    with pytest.raises(ValueError, match=schema.T_S):
        delag(df.rename(columns={schema.T_S: "x"}), 0.5)
    with pytest.raises(ValueError, match="intervals"):
        naive_energy(df.assign(**{schema.POWER_INSTANT_W: 1.0}), [[2.0, 1.0]])
    with pytest.raises(ValueError, match="power_average_w"):
        naive_energy(df, [[0.0, 1.0]], power_column=schema.POWER_AVERAGE_W)


# ----------------------------------------------------------------------------- FinGraV

def test_guidance_follows_table_1():
    assert fingrav.guidance(30e-6) == {"runs": 400, "loi_spacing_s": 5e-6, "margin": 0.05}
    assert fingrav.guidance(500e-6)["margin"] == 0.02
    assert fingrav.guidance(5e-3)["runs"] == 200
    with pytest.raises(ValueError, match="exec_time_s"):
        fingrav.guidance(0.0)


def test_golden_runs_pick_the_densest_bin():
    times = np.r_[np.full(10, 100e-6) * np.linspace(1, 1.015, 10), [80e-6, 130e-6, 150e-6]]
    mask = fingrav.golden_runs(times, margin=0.02)
    assert mask[:10].all() and not mask[10:].any()


def test_tag_executions_sse_and_ssp():
    times = [3.0, 2.0, 1.5, 1.01, 1.0, 1.0, 1.0, 1.0]
    powers = [200, 250, 280, 300, 320, 335, 340, 341]
    tags = fingrav.tag_executions(times, powers)
    assert list(tags[:3]) == ["warmup"] * 3
    assert tags[3] == "sse" and tags[5] == "ssp"
    assert fingrav.tag_executions([1.0, 1.0])[0] == "sse"


def test_stitch_recovers_a_profile_finer_than_the_logger():
    # a 1 ms kernel whose power ramps 200 → 400 W; a 1 ms logger, random phase per run
    rng = np.random.default_rng(0)
    traces, launches = [], []
    for run in range(300):
        start = 0.5 + rng.uniform(0, 1e-3)
        dur = 1e-3 * (1 + rng.normal(0, 0.005)) if run % 10 else 1.3e-3   # some outliers
        t = np.arange(0.0, 1.0, 1e-3)
        inside = (t >= start) & (t <= start + dur)
        p = np.where(inside, 200 + 200 * (t - start) / dur, 80.0)
        traces.append(pd.DataFrame({schema.RUN_ID: f"r{run}", schema.T_S: t, schema.POWER_INSTANT_W: p}))
        launches.append({schema.RUN_ID: f"r{run}", schema.EXECUTION: 0, schema.START_S: start,
                         schema.END_S: start + dur})
    stitched = fingrav.stitch(pd.concat(traces), pd.DataFrame(launches), updates_only=False, margin=0.02)
    assert not stitched[schema.RUN_ID].isin([f"r{r}" for r in range(0, 300, 10)]).any()
    prof = fingrav.profile(stitched, bin_s=1e-4)
    assert len(prof) >= 9
    expected = 200 + 200 * prof[schema.TOI_S] / 1e-3
    assert np.allclose(prof[schema.POWER_W], expected, rtol=0.03)
