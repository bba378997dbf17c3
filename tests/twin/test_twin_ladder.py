"""The replay runs a recording's ``ladder`` part (two loads alternating every few ms) as the recording ran it."""

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.recording import Recording
from powermodels.twin import metrics
from powermodels.twin.replay import TRACE_COLUMNS, ladder_cycles, replay

from .test_twin import known_preset

PER_CYCLE = (("bf16", 4), ("gemm", 1))  # the pressure's batches, then the workload's: one cycle
PHASE_COLUMNS = [schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND, schema.T0_S, schema.T1_S]


def ladder_recording(preset, seed=5):
    """A twin-made recording with a ladder step, driven on the GPU directly (not through the replay).

    Idle 2 s, 1.5 s of ``bf16`` ×4 / ``gemm`` ×1 alternating (one ``ladder`` entry under ``gemm``,
    both loads' batches timed), 0.3 s of ``gemm`` alone (its ``burst``, batches numbered on), idle 1.5 s.
    """
    gpu = preset.gpu(seed=seed, history_s=60.0)
    gpu.start_at_temperature(40.0)
    rows, phases, batch = [], [], {"bf16": 0, "gemm": 0}

    def timed(name, se):
        for s, e in se:
            rows.append({schema.WORKLOAD: name, schema.RECORDING_PHASE: "ladder", schema.REPEAT: 0,
                         schema.BATCH: batch[name], schema.START_S: s, schema.END_S: e, schema.LAUNCHES: 1,
                         schema.TIME_S: e - s})
            batch[name] += 1

    a, _ = gpu.idle(2.0)
    phases.append(("ladder", "-", -1, "idle", a, gpu.now()))
    t0 = gpu.now()
    while gpu.now() - t0 < 1.5:
        for name, n in PER_CYCLE:
            timed(name, gpu.run(preset.workload(name).workload, launches=n))
    phases.append(("ladder", "gemm", 0, "ladder", t0, gpu.now()))
    t0 = gpu.now()
    timed("gemm", gpu.run(preset.workload("gemm").workload, launches=int(0.3 / 0.0025), gap_s=2e-5))
    phases.append(("ladder", "gemm", 0, "burst", t0, gpu.now()))
    a, _ = gpu.idle(1.5)
    phases.append(("ladder", "-", -1, "idle", a, gpu.now()))
    full = gpu.trace(0.0, gpu.now(), sample_period_s=2e-3)
    trace = full[list(TRACE_COLUMNS)].reset_index(drop=True)
    energy = full.loc[full[schema.ENERGY_COUNTER_J].notna(), [schema.T_S, schema.ENERGY_COUNTER_J]]
    prov = {"gpu": "twin known (simulated)", "power_limit_w": preset.physics.power_limit_w,
            "max_sm_clock_mhz": preset.physics.sm_clock_max_mhz, "simulated": True}
    return Recording(trace, energy.reset_index(drop=True), pd.DataFrame(rows),
                     pd.DataFrame(phases, columns=PHASE_COLUMNS), prov)


@pytest.fixture(scope="module")
def made():
    preset = known_preset()
    real = ladder_recording(preset)
    return real, replay(real, preset, seed=5, poll_s=2e-3)


def test_ladder_cycle_is_read_from_the_launches(made):
    real, _ = made
    assert ladder_cycles(real) == {("ladder", "gemm", 0): (("bf16", 4, 1), ("gemm", 1, 1))}


def test_replay_runs_the_ladder_as_the_recording_did(made):
    real, twin = made
    entry = real.phases.loc[real.phases[schema.PHASE_KIND] == "ladder"].iloc[0]
    t0, t1 = float(entry[schema.T0_S]), float(entry[schema.T1_S])
    la = twin.launches
    inside = la.loc[(la[schema.START_S] >= t0) & (la[schema.END_S] <= t1 + 1e-9)]
    counts = inside[schema.WORKLOAD].value_counts()
    real_counts = real.launches.loc[real.launches[schema.START_S] < t1, schema.WORKLOAD].value_counts()
    assert counts["bf16"] == 4 * counts["gemm"]
    assert counts["gemm"] == pytest.approx(real_counts["gemm"], rel=0.05)
    # (workload, phase, repeat, batch) stays unique: the tail's batches continue the ladder's numbering
    keys = la[[schema.WORKLOAD, schema.RECORDING_PHASE, schema.REPEAT, schema.BATCH]]
    assert not keys.duplicated().any()
    # same physics, same schedule: the ladder step's energy and the tail's match the recording's
    for a, b in ((t0 + 0.2, t1), (t1, t1 + 0.3)):
        e_real = float(metrics.energy_between(real, np.array([a]), np.array([b]))[0])
        e_twin = float(metrics.energy_between(twin, np.array([a]), np.array([b]))[0])
        assert e_twin == pytest.approx(e_real, rel=0.02)


def test_a_ladder_without_its_launches_is_a_one_line_error(made):
    real, _ = made
    with pytest.raises(ValueError, match="cycle only the recording's launches give"):
        replay(real.phases, known_preset(), poll_s=2e-3)


def test_ladder_steps_measure_the_mix_on_both_recordings(made):
    real, twin = made
    a, b = metrics.ladder_steps(real), metrics.ladder_steps(twin)
    assert len(a) == len(b) == 1
    for steps in (a, b):
        row = steps.iloc[0]
        # back to back (up to the simulator's 0.2 ms step between calls): the two loads cover the step,
        # the pressure most of it by time
        assert row[schema.LAUNCH_COVERAGE] + row[schema.COMPANION_SHARE] == pytest.approx(1.0, abs=0.05)
        assert 0.6 < row[schema.COMPANION_SHARE] < 0.8
        assert np.isnan(row[schema.PROBE_CLOCK_MHZ])  # no probes in these recordings
    assert b[schema.POWER_W].iloc[0] == pytest.approx(a[schema.POWER_W].iloc[0], rel=0.02)
    assert b[schema.SM_CLOCK_MHZ].iloc[0] == pytest.approx(a[schema.SM_CLOCK_MHZ].iloc[0], abs=30)
