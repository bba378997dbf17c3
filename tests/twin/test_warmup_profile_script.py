"""benchmarks/twin_warmup_profile.py and twin_capped_pieces.py: the warm-up error second by second (twin-made
recordings) and the capped workload's pieces (a real H200 recording)."""

from pathlib import Path

import pytest

from powermodels import schema
from powermodels.recording import read_recording, write_recording
from powermodels.twin.replay import replay

from .test_twin_board import board, schedule


def test_the_profile_reads_a_known_power_difference_second_by_second(tmp_path, capsys):
    from benchmark_scripts import load_benchmark

    script = load_benchmark("twin_warmup_profile")
    real = replay(schedule(), board(), seed=1, poll_s=2e-3, start_temperature_c=40.0)
    folder = write_recording(real, tmp_path / "rec")
    # the "twin": the same board with 5 % more dynamic power, as a twin_unseen_boards.py label folder holds it
    write_recording(replay(schedule(), board(core_w_per_ghz=230.0 * 1.05), seed=1, poll_s=2e-3,
                           start_temperature_c=40.0), tmp_path / "out" / "hot" / folder.name / "twin")
    write_recording(replay(schedule(), board(), seed=2, poll_s=2e-3, start_temperature_c=40.0),
                    tmp_path / "out" / "same" / folder.name / "twin")
    table = script.profiles([("hot", tmp_path / "out" / "hot"), ("same", tmp_path / "out" / "same")], [folder], "gemm")
    assert sorted(table["second"].unique()) == [0, 1, 2, 3]  # the gemm series runs 4 s
    hot = table.loc[table["label"] == "hot", "error_pct"]
    same = table.loc[table["label"] == "same", "error_pct"]
    assert (hot > 1.0).all() and (hot < 5.0).all()  # dynamic power +5 %, the constant power not
    assert same.abs().max() < 1.0
    summary = script.summary(table).set_index("label")
    assert summary.loc["hot", "worst_second_median_abs_pct"] == pytest.approx(hot.abs().max())
    assert script.main([str(folder), "--workload", "gemm", "--folder", "hot", str(tmp_path / "out" / "hot"),
                        "--plot", str(tmp_path / "p.png")]) == 0
    assert "| hot | 1 |" in capsys.readouterr().out and (tmp_path / "p.png").stat().st_size > 10_000


def test_the_capped_pieces_read_a_real_recording():
    from benchmark_scripts import load_benchmark

    script = load_benchmark("twin_capped_pieces")
    path = Path(__file__).resolve().parents[2] / "datasets" / "h200-2026-11-29" / "raw_recording_a21da588"
    real = read_recording(path)
    row = script.readings(real, real)  # the recording against itself: both sides read alike
    assert row["board"] == "a21da588" and row["real entries MHz"] == row["twin entries MHz"]
    assert 1400 < row["real series MHz"] < 1600 and abs(row["real series/entries %"]) < 1.0  # real, session 22
    assert 680 < row["real series W"] < 700
    level = script.levels(str(path), "h200-raw-pooled")
    assert 0.97 < level[schema.PROBED_TIME_RATIO] < 1.03 and 1.0 < level[schema.CAP_CORE_SCALE] < 1.1
