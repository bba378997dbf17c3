"""The capped start's mean shape: real on four boards, and the twin's replay of it (docs/twin.md, session 13)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.twin import metrics
from powermodels.twin.cap_seeds import replay_capped_start
from powermodels.twin.preset import load_preset

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = "torch_bf16_matmul_8192"
CAPSTARTS = ["datasets/h100-2026-11-28/capstarts_5db815fe_1", "datasets/h100-2026-11-28/capstarts_d14bdb3b",
             "datasets/h200-2026-11-28/capstarts_f0bfff09", "datasets/h200-2026-11-28/capstarts_40717706"]


def window(profile, a, b):
    t = profile[schema.T_S].to_numpy(float)
    return profile[schema.POWER_W].to_numpy(float)[(t >= a) & (t < b)]


@pytest.mark.parametrize("path", CAPSTARTS)
def test_real_starts_share_one_shape(path):
    # real H100 and H200 boards: plateau above the settled power, a deep short dip ~1 s in, a smaller echo ~1 s later
    prof = metrics.cap_start_profile(read_recording(ROOT / path), WORKLOAD)
    assert (prof["starts"].iloc[2:] >= 8).all()
    plateau = window(prof, 0.3, 0.85).mean()
    first, second = window(prof, 0.85, 1.2).min(), window(prof, 1.8, 2.2).min()
    assert 10.0 < plateau < 60.0
    assert first < -50.0
    assert first < second < 0.0
    assert abs(window(prof, 5.0, 6.0).mean()) < 15.0


def test_a_replayed_start_gives_a_profile_on_the_same_grid():
    real = read_recording(ROOT / CAPSTARTS[0])
    twin = replay_capped_start(real, real, load_preset("h100-sxm"), WORKLOAD, 3, seed=0)
    assert len(metrics.series_entries(twin, WORKLOAD)) == 1
    prof, ref = metrics.cap_start_profile(twin, WORKLOAD), metrics.cap_start_profile(real, WORKLOAD)
    assert np.array_equal(prof[schema.T_S], ref[schema.T_S])
    assert np.isfinite(window(prof, 0.1, 6.0)).all()


def test_the_profile_refuses_what_it_cannot_read():
    real = read_recording(ROOT / CAPSTARTS[0])
    with pytest.raises(ValueError, match="no 'cupy_fma_loop' series"):
        metrics.cap_start_profile(real, "cupy_fma_loop")
    with pytest.raises(ValueError, match="the profile needs 12 s"):
        metrics.cap_start_profile(real, WORKLOAD, span_s=12.0)
    with pytest.raises(ValueError, match="no trace"):
        metrics.cap_start_profile(replace(real, trace=real.trace.iloc[:0]), WORKLOAD)
