"""DVFS feature workflow: the H200 dataset's features are reproduced from its raw files and sources."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from powermodels.cli import main
from powermodels.microbench import sass
from powermodels.workflows.dvfs_features import runtime_table, static_features

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "datasets" / "h200"


def test_runtime_table_from_the_h200_ncu_output_equals_the_committed_features():
    for name in ("dvfs_ncu_raw.csv.gz", "dvfs_features_plan.json", "dvfs_runtime_features.csv"):
        if not (DATA / name).exists():
            pytest.skip(f"{name} is absent")
    plan = json.loads((DATA / "dvfs_features_plan.json").read_text())
    with gzip.open(DATA / "dvfs_ncu_raw.csv.gz", "rt") as f:
        table = runtime_table(f.read(), plan["workloads"])
    # through CSV, as the benchmark wrote it
    table = pd.read_csv(io.StringIO(table.to_csv(index=False)))
    pd.testing.assert_frame_equal(table, pd.read_csv(DATA / "dvfs_runtime_features.csv"))


needs_nvcc = pytest.mark.skipif(sass.find_tool("nvcc") is None, reason="nvcc is not installed")


@needs_nvcc
def test_ptx_features_of_a_registry_source_equal_the_h200_dataset():
    problems: list[str] = []
    ptx = static_features([REPO / "kernels" / "fp32.cu"], problems, root=REPO)
    assert not problems
    ref = pd.read_csv(DATA / "dvfs_ptx_features.csv")
    ref = ref[ref["source"] == "kernels/fp32.cu"].reset_index(drop=True)
    assert len(ptx) == len(ref) == 1
    # the dataset's columns are the union over all sources: absent instructions are 0
    assert set(ptx.columns) <= set(ref.columns)
    pd.testing.assert_frame_equal(ptx.reindex(columns=ref.columns, fill_value=0.0), ref,
                                  check_dtype=False)


@needs_nvcc
def test_command_ptx_only_and_a_broken_source_is_a_problem_not_a_crash(tmp_path, capsys):
    bad = tmp_path / "bad.cu"
    bad.write_text('extern "C" __global__ void k(float* x) { x[0] = undefined_name; }')
    assert main(["dvfs-features", "--out", str(tmp_path / "o"), "--ptx-only",
                 "--source", str(REPO / "kernels" / "stream.cu"), "--source", str(bad)]) == 0
    out = capsys.readouterr().out
    assert "PTX features: 2 kernels from 1 sources" in out and "problem: PTX of bad.cu" in out
    meta = json.loads((tmp_path / "o" / "meta.json").read_text())
    assert len(meta["problems"]) == 1 and (tmp_path / "o" / "ptx_features.csv").is_file()
    assert main(["dvfs-features", "--out", str(tmp_path / "o"), "--source", "missing.cu"]) != 0
