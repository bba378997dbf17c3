"""The capped-start row's resolution (powermodels.cap_start_spread): synthetic starts and one real recording."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import cap_start_spread, schema
from powermodels.recording import read_recording

REAL = Path(__file__).resolve().parents[2] / "datasets" / "h200-2026-11-29" / "capstarts_rests15_15b35cd8"


def _starts(boards: dict[str, list[float]], column: str = schema.OVERSHOOT_W) -> pd.DataFrame:
    return pd.DataFrame([{schema.DEVICE_UUID: b, column: v} for b, values in boards.items() for v in values])


def test_a_board_whose_starts_agree_is_always_met_and_a_scattered_one_is_not():
    starts = _starts({"tight": [10.0] * 6, "wide": [1.0, 4.0, 9.0, 15.0, 22.0]})
    out = cap_start_spread.median_ceiling(starts, draws=500).set_index(schema.DEVICE_UUID)
    assert out.loc["tight", schema.PERFECT_TWIN_CHANCE] == 1.0
    assert out.loc["wide", schema.PERFECT_TWIN_CHANCE] < 0.6
    assert out.loc["wide", schema.BOARD_MEDIAN] == 9.0 and out.loc["wide", schema.START_COUNT] == 5


def test_both_rows_at_once_are_met_no_more_often_than_either():
    rng = np.random.default_rng(3)
    starts = pd.DataFrame({schema.DEVICE_UUID: "a", schema.OVERSHOOT_W: rng.gamma(2.0, 4.0, size=8),
                           schema.SETTLING_S: rng.choice([0.0, 1.1, 2.1], size=8)})
    both = cap_start_spread.joint_ceiling(starts, draws=800)[schema.PERFECT_TWIN_CHANCE].iloc[0]
    each = [cap_start_spread.median_ceiling(starts, c, draws=800)[schema.PERFECT_TWIN_CHANCE].iloc[0] for c in cap_start_spread.SCORED]
    assert 0 < both <= min(each) + 0.03  # different resamples: allow their sampling noise
    steady = starts.assign(**{schema.OVERSHOOT_W: 9.0, schema.SETTLING_S: 1.1})
    assert cap_start_spread.joint_ceiling(steady, draws=100)[schema.PERFECT_TWIN_CHANCE].iloc[0] == 1.0


def test_more_starts_pin_the_median_better():
    rng = np.random.default_rng(1)
    starts = _starts({f"b{i}": list(rng.gamma(2.0, 4.0, size=8)) for i in range(6)})
    out = cap_start_spread.ceiling_by_starts(starts, counts=(3, 40), draws=2000)
    assert out[schema.PERFECT_TWIN_CHANCE].iloc[0] < 0.6 < out[schema.PERFECT_TWIN_CHANCE].iloc[1]
    assert out[schema.BOARDS_POOLED].iloc[0] == 6 and out[schema.STARTS_POOLED].iloc[0] == 48


def test_the_pooled_guess_leaves_the_board_out():
    starts = _starts({"a": [10.0, 10.0], "b": [12.0, 12.0], "c": [30.0, 30.0]})
    out = cap_start_spread.pooled_guess(starts).set_index(schema.DEVICE_UUID)
    assert out.loc["a", schema.OTHER_BOARDS_MEDIAN] == pytest.approx(21.0)  # median of b and c's starts
    assert out.loc["c", schema.OTHER_BOARDS_MEDIAN] == pytest.approx(11.0)
    assert out.loc["c", schema.CHECK_ERROR] == pytest.approx(11.0 / 30.0 - 1.0)
    assert not out[schema.CHECK_WITHIN].any()


def test_between_boards_tells_a_shared_spread_from_distinct_boards():
    rng = np.random.default_rng(2)
    shared = _starts({f"b{i}": list(rng.normal(10.0, 3.0, size=10)) for i in range(5)})
    apart = _starts({f"b{i}": list(rng.normal(10.0 * (i + 1), 0.5, size=10)) for i in range(5)})
    same, differ = cap_start_spread.between_boards(shared), cap_start_spread.between_boards(apart)
    assert same["kruskal_p"] > 0.05 and same["between_share"] < 0.2
    assert differ["kruskal_p"] < 1e-6 and differ["between_share"] > 0.95
    assert differ["boards"] == 5 and differ[schema.START_COUNT] == 50


def test_settling_is_scored_with_its_floor():
    # a start that never leaves the band reads 0 s; against 0.05 s both are the window's 0.1 s step
    assert cap_start_spread.relative_error(schema.SETTLING_S, 0.0, 0.05) == 0.0
    assert cap_start_spread.relative_error(schema.OVERSHOOT_W, 8.0, 10.0) == pytest.approx(0.25)
    starts = _starts({"a": [0.0, 0.0, 0.0], "b": [1.1, 1.0, 1.1]}, schema.SETTLING_S)
    out = cap_start_spread.pooled_guess(starts, schema.SETTLING_S).set_index(schema.DEVICE_UUID)
    assert out.loc["a", schema.CHECK_ERROR] == pytest.approx(10.0)  # 1.1 s against the 0.1 s floor


def test_bad_input_says_what_is_wrong():
    starts = _starts({"a": [1.0, 2.0]})
    with pytest.raises(ValueError, match="one of"):
        cap_start_spread.median_ceiling(starts, schema.SETTLED_W)
    with pytest.raises(ValueError, match="tolerance"):
        cap_start_spread.median_ceiling(starts, tolerance=0)
    with pytest.raises(ValueError, match="board_starts"):
        cap_start_spread.pooled_guess(pd.DataFrame({schema.OVERSHOOT_W: [1.0]}))
    with pytest.raises(ValueError, match="two boards"):
        cap_start_spread.between_boards(starts)
    with pytest.raises(ValueError, match="3 or more starts"):
        cap_start_spread.ceiling_by_starts(starts)
    with pytest.raises(ValueError, match="no recordings"):
        cap_start_spread.board_starts([])


def test_board_starts_reads_a_real_capstarts_recording():
    rec = read_recording(REAL)
    starts = cap_start_spread.board_starts([rec])
    assert len(starts) == 7  # seven starts after 15 s rests (datasets/h200-2026-11-29/README.md, session 21)
    assert set(starts[schema.DEVICE_UUID]) == {"GPU-15b35cd8-903a-d77c-6f64-bbe776fe9416"}
    assert starts[schema.WORKLOAD].unique().tolist() == ["torch_bf16_matmul_8192"]
    assert starts[schema.OVERSHOOT_W].median() == pytest.approx(6.17, abs=0.01)
    rec.provenance = {k: v for k, v in rec.provenance.items() if k != "uuid"}
    with pytest.raises(ValueError, match="UUID"):
        cap_start_spread.board_starts([rec])
    with pytest.raises(ValueError, match="no series of 'cupy_triad_256MiB'"):
        cap_start_spread.board_starts([read_recording(REAL)], workload="cupy_triad_256MiB")


def test_a_series_that_never_reached_the_cap_is_refused():
    raw = read_recording(REAL.parent / "raw_recording_15b35cd8")  # the same board's raw recording
    with pytest.raises(ValueError, match="no power-capped series of 'cupy_fp32_matmul_4096'"):
        cap_start_spread.board_starts([raw], workload="cupy_fp32_matmul_4096")


def test_the_script_tables_two_real_boards_and_draws_the_figure(tmp_path, capsys):
    from benchmark_scripts import load_benchmark

    script = load_benchmark("cap_start_spread")
    other = REAL.parent / "capstarts_rests15_c0b62778"
    assert script.main([str(REAL), str(other), "--out", str(tmp_path), "--plot", str(tmp_path / "spread.png")]) == 0
    text = capsys.readouterr().out
    assert "14 starts on 2 boards (real)" in text and "Kruskal–Wallis" in text
    boards = pd.read_csv(tmp_path / "boards.csv")
    assert sorted(boards[schema.DEVICE_UUID]) == ["15b35cd8", "c0b62778"]
    assert boards[script.BOTH].between(0, 1).all()
    assert (tmp_path / "spread.png").stat().st_size > 10_000
    # one board's starts, even from two recordings: no spread between boards to read; said so, no traceback
    assert script.main([str(REAL), str(REAL)]) == 2
    err = capsys.readouterr().err
    assert "one board" in err and "Traceback" not in err


def test_the_board_scores_script_pools_its_boards():
    from benchmark_scripts import load_benchmark

    script = load_benchmark("twin_cap_board_scores")
    real = {"a": pd.DataFrame({schema.OVERSHOOT_W: [4.0, 6.0, 8.0], schema.SETTLING_S: [1.1, 1.1, 0.0]}),
            "b": pd.DataFrame({schema.OVERSHOOT_W: [10.0, 12.0], schema.SETTLING_S: [1.0, 2.1]})}
    twin = pd.DataFrame({schema.OVERSHOOT_W: [7.0, 9.0, 11.0], schema.SETTLING_S: [1.1, 1.1, 1.1]})
    per_board = pd.DataFrame({"overshoot_err": [0.1, -0.3], "settling_err": [0.0, 0.0]})
    row = script.pooled_row("p", twin, real, per_board)
    assert row["overshoot_real_w"] == 8.0 and row["overshoot_twin_w"] == 9.0  # medians over every start
    assert row["overshoot_err"] == pytest.approx(0.125) and row["settling_err"] == 0.0
    assert row["boards"] == 2 and row["starts"] == 5 and row["boards_within_both"] == 1


def test_the_held_out_pool_reads_kept_twin_starts_against_the_boards_recordings(tmp_path, capsys):
    from benchmark_scripts import load_benchmark

    script = load_benchmark("cap_held_out_pooled")
    assert script.board_label("GPU-15b35cd8-903a-d77c-6f64-bbe776fe9416") == "15b35cd8"
    # the twin at each board's real median (6.17 W, 1.1 s): within on both rows; 20 % low on the other board
    twin = pd.DataFrame({"preset": ["p"] * 4, "board": ["15b35cd8", "15b35cd8", "c0b62778", "c0b62778"],
                         schema.OVERSHOOT_W: [6.169, 6.169, 7.184 * 0.8, 7.184 * 0.8],
                         schema.SETTLING_S: [1.1, 1.1, 1.1, 1.1]})
    twin.to_csv(tmp_path / "twin.csv", index=False)
    other = REAL.parent / "capstarts_rests15_c0b62778"
    unrelated = REAL.parents[1] / "h200-2026-11-28" / "capstarts_rests15_3df23f50"  # a board not in the table
    assert script.main([str(tmp_path / "twin.csv"), "--real", str(REAL), str(other), str(unrelated)]) == 0
    text = capsys.readouterr().out
    assert "2 held-out boards, 14 real starts" in text
    assert "| p | 2 | 14 |" in text and text.rstrip().endswith("| 2 |")  # both boards within both rows
    with pytest.raises(SystemExit):  # a board of the table without its recording is refused
        script.main([str(tmp_path / "twin.csv"), "--real", str(REAL)])
    twin.iloc[:2].assign(preset="q").pipe(lambda q: pd.concat([twin, q])).to_csv(tmp_path / "gap.csv", index=False)
    with pytest.raises(SystemExit):  # and so is a preset not replayed on every board (q lacks c0b62778)
        script.main([str(tmp_path / "gap.csv"), "--real", str(REAL), str(other)])
    assert "no twin starts of q on c0b62778" in capsys.readouterr().err


def test_the_starts_plot_takes_a_set_without_its_twin_folder(tmp_path, capsys):
    """``--set LABEL RECORDING`` (the twin's folder optional, as its help says): fails before with a TypeError."""
    from benchmark_scripts import load_benchmark

    script = load_benchmark("cap_starts_plot")
    assert script.main(["--set", "one", str(REAL), "--out", str(tmp_path / "sub" / "starts.png")]) == 0
    assert "one: " in capsys.readouterr().out and (tmp_path / "sub" / "starts.png").stat().st_size > 10_000
