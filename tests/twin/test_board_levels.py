"""Each board's level against a preset, and the preset moved to the median board (twin-made boards, known levels)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_calibration import board_levels, pooled_preset
from powermodels.twin import metrics
from powermodels.twin.replay import replay

from .test_twin_board import board, schedule

#: three boards of one model: (constant power W, dynamic-power factor, thermal-resistance factor)
BOARDS = {"GPU-low": (19.0, 0.96, 0.9), "GPU-mid": (25.0, 1.02, 1.0), "GPU-high": (33.0, 1.08, 1.2)}


def made_board(p0_w: float, factor: float, k: float, seed: int):
    b = board(core_w_per_ghz=230.0 * factor, p0_w=p0_w)
    ph = b.physics
    b = replace(b, physics=replace(ph, thermal_poles=tuple((r * k, tau) for r, tau in ph.poles)))
    return replay(schedule(), b, seed=seed, poll_s=2e-3, start_temperature_c=40.0)


@pytest.fixture(scope="module")
def recordings():
    recs = []
    for seed, (uuid, levels) in enumerate(BOARDS.items()):
        rec = made_board(*levels, seed=seed)
        rec.provenance["uuid"] = uuid
        recs.append(rec)
    return recs


@pytest.fixture(scope="module")
def levels(recordings):
    return board_levels(board(), recordings, thermal=False)


def test_levels_read_each_board(levels):
    per = levels.drop_duplicates(schema.RECORDING_NAME).set_index(schema.DEVICE_UUID)
    assert per[schema.DYNAMIC_SCALE].to_dict() == pytest.approx({u: v[1] for u, v in BOARDS.items()}, abs=0.02)
    # the constant power's order is the idle power's; one row per workload read
    assert per[schema.IDLE_AT_REF_W]["GPU-low"] < per[schema.IDLE_AT_REF_W]["GPU-mid"] < per[schema.IDLE_AT_REF_W]["GPU-high"]
    assert set(levels[schema.WORKLOAD]) == {"gemm", "triad"} and len(levels) == 6
    assert levels[schema.THERMAL_SCALE].isna().all()


def test_pooled_preset_is_the_median_board(levels):
    preset = board()
    pooled = pooled_preset(preset, levels, scale="board", thermal=False)
    mid = levels.loc[levels[schema.DEVICE_UUID] == "GPU-mid"].iloc[0]
    ph = pooled.physics
    assert ph.core_w_per_ghz == pytest.approx(230.0 * mid[schema.DYNAMIC_SCALE], rel=1e-9)
    assert float(ph.power_w(ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0], ph.t_ref_c)) == pytest.approx(
        mid[schema.IDLE_AT_REF_W], abs=1e-6)
    assert pooled.name == "b@median-of-3" and pooled.fit["pooled_boards"]["boards"] == sorted(BOARDS)
    # what no calibration reads stays the preset's
    assert ph.thermal_poles == preset.physics.thermal_poles and ph.leakage_per_c == preset.physics.leakage_per_c


def test_a_board_counts_once_however_many_recordings(levels):
    # the high board recorded five times must not pull the median up
    many = levels.copy()
    for i in range(4):
        more = levels.loc[levels[schema.DEVICE_UUID] == "GPU-high"].copy()
        more[schema.RECORDING_NAME] = f"again-{i}"
        many = pd.concat([many, more], ignore_index=True)
    once, five = (pooled_preset(board(), x, thermal=False).physics for x in (levels, many))
    assert five.core_w_per_ghz == pytest.approx(once.core_w_per_ghz) and five.p0_w == pytest.approx(once.p0_w)


def test_workload_scale_moves_activities_not_the_core(levels):
    preset = board()
    pooled = pooled_preset(preset, levels, scale="workload", thermal=False)
    assert pooled.physics.core_w_per_ghz == preset.physics.core_w_per_ghz
    ratio = pooled.fit["pooled_boards"]["activity_scale"]["gemm"]["ratio"]
    assert ratio == pytest.approx(1.02, abs=0.03)
    assert pooled.workload("gemm").workload.activity == pytest.approx(preset.workload("gemm").workload.activity * ratio)


def test_the_median_boards_replay_is_closer_to_a_left_out_board(recordings):
    # pooled from the two outer boards, the preset of a badly-placed board (the high one) moves towards the middle
    preset = board(core_w_per_ghz=230.0 * 1.08, p0_w=33.0)
    outer = board_levels(preset, [recordings[0], recordings[2]], thermal=False)
    pooled = pooled_preset(preset, outer, thermal=False)
    mid = metrics.warmup_energy_per_launch(recordings[1], "gemm", 4)[schema.ENERGY_J].to_numpy()[1:]
    error = {}
    for name, p in (("preset", preset), ("pooled", pooled)):
        tw = replay(schedule(), p, seed=1, poll_s=2e-3, start_temperature_c=40.0)
        energy = metrics.warmup_energy_per_launch(tw, "gemm", 4)[schema.ENERGY_J].to_numpy()[1:]
        error[name] = float(np.abs(energy / mid - 1).max())
    assert error["preset"] > 0.03
    assert error["pooled"] < error["preset"] / 2


def test_thermal_factor_is_pooled_where_read(levels):
    # the short schedule does not identify a board's resistance (NaN): nothing to pool, the poles stay
    unread = pooled_preset(board(), levels)
    assert unread.physics.thermal_poles == board().physics.thermal_poles
    assert unread.fit["pooled_boards"]["thermal_boards"] == 0
    # read on two boards of three: their median, every resistance times it, the time constants kept
    read = levels.copy()
    read[schema.THERMAL_SCALE] = read[schema.DEVICE_UUID].map({"GPU-low": 0.9, "GPU-mid": np.nan, "GPU-high": 1.3})
    pooled = pooled_preset(board(), read)
    assert pooled.fit["pooled_boards"]["thermal_scale"] == pytest.approx(1.1)
    assert [r for r, _ in pooled.physics.poles] == pytest.approx([r * 1.1 for r, _ in board().physics.poles])
    assert [t for _, t in pooled.physics.poles] == [t for _, t in board().physics.poles]


def test_bad_input_is_refused(levels):
    with pytest.raises(ValueError, match="scale must be"):
        pooled_preset(board(), levels, scale="boards")
    with pytest.raises(ValueError, match="no board levels"):
        pooled_preset(board(), levels.iloc[:0])
    with pytest.raises(ValueError, match="no recording"):
        board_levels(board(), [])


def test_shipped_pooled_h200_preset_is_reproduced_from_its_recordings():
    """``h200-raw-pooled`` (session 15) and ``-cap`` (16) are ``h200-raw`` moved to the median of the recordings they name."""
    from pathlib import Path

    from powermodels.recording import read_recording
    from powermodels.twin.preset import load_preset

    shipped = load_preset("h200-raw-pooled")
    root = Path(__file__).resolve().parents[2]
    paths = [root / p for p in shipped.provenance["pooled_from"]]
    if not all(p.is_dir() for p in paths):
        pytest.skip("the H200 recordings are not in this checkout")
    levels = board_levels("h200-raw", [read_recording(p) for p in paths], cap=True)
    again = pooled_preset("h200-raw", levels.drop(columns=[schema.CAP_CORE_SCALE]), scale="board",
                          name="h200-raw-pooled")
    assert len(shipped.fit["pooled_boards"]["boards"]) == 7
    for field in ("p0_w", "core_w_per_ghz", "mem_w_per_ghz"):
        assert getattr(again.physics, field) == pytest.approx(getattr(shipped.physics, field), rel=1e-9), field
    # h200-raw-pooled-cap (session 16): the same seven boards, and their settled capped clock's median too
    with_cap = load_preset("h200-raw-pooled-cap")
    assert with_cap.provenance["pooled_from"] == shipped.provenance["pooled_from"]
    again_cap = pooled_preset("h200-raw", levels, scale="board", name="h200-raw-pooled-cap")
    for field in ("p0_w", "core_w_per_ghz", "mem_w_per_ghz"):
        assert getattr(again_cap.physics, field) == pytest.approx(getattr(with_cap.physics, field), rel=1e-6), field
    assert {w: tw.workload.activity for w, tw in again_cap.workloads.items()} == pytest.approx(
        {w: tw.workload.activity for w, tw in with_cap.workloads.items()}, rel=1e-6)
    assert with_cap.fit["pooled_boards"]["cap_boards"] == 7
    assert np.ravel(again.physics.poles) == pytest.approx(np.ravel(shipped.physics.poles), rel=1e-9)
    # only the levels moved: the leakage slope, controller and sensor are h200-raw's
    raw = load_preset("h200-raw")
    assert shipped.physics.leakage_per_c == raw.physics.leakage_per_c and shipped.sensor == raw.sensor
    assert shipped.physics.cap_proportional == raw.physics.cap_proportional


def test_shipped_part_presets_are_reproduced_from_their_recordings():
    """``h200-raw-part-000`` and ``-001`` (session 17): ``h200-raw-pooled``'s boards, memory pooled per part number."""
    from pathlib import Path

    from powermodels.board_calibration import part_preset
    from powermodels.recording import read_recording
    from powermodels.twin.preset import load_preset

    root = Path(__file__).resolve().parents[2]
    shipped = {part: load_preset(f"h200-raw-part-{part}") for part in ("000", "001")}
    assert shipped["000"].provenance["pooled_from"] == load_preset("h200-raw-pooled").provenance["pooled_from"]
    paths = [root / p for p in shipped["000"].provenance["pooled_from"]]
    if not all(p.is_dir() for p in paths):
        pytest.skip("the H200 recordings are not in this checkout")
    recs = [read_recording(p) for p in paths]
    levels = board_levels("h200-raw", recs, cap=True, domains=True)
    for part, preset in shipped.items():
        again = pooled_preset("h200-raw", levels, scale="domains", memory_part=f"692-2G520-0282-{part}")
        for field in ("p0_w", "core_w_per_ghz", "mem_w_per_ghz"):
            assert getattr(again.physics, field) == pytest.approx(getattr(preset.physics, field), rel=1e-6), field
    # the memory differs by part, nothing else does
    a, b = (shipped[p].physics for p in ("000", "001"))
    assert b.mem_w_per_ghz / a.mem_w_per_ghz == pytest.approx(1.35, abs=0.05)
    assert a.core_w_per_ghz == b.core_w_per_ghz and a.thermal_poles == b.thermal_poles
    # each of the fitting recordings picks the preset of its own part
    picked = {rec.name: part_preset(rec, list(shipped.values())).name for rec in recs}
    assert picked["raw_recording_168e6658"] == "h200-raw-part-000"
    assert picked["raw_recording_ladder_25027b10"] == "h200-raw-part-001"
    assert sorted(picked.values()).count("h200-raw-part-000") == 4  # 168e6658, 1717480a, ef3dd380, c52dbede


def test_the_idle_versus_dynamic_script_reads_real_boards(capsys):
    from benchmark_scripts import load_benchmark

    folder = Path(__file__).resolve().parents[2] / "datasets" / "h200-2026-11-29"
    script = load_benchmark("board_idle_vs_dynamic")
    assert script.main([str(folder / "raw_recording_15b35cd8"), str(folder / "raw_recording_a21da588")]) == 0
    text = capsys.readouterr().out
    assert text.startswith("2 boards, 2 recordings (real)")
    assert "no part number has 3 boards" in text  # one board of each part: nothing to correlate
