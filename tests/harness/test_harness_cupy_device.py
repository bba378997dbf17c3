"""CupyRunner launches on the GPU its sensor reads (``device.info.index``), in any thread.

A stand-in cupy whose ``cuda.Device(i)`` is a context manager over a per-thread current
device (as CUDA's is); every launch, event and allocation records the device it ran on.
"""

from __future__ import annotations

import sys
import threading
import types

import numpy as np
import pytest

from powermodels.devices import event_clock
from powermodels.devices.nvml import NVMLDevice
from powermodels.measuring import sampler as sampler_module
from powermodels.measuring.graphs import run_batched
from powermodels.measuring.runner import CupyRunner
from powermodels.workloads.base import Prepared, Workload

CURRENT = threading.local()  # CUDA's current device is per host thread; 0 until set
SEEN: list = []


def _current() -> int:
    return getattr(CURRENT, "device", 0)


class _Device:
    def __init__(self, index=None):
        self.index = _current() if index is None else index

    def __enter__(self):
        self.previous = _current()
        CURRENT.device = self.index
        return self

    def __exit__(self, *exc):
        CURRENT.device = self.previous
        return False

    def synchronize(self):
        pass


class _Event:
    def record(self, stream=None):
        SEEN.append(("event", _current()))

    def synchronize(self):
        pass


class _Stream:
    def __init__(self, non_blocking=False):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        pass

    def begin_capture(self):
        pass

    def end_capture(self):
        return types.SimpleNamespace(launch=lambda stream=None: SEEN.append(("graph", _current())))


class _Prepared(Prepared):
    timing = "events"

    def launch(self, stream=None):
        SEEN.append(("launch", _current()))

    def close(self):
        SEEN.append(("close", _current()))


class _Workload(Workload):
    name, kind, tune_params = "stand-in", "kernel", {}

    def prepare(self, config):
        SEEN.append(("prepare", _current()))
        return _Prepared()


class _Clock:
    def __init__(self, now=None):
        pass

    def calibrate(self, brackets=20):
        SEEN.append(("clock", _current()))

    def host_times(self, events):
        return np.arange(len(events), dtype=float)


class _Sampler:
    def __init__(self, device, **kwargs):
        pass

    def start(self):
        return self

    def stop(self):
        pass


class _GPU(NVMLDevice):
    """An NVML device opened for CUDA ordinal ``index``, without NVML (the runner reads no sensor here)."""

    def __init__(self, index):
        self.index = index

    def now(self):
        return 0.0


@pytest.fixture
def cupy(monkeypatch):
    SEEN.clear()
    CURRENT.device = 0
    runtime = types.SimpleNamespace(deviceSynchronize=lambda: SEEN.append(("device-sync", _current())))
    cuda = types.SimpleNamespace(Device=_Device, Event=_Event, Stream=_Stream, runtime=runtime,
                                 get_current_stream=_Stream)
    def zeros(n, dtype=None):  # the clock probe's buffer
        SEEN.append(("alloc", _current()))

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=cuda, zeros=zeros, uint64="uint64", RawKernel=lambda source, name: None))
    monkeypatch.setattr(event_clock, "EventClock", _Clock)
    monkeypatch.setattr(sampler_module, "Sampler", _Sampler)


def test_every_launch_runs_on_the_sensors_gpu(cupy):
    runner = CupyRunner(_GPU(index=1))
    runner.run(_Workload(), None, 3)
    runner.run_as_called(_Workload(), None, 2)
    runner.idle(0.0)
    assert runner.probe_clocks(True)  # the probe's buffer on the same GPU
    runner.close()
    assert {what for what, _ in SEEN} >= {"clock", "prepare", "launch", "event", "device-sync", "alloc"}
    assert {device for _, device in SEEN} == {1}, SEEN
    assert _current() == 0  # the caller's device is restored


def test_a_thread_other_than_the_constructors_still_launches_on_the_runners_gpu(cupy):
    # a Dask worker builds its runner in one thread and measures in its pool's threads
    runner = CupyRunner(_GPU(index=1))
    errors = []

    def measure():
        try:
            runner.run(_Workload(), None, 2)
            run_batched(runner, _Workload(), None, 4, 2, back_to_back=lambda pk, n, f, s: [
                pk.launch(s) or _Event().record(s) for _ in range(n + 1)])
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    thread = threading.Thread(target=measure)
    thread.start()
    thread.join()
    assert not errors
    assert {device for _, device in SEEN} == {1}, SEEN
    assert ("graph", 1) in SEEN
