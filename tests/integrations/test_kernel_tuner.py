"""PowerModelsObserver under Kernel Tuner's observer protocol, on the simulated GPU.

Kernel Tuner cannot launch CUDA kernels here, but its C backend runs C functions
on the CPU through the same benchmarking loop (observers included): the
end-to-end test tunes a C function whose returned "time" equals its simulated
twin's, while the twin's launches run on the simulated GPU inside the window.
"""

from __future__ import annotations

import math
import shutil
import types

import numpy as np
import pytest

pytest.importorskip("kernel_tuner")

from kernel_tuner.observers.observer import BenchmarkObserver, ContinuousObserver

from powermodels.devices.simulated import SimulatedGPU, SimulatedWorkload
from powermodels.integrations.kernel_tuner import OBSERVABLES, PowerModelsObserver
from powermodels.workloads import SimulatedTwin

TWIN = SimulatedTwin(time_s="1e-3 * 64 / block_size_x + 2e-4 * tile", activity="0.5 + 0.1 * tile")


def _drive(obs, params, time_ms):
    """What Kernel Tuner's core does for one configuration (core.benchmark / benchmark_continuous)."""
    obs.register_configuration(params)
    cont = obs.continuous_observer
    cont.results = {"time": time_ms}
    cont.before_start()
    cont.after_start()
    cont.during()
    cont.after_finish()
    return {**obs.get_results(), **cont.get_results()}


def test_observer_protocol_on_the_simulated_gpu():
    gpu = SimulatedGPU(seed=4)
    gpu.idle(0.5)
    obs = PowerModelsObserver(gpu, simulated=TWIN, continuous_duration=1.0)
    assert isinstance(obs, BenchmarkObserver) and isinstance(obs.continuous_observer, ContinuousObserver)
    obs.register_device(types.SimpleNamespace(env={}, observers=[obs]))
    for bx, tile in ((64, 1), (128, 4)):
        result = _drive(obs, {"block_size_x": bx, "tile": tile}, time_ms=64.0 / bx + 0.2 * tile)
        assert set(result) == set(OBSERVABLES)
        params, launches, w = obs.windows[-1]
        assert params == {"block_size_x": bx, "tile": tile}
        assert launches == math.ceil(1.0 / ((64.0 / bx + 0.2 * tile) / 1e3))
        true = gpu.true_energy_j(w.start_s, w.end_s) / launches
        assert abs(result["powermodels_energy"] - true) < 3 * result["powermodels_energy_uncertainty"] + 1e-9
        assert abs(result["powermodels_energy"] - true) / true < 0.005   # steady: no edge interpolation
        assert result["powermodels_power"] == pytest.approx(w.power_w)
    # a busier configuration (tile 4: activity 0.9) draws more power than tile 1 (0.6)
    assert obs.windows[1][2].power_w > obs.windows[0][2].power_w + 50
    obs.close()


def test_launch_count_follows_the_longest_continuous_duration():
    obs = PowerModelsObserver(SimulatedGPU(seed=0), simulated=TWIN, continuous_duration=0.5)
    other = types.SimpleNamespace(continuous_observer=types.SimpleNamespace(continuous_duration=3.0))
    obs.dev = types.SimpleNamespace(observers=[obs, other])
    assert obs._launches(2.0) == 1500          # Kernel Tuner runs max(1 s, 3 s) of 2 ms launches
    obs.dev = types.SimpleNamespace(observers=[obs])
    assert obs._launches(2.0) == 500           # at least 1 s even when asked for 0.5 s
    with pytest.raises(ValueError, match="launch time"):
        obs._launches(0.0)


def test_observer_errors():
    with pytest.raises(ValueError, match="continuous_duration"):
        PowerModelsObserver(SimulatedGPU(seed=0), continuous_duration=0)
    obs = PowerModelsObserver(SimulatedGPU(seed=0))
    with pytest.raises(ValueError, match="needs a twin"):
        obs.register_device(types.SimpleNamespace(env={}, observers=[obs]))
    fresh = PowerModelsObserver(SimulatedGPU(seed=0), simulated=TWIN)
    with pytest.raises(RuntimeError, match="did not register a device"):
        fresh.continuous_observer.before_start()


def test_a_callable_or_simulated_workload_twin():
    gpu = SimulatedGPU(seed=1)
    fixed = SimulatedWorkload("k", core_work=1.98, activity=0.7)      # 1 ms at 1980 MHz
    for twin in (fixed, lambda p: {"time_s": 1e-3, "activity": 0.7}):
        obs = PowerModelsObserver(gpu, simulated=twin)
        obs.register_device(types.SimpleNamespace(env={}, observers=[obs]))
        result = _drive(obs, {"n": 1}, time_ms=1.0)
        assert 0.2 < result["powermodels_energy"] < 0.6            # ~400 W x 1 ms


C_SOURCE = """
extern "C" float scale(float *c, float *a, int n) {
    for (int i = 0; i < n; i += block_size_x)
        for (int j = 0; j < block_size_x && i + j < n; j++) c[i + j] = a[i + j] * tile;
    return (float)(64.0 / block_size_x + 0.2 * tile);  /* the 'time' in ms: the twin's */
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="Kernel Tuner's C backend needs g++")
def test_tune_kernel_end_to_end_with_the_c_backend(tmp_path, monkeypatch):
    from kernel_tuner import tune_kernel

    monkeypatch.chdir(tmp_path)  # Kernel Tuner's C backend writes temp_*.c/.so into the cwd

    gpu = SimulatedGPU(seed=2)
    obs = PowerModelsObserver(gpu, simulated=TWIN)
    n = np.int32(4096)
    a = np.random.default_rng(0).random(n).astype(np.float32)
    c = np.zeros_like(a)
    results, _ = tune_kernel("scale", C_SOURCE, n, [c, a, n], {"block_size_x": [64, 128], "tile": [1, 4]},
                             lang="C", observers=[obs], quiet=True, iterations=2,
                             metrics={"launches/J": lambda p: 1.0 / p["powermodels_energy"]})
    obs.close()
    assert len(results) == 4
    by = {(r["block_size_x"], r["tile"]): r for r in results}
    for (bx, tile), r in by.items():
        twin = TWIN.workload("k", {"block_size_x": bx, "tile": tile})
        assert r["powermodels_power"] > 300
        # energy per launch ≈ power × the twin's time per launch
        assert r["powermodels_energy"] == pytest.approx(r["powermodels_power"] * twin.time_s(1980, 2619), rel=0.05)
        assert r["launches/J"] == pytest.approx(1.0 / r["powermodels_energy"])
    assert by[(128, 1)]["powermodels_energy"] < by[(64, 4)]["powermodels_energy"]


def test_close_closes_the_gpu_the_observer_opened(monkeypatch):
    closed = []
    monkeypatch.setattr(SimulatedGPU, "close", lambda self: closed.append(self), raising=False)
    obs = PowerModelsObserver("simulated", simulated=TWIN)
    obs.register_device(types.SimpleNamespace(env={}, observers=[obs]))
    opened = obs.meter.device
    obs.close()
    assert closed == [opened]
    given = PowerModelsObserver(SimulatedGPU(seed=0), simulated=TWIN)
    given.register_device(types.SimpleNamespace(env={}, observers=[given]))
    given.close()
    assert closed == [opened]          # a Device handed in stays open
