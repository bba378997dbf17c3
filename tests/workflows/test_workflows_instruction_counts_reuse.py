"""Reusing the ncu counts of an earlier run on the same GPU model (``counts_from``).

Instruction counts belong to the code, compiler and GPU model, so a run on another board
profiles only what the earlier run lacks; the tables must equal a full profile's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.microbench.catalog import MICROBENCHMARKS
from powermodels.microbench.gpu import window_clocks
from powermodels.microbench.simulated import SimulatedInstructionBackend
from powermodels.instruction_energy.calibration import measure_and_profile
from powermodels.instruction_energy.tables import (
    earlier_profiles,
    rebuild_tables,
    tables_from_profiles,
)

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "datasets" / "h100" / "wattchmen"
FEW = ["ffma", "iadd3", "hmma_f32", "lds32", "ldg32_l2", "nanosleep"]


def _run(out, micro, *, preset="sim-hopper-a", **kw):
    backend = SimulatedInstructionBackend(preset, hopper_extras=True)
    return measure_and_profile(backend, out, micro, ["sim_gemm", "sim_stream"],
                               say=lambda m: None, **kw)


def test_reused_counts_give_the_tables_of_a_full_profile(tmp_path):
    _run(tmp_path / "source", FEW)  # the earlier run: no warp-group MMA benchmark
    record, micro, wl = _run(tmp_path / "new", [*FEW, "hgmma_f32"],
                             counts_from=tmp_path / "source", recheck=["ffma", "sim_gemm"])
    _, micro_full, wl_full = _run(tmp_path / "full", [*FEW, "hgmma_f32"])
    pd.testing.assert_frame_equal(micro, micro_full)
    pd.testing.assert_frame_equal(wl, wl_full)
    assert record["profile_plan"] == {"micro": ["ffma", "hgmma_f32"], "workloads": ["sim_gemm"]}
    assert sorted(record["counts_from"]["reused"]) == sorted(
        ["iadd3", "hmma_f32", "lds32", "ldg32_l2", "nanosleep", "sim_stream"])
    assert record["counts_check"] == {"ffma": 1.0, "sim_gemm": 1.0}
    # the raw files rebuild the tables, given the source they reused
    new = tmp_path / "new"
    args = (new / "measure.json", new / "ncu_raw.csv.gz", new / "ncu_sectors.csv.gz")
    pd.testing.assert_frame_equal(rebuild_tables(*args, counts_from=tmp_path / "source")[0], micro)
    with pytest.raises(ValueError, match="counts_from: .* reused the ncu counts of"):
        rebuild_tables(*args)


def test_counts_of_another_gpu_model_are_not_reused(tmp_path):
    _run(tmp_path / "source", FEW)
    lines = []
    backend = SimulatedInstructionBackend("sim-hopper-b")
    record, micro, _ = measure_and_profile(backend, tmp_path / "new", FEW, [],
                                           counts_from=tmp_path / "source", say=lines.append)
    assert "counts_from" not in record and len(micro) == len(FEW)
    assert any("profiled on another GPU model" in line and "profiling every item" in line
               for line in lines)


def test_a_missing_counts_source_fails_before_anything_is_measured(tmp_path):
    with pytest.raises(FileNotFoundError, match="counts_from: .* lacks measure.json"):
        _run(tmp_path / "new", FEW, counts_from=tmp_path / "nowhere")
    assert not (tmp_path / "new" / "measure.json").exists()


def test_the_h100_tables_come_back_from_its_counts_alone():
    """Real data (datasets/h100/wattchmen): a run that profiled nothing and reused every count
    gets the committed tables (same energies here, so equal to the last digit)."""
    for name in ("measure.json", "ncu_raw.csv.gz", "ncu_sectors.csv.gz"):
        if not (H100 / name).exists():
            pytest.skip(f"{H100 / name} is absent")
    record, _, _ = earlier_profiles(H100)
    reused = {**record, "profile_plan": {"micro": [], "workloads": []}}
    micro, wl = tables_from_profiles(reused, "", "", earlier_profiles(H100))
    pd.testing.assert_frame_equal(micro, pd.read_parquet(H100 / "wattchmen_microbench.parquet"))
    pd.testing.assert_frame_equal(wl, pd.read_parquet(H100 / "wattchmen_workloads.parquet"))
    assert set(micro[schema.WORKLOAD]) == set(MICROBENCHMARKS)


def test_window_clocks_summarise_probes_and_nvml_readings():
    got = window_clocks([1980.0, 1965.0, np.nan, 1500.0, 1980.0], [1980, 1950])
    assert got["n_probes"] == 4 and got["probe_clock_mhz"] == pytest.approx(1972.5)
    assert got["probe_clock_p05_mhz"] < 1600 and got["nvml_clock_mean_mhz"] == 1965.0
    empty = window_clocks([], [])
    assert empty["n_probes"] == 0 and np.isnan(empty["probe_clock_mhz"])
    assert np.isnan(empty["nvml_clock_mean_mhz"])
    json.dumps(empty)  # the energy record is JSON
    # a failed NVML read (NaN) is left out of the mean, as a failed probe is (before: the mean was NaN)
    assert window_clocks([1980.0], [1980, np.nan, 1950])["nvml_clock_mean_mhz"] == 1965.0


def test_reused_counts_without_a_sector_profile_say_the_columns_are_left_out():
    """Real data (datasets/h100/wattchmen): with reused counts but no sector profile on either side,
    the tables come without sector columns and a warning says so (before: silently)."""
    for name in ("measure.json", "ncu_raw.csv.gz"):
        if not (H100 / name).exists():
            pytest.skip(f"{H100 / name} is absent")
    record, opcode_csv, _ = earlier_profiles(H100)
    reused = {**record, "profile_plan": {"micro": [], "workloads": []}}
    with pytest.warns(UserWarning, match="sector-traffic columns left out .the earlier run has no sector"):
        micro, _ = tables_from_profiles(reused, "", "", (record, opcode_csv, None))
    assert not any(c.startswith("sectors_") or "sector" in c for c in micro.columns)
