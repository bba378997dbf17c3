"""benchmarks/repeat_as_twin.py: a board's repeat scored as a calibrated twin of its run, beside the twin's rows."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.twin.compare import warmup_metric

script = load_benchmark("repeat_as_twin")
REAL = Path(__file__).resolve().parents[2] / "datasets" / "h200-2026-11-30"


def _rows() -> pd.DataFrame:
    # two boards, two workloads: as measured 3 of 4 within 1 %, levelled 2 of 4
    return pd.DataFrame({schema.WORKLOAD: ["gemm", "triad", "gemm", "triad"],
                         schema.WORST_SCORED_DIFF_PCT: [0.5, -1.5, 0.9, 0.2],
                         schema.WORST_SCORED_DIFF_LEVELLED_PCT: [0.4, -0.8, 1.2, -1.1],
                         schema.WORST_COOLING_DIFF_C: [-2.0, 1.0, 3.0, -2.5],
                         "board": ["aaaa0000", "aaaa0000", "bbbb1111", "bbbb1111"],
                         "run": ["raw_recording_aaaa0000"] * 2 + ["raw_recording_bbbb1111"] * 2})


def test_summary_counts_each_workload_and_all_rows_against_one_per_cent():
    table = script.summary(_rows()).set_index("workload")
    assert table.loc["all", "rows"] == 4
    assert table.loc["all", "as measured: within 1 %"] == 3
    assert table.loc["all", "levelled at second 1: within 1 %"] == 2
    assert table.loc["gemm", "levelled median |worst| (%)"] == pytest.approx(0.8)
    assert table.loc["triad", "median |worst| (%)"] == pytest.approx(0.85)
    assert table.loc["all", "cooling within 2 °C"] == 2  # -2.0 and 1.0: the target's edge counts as within


def _twin_table() -> pd.DataFrame:
    # preset p: board aaaa0000's two workloads and board cccc2222 (no repeat); preset q: one row; a board-blind row of
    # p scored from second 0 that must not be taken; each warm-up row with its cooling row
    warm = pd.DataFrame({"preset": ["p", "p", "p", "q", "p"],
                         "board": ["aaaa0000", "aaaa0000", "cccc2222", "aaaa0000", "bbbb1111"],
                         "recording": ["raw_recording_aaaa0000"] * 2 + ["raw_recording_cccc2222",
                                                                         "raw_recording_aaaa0000",
                                                                         "raw_recording_bbbb1111"],
                         "metric": [warmup_metric(2)] * 4 + [warmup_metric(0)],
                         "workload": ["gemm", "triad", "gemm", "gemm", "gemm"], "error": [0.3, 1.4, 0.1, 9.0, 0.2],
                         "within": [True, False, True, False, True], "set": "run 1"})
    cooling = warm.iloc[:4].assign(metric="cooling temperature, worst second of 30 s", error=[-1.0, -3.0, 0.0, 0.0],
                                   within=[True, False, True, True])
    return pd.concat([warm, cooling], ignore_index=True)


def test_twin_side_reads_the_twins_calibrated_rows_on_the_same_runs_only(tmp_path):
    path = tmp_path / "rows.csv"
    _twin_table().to_csv(path, index=False)
    table = script.read_twin_rows([path])
    warm = script.twin_rows_on(_rows(), table, "p")
    # bbbb1111's row is scored from second 0 (board-blind): not beside a repeat scored from second 2
    assert set(warm["board"]) == {"aaaa0000"}
    side = script.twin_side(_rows(), warm, "p", script.twin_rows_on(_rows(), table, "p", metric="cooling"))
    side = side.set_index("on the same boards")
    # the twin has board aaaa0000 only: the repeat's side is cut to that board too
    assert side.loc["the repeat, levelled at second 1", "rows"] == 2
    assert side.loc["the repeat, levelled at second 1", "within 1 %"] == 2
    assert side.loc["the twin, p", "rows"] == 2
    assert side.loc["the twin, p", "within 1 %"] == 1
    assert side.loc["the twin, p", "median |worst| (%)"] == pytest.approx(0.85)
    assert side.loc["the repeat, levelled at second 1", "cooling within 2 °C"] == 2
    assert side.loc["the twin, p", "cooling within 2 °C"] == 1
    assert list(script.on_twin_boards(_rows(), warm)["board"]) == ["aaaa0000", "aaaa0000"]
    script.plot(_rows(), warm, "p", tmp_path / "fig.png")
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_twin_rows_refuse_a_row_given_twice_unless_one_set_is_chosen(tmp_path):
    path = tmp_path / "rows.csv"
    table = _twin_table()
    pd.concat([table, table.assign(set="repeats")], ignore_index=True).to_csv(path, index=False)
    with pytest.raises(SystemExit, match=r"more than once.*--twin-set"):
        script.twin_rows_on(_rows(), script.read_twin_rows([path]), "p")
    assert len(script.twin_rows_on(_rows(), script.read_twin_rows([path]), "p", set_part="run 1")) == 2
    with pytest.raises(SystemExit, match=r"no warm-up row of 'r'.*scored from second 2"):
        script.twin_rows_on(_rows(), script.read_twin_rows([path]), "r")
    table.drop(columns="set").to_csv(path, index=False)
    with pytest.raises(SystemExit, match="no set column"):
        script.twin_rows_on(_rows(), script.read_twin_rows([path]), "p", set_part="run 1")


def test_the_twins_rows_need_their_preset(capsys):
    with pytest.raises(SystemExit):
        script.main(["--pair", "A", "B", "--twin-rows", "rows.csv"])
    assert "--twin-rows and --twin-preset go together" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        script.main(["--pair", "A", "B", "--twin-set", "run 1"])
    assert "--twin-set needs --twin-rows" in capsys.readouterr().err


def test_a_real_board_and_its_repeat_give_a_row_per_workload_and_two_boards_are_refused():
    run, repeat = str(REAL / "raw_recording_deeee79b"), str(REAL / "raw_recording_repeat_deeee79b")
    rows = script.score_pairs([(run, repeat)])
    assert sorted(rows[schema.WORKLOAD]) == ["cupy_fma_loop", "cupy_fp32_matmul_4096", "cupy_triad_256MiB",
                                             "torch_bf16_matmul_8192"]
    assert set(rows["board"]) == {"deeee79b"}
    # session 33: this board's repeat stays within 1.2 % of its run at every scored second (real)
    assert np.all(np.isfinite(rows[schema.WORST_SCORED_DIFF_LEVELLED_PCT]))
    assert rows[schema.WORST_SCORED_DIFF_PCT].abs().max() < 1.2
    assert rows[schema.WORST_COOLING_DIFF_C].abs().max() <= 3
    with pytest.raises(SystemExit, match="a pair is one board twice"):
        script.score_pairs([(run, str(REAL / "raw_recording_10c33659"))])
