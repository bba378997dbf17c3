"""The simulated GPU keeps a bounded history: same answers over what it keeps, clear error beyond."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels.devices.simulated import EXAMPLE_WORKLOADS, SimulatedGPU


def _campaign(gpu, runs=12):
    for i in range(runs):
        gpu.idle(1.5)
        gpu.run(EXAMPLE_WORKLOADS["gemm" if i % 2 else "fp32"], launches=150)
        gpu.square_wave(0.05, 0.05, periods=3)
    return gpu


def test_bounded_history_answers_like_the_unbounded_gpu_and_stays_small():
    kept = _campaign(SimulatedGPU(seed=3, reference_meter=True, history_s=10.0))
    full = _campaign(SimulatedGPU(seed=3, reference_meter=True, history_s=None))
    now = full.now()
    assert kept.now() == now and now > 30
    lo = now - 9.0
    pd.testing.assert_frame_equal(kept.trace(lo, now, 1e-3, "r"), full.trace(lo, now, 1e-3, "r"))
    # the running integral is summed in other pieces when history is dropped: equal to ~1e-14
    pd.testing.assert_frame_equal(kept.truth(lo, now), full.truth(lo, now), rtol=1e-9)
    assert kept.true_energy_j(lo, now) == pytest.approx(full.true_energy_j(lo, now), rel=1e-12)
    assert kept.read() == full.read() and kept.read_energy_j() == full.read_energy_j()
    # memory: the fine-step buffers hold ~1.5 x 10 s at most (plus growth slack), not the whole run
    fine_rows = kept._act.data.size
    assert fine_rows < full._act.data.size / 2
    assert kept._j0 > 0 and (kept._tick - kept._j0) * kept._df <= 1.5 * 10.0 + 5.0


def test_asking_about_dropped_history_names_history_s():
    gpu = _campaign(SimulatedGPU(seed=0, history_s=10.0))
    with pytest.raises(ValueError, match="history_s=10"):
        gpu.trace(0.0, 1.0)
    with pytest.raises(ValueError, match="history_s"):
        gpu.true_energy_j(0.0, gpu.now())
    with pytest.raises(ValueError, match="history_s"):
        gpu.truth(1.0, 2.0)


def test_a_single_long_call_stays_queryable():
    gpu = SimulatedGPU(seed=0, history_s=10.0)
    gpu.idle(5.0)
    on = gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=2500)  # 25 s in one call
    trace = gpu.trace(on[0, 0], gpu.now(), 1e-2, "long")
    assert len(trace) > 2000 and np.isfinite(trace["power_instant_w"]).all()


@pytest.mark.parametrize("bad", [5.0, 0.0, -1.0, float("nan"), "x"])
def test_history_s_is_validated(bad):
    with pytest.raises(ValueError, match="history_s"):
        SimulatedGPU(history_s=bad)
