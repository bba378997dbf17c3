"""The natural-DVFS ladder part: the workload beside the pressure load, and the mixed windows' fit.

On the simulated GPU the power of a 1 ms step is linear in the activity of what runs in it, so a
window shared by the two loads draws each load's power over its own time (the assumption
``ladder_windows`` rests on), and eq. 4.1 fitted on such windows must give the workload's own
power at the clocks the cap held.
"""

from __future__ import annotations

import numpy as np
import pytest

from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.runner import make_runner
from powermodels.models.voltage import relative_voltage
from powermodels.natural_dvfs.clock_power import (
    fit_setting,
    power_at_heldout_clocks,
    predict_setting,
)
from powermodels.natural_dvfs.clock_windows import clock_windows
from powermodels.natural_dvfs.launch_clocks import attribute_clocks
from powermodels.natural_dvfs.natural_recording import Ladder, record_natural_dvfs
from powermodels.workflows.calibrate import default_pressure_workload
from powermodels.workloads import as_workload
from powermodels.workloads.registry import simulated_workload

PHYSICS = GPUPhysics(power_limit_w=540, control_step_s=0.01, clock_recovery_mhz_per_s=600)
V2F = {"form": "v2f", "temperature": "none", "sources": "counter", "p_static": "free"}


def _item(name):
    w = as_workload(name)
    return w, w.validate_config(w.parse_config(None))


@pytest.fixture(scope="module")
def recorded():
    """fp32 bursts after the pressure load, then one ladder step beside it (simulated board)."""
    runner = make_runner(SimulatedGPU(seed=3, physics=PHYSICS))
    try:
        fp32, config = _item("fp32")
        rec = record_natural_dvfs(runner, [(fp32, config, "fp32")], _item(default_pressure_workload()),
                                  cycles=2, pressure_s=0.4, burst_s=0.4, series_s=0.0, lead_idle_s=0.3,
                                  batch_s=0.003, ladder=Ladder(shares=(0.5,), hold_s=1.0, tail_s=0.2))
    finally:
        runner.close()
    clocks = attribute_clocks(rec)
    return rec, clocks, clock_windows(rec, clocks), simulated_workload("fp32", config)


def test_ladder_step_records_both_loads_probed(recorded):
    rec, *_ = recorded
    ph = rec.phases
    step = ph.loc[ph[schema.PHASE_KIND] == "ladder"]
    assert list(step[schema.WORKLOAD]) == ["fp32"] and step[schema.T1_S].iloc[0] - step[schema.T0_S].iloc[0] >= 1.0
    t0, t1 = step[[schema.T0_S, schema.T1_S]].to_numpy(float)[0]
    inside = rec.launches.loc[(rec.launches[schema.START_S] >= t0) & (rec.launches[schema.END_S] <= t1)]
    names = set(inside[schema.WORKLOAD])
    assert names == {"fp32", default_pressure_workload().name}
    busy = {w: float((g[schema.END_S] - g[schema.START_S]).sum()) / (t1 - t0) for w, g in inside.groupby(schema.WORKLOAD)}
    assert 0.35 < busy["fp32"] < 0.65 and sum(busy.values()) > 0.95  # the share asked for, few gaps
    probed = set(rec.probes.loc[(rec.probes[schema.T_S] >= t0) & (rec.probes[schema.T_S] <= t1), schema.WORKLOAD])
    assert probed == names
    assert rec.provenance["schedule"]["ladder"]["shares"] == (0.5,) and "ladder" in rec.provenance["protocols"]


def test_the_ladder_keeps_the_gpu_busy_when_a_probed_call_costs_the_host():
    """Fails before the ladder queued its turns in one runner call: with the ~4 ms host round trip
    per probed call of the real runner (4.1–4.6 ms median between the recorder's calls on the H100
    GPU-f73aad1d and the H200 GPU-25027b10), the two loads covered 47–61 % of each step there and
    every mixed window was dropped (coverage)."""
    runner = make_runner(SimulatedGPU(seed=3, physics=PHYSICS), probed_call_s=0.004)
    try:
        fp32, config = _item("fp32")
        rec = record_natural_dvfs(runner, [(fp32, config, "fp32")], _item(default_pressure_workload()),
                                  cycles=2, pressure_s=0.2, burst_s=0.2, series_s=0.0, lead_idle_s=0.3,
                                  batch_s=0.003, ladder=Ladder(shares=(0.5,), hold_s=1.0, tail_s=0.1))
    finally:
        runner.close()
    ph = rec.phases
    t0, t1 = ph.loc[ph[schema.PHASE_KIND] == "ladder", [schema.T0_S, schema.T1_S]].to_numpy(float)[0]
    inside = rec.launches.loc[(rec.launches[schema.START_S] >= t0) & (rec.launches[schema.END_S] <= t1)]
    assert float((inside[schema.END_S] - inside[schema.START_S]).sum()) / (t1 - t0) > 0.95
    t = clock_windows(rec, attribute_clocks(rec)).table
    assert (t[schema.WINDOW_KEPT] & (t[schema.COMPANION_SHARE] > 0) & (t[schema.WINDOW_SOURCE] == "counter")).sum() >= 6


def test_mixed_windows_are_kept_with_both_shares(recorded):
    """Fails before ladder_windows: a window shared with the pressure was dropped (coverage)."""
    _, _, cw, _ = recorded
    t = cw.table
    mixed = t.loc[t[schema.WINDOW_KEPT] & (t[schema.COMPANION_SHARE] > 0) & (t[schema.WINDOW_SOURCE] == "counter")]
    assert len(mixed) >= 6
    total = mixed[schema.LAUNCH_COVERAGE] + mixed[schema.COMPANION_SHARE]
    assert (total >= 0.95).all() and (total <= 1.0 + 1e-9).all()
    rows = cw.table.index.get_indexer(mixed.index)
    own = cw.mean_of(lambda f: f, rows)
    comp = cw.mean_of(lambda f: f, rows, companion=True)
    assert np.isfinite(own).all() and np.isfinite(comp).all()
    # below the top clock: the cap holds the clock down while the workload runs
    assert np.median(own) < PHYSICS.sm_clock_max_mhz - 100


def test_fit_on_mixed_windows_gives_the_workloads_own_power(recorded):
    rec, _, cw, twin = recorded
    t = cw.table
    kept = np.flatnonzero((t[schema.WINDOW_KEPT] & (t[schema.WINDOW_SOURCE] == "counter")).to_numpy())
    params = fit_setting(cw, kept, V2F)
    assert params["companion_a_w_per_mhz"] > params["a_w_per_mhz"] > 0  # the pressure draws more per MHz
    # the workload's own power where the cap held it, against the simulated truth
    mixed = kept[t[schema.COMPANION_SHARE].to_numpy(float)[kept] > 0]
    f = np.median(cw.mean_of(lambda x: x, mixed))
    temp = float(np.nanmedian(t[schema.TEMPERATURE_C].to_numpy(float)[mixed]))
    f_mem = float(np.nanmedian(rec.trace[schema.MEM_CLOCK_MHZ]))
    truth = PHYSICS.power_w(f, f_mem, temp, twin.activity, twin.mem_activity)
    v = relative_voltage(np.array([f]), params["knee_mhz"], params["slope_per_ghz"])[0]
    own = params["p_static_w"] + params["a_w_per_mhz"] * f * v ** 2
    assert abs(own - truth) / truth < 0.01
    # and the mixed windows themselves are predicted from both terms
    y = t[schema.POWER_W].to_numpy(float)[mixed]
    assert np.median(np.abs(predict_setting(cw, mixed, params) - y) / y) < 0.02


def test_a_mixed_window_is_never_held_out(recorded):
    _, _, cw, _ = recorded
    t = cw.table
    mixed = (t[schema.COMPANION_SHARE] > 0) & t[schema.WINDOW_KEPT] & (t[schema.WINDOW_SOURCE] == "counter")
    f = t.loc[mixed, schema.SM_CLOCK_MHZ].to_numpy(float)
    band = (float(f.min()) - 1, float(f.max()) + 1)  # a band around the ladder's clocks
    table = power_at_heldout_clocks(cw, band_mhz=band)
    row = table.loc[table[schema.WORKLOAD] == "fp32"].iloc[0]
    pure_in_band = (~mixed & t[schema.WINDOW_KEPT] & (t[schema.WINDOW_SOURCE] == "counter")
                    & t[schema.SM_CLOCK_MHZ].between(*band) & (t[schema.WORKLOAD] == "fp32"))
    assert row["test_windows"] == int(pure_in_band.sum())


def test_band_share_counts_the_companions_time(recorded):
    _, _, cw, _ = recorded
    t = cw.table
    i = np.flatnonzero((t[schema.COMPANION_SHARE] > 0).to_numpy() & t[schema.WINDOW_KEPT].to_numpy())[0]
    f_own = cw.seg_clock_mhz[cw.seg_offset[i]:cw.seg_offset[i + 1]]
    f_comp = cw.comp_seg_clock_mhz[cw.comp_seg_offset[i]:cw.comp_seg_offset[i + 1]]
    lo = hi = float(np.concatenate([f_own, f_comp]).min())  # a one-MHz band at the lowest clock seen
    assert cw.band_share(lo - 0.5, hi + 0.5)[i] > 0


@pytest.mark.parametrize("kwargs, words", [
    ({"shares": ()}, "shares"), ({"shares": (1.0,)}, "shares"), ({"hold_s": 0}, "hold_s"),
    ({"cycle_s": 0.2}, "cycle_s"),
])
def test_bad_ladder_is_one_line(kwargs, words):
    with pytest.raises(ValueError, match=words) as err:
        Ladder(**kwargs)
    assert "\n" not in str(err.value)


def test_ladder_without_pressure_is_one_line():
    runner = make_runner(SimulatedGPU(seed=0))
    try:
        with pytest.raises(ValueError, match="pressure load"):
            record_natural_dvfs(runner, [(*_item("fp32"), "fp32")], None, ladder=Ladder())
    finally:
        runner.close()


def test_a_ladder_recording_round_trips_and_refits(recorded, tmp_path):
    """Fails before 'ladder' was a phase kind of the format: write_recording refused it."""
    from powermodels.recording import read_recording, write_recording

    rec, clocks, cw, _ = recorded
    again = read_recording(write_recording(rec, tmp_path / "rec"))
    assert (again.phases[schema.PHASE_KIND] == "ladder").sum() == 1
    t = clock_windows(again, attribute_clocks(again)).table
    assert (t[schema.COMPANION_SHARE] > 0).sum() == (cw.table[schema.COMPANION_SHARE] > 0).sum()


def test_twin_replay_needs_the_recordings_launches_for_a_ladder_phase():
    """A phases table alone cannot say the ladder's cycle (the Recording's launches do: tests/twin/test_twin_ladder.py)."""
    import pandas as pd

    from powermodels.twin.replay import replay

    phases = pd.DataFrame({schema.RECORDING_PHASE: ["natural", "ladder"], schema.WORKLOAD: ["-", "cupy_fma_loop"],
                           schema.REPEAT: [-1, 0], schema.PHASE_KIND: ["idle", "ladder"], schema.T0_S: [0.0, 0.1],
                           schema.T1_S: [0.1, 0.3]})
    with pytest.raises(ValueError, match="'ladder' entry .* cycle only the recording's launches give"):
        replay(phases, "h100-sxm")


def test_a_run_stopped_in_the_ladder_keeps_its_finished_steps(tmp_path):
    """SIGTERM (as `timeout` sends it) after the first workload's ladder: the recording holds it."""
    import signal

    from powermodels.recording import read_recording
    from powermodels.termination import Terminated

    def progress(line):
        if line.startswith("ladder 1/2"):
            raise Terminated(signal.SIGTERM)

    runner = make_runner(SimulatedGPU(seed=3, physics=PHYSICS))
    try:
        items = [(*_item("fp32"), "fp32"), (*_item("stream_triad"), "triad")]
        with pytest.raises(Terminated):
            record_natural_dvfs(runner, items, _item(default_pressure_workload()), cycles=2, pressure_s=0.2,
                                burst_s=0.2, series_s=1.0, lead_idle_s=0.1, batch_s=0.003, progress=progress,
                                ladder=Ladder(shares=(0.5,), hold_s=0.3, tail_s=0.1), save_to=tmp_path / "rec")
    finally:
        runner.close()
    rec = read_recording(tmp_path / "rec")
    assert rec.provenance["complete"] is False and "SIGTERM" in rec.provenance["stopped"]
    steps = rec.phases.loc[rec.phases[schema.PHASE_KIND] == "ladder", schema.WORKLOAD]
    assert list(steps) == ["fp32"]
