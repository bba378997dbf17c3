"""A short board calibration: a preset brought to another board from its first idle and first second."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_calibration.calibrate import calibrate_board, calibrated_preset
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.sensor_emulation import PRESETS
from powermodels.devices.simulated_workload import SimulatedWorkload
from powermodels.twin import metrics
from powermodels.twin.preset import TwinPreset, TwinWorkload
from powermodels.twin.replay import replay


def board(core_w_per_ghz: float = 230.0, p0_w: float = 25.0) -> TwinPreset:
    ph = GPUPhysics(thermal_poles=((0.025, 0.1), (0.025, 20.0)), voltage_knee_mhz=1100.0, leakage_per_c=0.012,
                    core_w_per_ghz=core_w_per_ghz, p0_w=p0_w)
    sensor = replace(PRESETS["hopper"], name="b", noise_w=0.0, energy_read_s=3e-3)
    w = {"gemm": TwinWorkload(SimulatedWorkload("gemm", core_work=2.0e-3 * 1980, activity=0.45, mem_activity=0.2),
                              0.0, 1),
         "triad": TwinWorkload(SimulatedWorkload("triad", core_work=1e-4 * 1980, t0_s=2e-4, activity=0.2,
                                                 mem_activity=0.8), 0.0, 8)}
    return TwinPreset("b", ph, sensor, 30.0, w, {"made_by": "tests"})


#: the schedule the boards here replay: (phase, workload, repeat, kind, t0_s, t1_s) per entry
SCHEDULE = (("thermal", "-", -1, "idle", 0.0, 5.0), ("thermal", "gemm", 0, "series", 5.0, 9.0),
            ("thermal", "-", -1, "idle", 9.0, 13.0), ("thermal", "triad", 0, "series", 13.0, 17.0),
            ("thermal", "-", -1, "idle", 17.0, 19.0))


def schedule(rows=SCHEDULE) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                       schema.T0_S, schema.T1_S])


@pytest.fixture(scope="module")
def other_board():
    # another board of the same model: 5 % more dynamic power, 6 W less constant power
    return replay(schedule(), board(core_w_per_ghz=230.0 * 1.05, p0_w=19.0), seed=1, poll_s=2e-3,
                  start_temperature_c=40.0)


def test_board_scale_and_idle_are_recovered(other_board):
    preset = board()
    cal = calibrate_board(preset, other_board)
    report = cal.fit["board_calibration"]
    assert report["dynamic_scale"] == pytest.approx(1.05, abs=0.02)
    assert cal.physics.core_w_per_ghz == pytest.approx(230.0 * 1.05, rel=0.02)
    # idle power at the idle temperature read is the recording's
    t = report["idle_temperature_c"]
    assert float(cal.physics.power_w(1980.0, 2619.0, t)) == pytest.approx(report["idle_w"], abs=0.5)
    assert cal.name == "b+board@" + other_board.provenance["uuid"] and cal.provenance["board_calibration"]["scale"] == "board"
    # what the calibration did not read stays the preset's
    assert cal.physics.thermal_poles == preset.physics.thermal_poles
    assert cal.workloads == preset.workloads


def test_calibrated_preset_replays_the_other_board_closer(other_board):
    preset = board()
    cal = calibrate_board(preset, other_board)
    errors = {}
    for name, p in (("preset", preset), ("calibrated", cal)):
        tw = replay(schedule(), p, seed=1, poll_s=2e-3, start_temperature_c=40.0)
        a, b = metrics.warmup_energy_per_launch(other_board, "gemm", 4), metrics.warmup_energy_per_launch(tw, "gemm", 4)
        errors[name] = np.abs(b[schema.ENERGY_J].to_numpy()[1:] / a[schema.ENERGY_J].to_numpy()[1:] - 1).max()
    assert errors["preset"] > 0.02
    assert errors["calibrated"] < 0.01


def test_per_workload_scale_and_capped_series_skipped(other_board):
    preset = board()
    cal = calibrate_board(preset, other_board, scale="workload")
    series = cal.fit["board_calibration"]["series"]
    assert set(series) == {"gemm", "triad"}
    assert cal.physics.core_w_per_ghz == preset.physics.core_w_per_ghz
    assert cal.workload("gemm").workload.activity > preset.workload("gemm").workload.activity
    # a board held at a limit below the series' power: NVML reads the cap, nothing to scale from
    low = replace(preset, physics=replace(preset.physics, power_limit_w=250.0, power_limit_min_w=200.0))
    capped = replay(schedule(), low, seed=1, poll_s=2e-3, start_temperature_c=40.0)
    assert calibrate_board(preset, capped).fit["board_calibration"]["series"] == {}
    with pytest.raises(ValueError, match="scale must be"):
        calibrate_board(preset, other_board, scale="gpu")


def test_core_and_memory_factors_are_recovered_apart():
    """``scale="domains"``: a board with 8 % more core power and 15 % less memory power (session 15's triad)."""
    preset = board()
    ph = preset.physics
    other = replace(preset, physics=replace(ph, core_w_per_ghz=ph.core_w_per_ghz * 1.08,
                                            mem_w_per_ghz=ph.mem_w_per_ghz * 0.85))
    rec = replay(schedule(), other, seed=2, poll_s=2e-3, start_temperature_c=40.0)
    cal = calibrate_board(preset, rec, scale="domains")
    report = cal.fit["board_calibration"]
    assert report["core_scale"] == pytest.approx(1.08, abs=0.02)
    assert report["memory_scale"] == pytest.approx(0.85, abs=0.04)
    assert cal.physics.mem_w_per_ghz == pytest.approx(ph.mem_w_per_ghz * report["memory_scale"])
    # one factor for both cannot fit the two workloads; the two factors fit each within 1 %
    one = calibrate_board(preset, rec, scale="board")
    for name, p in (("one", one), ("two", cal)):
        tw = replay(schedule(), p, seed=2, poll_s=2e-3, start_temperature_c=40.0)
        worst = max(float(np.abs(metrics.warmup_energy_per_launch(tw, w, 4)[schema.ENERGY_J].to_numpy()[1:]
                                 / metrics.warmup_energy_per_launch(rec, w, 4)[schema.ENERGY_J].to_numpy()[1:] - 1).max())
                    for w in ("gemm", "triad"))
        if name == "one":
            assert worst > 0.02
        else:
            assert worst < 0.01


def test_domains_need_a_memory_bound_and_a_compute_bound_series(other_board):
    preset = board()
    # the triad alone: its core and memory parts move together, one series cannot split them
    only_triad = replace(preset, workloads={"triad": preset.workload("triad")})
    with pytest.raises(ValueError, match="cannot tell the core's power from the memory's"):
        calibrate_board(only_triad, other_board, scale="domains")


def test_another_kernel_under_the_same_name_does_not_set_the_board_factor(other_board):
    preset = board()
    gemm = preset.workload("gemm")
    # the preset's gemm runs twice as long as the recording's: another kernel
    other = replace(preset, workloads={**preset.workloads, "gemm": replace(
        gemm, workload=replace(gemm.workload, core_work=2 * gemm.workload.core_work))})
    report = calibrate_board(other, other_board).fit["board_calibration"]
    assert report["series"]["gemm"]["same_kernel"] is False
    assert report["series"]["triad"]["same_kernel"] is True
    assert report["dynamic_scale"] == pytest.approx(report["series"]["triad"]["ratio"])


def test_cli_twin_compare_calibrates_and_says_so(other_board, tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.recording import write_recording
    from powermodels.twin import save_preset

    folder = write_recording(other_board, tmp_path / "rec")
    preset_file = save_preset(board(), tmp_path / "b.json")
    assert main(["twin-compare", str(folder), "--preset", str(preset_file), "--out", str(tmp_path / "cmp"),
                 "--calibrate-board", "board"]) == 0
    out = capsys.readouterr().out
    assert "board calibration (board; its seconds are in-sample" in out and "board x 1.0" in out
    assert "board calibration" in (tmp_path / "cmp" / "comparison.md").read_text()
    # the calibrated preset is kept: loading it replays the board without reading its recording again
    from powermodels.twin import load_preset

    kept = load_preset(tmp_path / "cmp" / "preset.json")
    again = calibrated_preset(board(), other_board, scale="board")
    assert kept.name == again.name and kept.physics == again.physics and kept.workloads == again.workloads
    assert kept.provenance["board_calibration"]["scale"] == "board"


def test_calibrated_comparison_scores_the_warmup_after_the_seconds_read(other_board, tmp_path):
    """Fails before: the warm-up rows took their worst second from second 0, inside the calibration's read (0.2–1.2 s)."""
    from powermodels.twin.compare import compare_recordings, twin_compare

    table = twin_compare(other_board, calibrated_preset(board(), other_board, scale="board"), tmp_path / "cmp")
    warm = table.loc[table[schema.CHECK_METRIC].str.startswith("warm-up energy")]
    assert len(warm) == 2 and (warm[schema.CHECK_METRIC] == "warm-up energy per launch, worst second from second 2 on").all()
    assert "warm-up rows start at second 2" in " ".join(table.attrs["not_compared"])
    twin = replay(schedule(), calibrate_board(board(), other_board), seed=0, poll_s=2e-3, start_temperature_c=40.0)
    whole, after = compare_recordings(other_board, twin), compare_recordings(other_board, twin, from_s=1.2)
    a, b = metrics.warmup_energy_per_launch(other_board, "gemm"), metrics.warmup_energy_per_launch(twin, "gemm")
    err = (b[schema.ENERGY_J].to_numpy() / a[schema.ENERGY_J].to_numpy() - 1) * 100
    assert after[schema.CHECK_ERROR].iloc[0] == pytest.approx(err[2:][np.argmax(np.abs(err[2:]))])
    assert whole[schema.CHECK_ERROR].iloc[0] == pytest.approx(err[np.argmax(np.abs(err))])
    assert whole[schema.CHECK_METRIC].iloc[0] == "warm-up energy per launch, worst second"


def test_a_recording_without_an_idle_entry_is_one_line(other_board):
    """No idle phase to read the board's idle power from: a one-line error naming the recording."""
    phases = other_board.phases
    no_idle = replace(other_board, phases=phases.loc[phases[schema.PHASE_KIND] != "idle"].reset_index(drop=True))
    with pytest.raises(ValueError, match="no idle entry") as err:
        calibrate_board(board(), no_idle)
    assert other_board.name in str(err.value) and "\n" not in str(err.value)


def test_a_workload_in_two_series_is_read_in_both():
    """Fails before: the second gemm series replaced the first one's reading without a word."""
    rows = [("thermal", "-", -1, "idle", 0.0, 5.0), ("thermal", "gemm", 0, "series", 5.0, 8.0),
            ("thermal", "-", -1, "idle", 8.0, 11.0), ("thermal", "gemm", 1, "series", 11.0, 14.0),
            ("thermal", "-", -1, "idle", 14.0, 16.0)]
    twice = pd.DataFrame(rows, columns=schedule().columns)
    rec = replay(twice, board(core_w_per_ghz=230.0 * 1.05, p0_w=19.0), seed=1, poll_s=2e-3, start_temperature_c=40.0)
    report = calibrate_board(board(), rec).fit["board_calibration"]
    gemm = report["series"]["gemm"]
    assert gemm["series_t0_s"] == pytest.approx([5.0, 11.0], abs=0.1)
    assert len(gemm["real_w"]) == len(gemm["ratios"]) == 2 and gemm["real_w"][1] != gemm["real_w"][0]
    assert gemm["ratio"] == pytest.approx(float(np.median(gemm["ratios"])))
    assert report["dynamic_scale"] == pytest.approx(1.05, abs=0.02)
    assert report["series_read_s"] == pytest.approx([0.2, 1.2])


#: the SCHEDULE with a natural part first: idle, then three short bursts of each workload
BURSTS = (("natural", "-", -1, "idle", 0.0, 5.0), ("natural", "gemm", 0, "burst", 5.0, 6.0),
          ("natural", "triad", 0, "burst", 6.5, 7.5), ("natural", "gemm", 1, "burst", 8.0, 9.0),
          ("natural", "triad", 1, "burst", 9.5, 10.5), ("natural", "gemm", 2, "burst", 11.0, 12.0),
          ("natural", "triad", 2, "burst", 12.5, 13.5), ("thermal", "-", -1, "idle", 13.5, 18.0),
          ("thermal", "gemm", 0, "series", 18.0, 22.0), ("thermal", "-", -1, "idle", 22.0, 26.0),
          ("thermal", "triad", 0, "series", 26.0, 30.0), ("thermal", "-", -1, "idle", 30.0, 32.0))


def test_domains_read_from_the_bursts_leave_every_series_second_out(tmp_path):
    """``read="bursts"`` (session 28's candidate (b)): the factors from the natural part's bursts, no series read."""
    from powermodels.twin.compare import twin_compare

    preset = board()
    ph = preset.physics
    other = replace(preset, physics=replace(ph, core_w_per_ghz=ph.core_w_per_ghz * 1.08,
                                            mem_w_per_ghz=ph.mem_w_per_ghz * 0.85))
    rec = replay(schedule(BURSTS), other, seed=2, poll_s=2e-3, start_temperature_c=40.0)
    cal = calibrate_board(preset, rec, scale="domains", read="bursts")
    report = cal.fit["board_calibration"]
    assert report["core_scale"] == pytest.approx(1.08, abs=0.02)
    assert report["memory_scale"] == pytest.approx(0.85, abs=0.04)
    assert report["series_read_s"] == [0.0, 0.0] and "bursts" in report["read"]
    assert [len(r["ratios"]) for r in report["series"].values()] == [3, 3]
    # the series' energy is never read: scaling it changes nothing
    en = rec.energy
    tampered = replace(rec, energy=en.assign(**{schema.ENERGY_COUNTER_J: np.where(
        en[schema.T_S] > 18.0, en[schema.ENERGY_COUNTER_J] * 1.05, en[schema.ENERGY_COUNTER_J])}))
    again = calibrate_board(preset, tampered, scale="domains", read="bursts").fit["board_calibration"]
    assert again["core_scale"] == pytest.approx(report["core_scale"], rel=1e-12)
    assert calibrate_board(preset, tampered, scale="domains").fit["board_calibration"]["core_scale"] != pytest.approx(
        report["core_scale"], rel=1e-3)  # the series' first second is what the default reads
    # no series second read: the comparison scores the warm-up from second 0 and says why
    table = twin_compare(rec, calibrated_preset(preset, rec, scale="domains", read="bursts"), tmp_path / "cmp",
                         cap_seeds=(0,))
    warm = table.loc[table[schema.CHECK_METRIC].str.startswith("warm-up energy")]
    assert (warm[schema.CHECK_METRIC] == "warm-up energy per launch, worst second").all()
    assert "no series read, so every warm-up second is held out" in " ".join(table.attrs["not_compared"])
    with pytest.raises(ValueError, match="no burst entry"):
        calibrate_board(preset, rec.__class__(rec.trace, rec.energy, rec.launches,
                                              rec.phases.loc[rec.phases[schema.PHASE_KIND] != "burst"],
                                              rec.provenance), read="bursts")
    with pytest.raises(ValueError, match="read must be one of series, bursts"):
        calibrate_board(preset, rec, read="natural")
