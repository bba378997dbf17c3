"""A workload the preset gives too little activity: every board reads it above its two factors, the pool moves it."""

from dataclasses import replace
from pathlib import Path

import pytest

from powermodels import schema
from powermodels.board_calibration.workload_residuals import (
    with_workload_residuals,
    workload_residuals,
)
from powermodels.recording import read_recording
from powermodels.twin.preset import TwinWorkload, load_preset
from powermodels.twin.replay import replay

from .test_twin_board import SCHEDULE, board, schedule

#: the schedule with a compute-bound third series (two factors, three workloads: one residual left)
WITH_FMA = (*SCHEDULE, ("thermal", "fma", 0, "series", 19.0, 23.0), ("thermal", "-", -1, "idle", 23.0, 25.0))
#: (uuid, core factor, memory factor) of three boards whose fma loop draws 4 % more than the preset says
BOARDS = (("GPU-r0", 1.00, 1.00), ("GPU-r1", 1.03, 0.97), ("GPU-r2", 0.98, 1.05))
FMA_ACTIVITY = 0.3  # well below the cap on every board: a capped series is not read


def with_fma(preset, activity: float):
    gemm = preset.workloads["gemm"]
    fma = TwinWorkload(replace(gemm.workload, name="fma", activity=activity, mem_activity=0.02), 0.0, 1)
    return replace(preset, workloads={**preset.workloads, "fma": fma})


@pytest.fixture(scope="module")
def recordings():
    recs = []
    for seed, (uuid, core, memory) in enumerate(BOARDS):
        preset = with_fma(board(), FMA_ACTIVITY * 1.04)
        ph = preset.physics
        real = replace(preset, physics=replace(ph, core_w_per_ghz=ph.core_w_per_ghz * core,
                                               mem_w_per_ghz=ph.mem_w_per_ghz * memory))
        rec = replay(schedule(WITH_FMA), real, seed=seed, poll_s=2e-3, start_temperature_c=40.0)
        rec.provenance.update(uuid=uuid)
        recs.append(rec)
    return recs


def test_the_workload_the_preset_underrates_reads_above_its_boards_factors(recordings):
    preset = with_fma(board(), FMA_ACTIVITY)
    residuals = workload_residuals(preset, recordings)
    assert set(residuals[schema.DEVICE_UUID]) == {uuid for uuid, _, _ in BOARDS}
    per_workload = residuals.groupby(schema.WORKLOAD)[schema.WORKLOAD_RESIDUAL].median()
    assert per_workload["fma"] > 1.01 and per_workload["gemm"] < 1.0  # the two core workloads share one factor
    moved = with_workload_residuals(preset, residuals)
    ratio = moved.fit["workload_residuals"]["ratio"]
    assert ratio["fma"]["boards"] == 3 and ratio["fma"]["ratio"] == pytest.approx(per_workload["fma"], abs=0.01)
    assert moved.workloads["fma"].workload.activity == pytest.approx(FMA_ACTIVITY * ratio["fma"]["ratio"])
    assert moved.name == "b+workload-residuals" and moved.physics == preset.physics  # only the activities move


def test_no_residuals_is_refused(recordings):
    with pytest.raises(ValueError, match="no residuals"):
        with_workload_residuals(board(), residuals=None)
    with pytest.raises(ValueError, match="no recording"):
        workload_residuals(board(), [])


def test_the_shipped_per_workload_presets_are_rebuilt_from_their_pool_alone():
    # what benchmarks/twin_workload_residuals.py --save writes, from the nine recordings the part presets pooled
    root = Path(__file__).resolve().parents[2]
    parts = ["h200-raw-part-000", "h200-raw-part-001"]
    pool = load_preset(parts[0]).provenance["pooled_from"]
    recordings = [read_recording(root / path) for path in pool]  # read once for both residuals
    residuals = workload_residuals(parts, recordings)
    assert {str(u)[4:12] for u in residuals[schema.DEVICE_UUID]} == {
        str(u)[4:12] for u in load_preset(parts[0]).provenance["pooled_boards"]["boards"]}
    against_pooled = workload_residuals("h200-raw-pooled", recordings)
    for name, read in ((parts[0], residuals), (parts[1], residuals), ("h200-raw-pooled", against_pooled)):
        shipped = load_preset(f"{name}-per-workload")
        rebuilt = with_workload_residuals(name, read, name=shipped.name)
        assert shipped.workloads == rebuilt.workloads and shipped.physics == rebuilt.physics
        assert shipped.fit["workload_residuals"]["ratio"]["cupy_fma_loop"]["ratio"] > 1.0
