"""``board_calibration.capped_workload``: a capped workload's cycles, capped clock and recovery from the boards' probes."""

from pathlib import Path

import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_calibration.capped_workload import (
    capped_workload_levels,
    capped_workload_preset,
)
from powermodels.recording import read_recording
from powermodels.twin.preset import load_preset
from powermodels.twin.replay import replay

from .test_twin import known_preset, schedule

ROOT = Path(__file__).resolve().parents[2]
BF16 = "torch_bf16_matmul_8192"


def test_the_preset_moves_to_the_median_board():
    levels = pd.DataFrame({schema.DEVICE_UUID: ["GPU-a", "GPU-b", "GPU-c"], schema.RECORDING_NAME: ["a", "b", "c"],
                           schema.PROBED_TIME_RATIO: [1.1, 1.2, 1.3], schema.CAP_CORE_SCALE: [0.8, 0.9, 1.0]})
    base = load_preset("h100-sxm")
    moved = capped_workload_preset(base, levels, BF16)
    before, after = base.workloads[BF16].workload, moved.workloads[BF16].workload
    assert after.core_work == pytest.approx(1.2 * before.core_work) and after.t0_s == pytest.approx(1.2 * before.t0_s)
    assert moved.physics.core_w_per_ghz == pytest.approx(0.9 * base.physics.core_w_per_ghz)
    # the uncapped workloads keep their power at the top clock: activity ÷ the core factor
    fp32 = "cupy_fp32_matmul_4096"
    assert moved.workloads[fp32].workload.activity == pytest.approx(base.workloads[fp32].workload.activity / 0.9)
    # without recordings the recovery rate is the preset's
    assert moved.physics.clock_recovery_mhz_per_s == base.physics.clock_recovery_mhz_per_s
    report = moved.fit["capped_workload"]
    assert report["boards"] == ["GPU-a", "GPU-b", "GPU-c"] and moved.name == "h100-sxm-capped-" + BF16
    with pytest.raises(ValueError, match="no workload"):
        capped_workload_preset(base, levels, "nope")


def test_a_recording_without_probes_is_refused():
    preset = known_preset()
    rec = replay(schedule(), preset, seed=3, poll_s=2e-3)  # a twin's recording has no clock probes
    with pytest.raises(ValueError, match="no clock probes"):
        capped_workload_levels(preset, [rec], "gemm")
    with pytest.raises(ValueError, match="no recording given"):
        capped_workload_levels(preset, [], "gemm")


def test_shipped_probed_h100_preset_is_reproduced_from_its_recordings():
    """``h100-sxm-probed`` (session 19): h100-sxm moved to five H100s' probed bf16 cycles, capped clock, recovery."""
    shipped = load_preset("h100-sxm-probed")
    paths = [ROOT / p for p in shipped.provenance["capped_workload_from"]]
    if not all(p.is_dir() for p in paths):
        pytest.skip("the H100 recordings are not in this checkout")
    recordings = [read_recording(p) for p in paths]
    levels = capped_workload_levels("h100-sxm", recordings, BF16)
    assert levels[schema.PROBED_TIME_RATIO].between(1.08, 1.11).all()
    again = capped_workload_preset("h100-sxm", levels, BF16, recordings=recordings, name="h100-sxm-probed")
    for field in ("core_w_per_ghz", "clock_recovery_mhz_per_s"):
        assert getattr(again.physics, field) == pytest.approx(getattr(shipped.physics, field), rel=1e-6), field
    assert again.workloads[BF16].workload.core_work == pytest.approx(shipped.workloads[BF16].workload.core_work,
                                                                     rel=1e-6)
    # nothing else moved: the sensor, leakage and controller gains are h100-sxm's
    base = load_preset("h100-sxm")
    assert shipped.sensor == base.sensor and shipped.physics.leakage_per_c == base.physics.leakage_per_c
    assert shipped.physics.cap_proportional == base.physics.cap_proportional
