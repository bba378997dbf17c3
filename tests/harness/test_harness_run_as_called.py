"""CupyRunner.run_as_called with a stand-in cupy: a plain loop of calls, no events, one synchronize."""

import contextlib
import sys
import types

import numpy as np

from powermodels.measuring.runner import CupyRunner

ORDER: list = []


class _Stream:
    def synchronize(self):
        ORDER.append("synchronize")


class _Prepared:
    timing = "events"

    def launch(self, stream=None):
        ORDER.append("launch")


class _Device:
    def __init__(self):
        self.t = 10.0

    def cuda_device(self):
        return contextlib.nullcontext()

    def now(self):
        self.t += 0.5
        return self.t


def _runner(monkeypatch, prepared):
    ORDER.clear()
    runtime = types.SimpleNamespace(deviceSynchronize=lambda: ORDER.append("device-sync"))

    def no_events():
        raise AssertionError("as called: no CUDA events between the calls")

    cuda = types.SimpleNamespace(get_current_stream=_Stream, runtime=runtime, Event=no_events)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    runner = object.__new__(CupyRunner)
    runner.device = _Device()
    runner.prepared = lambda w, c: prepared
    return runner


def test_as_called_is_a_plain_loop_split_evenly_over_the_host_span(monkeypatch):
    runner = _runner(monkeypatch, _Prepared())
    iv = runner.run_as_called("w", None, 4)
    assert ORDER == ["device-sync", "launch", "launch", "launch", "launch", "synchronize"]
    # the host clock from before the first call to after the last, split evenly: gaps charged to calls
    assert iv.shape == (4, 2) and iv[0, 0] == 10.5 and iv[-1, 1] == 11.0
    assert np.allclose(np.diff(iv, axis=1), 0.125) and np.allclose(iv[1:, 0], iv[:-1, 1])


def test_work_on_other_streams_is_timed_by_device_synchronizes(monkeypatch):
    prepared = _Prepared()
    prepared.timing = "synchronize"
    runner = _runner(monkeypatch, prepared)
    seen = []
    runner._launch_synchronized = lambda pk, n: seen.append((pk, n)) or np.zeros((n, 2))
    runner.run_as_called("w", None, 3)
    assert seen == [(prepared, 3)] and ORDER == []
