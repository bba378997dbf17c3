"""benchmarks/twin_clean_set.py: the H200 twin's headline figures gathered from the sessions' kept rows."""

from pathlib import Path

import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.twin.compare import warmup_metric

script = load_benchmark("twin_clean_set")


def test_the_kept_rows_give_session_33s_headline_figures():
    # real boards against their twins (the rows each session kept): docs/twin.md's figures as of session 33
    rows = script.gather(Path(__file__).resolve().parents[2] / "benchmarks" / "results")
    table = script.headline(rows).set_index("label")
    assert rows[script.BOARD].nunique() == 31
    recommended = table.loc[script.RECOMMENDED_ROW]
    assert (recommended["boards"], recommended["warm-up rows"], recommended["within 1 %"]) == (31, 124, 89)
    assert recommended["median |worst second| (%)"] == pytest.approx(0.786)
    assert table.loc[script.PART, "within 1 %"] == 18
    assert table.loc[script.PART, "median |worst second| (%)"] == pytest.approx(1.944)
    assert table.loc[script.CAP_RATE, "boards"] == 26
    assert script.per_workload(rows, script.RECOMMENDED_ROW)["rows"].tolist() == [31, 31, 31, 31]


def _rows(session_set: str, preset: str, boards: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"preset": preset, "board": boards, "recording": [f"raw_recording_{b}" for b in boards],
                         schema.CHECK_METRIC: warmup_metric(2), schema.WORKLOAD: "gemm",
                         schema.CHECK_ERROR: 0.5, schema.CHECK_WITHIN: True, "set": session_set})


def test_a_board_scored_twice_under_one_label_is_refused_and_unprobed_boards_keep_the_label_without_cap(
        tmp_path, monkeypatch):
    table = pd.concat([_rows("first batch", script.RECOMMENDED, ["aaaa0000", "bbbb1111"]),
                       _rows("cap batch", script.CAP_RATE, ["aaaa0000"]).assign(**{schema.CHECK_ERROR: 2.0,
                                                                                    schema.CHECK_WITHIN: False})])
    table.to_csv(tmp_path / "twin_unseen_rows_h200_session40.csv", index=False)
    monkeypatch.setattr(script, "SOURCES", {script.RECOMMENDED: ((40, "first"),), script.CAP_RATE: ((40, "cap"),)})
    rows = script.gather(tmp_path)
    recommended = rows[rows[script.PRESET] == script.RECOMMENDED_ROW].set_index(script.BOARD)
    # the probed board takes its :cap-rate row, the other keeps the row without the cap calibration
    assert recommended.loc["aaaa0000", schema.CHECK_ERROR] == 2.0
    assert recommended.loc["bbbb1111", schema.CHECK_ERROR] == 0.5
    monkeypatch.setattr(script, "SOURCES", {script.RECOMMENDED: ((40, "first"), (40, "first"))})
    with pytest.raises(SystemExit, match="scored twice under one label"):
        script.gather(tmp_path)
    monkeypatch.setattr(script, "SOURCES", {script.PART: ((40, "first"),)})
    with pytest.raises(SystemExit, match="no row of 'part:"):
        script.gather(tmp_path)
    monkeypatch.setattr(script, "SOURCES", {script.PART: ((41, "first"),)})
    with pytest.raises(SystemExit, match=r"session41\.csv: missing"):
        script.gather(tmp_path)
