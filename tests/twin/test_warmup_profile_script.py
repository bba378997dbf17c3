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
    folders = []
    for k, (uuid, factor) in enumerate((("GPU-aaaa1111-x", 1.05), ("GPU-bbbb2222-y", 1.02))):
        real = replay(schedule(), board(), seed=1 + k, poll_s=2e-3, start_temperature_c=40.0)
        real.provenance["uuid"] = uuid
        folder = write_recording(real, tmp_path / f"rec{k}")
        # the "twin": the same board with more dynamic power, as a twin_unseen_boards.py label folder holds it
        write_recording(replay(schedule(), board(core_w_per_ghz=230.0 * factor), seed=1 + k, poll_s=2e-3,
                               start_temperature_c=40.0), tmp_path / "out" / "hot" / folder.name / "twin")
        write_recording(replay(schedule(), board(), seed=5 + k, poll_s=2e-3, start_temperature_c=40.0),
                        tmp_path / "out" / "same" / folder.name / "twin")
        folders.append(folder)
    table = script.profiles([("hot", tmp_path / "out" / "hot"), ("same", tmp_path / "out" / "same")], folders, "gemm")
    assert sorted(table["second"].unique()) == [0, 1, 2, 3]  # the gemm series runs 4 s
    assert set(table["board"]) == {"aaaa1111", "bbbb2222"}  # the board from the provenance, not the folder name
    hot = table.loc[table["label"] == "hot"]
    assert (hot["error_pct"] > 0.3).all() and (hot["error_pct"] < 5.0).all()  # more dynamic power, not constant
    high, low = (hot.loc[hot["board"] == b, "error_pct"] for b in ("aaaa1111", "bbbb2222"))
    assert high.min() > low.max()  # +5 % reads above +2 % at every second
    assert table.loc[table["label"] == "same", "error_pct"].abs().max() < 1.0
    summary = script.summary(table).set_index("label")
    assert summary.loc["hot", "boards"] == 2
    assert summary.loc["hot", "worst_second_median_abs_pct"] == pytest.approx((high.max() + low.max()) / 2)
    assert script.main([*map(str, folders), "--workload", "gemm", "--folder", "hot", str(tmp_path / "out" / "hot"),
                        "--plot", str(tmp_path / "p.png")]) == 0
    assert "| hot | 2 | 2 |" in capsys.readouterr().out and (tmp_path / "p.png").stat().st_size > 10_000


def test_the_capped_pieces_read_a_real_recording():
    from dataclasses import replace

    from benchmark_scripts import load_benchmark

    script = load_benchmark("twin_capped_pieces")
    path = Path(__file__).resolve().parents[2] / "datasets" / "h200-2026-11-29" / "raw_recording_a21da588"
    real = read_recording(path)
    # a "twin" whose NVML clock reads 2 % high everywhere and its power 4 W high: the readings say so, side by side
    trace = real.trace.copy()
    trace[schema.SM_CLOCK_MHZ] *= 1.02
    trace[schema.POWER_AVERAGE_W] += 4.0
    row = script.readings(real, replace(real, trace=trace))
    assert row["board"] == "a21da588"
    assert 1400 < row["real series MHz"] < 1600 and abs(row["real series/entries %"]) < 1.0  # real, session 22
    assert row["twin series MHz"] == pytest.approx(1.02 * row["real series MHz"])
    assert row["twin entries MHz"] == pytest.approx(1.02 * row["real entries MHz"])
    assert row["twin series W"] == pytest.approx(row["real series W"] + 4.0) and 680 < row["real series W"] < 700
    with_cycles, preset_cycles = (script.levels(str(path), "h200-raw-pooled", c) for c in (True, False))
    assert 0.97 < with_cycles[schema.PROBED_TIME_RATIO] < 1.03 and 1.0 < with_cycles[schema.CAP_CORE_SCALE] < 1.1
    # shorter launches at one clock need a lower clock for the same time: the factor differs with the cycles
    assert with_cycles[schema.CAP_CORE_SCALE] != pytest.approx(preset_cycles[schema.CAP_CORE_SCALE], abs=1e-4)
