"""The twin: presets, replay, and fitting a twin-made recording with known parameters."""

import json
import sys
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.cli import main
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.sensor_emulation import PRESETS
from powermodels.devices.simulated_workload import SimulatedWorkload
from powermodels.recording import read_recording, write_recording
from powermodels.thermal.foster import fit_foster, simulate_foster
from powermodels.twin import load_preset, metrics, preset_names, save_preset
from powermodels.twin.fit import fit_twin
from powermodels.twin.fit_controller import fit_cap_gains
from powermodels.twin.preset import TwinPreset, TwinWorkload
from powermodels.twin.replay import replay

KNOWN_POLES = ((0.025, 0.1), (0.025, 20.0))


def known_preset() -> TwinPreset:
    """A twin with H100-like physics whose parameters the fit must find again."""
    ph = GPUPhysics(thermal_poles=KNOWN_POLES, cap_window_s=1.0, cap_headroom_w=60.0, cap_gain_per_s=4.0,
                    cap_proportional=30.0, clock_period_s=0.015, clock_recovery_mhz_per_s=5000.0,
                    clock_recovery_delay_s=0.03, voltage_knee_mhz=1100.0, leakage_per_c=0.012,
                    core_w_per_ghz=230.0)
    sensor = replace(PRESETS["hopper"], name="known", clock_period_s=0.1, clock_delay_s=0.02, noise_w=0.0,
                     energy_read_s=3e-3)
    w = {
        "fma": TwinWorkload(SimulatedWorkload("fma", core_work=1.2e-3 * 1980, activity=0.3), 2e-5, 1),
        "gemm": TwinWorkload(SimulatedWorkload("gemm", core_work=2.0e-3 * 1980, t0_s=5e-4, activity=0.45,
                                               mem_activity=0.2), 2e-5, 1),
        "bf16": TwinWorkload(SimulatedWorkload("bf16", core_work=1.5e-3 * 1980, activity=1.0, mem_activity=0.5),
                             0.0, 1),
    }
    return TwinPreset("known", ph, sensor, 30.0, w, {"made_by": "tests"})


def schedule() -> pd.DataFrame:
    """Idle, pressure/burst cycles (clock recovery), a series from idle and its cooling (~38 s)."""
    rows, t = [("natural", "-", -1, "idle", 0.0, 3.0)], 3.0
    for rep, (press, w) in enumerate([(1.5, "fma"), (1.0, "gemm"), (1.5, "fma"), (1.0, "gemm"), (2.0, "fma")]):
        rows.append(("natural", "bf16", rep, "pressure", t, t + press))
        rows.append(("natural", w, rep, "burst", t + press, t + press + 0.5))
        t += press + 0.5
    rows.append(("thermal", "gemm", -1, "idle", t, t + 8.0))
    rows.append(("thermal", "gemm", 0, "series", t + 8.0, t + 16.0))
    rows.append(("thermal", "-", -1, "idle", t + 16.0, t + 24.0))
    return pd.DataFrame(rows, columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                       schema.T0_S, schema.T1_S])


@pytest.fixture(scope="module")
def made():
    preset = known_preset()
    return preset, replay(schedule(), preset, seed=3, poll_s=2e-3, start_temperature_c=40.0)


def test_replay_writes_a_readable_recording(made, tmp_path):
    preset, rec = made
    back = read_recording(write_recording(rec, tmp_path / "twin"))
    assert set(back.workloads) == {"fma", "gemm"}  # the pressure load is not timed
    assert back.provenance["simulated"] is True and back.provenance["preset"] == "known"
    series = back.launches.loc[back.launches[schema.RECORDING_PHASE] == "thermal"]
    assert series[schema.START_S].min() >= schedule()[schema.T0_S].iloc[-2]
    # the twin's NVML clock reading changes only on its 100 ms grid, and lags the real clock
    assert metrics.update_period(back, schema.SM_CLOCK_MHZ) == pytest.approx(0.1, rel=0.05)
    rec_rows = metrics.clock_recovery(back, "fma")
    assert (rec_rows["lag_s"] > 0).all() and rec_rows["real_s"].median() < 0.2
    # power-capped from a cooler start: the first second runs above the settled power
    assert back.trace[schema.THROTTLE_REASONS].max() & 0x4


def test_fit_recovers_known_parameters(made):
    preset, rec = made
    fit = fit_twin(rec, name="refit", clock_workload="fma", search_cap_gains=False,
                   workload_times={"bf16": {"t_fast_s": 1.5e-3, "clock_share": 1.0}})
    true_alpha = preset.physics.leakage_slope_w_per_c(1980.0)
    assert fit.fit["leakage"]["alpha_w_per_c"] == pytest.approx(true_alpha, rel=0.35)
    assert fit.sensor.clock_period_s == pytest.approx(0.1, rel=0.05)
    assert fit.sensor.update_period_s == pytest.approx(0.1, rel=0.05)
    assert fit.physics.clock_period_s == pytest.approx(0.015, abs=0.006)
    assert fit.physics.clock_recovery_mhz_per_s == pytest.approx(5000.0, rel=0.3)
    assert fit.physics.clock_recovery_delay_s == pytest.approx(0.03, abs=0.015)
    fast = min(fit.physics.thermal_poles, key=lambda p: p[1])
    assert fast[0] == pytest.approx(KNOWN_POLES[0][0], rel=0.4) and fast[1] < 1.0
    gemm = fit.workload("gemm").workload
    assert gemm.time_s(1980.0, 2619.0) == pytest.approx(preset.workload("gemm").workload.time_s(1980.0, 2619.0),
                                                        rel=0.02)
    # and the refit twin replays the same schedule to within a few per cent of energy per launch
    again = replay(schedule(), fit, seed=3, poll_s=2e-3, start_temperature_c=40.0)
    a, b = metrics.warmup_energy_per_launch(rec, "gemm", 6), metrics.warmup_energy_per_launch(again, "gemm", 6)
    assert np.max(np.abs(b[schema.ENERGY_J] / a[schema.ENERGY_J] - 1)) < 0.05


def test_cap_gains_found_by_replaying_the_capped_spans(made):
    preset, rec = made
    wrong = replace(preset, physics=replace(preset.physics, cap_proportional=0.0))
    report = {}
    fit = fit_cap_gains(wrong, rec, grid=((0.0, 4.0, 0.0), (30.0, 4.0, 0.0)), report=report)
    assert fit.physics.cap_proportional == 30.0
    assert len(report["cap_gains"]["candidates"]) == 2
    # a held-out span is never scored: holding out every pressure entry leaves nothing to fit
    pressure = rec.phase_rows(kind="pressure")
    everything = [(float(pressure[schema.T0_S].min()) - 5.0, float(pressure[schema.T1_S].max()) + 5.0)]
    assert fit_cap_gains(wrong, rec, everything, report=report) is wrong


def test_foster_fit_recovers_poles():
    t = np.arange(0, 120, 0.1)
    p = np.where((t % 40) < 20, 600.0, 120.0)
    temp = simulate_foster(t, p, KNOWN_POLES, 30.0)
    fit = fit_foster(t, p, temp, n_poles=2, grid=9)
    assert fit["rmse_c"] < 0.3
    assert sum(r for r, _ in fit["poles"]) == pytest.approx(0.05, rel=0.1)


def test_shipped_presets_load_and_round_trip(tmp_path):
    assert "h100-sxm" in preset_names()
    p = load_preset("h100-sxm")
    assert p.physics.power_limit_w == 700.0 and p.sensor.clock_period_s == pytest.approx(0.1, rel=0.05)
    assert len(p.physics.thermal_poles) >= 2 and p.provenance["fitted_from"]
    assert {"cupy_fma_loop", "torch_bf16_matmul_8192"} <= set(p.workloads)
    back = load_preset(save_preset(p, tmp_path / "x.json"))
    assert back == p
    gpu = p.gpu()
    gpu.run(p.workload("cupy_fma_loop").workload, launches=100)
    assert gpu.read().sm_clock_mhz > 0


def test_bad_presets_are_one_line_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown twin preset 'h900'.*h100-sxm"):
        load_preset("h900")
    f = tmp_path / "p.json"
    data = known_preset().to_dict()
    data["physics"]["leakage_w"] = -1
    f.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="leakage_w"):
        load_preset(f)
    data = known_preset().to_dict()
    data["workloads"]["fma"]["speed"] = 2
    f.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="unknown field.*speed"):
        load_preset(f)
    with pytest.raises(ValueError, match="no workload 'nope'"):
        replay(schedule().assign(**{schema.WORKLOAD: "nope"}), known_preset())


def test_existing_presets_keep_their_behaviour():
    from powermodels.devices.simulated import SimulatedGPU
    gpu = SimulatedGPU(seed=0)
    assert gpu.physics.thermal_poles == () and gpu.sensor.clock_period_s is None
    with pytest.raises(ValueError, match="already ran"):
        gpu.idle(0.1)
        gpu.start_at_temperature(50.0)


def test_twin_compare_without_matplotlib_writes_the_table(made, tmp_path, monkeypatch):
    # matplotlib is the [plot] extra and CI installs [test] only: the twin's recording and the table
    # are written, and comparison.md says why there are no plots (it stopped with an ImportError)
    from powermodels.twin.compare import twin_compare

    preset, rec = made
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    table = twin_compare(rec, preset, tmp_path / "cmp")
    assert len(table) and (tmp_path / "cmp" / "twin" / "trace.parquet").is_file()
    assert "matplotlib is not installed" in (tmp_path / "cmp" / "comparison.md").read_text()
    assert not list((tmp_path / "cmp").glob("*.png"))


def test_cli_fit_and_compare(made, tmp_path, capsys):
    preset, rec = made
    folder = write_recording(rec, tmp_path / "rec")
    out = tmp_path / "fitted.json"
    assert main(["fit-twin", str(folder), "--out", str(out), "--clock-workload", "fma",
                 "--workload-time", "bf16=0.0015:1", "--cap-controller", "period"]) == 0
    text = capsys.readouterr().out
    assert "leakage slope" in text and "cap controller period" in text
    assert main(["twin-compare", str(folder), "--preset", str(out), "--out", str(tmp_path / "cmp")]) == 0
    text = capsys.readouterr().out
    assert "within target" in text
    assert (tmp_path / "cmp" / "comparison.csv").is_file() and (tmp_path / "cmp" / "twin" / "trace.parquet").is_file()
    assert main(["fit-twin", str(folder), "--out", str(out), "--workload-time", "bf16"]) == 1
    assert "expected NAME=T_S" in capsys.readouterr().err


def test_burst_clock_choices(made):
    _, rec = made
    times = {"bf16": {"t_fast_s": 1.5e-3, "clock_share": 1.0}}
    none = fit_twin(rec, clock_workload="fma", search_cap_gains=False, workload_times=times, burst_clock="none")
    assert "burst_clock" not in none.fit
    with pytest.raises(ValueError, match="burst_clock must be"):
        fit_twin(rec, clock_workload="fma", burst_clock="clock")


def test_burst_correction_scale_from_the_workloads_own_series():
    from powermodels.twin import fit_bursts
    # two workloads: bursts below the top clock draw 5 W (a) and 3 W (b) less than their series at the
    # same temperature, where the V(f) model's correction says 10 W and 6 W: the data say half of it
    rows = []
    for w, deficit, corr in (("a", 5.0, 10.0), ("b", 3.0, 6.0)):
        for k in range(30):
            t = 50.0 + k % 5
            rows.append((w, "series", 1.0, 400.0 + 1.0 * t, t, 0.0))
        for k in range(8):
            t = 55.0
            rows.append((w, "burst", 0.4, 400.0 + 1.0 * t - deficit, t, corr))
    iv = pd.DataFrame(rows, columns=[schema.WORKLOAD, schema.PHASE_KIND, schema.SINCE_S, schema.POWER_W, "die_c",
                                     "add"])
    iv[schema.SM_CLOCK_MHZ] = 1980.0
    low = (iv[schema.PHASE_KIND] == "burst").to_numpy()
    scale, evidence = fit_bursts._scale_from_series(iv, low, iv["add"].to_numpy(), 1980.0, ["a", "b"], 1.0)
    assert scale == pytest.approx(0.5)
    assert evidence["a"] == {"deficit_w": pytest.approx(5.0), "model_correction_w": pytest.approx(10.0)}
    # bursts that draw more than their series: no correction at all (clipped at 0)
    iv.loc[low, schema.POWER_W] += 20.0
    assert fit_bursts._scale_from_series(iv, low, iv["add"].to_numpy(), 1980.0, ["a", "b"], 1.0)[0] == 0.0


def test_a_late_counter_update_merges_two_intervals():
    # updates every 0.1 s at 500 W, one published 0.09 s late: 0.19 s, then 0.01 s
    t = np.array([0.0, 0.1, 0.2, 0.39, 0.4, 0.5, 0.6])
    e = 500.0 * np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # the late update carries the energy up to 0.3 s
    t2, e2 = metrics.merge_late_updates(t, e)
    assert t2.tolist() == [0.0, 0.1, 0.2, 0.4, 0.5, 0.6]
    assert np.allclose(np.diff(e2) / np.diff(t2), 500.0)
    # regular updates with a little jitter are all kept
    t3 = np.arange(0, 2, 0.1) + np.random.default_rng(0).uniform(-0.01, 0.01, 20)
    assert metrics.merge_late_updates(t3, t3 * 400.0)[0].size == 20


def test_a_late_first_counter_update_is_dropped_too():
    """The first update published late: its short interval alone read ~5 kW and stayed in every fit."""
    t = np.array([0.09, 0.1, 0.2, 0.3, 0.4, 0.5])
    e = 500.0 * np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])  # the late first update carries energy up to 0.0 s
    t2, e2 = metrics.merge_late_updates(t, e)
    assert t2.tolist() == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert np.allclose(np.diff(e2) / np.diff(t2), 500.0)
