"""run_batched's graph cache follows the runner's prepared workloads (no GPU: a stand-in cupy)."""

from __future__ import annotations

import contextlib
import sys
import types

import numpy as np

from powermodels.measuring.graphs import run_batched


class _Stream:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def begin_capture(self):
        pass

    def end_capture(self):
        return types.SimpleNamespace(launch=lambda stream=None: None)


class _Prepared:
    timing = "events"

    def launch(self, stream=None):
        pass


class _Clock:
    def calibrate(self, n):
        pass

    def host_times(self, events):
        return np.asarray(events, dtype=float)


class _Runner:
    """Keeps the last ``keep`` prepared workloads, like CupyRunner's keep_prepared."""

    def __init__(self, keep=2):
        self._prepared, self.keep, self.clock, self.in_flight = {}, keep, _Clock(), 8
        self.device = types.SimpleNamespace(cuda_device=contextlib.nullcontext)

    def prepared(self, workload, config):
        key = (workload, str(config))
        pk = self._prepared.pop(key, None) or _Prepared()
        self._prepared[key] = pk
        while len(self._prepared) > self.keep:
            self._prepared.pop(next(iter(self._prepared)))
        return pk


def test_graphs_of_evicted_prepared_workloads_are_dropped(monkeypatch):
    cuda = types.SimpleNamespace(Stream=lambda non_blocking=True: _Stream(),
                                 get_current_stream=lambda: None)
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(cuda=cuda))
    runner = _Runner(keep=2)
    b2b = lambda unit, n, in_flight, stream: list(range(n + 1))  # noqa: E731
    for i in range(6):
        iv = run_batched(runner, "k", {"i": i}, 8, 4, back_to_back=b2b)
        assert iv.shape == (8, 2)
    live = {id(p) for p in runner._prepared.values()}
    # only the kept configurations' graphs (and through them their GPU arrays) are held
    assert {unit.prepared for unit in runner._batches.values()} <= set(runner._prepared.values())
    assert len(runner._batches) == len(live) == 2
