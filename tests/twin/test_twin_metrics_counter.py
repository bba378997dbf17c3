"""The twin's counter and launch measurements run on the library's energy-counter helpers, unchanged."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.energy_counter import launches_inside
from powermodels.recording import read_recording
from powermodels.twin import metrics

DATASETS = Path(__file__).resolve().parents[2] / "datasets"
RECORDINGS = [DATASETS / "h100" / "raw-2026-11-25",
              DATASETS / "h100-2026-11-25-session5" / "raw_recording_620707cb"]


def _updates_as_before(rec):
    """twin.metrics.counter_updates as it was (its own code): first read kept, then each new value."""
    e = rec.energy[schema.ENERGY_COUNTER_J].to_numpy(float)
    t = rec.energy[schema.T_S].to_numpy(float)
    keep = np.r_[True, np.diff(e) != 0]
    return t[keep], e[keep]


def _launches_as_before(rec, a, b, workload):
    la = rec.launches.loc[rec.launches[schema.WORKLOAD] == workload]
    s, e, n = (la[c].to_numpy(float) for c in (schema.START_S, schema.END_S, schema.LAUNCHES))
    overlap = np.clip(np.minimum(e, b) - np.maximum(s, a), 0.0, None)
    return float(np.sum(n * overlap / np.maximum(e - s, 1e-12)))


@pytest.mark.parametrize("folder", RECORDINGS, ids=lambda p: p.name)
def test_the_same_results_on_the_real_recordings(folder):
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this checkout")
    rec = read_recording(folder, probes=False)
    t, e = metrics.counter_updates(rec)
    t0, e0 = _updates_as_before(rec)
    assert np.array_equal(t, t0) and np.array_equal(e, e0)
    for w in rec.phase_rows(kind="series")[schema.WORKLOAD]:
        row = rec.phase_rows(kind="series", workload=w).iloc[0]
        for a in float(row[schema.T0_S]) + np.array([0.0, 0.37, 7.5, 24.0]):
            assert metrics.launches_between(rec, a, a + 1.0, w) == pytest.approx(
                _launches_as_before(rec, a, a + 1.0, w), rel=1e-12, abs=1e-12)


def test_launches_inside_counts_batches_pro_rata():
    iv = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 2.0]])
    assert launches_inside(iv, 0.5, 1.5) == pytest.approx(1.0)
    assert launches_inside(iv, 0.5, 1.5, counts=[8, 4, 3]) == pytest.approx(6.0)
    # a zero-length batch at an instant inside the window ran inside it (the twin's own code counted 0)
    assert launches_inside(iv, 1.5, 2.5, counts=[8, 4, 3]) == pytest.approx(5.0)


def test_a_counter_reset_is_a_one_line_error():
    energy = pd.DataFrame({schema.T_S: [0.0, 0.1, 0.2, 0.3], schema.ENERGY_COUNTER_J: [10.0, 20.0, 5.0, 15.0]})
    rec = read_recording(RECORDINGS[0], probes=False) if RECORDINGS[0].is_dir() else None
    if rec is None:
        pytest.skip("the raw H100 recording is not in this checkout")
    with pytest.raises(ValueError, match="decreased"):
        metrics.counter_updates(replace(rec, energy=energy))


def test_capped_series_found_on_both_real_boards(tmp_path):
    # GPU-620707cb runs hot: its fp32 GEMM series reaches the 700 W cap too (79 % of the readings)
    from powermodels.twin.compare import capped_series, plot_cap_settling

    found = {}
    for folder in RECORDINGS:
        if not folder.is_dir():
            pytest.skip(f"{folder} is not in this checkout")
        found[folder.name] = capped_series(read_recording(folder, probes=False))
    assert found == {"raw-2026-11-25": ["torch_bf16_matmul_8192"],
                     "raw_recording_620707cb": ["cupy_fp32_matmul_4096", "torch_bf16_matmul_8192"]}
    plt = pytest.importorskip("matplotlib.pyplot")
    rec = read_recording(RECORDINGS[0], probes=False)
    fig, ax = plt.subplots()
    plot_cap_settling(rec, rec, ax, "torch_bf16_matmul_8192")
    assert [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")] == [
        "real (settled 1.8 s)", "twin (settled 1.8 s)"]
    plt.close(fig)
