"""``powermodels.twin.adapt``: a preset's workloads brought to a recording's own launches."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.twin.adapt import PROBE_PAIRING_S, adapt_workloads, probed_time_ratio
from powermodels.twin.compare import adaptation_note
from powermodels.twin.preset import load_preset

ROOT = Path(__file__).resolve().parents[2]
BF16 = "torch_bf16_matmul_8192"
#: a held-out H100 raw recording with a clock probe beside every batch (session 13); never fitted by h100-sxm
H100_PROBED = ROOT / "datasets/h100-2026-11-28/raw_recording_549d5430"


def _launches_and_probes(workload, mem_mhz, clocks, factor, offset_s):
    t = np.arange(len(clocks)) * 0.1  # a batch every 100 ms
    times = factor * np.array([workload.workload.time_s(f, mem_mhz) for f in clocks])
    launches = pd.DataFrame({schema.START_S: t, schema.TIME_S: times})
    probes = pd.DataFrame({schema.T_S: t - offset_s, schema.PROBE_CLOCK_MHZ: clocks})
    return launches, probes


def test_the_probed_ratio_compares_each_launch_at_its_own_clock():
    preset = load_preset("h100-sxm")
    workload, mem = preset.workloads[BF16], preset.physics.mem_clocks_mhz[0]
    clocks = np.linspace(1300.0, 1500.0, 41)
    launches, probes = _launches_and_probes(workload, mem, clocks, 1.1, 8e-4)
    assert probed_time_ratio(workload, launches, probes, mem) == pytest.approx(1.1)
    # a probe too far from every launch pairs with none: no ratio, rather than one from the wrong launch
    launches, probes = _launches_and_probes(workload, mem, clocks, 1.1, 10 * PROBE_PAIRING_S)
    assert np.isnan(probed_time_ratio(workload, launches, probes, mem))


@pytest.fixture(scope="module")
def h100_probed():
    return read_recording(H100_PROBED)


def test_a_capped_workload_keeps_the_presets_time_but_its_probes_are_reported(h100_probed):
    """By default h100-sxm's capped bf16 GEMM keeps its time (its capped clock was fitted with it)."""
    adapted, changed = adapt_workloads("h100-sxm", h100_probed)
    assert changed[BF16]["time_from"] == "kept (capped)" and changed[BF16]["time_ratio"] == 1.0
    assert changed[BF16]["probed_ratio"] == pytest.approx(1.10, abs=0.02)
    assert adapted.workloads[BF16].workload == load_preset("h100-sxm").workloads[BF16].workload
    with pytest.raises(ValueError, match="capped_time must be"):
        adapt_workloads("h100-sxm", h100_probed, capped_time="top")
    # comparison.md says so, with what the probes read
    note = adaptation_note(BF16, changed[BF16])
    assert note.startswith(f"workload {BF16} ran capped: the preset's time per launch kept")
    assert f"probes read the preset's time × {changed[BF16]['probed_ratio']:.3f}" in note
    assert "(from the top clock)" in adaptation_note("cupy_fp32_matmul_4096", changed["cupy_fp32_matmul_4096"])


def test_a_capped_workloads_time_comes_from_its_clock_probes(h100_probed):
    """Real H100 GPU-549d5430: its capped bf16 GEMM takes ~10 % longer than h100-sxm's at the probed clock."""
    real = h100_probed
    preset = load_preset("h100-sxm")
    adapted, changed = adapt_workloads(preset, real, capped_time="probes")
    assert changed[BF16]["time_from"] == "clock probes"
    assert changed[BF16]["time_ratio"] == pytest.approx(1.10, abs=0.02)
    # uncapped workloads are still compared at the top clock
    assert changed["cupy_fp32_matmul_4096"]["time_from"] == "top clock"
    # after the adaptation the preset's time at each launch's probed clock is the real one (median within 1 %)
    mem = preset.physics.mem_clocks_mhz[0]
    bf16 = real.launches.loc[real.launches[schema.WORKLOAD] == BF16]
    probes = real.probes.loc[real.probes[schema.WORKLOAD] == BF16]
    assert probed_time_ratio(adapted.workloads[BF16], bf16, probes, mem) == pytest.approx(1.0, abs=0.01)
