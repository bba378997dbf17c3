"""``gpu_wattchmen_transfer.py measure``: the never-run Hopper extras are tried in a child
process first, and one that faults is left out instead of losing the whole run."""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmark_scripts import load_benchmark

REPO = Path(__file__).resolve().parents[2]


def _script():
    return load_benchmark("gpu_wattchmen_transfer")


def test_a_faulting_extra_is_left_out_and_the_others_kept(monkeypatch):
    script = _script()
    calls = []

    def fake_run(cmd, **kw):
        code = cmd[-1]
        calls.append(code)
        faults = "'dmma_rand'" in code  # the batch with it, and it alone, fault
        return subprocess.CompletedProcess(cmd, 1 if faults else 0,
                                           stdout="" if faults else "finite\n",
                                           stderr="CUDA_ERROR_ILLEGAL_INSTRUCTION" if faults else "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    lines = []
    kept = script.preflight(["hgmma_f32", "dmma_rand", "ffma_rand"], lines.append)
    assert kept == ["hgmma_f32", "ffma_rand"]
    assert len(calls) == 4  # all together, then one by one
    assert any(line.startswith("WARNING: preflight dmma_rand failed (rc=1): CUDA_ERROR_ILLEGAL")
               for line in lines)
    assert all("forbid_nvml_setters()" in code for code in calls)  # the child is read-only too


def test_all_extras_that_launch_cost_one_child_process(monkeypatch):
    script = _script()
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, **kw: calls.append(cmd) or
                        subprocess.CompletedProcess(cmd, 0, stdout="finite\n", stderr=""))
    lines = []
    assert script.preflight(["hgmma_f32", "ffma_rand"], lines.append) == ["hgmma_f32", "ffma_rand"]
    assert len(calls) == 1 and lines == ["preflight hgmma_f32, ffma_rand: launched and "
                                         "synchronised cleanly (finite)"]


def test_analyze_joins_the_fresh_set_and_finds_the_power_limit(tmp_path):
    import json

    import pandas as pd

    script = _script()
    h200 = REPO / "datasets" / "h200"
    wl = script.held_out_workloads(h200)
    first = pd.read_parquet(h200 / "wattchmen_workloads.parquet")
    fresh = pd.read_parquet(h200 / "wattchmen_fresh_workloads.parquet")
    assert list(wl["workload"]) == [*first["workload"], *fresh["workload"]]
    ops = [c for c in wl.columns if c.startswith("op:")]
    assert not wl[ops].isna().any().any()  # an opcode one set lacks counts 0 in its rows
    # each set keeps its own static power (the fresh set ran on another card)
    assert wl["static_power_w"].nunique() == 2
    # the limit: the option first, else measure.json's info, else unknown
    assert script.power_limit(tmp_path, 650.0) == 650.0
    assert script.power_limit(tmp_path, None) is None
    (tmp_path / "measure.json").write_text(json.dumps({"info": {"power_limit_w": 700.0}}))
    assert script.power_limit(tmp_path, None) == 700.0
    (tmp_path / "measure.json").write_text(json.dumps({"info": {"gpu": "x"}}))
    assert script.power_limit(tmp_path, None) is None


def test_analyze_lets_the_cv_decide_whether_measurement_rows_are_used(tmp_path, monkeypatch):
    """Simulated GPU: the HGMMA group rows are used (they agree with the rest); irregular-memory
    rows whose energies contradict the other rows (tripled here) are held back by the CV."""
    import numpy as np

    from powermodels import schema
    from powermodels.instruction_energy import selection as sel
    from powermodels.instruction_energy.calibration import calibrate_instructions
    from powermodels.instruction_energy.diagnostics import with_operand_variants
    from powermodels.microbench.catalog import MEASUREMENT_ROWS
    from powermodels.microbench.simulated import SimulatedInstructionBackend

    script = _script()
    monkeypatch.setattr(sel, "INSTRUCTION_CANDIDATES", {"default": {}})
    monkeypatch.setattr(script, "SUMMARY", [])
    groups, irregular = MEASUREMENT_ROWS["hgmma groups"], MEASUREMENT_ROWS["irregular memory"]
    cal = calibrate_instructions(
        SimulatedInstructionBackend(hopper_extras=True), tmp_path / "cal",
        micro=["nanosleep", "ffma", "iadd3", "imad", "lop3", "ldg32_dram", "ldg128_dram",
               "stg32_dram", "hgmma_f32", "hgmma_f32_rand", *groups, *irregular],
        workloads=["sim"], say=lambda m: None)
    micro = with_operand_variants(cal.micro, "toggling")
    bad = micro[schema.WORKLOAD].isin(irregular)
    micro.loc[bad, schema.ENERGY_J] *= 3.0
    params, text, used = script.selection(micro, cal.workloads)
    assert params == {}
    names = set(used[schema.WORKLOAD])
    assert set(groups) <= names and not names & set(irregular)
    assert script.SUMMARY[-1]["held_back"] == list(irregular)
    assert "default, without irregular memory" in text and "held_back" in text
    assert np.isfinite(script.SUMMARY[-1]["heldout_mape_pct"])


def test_measure_on_the_simulated_gpu_takes_the_measurement_rows(tmp_path):
    """``measure --hopper-extras --device simulated``: every extra, the issue-26 rows included,
    is measured and profiled (the command the next GPU session runs, on the simulated backend)."""
    import pandas as pd

    from powermodels import schema
    from powermodels.microbench.catalog import HOPPER_MICROBENCHMARKS, MEASUREMENT_ROWS

    script = _script()
    out = tmp_path / "out"
    assert script.main(["measure", "--hopper-extras", "--device", "simulated",
                        "--counts-from", "none", "--out", str(out)]) == 0
    micro = pd.read_parquet(out / "wattchmen_microbench.parquet")
    names = set(micro[schema.WORKLOAD])
    assert set(HOPPER_MICROBENCHMARKS) <= names
    assert {n for rows in MEASUREMENT_ROWS.values() for n in rows} <= names
    rows = micro.set_index(schema.WORKLOAD)
    assert (rows.loc[list(MEASUREMENT_ROWS["irregular memory"]), schema.DRAM_SECTORS] > 0).all()
