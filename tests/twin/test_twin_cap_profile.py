"""The capped start's mean shape: real on four boards, and the twin's replay of it (docs/twin.md, session 13)."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from powermodels import cap_start_shape, schema
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
    prof = cap_start_shape.cap_start_profile(read_recording(ROOT / path), WORKLOAD)
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
    prof, ref = cap_start_shape.cap_start_profile(twin, WORKLOAD), cap_start_shape.cap_start_profile(real, WORKLOAD)
    assert np.array_equal(prof[schema.T_S], ref[schema.T_S])
    assert np.isfinite(window(prof, 0.1, 6.0)).all()


def test_the_profile_refuses_what_it_cannot_read():
    real = read_recording(ROOT / CAPSTARTS[0])
    with pytest.raises(ValueError, match="no 'cupy_fma_loop' series"):
        cap_start_shape.cap_start_profile(real, "cupy_fma_loop")
    with pytest.raises(ValueError, match="the profile needs 12 s"):
        cap_start_shape.cap_start_profile(real, WORKLOAD, span_s=12.0)
    with pytest.raises(ValueError, match="no trace"):
        cap_start_shape.cap_start_profile(replace(real, trace=real.trace.iloc[:0]), WORKLOAD)


def test_the_window_means_start_at_the_mean_overshoot():
    real = read_recording(ROOT / CAPSTARTS[1])
    means = cap_start_shape.cap_start_window_means(real, WORKLOAD)
    starts = metrics.cap_starts(real, WORKLOAD)
    assert means[schema.T_S].iloc[0] == pytest.approx(1.0)
    assert means[schema.POWER_W].iloc[0] == pytest.approx(starts["overshoot_w"].mean(), abs=1e-9)
    assert int(means["starts"].iloc[0]) == len(starts)
    # settled from 5 s on: the late windows average out near zero
    assert abs(means.loc[means[schema.T_S] >= 6.0, schema.POWER_W].mean()) < 2.0
    with pytest.raises(ValueError, match="the window-mean curve needs 12 s"):
        cap_start_shape.cap_start_window_means(real, WORKLOAD, span_s=12.0)


CONTROLLER_FIELDS = {"cap_proportional", "cap_repeat", "cap_headroom_w", "cap_window_s", "cap_response_s"}


def test_the_profile_preset_is_h100_sxm_but_for_its_controller():
    shipped, fitted = load_preset("h100-sxm"), load_preset("h100-sxm-cap-profile")
    changed = {k for k, v in vars(shipped.physics).items() if getattr(fitted.physics, k) != v}
    assert changed == CONTROLLER_FIELDS
    assert fitted.workloads == shipped.workloads and fitted.sensor == shipped.sensor
    assert set(fitted.provenance["cap_profile_refit"]["fields"]) == CONTROLLER_FIELDS


def run_start(response_s, seconds=1.5):
    """h100-sxm with ``cap_response_s``: idle, then the bf16 GEMM, then idle; the GPU, load start and end."""
    preset = load_preset("h100-sxm")
    preset = replace(preset, physics=replace(preset.physics, cap_response_s=response_s))
    gpu = preset.gpu(seed=1, history_s=30.0)
    gpu.start_at_temperature(40.0)
    gpu.idle(1.5)
    t0 = gpu.now()
    while gpu.now() - t0 < seconds:
        gpu.run(preset.workload(WORKLOAD).workload, launches=20)
    t1 = gpu.now()
    gpu.idle(0.5)
    return gpu, t0, t1


def mean_power(gpu, a, b):
    e = gpu._energy(np.array([a, b]))
    return float(e[1] - e[0]) / (b - a)


def clock_back_at(gpu, t1, mhz=1950.0):
    t = np.arange(t1, t1 + 0.5, 1e-3)
    return float(t[np.argmax(gpu._clocks[gpu._fi.data[gpu._step_at(t)]] >= mhz)] - t1)


def test_a_lagged_controller_runs_the_start_of_a_load_hotter_and_nothing_else():
    lag, t0, t1 = run_start(0.02)
    now, u0, u1 = run_start(0.0)
    assert mean_power(lag, t0, t0 + 0.1) > mean_power(now, u0, u0 + 0.1) + 30.0
    assert mean_power(lag, t0 + 0.4, t0 + 0.8) == pytest.approx(mean_power(now, u0 + 0.4, u0 + 0.8), rel=0.03)
    assert clock_back_at(lag, t1) == pytest.approx(clock_back_at(now, u1), abs=0.01)


def test_the_h200_profile_preset_borrows_the_h100_controller():
    h100, h200, fitted = load_preset("h100-sxm-cap-profile"), load_preset("h200-raw"), load_preset("h200-raw-cap-profile")
    changed = {k for k, v in vars(h200.physics).items() if getattr(fitted.physics, k) != v}
    assert changed == CONTROLLER_FIELDS
    assert all(getattr(fitted.physics, k) == getattr(h100.physics, k) for k in CONTROLLER_FIELDS)
    assert fitted.workloads == h200.workloads


def test_a_tightly_capped_board_is_not_taken_for_a_slower_kernel():
    # H200 GPU-40717706 held its capped clock so steadily that half its launch times lay within 2 % of the
    # 5th percentile, which read as "ran at the top clock": the bf16 GEMM was scaled ×1.29 (its warm-up
    # energy +27 %); its clock probes (median 1,484 MHz) say it was capped
    from powermodels.twin.adapt import adapt_workloads

    real = read_recording(ROOT / CAPSTARTS[3])
    _, changed = adapt_workloads(load_preset("h200-raw"), real)
    assert changed.get(WORKLOAD, {}).get("time_ratio", 1.0) == 1.0


def test_the_h200_fitted_controller_preset_is_h200_raw_but_for_its_controller():
    """``h200-raw-cap-h200``: the controller fitted to two H200s' starts (session 14), nothing else changed."""
    h200, fitted = load_preset("h200-raw"), load_preset("h200-raw-cap-h200")
    changed = {k for k, v in vars(h200.physics).items() if getattr(fitted.physics, k) != v}
    assert changed == CONTROLLER_FIELDS
    assert fitted.workloads == h200.workloads and fitted.sensor == h200.sensor
    refit = fitted.provenance["cap_profile_refit"]
    assert refit["overshoot_term"] and all("h200" in p for p in refit["train"]) and len(refit["train"]) == 2


def test_the_pooled_h200_controller_preset_moved_only_the_response_lag():
    """``h200-raw-cap-pooled`` (session 21): fitted to ten H200s' starts, held out on nine others."""
    profile, pooled = load_preset("h200-raw-cap-profile"), load_preset("h200-raw-cap-pooled")
    changed = {k for k, v in vars(profile.physics).items() if getattr(pooled.physics, k) != v}
    assert changed == {"cap_response_s"}
    assert pooled.physics.cap_response_s > profile.physics.cap_response_s  # a later response: a larger overshoot
    assert pooled.workloads == profile.workloads and pooled.sensor == profile.sensor
    refit = pooled.provenance["cap_profile_refit"]
    # every capstarts folder name ends in its board's UUID prefix
    train = {p.rsplit("_", 1)[-1] for p in refit["train"]}
    held = {p.rsplit("_", 1)[-1] for p in refit["held_out"]["recordings"]}
    assert len(train) == 10 and len(held) == 9 and not train & held
    assert all((ROOT / p).is_dir() for p in refit["train"] + refit["held_out"]["recordings"])
