"""The Zeus-compatible window API against Zeus's documented names, on the simulated GPU.

The names checked here are those of Zeus's documentation (ml.energy/zeus, "Measuring
Energy", and the ``zeus.monitor.ZeusMonitor`` / ``Measurement`` reference): the
constructor's ``gpu_indices``, ``cpu_indices``, ``approx_instant_energy``, ``log_file``,
``sync_execution_with``; ``begin_window(key, sync_execution, restart)``,
``end_window(key, sync_execution, cancel)``, ``reset_windows()``; ``Measurement.time``,
``gpu_energy`` (by GPU index), ``cpu_energy``, ``dram_energy``, ``soc_energy``,
``total_energy``.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings

import pytest

from powermodels.devices.simulated import SimulatedGPU, SimulatedWorkload
from powermodels.integrations.zeus import Measurement, ZeusMonitor

STEP = SimulatedWorkload("step", core_work=1.98 * 20, activity=0.8)   # 20 ms at 1,980 MHz


def test_the_documented_names():
    params = inspect.signature(ZeusMonitor).parameters
    assert list(params)[:5] == ["gpu_indices", "cpu_indices", "approx_instant_energy", "log_file",
                                "sync_execution_with"]
    assert params["sync_execution_with"].default == "torch" and params["approx_instant_energy"].default is False
    begin = inspect.signature(ZeusMonitor.begin_window).parameters
    assert list(begin)[1:] == ["key", "sync_execution", "restart"]
    assert begin["sync_execution"].default is True and begin["restart"].default is False
    end = inspect.signature(ZeusMonitor.end_window).parameters
    assert list(end)[1:] == ["key", "sync_execution", "cancel"]
    assert end["sync_execution"].default is True and end["cancel"].default is False
    assert callable(ZeusMonitor.reset_windows)
    fields = [f.name for f in dataclasses.fields(Measurement)]
    assert fields[:5] == ["time", "gpu_energy", "cpu_energy", "dram_energy", "soc_energy"]
    m = Measurement(1.0, {0: 2.0, 1: 3.0})     # positional as Zeus's dataclass
    assert m.total_energy == 5.0 and m.cpu_energy is None and m.dram_energy is None


def test_the_zeus_documentation_example_runs_unchanged():
    """Zeus's "Measuring Energy" loop (epochs of steps), on the simulated GPU."""
    gpu = SimulatedGPU(seed=0)
    gpu.idle(0.5)
    monitor = ZeusMonitor(gpu_indices=[0], device=gpu)
    assert monitor.gpu_indices == [0]
    for _epoch in range(2):
        monitor.begin_window("epoch")
        steps = []
        for _ in range(3):
            monitor.begin_window("step")
            gpu.run(STEP, launches=25)           # train_one_step(x, y): 0.5 s of GPU work
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the meter's note on a window shorter than ~2 updates
                steps.append(monitor.end_window("step"))
        mes = monitor.end_window("epoch")
        avg_time = sum(map(lambda m: m.time, steps)) / len(steps)
        avg_energy = sum(map(lambda m: m.total_energy, steps)) / len(steps)
        assert mes.time > 3 * avg_time * 0.99 and mes.total_energy > 3 * avg_energy * 0.95
        for s in steps:
            w = s.windows[0]
            truth = gpu.true_energy_j(w.start_s, w.end_s)
            assert abs(s.gpu_energy[0] - truth) < 3 * s.gpu_energy_uncertainty[0] + 1e-6
        # back to back, the steps after the first are within 1 % of the truth (wait=False, as Zeus)
        for s in steps[1:]:
            w = s.windows[0]
            assert s.gpu_energy[0] == pytest.approx(gpu.true_energy_j(w.start_s, w.end_s), rel=0.01)
    monitor.close()


def test_wait_brackets_the_end_with_a_counter_update():
    gpu = SimulatedGPU(seed=5)
    gpu.idle(0.5)
    waiting = ZeusMonitor(gpu_indices=[0], device=gpu, wait=True)
    waiting.begin_window("w")
    gpu.run(STEP, launches=50)
    m = waiting.end_window("w")
    waiting.close()
    lo, hi = m.windows[0].energy_bounds_j
    assert lo <= gpu.true_energy_j(m.windows[0].start_s, m.windows[0].end_s) <= hi < float("inf")
    returning = ZeusMonitor(gpu_indices=[0], device=gpu)       # default: returns at once, as Zeus
    returning.begin_window("w")
    gpu.run(STEP, launches=50)
    m = returning.end_window("w")
    returning.close()
    assert m.windows[0].energy_bounds_j[1] == float("inf")


def test_a_window_shorter_than_the_counter_update_is_not_zero():
    gpu = SimulatedGPU(seed=1)
    gpu.idle(0.5)
    monitor = ZeusMonitor(gpu_indices=[0], device=gpu)
    monitor.begin_window("tiny")
    gpu.run(STEP, launches=1)                    # 20 ms, a fifth of Hopper's 100 ms update period
    with pytest.warns(RuntimeWarning, match="shorter than the counter's update period") as record:
        m = monitor.end_window("tiny")
    assert record[0].filename == __file__        # said at the caller's end_window, not inside powermodels
    assert m.windows[0].short and m.gpu_energy[0] > 0
    assert m.gpu_energy_uncertainty[0] > 0.1 * m.gpu_energy[0]   # said honestly: ~one update's energy
    monitor.close()


def test_window_bookkeeping_as_zeus():
    gpu = SimulatedGPU(seed=2)
    monitor = ZeusMonitor(device=gpu)            # gpu_indices=None: the one simulated GPU
    assert monitor.gpu_indices == [0]
    monitor.begin_window("a")
    with pytest.raises(ValueError, match="'a' already exists"):
        monitor.begin_window("a")
    gpu.run(STEP, launches=5)
    monitor.begin_window("a", restart=True)      # dropped and begun again
    gpu.run(STEP, launches=10)
    cancelled = monitor.end_window("a", cancel=True)
    assert cancelled.time == 0.0 and cancelled.gpu_energy == {0: 0.0}
    with pytest.raises(ValueError, match="'a' does not exist"):
        monitor.end_window("a")
    monitor.begin_window("b")
    monitor.begin_window("c")
    monitor.reset_windows()
    assert monitor.meters[0].open_windows == []
    with pytest.raises(ValueError, match="'b' does not exist"):
        monitor.end_window("b")
    monitor.close()


def test_two_gpus_and_the_log_file(tmp_path):
    gpus = {0: SimulatedGPU(seed=3), 1: SimulatedGPU(seed=4)}
    log = tmp_path / "zeus.csv"
    monitor = ZeusMonitor(device=gpus, log_file=log)
    assert monitor.gpu_indices == [0, 1]
    monitor.begin_window("both")
    for gpu in gpus.values():
        gpu.run(STEP, launches=20)
    m = monitor.end_window("both")
    monitor.close()
    assert set(m.gpu_energy) == {0, 1} and m.total_energy == pytest.approx(sum(m.gpu_energy.values()))
    assert m.total_energy_uncertainty > 0
    lines = log.read_text().splitlines()
    assert lines[0] == "start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy"
    start, name, elapsed, e0, e1 = lines[1].split(",")
    assert name == "both" and float(elapsed) == pytest.approx(m.time)
    assert float(e0) == pytest.approx(m.gpu_energy[0]) and float(e1) == pytest.approx(m.gpu_energy[1])


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="cpu_indices=\\[0\\]: powermodels measures GPU energy only"):
        ZeusMonitor(gpu_indices=[0], cpu_indices=[0], device=SimulatedGPU(seed=0))
    with pytest.raises(ValueError, match="sync_execution_with must be one of"):
        ZeusMonitor(gpu_indices=[0], sync_execution_with="tensorflow", device=SimulatedGPU(seed=0))
    with pytest.raises(ValueError, match="distinct integers"):
        ZeusMonitor(gpu_indices=[0, 0], device="simulated")
    with pytest.raises(ValueError, match="one Device serves one GPU index"):
        ZeusMonitor(gpu_indices=[0, 1], device=SimulatedGPU(seed=0))
    with pytest.raises(ValueError, match=r"no device given for GPU index\(es\) \[2\]"):
        ZeusMonitor(gpu_indices=[0, 2], device={0: SimulatedGPU(seed=0)})
