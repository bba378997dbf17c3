"""``powermodels calibrate-instructions`` on the simulated GPU and from the committed H200 raw files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from powermodels.cli import main

REPO = Path(__file__).resolve().parents[2]
H200 = REPO / "datasets" / "h200"
FEW = "ffma,fadd,lds32,dfma,imad,ldg32_l2,ldg128_dram,stg128_dram,hmma_f32,shfl_bfly,mufu_ex2"


def test_simulated_calibration_then_transfer(tmp_path, capsys):
    assert main(["calibrate-instructions", "--device", "simulated", "--out", str(tmp_path / "a"),
                 "--only", FEW, "--workloads", "sim"]) == 0
    out = capsys.readouterr().out
    assert "fit on 12 microbenchmarks" in out and "| sim_gemm |" in out
    assert main(["calibrate-instructions", "--device", "simulated", "--preset", "sim-hopper-b",
                 "--out", str(tmp_path / "b"), "--transfer-from",
                 str(tmp_path / "a" / "instructions.pmcal"), "--fraction", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "transferred: slope" in out
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["transfer"]["method"] == "rows" and summary["microbenchmarks"] == 7


def test_from_raw_reproduces_the_h200_benchmark_table(tmp_path, capsys):
    if not (H200 / "wattchmen_measure.json").exists():
        pytest.skip("datasets/h200 is absent")
    assert main(["calibrate-instructions", "--out", str(tmp_path), "--from-raw", str(H200)]) == 0
    out = capsys.readouterr().out
    # the rows of benchmarks/results/wattchmen.md (gpu_wattchmen.py analyze)
    assert "fit on 63 microbenchmarks: 79 opcode features, rank 63" in out
    assert "direct MAPE 24.7 %, extended MAPE 11.7 % over 13" in out
    assert "| cublas_sgemm_4096 | 1.858 | 1.276 | 31.34 | 1.395 | 24.94 |" in out


def test_bad_arguments_are_one_line_errors(tmp_path, capsys):
    assert main(["calibrate-instructions", "--device", "simulated", "--out", str(tmp_path),
                 "--only", "nope"]) != 0
    assert "unknown microbenchmarks ['nope']" in capsys.readouterr().err
    assert main(["calibrate-instructions", "--out", str(tmp_path), "--from-raw",
                 str(tmp_path / "missing")]) != 0
    assert "lacks measure.json" in capsys.readouterr().err
