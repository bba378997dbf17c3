"""Per-instruction calibration workflow: equality with the H200 benchmark, end to end on the simulator."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.io import load_calibration
from powermodels.microbench.simulated import PRESETS, SimulatedInstructionBackend
from powermodels.instruction_energy.calibration import (
    calibrate_instructions,
    evaluate_instruction_model,
)
from powermodels.instruction_energy.tables import rebuild_tables

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "datasets" / "h200"
RESULTS = REPO / "benchmarks" / "results"


def _need(*paths):
    for p in paths:
        if not p.exists():
            pytest.skip(f"{p} is absent")


@pytest.mark.parametrize("record, opcodes, sectors, table, which", [
    ("wattchmen_measure.json", "ncu_raw.csv.gz", "ncu_sectors.csv.gz",
     "wattchmen_microbench.parquet", 0),
    ("wattchmen_measure.json", "ncu_raw.csv.gz", "ncu_sectors.csv.gz",
     "wattchmen_workloads.parquet", 1),
    ("wattchmen_fresh_measure.json", "ncu_fresh_raw.csv.gz", "ncu_fresh_sectors.csv.gz",
     "wattchmen_fresh_workloads.parquet", 1),
])
def test_tables_rebuilt_from_the_h200_raw_files_equal_the_committed_ones(record, opcodes, sectors,
                                                                         table, which):
    _need(DATA / record, DATA / table)
    built = rebuild_tables(DATA / record, DATA / opcodes, DATA / sectors)[which]
    pd.testing.assert_frame_equal(built, pd.read_parquet(DATA / table))


@pytest.mark.parametrize("table, results", [("wattchmen_workloads.parquet", "wattchmen"),
                                            ("wattchmen_fresh_workloads.parquet", "wattchmen_fresh")])
def test_workflow_fit_gives_the_benchmark_results_on_h200(table, results):
    """Same fit on the same data: the MAPEs and coverages benchmarks/gpu_wattchmen.py recorded."""
    _need(DATA / "wattchmen_microbench.parquet", DATA / table, RESULTS / f"{results}.json")
    micro = pd.read_parquet(DATA / "wattchmen_microbench.parquet")
    per, summary = evaluate_instruction_model(micro, pd.read_parquet(DATA / table))
    recorded = json.loads((RESULTS / f"{results}.json").read_text())
    for key in ("direct_mape_pct", "extended_mape_pct", "direct_coverage_pct",
                "extended_coverage_pct"):
        assert summary[key] == pytest.approx(recorded[key], abs=1e-9), key
    model = summary["extended_model"]
    assert (len(model.energies_), model.rank_) == (79, 63)
    assert model.static_power_w_ == pytest.approx(141.7, abs=0.05)
    assert len(per) == summary["n_workloads"]


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal")
    lines = []
    cal = calibrate_instructions(SimulatedInstructionBackend(noise=0.002, seed=3), out,
                                 workloads=["sim"], say=lines.append)
    return cal, out, lines


def test_simulated_calibration_writes_every_file_and_predicts_workloads(simulated):
    cal, out, lines = simulated
    for name in ("measure.json", "ncu_raw.csv.gz", "ncu_sectors.csv.gz", "summary.json",
                 "instructions_microbench.parquet", "instructions_workloads.parquet",
                 "instructions.pmcal", "calibrate_log.txt"):
        assert (out / name).is_file(), name
    assert len(cal.micro) == 63 and len(cal.workloads) == 4
    assert cal.summary["extended_mape_pct"] < 3.0
    assert any("validation workloads" in ln for ln in lines)
    # the static power is the NANOSLEEP benchmark's (constant + static, from the data)
    assert cal.model.static_power_w_ == pytest.approx(PRESETS["sim-hopper-a"].static_power_w, rel=0.02)
    loaded = load_calibration(out / "instructions.pmcal")
    np.testing.assert_allclose(loaded.predict(cal.workloads.drop(columns=[schema.POWER_W])),
                               cal.model.predict(cal.workloads.drop(columns=[schema.POWER_W])))


def test_simulated_calibration_recovers_identifiable_energies(simulated):
    cal = simulated[0]
    truth = PRESETS["sim-hopper-a"].energies_j
    fitted = cal.model.energies_[cal.model.identifiable_]
    ops = [op for op in fitted.index if op in truth and truth[op] > 100e-12]
    assert len(ops) >= 25
    err = np.array([abs(fitted[op] - truth[op]) / truth[op] for op in ops])
    # the loop's IADD3/ISETP/BRA are in every benchmark: their share shifts every energy a little
    assert np.median(err) < 0.15


def test_resume_keeps_measured_items_and_tables_are_rebuildable(simulated, tmp_path):
    cal, out, _ = simulated
    again = calibrate_instructions(SimulatedInstructionBackend(noise=0.5, seed=9), out,
                                   workloads=["sim"], resume=True, say=lambda m: None)
    # nothing re-measured: the noisy backend would have changed the powers
    assert again.record["micro"] == cal.record["micro"]
    micro, wl = rebuild_tables(out / "measure.json", out / "ncu_raw.csv.gz", out / "ncu_sectors.csv.gz")
    pd.testing.assert_frame_equal(micro, cal.micro)
    pd.testing.assert_frame_equal(wl, cal.workloads)


def test_bad_input_names_the_problem(tmp_path):
    with pytest.raises(ValueError, match="unknown microbenchmarks"):
        calibrate_instructions(SimulatedInstructionBackend(), tmp_path, micro=["nope"],
                               say=lambda m: None)
    with pytest.raises(ValueError, match="preset"):
        SimulatedInstructionBackend(preset="gtx480")


@pytest.mark.parametrize("name", ["hgmma_f32", "ffma_rand", "dmma_rand", "hgmma_f32_rand"])
def test_hopper_extras_compile_to_their_targets_and_are_fitted(tmp_path, name):
    from powermodels.microbench import sass
    from powermodels.microbench.catalog import HOPPER_MICROBENCHMARKS

    m = HOPPER_MICROBENCHMARKS[name]
    if all(sass.find_tool(t) for t in ("nvcc", "cuobjdump", "nvdisasm")):
        code = sass.disassemble(sass.compile_cubin(m.path, tmp_path / "x.cubin", arch=m.arch))
        ops = sass.count_static_opcodes(code, m.kernel)
        assert ops[m.targets[0]] >= 32 and all(t in ops for t in m.targets), ops.most_common(8)
        # the target is the kernel's most common instruction (static count; the 32 FADDs of
        # the HGMMA kernels are the epilogue's sum of the accumulators, outside the loop)
        rest = [c for op, c in ops.items() if op not in (*m.targets, "NOP", "UMOV", "FADD")]
        assert ops[m.targets[0]] >= max(rest), ops.most_common(8)
    cal = calibrate_instructions(
        SimulatedInstructionBackend(hopper_extras=True), tmp_path / "cal",
        micro=["ffma", "iadd3", "hmma_f32", "dmma", name, "lds32"], say=lambda m: None)
    assert name in set(cal.micro[schema.WORKLOAD])
    assert m.targets[0] in cal.model.energies_.index


def test_real_backend_runs_ncu_with_clock_control_none(tmp_path):
    """The real backend's ncu calls leave clocks alone (checked with a stand-in ncu)."""
    import stat

    from powermodels.microbench.gpu import CupyNcuBackend, MeasureSettings, counter_slope

    log = tmp_path / "calls.txt"
    fake = tmp_path / "ncu"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\necho \'"ID","Kernel Name"\'\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    CupyNcuBackend._run_ncu(str(fake), ["m1", "m2"], plan, True, lambda m: None, instances=True)
    first, second = log.read_text().splitlines()
    assert first.startswith("--clock-control none --nvtx --nvtx-include pm/ --metrics m1,m2")
    assert "-m powermodels.microbench.gpu --plan" in first
    assert second.startswith("-i ") and "--print-metric-instances details" in second
    with pytest.raises(ValueError, match="window_s"):
        MeasureSettings(window_s=0)
    # counter slope: 1 J per 0.1 s between update edges = 10 W
    samples = [(0.01 * i, 1000.0 * (i // 10)) for i in range(100)]
    assert counter_slope(samples, 0.0, 1.0) == pytest.approx(10.0)
    assert np.isnan(counter_slope(samples[:5], 0.0, 1.0))


def _measure_only(backend, out, resume, lines):
    from powermodels.instruction_energy.calibration import measure_energy

    return measure_energy(backend, out, ["fadd", "nanosleep"], resume=resume, say=lines.append)


def test_resume_on_another_preset_is_refused_naming_it(tmp_path):
    """Issue 25 #3: --resume --preset sim-hopper-b reused sim-hopper-a's measurements without a word."""
    lines = []
    first = _measure_only(SimulatedInstructionBackend("sim-hopper-a"), tmp_path, False, lines)
    with pytest.raises(ValueError, match=r"measured on another device \(gpu 'Simulated sim-hopper-a' -> "
                                         r"'Simulated sim-hopper-b'.*run without --resume"):
        _measure_only(SimulatedInstructionBackend("sim-hopper-b"), tmp_path, True, lines)
    assert json.loads((tmp_path / "measure.json").read_text())["micro"] == first["micro"]
    fresh = _measure_only(SimulatedInstructionBackend("sim-hopper-b"), tmp_path, False, lines)
    assert fresh["info"]["gpu"] == "Simulated sim-hopper-b"


@pytest.mark.parametrize("damage", ["truncate", "empty", "list", "micro is a list"])
def test_a_corrupt_record_is_set_aside_and_measured_again(tmp_path, damage):
    """Issue 25 #9: a corrupt measure.json broke calibrate-instructions --resume every time."""
    lines = []
    _measure_only(SimulatedInstructionBackend(), tmp_path, False, lines)
    path = tmp_path / "measure.json"
    text = path.read_text()
    path.write_text({"truncate": text[: len(text) // 2], "empty": "", "list": "[1, 2]",
                     "micro is a list": json.dumps({**json.loads(text), "micro": []})}[damage])
    record = _measure_only(SimulatedInstructionBackend(), tmp_path, True, lines)
    assert sorted(record["micro"]) == ["fadd", "nanosleep"]
    kept = list(tmp_path.glob("measure.json.corrupt-*"))
    assert len(kept) == 1
    assert any(line.startswith(f"WARNING: {path} is unreadable") and kept[0].name in line for line in lines)
