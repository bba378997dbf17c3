"""CupyRunner.run_probed with a stand-in cupy: probes and launches interleave on one stream."""

import contextlib
import sys
import types

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.measuring.runner import CupyRunner

ORDER: list = []


class _Event:
    def __init__(self):
        self.t = None

    def record(self, stream):
        ORDER.append("event")
        self.t = len(ORDER) * 1e-3  # one ms per queued item, as a host time

    def synchronize(self):
        pass


class _Prepared:
    timing = "events"

    def launch(self, stream=None):
        ORDER.append("launch")


class _Probe:
    def __init__(self):
        self.n = 0

    def enqueue(self, stream=None):
        ORDER.append("probe")
        self.n += 1
        return self.n - 1

    def collect(self):
        n, self.n = self.n, 0
        return pd.DataFrame({schema.PROBE_CYCLES: np.full(n, 39_600.0), schema.PROBE_ELAPSED_NS: 20_000.0,
                             schema.PROBE_CLOCK_MHZ: 1980.0})


class _Clock:
    def calibrate(self, n):
        pass

    def host_times(self, events):
        return np.array([e.t for e in events])


def test_run_probed_brackets_every_batch(monkeypatch):
    ORDER.clear()
    cuda = types.SimpleNamespace(Event=_Event, get_current_stream=lambda: "stream",
                                 Stream=types.SimpleNamespace(null="null"))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    runner = object.__new__(CupyRunner)
    runner.in_flight = 2
    runner.device = types.SimpleNamespace(cuda_device=contextlib.nullcontext)
    runner.clock = _Clock()
    runner.prepared = lambda w, c: _Prepared()
    rows, probes = runner.run_probed("w", None, batches=3, per_batch=2, probe=_Probe())
    # probe, then per batch: start event, the launches, end event, probe
    assert ORDER == ["probe"] + ["event", "launch", "launch", "event", "probe"] * 3
    assert rows.shape == (3, 3) and len(probes) == 4
    t = probes[schema.T_S].to_numpy()
    assert np.all(t[:-1] <= rows[:, 0]) and np.all(t[1:] >= rows[:, 1])  # each batch bracketed
    assert np.allclose(rows[:, 2], (rows[:, 1] - rows[:, 0]) / 2)


def test_run_probed_alternating_queues_both_loads_in_one_call(monkeypatch):
    """Fails before run_probed_alternating: the ladder's turns were one run_probed call each, and each
    call's end sync, clock calibration and probe readback left the GPU idle ~4 ms (H100, H200)."""
    ORDER.clear()
    syncs, calibrations = [], []

    class Event(_Event):
        def synchronize(self):
            syncs.append(self.t)

    class Clock(_Clock):
        def calibrate(self, n):
            calibrations.append(n)

    cuda = types.SimpleNamespace(Event=Event, get_current_stream=lambda: "stream",
                                 Stream=types.SimpleNamespace(null="null"))
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    runner = object.__new__(CupyRunner)
    runner.in_flight = 100
    runner.device = types.SimpleNamespace(cuda_device=contextlib.nullcontext)
    runner.clock = Clock()
    runner.prepared = lambda w, c: _Prepared()
    rows, which, probes = runner.run_probed_alternating([("p", None, 2, 1), ("w", None, 1, 3)], 3, _Probe())
    turn = ["event", "launch", "event", "probe"] * 2 + ["event", "launch", "launch", "launch", "event", "probe"]
    assert ORDER == ["probe"] + turn * 3
    assert list(which) == [0, 0, 1] * 3 and rows.shape == (9, 3) and len(probes) == 10
    assert len(syncs) == 1 and calibrations == [8]  # the host waits once, at the end
    assert np.allclose(rows[:, 2], (rows[:, 1] - rows[:, 0]) / np.array([1, 1, 3] * 3))
