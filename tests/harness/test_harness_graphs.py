"""Batching of short launches (harness.graphs): the logic that needs no GPU, with a stand-in stream."""

from __future__ import annotations

import numpy as np
import pytest

from powermodels.measuring.graphs import Batch, batch_size, batch_sizes, spread


def test_batch_size_only_for_short_launches():
    assert batch_size(1e-3) == 1
    assert batch_size(2e-4) == 1
    assert batch_size(1e-5) == 200          # 2 ms of 10 µs launches
    assert batch_size(1e-9, max_batch=4096) == 4096
    for bad in (0.0, -1e-3, float("nan")):
        with pytest.raises(ValueError, match="launch_s"):
            batch_size(bad)


def test_batch_sizes_and_spread():
    assert batch_sizes(10, 4) == [4, 4, 2]
    assert batch_sizes(8, 4) == [4, 4]
    with pytest.raises(ValueError):
        batch_sizes(0, 4)
    iv = spread(np.array([[0.0, 4.0], [4.0, 6.0]]), [4, 2])
    np.testing.assert_allclose(iv, [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6]])
    with pytest.raises(ValueError, match="one size"):
        spread(np.array([[0.0, 1.0]]), [1, 2])


class _Stream:
    """Stands in for a CuPy stream: records what was captured."""

    def __init__(self, fail_on_launch=False):
        self.capturing, self.fail, self.ended = False, fail_on_launch, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def begin_capture(self):
        self.capturing = True

    def end_capture(self):
        self.capturing = False
        self.ended += 1
        return _Graph()


class _Graph:
    def __init__(self):
        self.launches = 0

    def launch(self, stream=None):
        self.launches += 1


class _Prepared:
    def __init__(self, fail=False, timing="events"):
        self.calls, self.fail, self.timing = 0, fail, timing

    def launch(self, stream=None):
        if self.fail and stream is not None and stream.capturing:
            raise RuntimeError("operation not permitted when stream is capturing")
        self.calls += 1


def test_batch_captures_once_and_replays_the_graph():
    p = _Prepared()
    b = Batch(p, 5).capture(_Stream())
    assert b.captured and p.calls == 5 and b.error is None
    b.launch()
    b.launch()
    assert b.graph.launches == 2 and p.calls == 5  # replays do not call the host launch again


def test_uncapturable_work_falls_back_to_a_loop_and_ends_the_capture():
    p = _Prepared(fail=True)
    stream = _Stream()
    b = Batch(p, 3).capture(stream)
    assert not b.captured and "not permitted" in b.error
    assert stream.ended == 1 and not stream.capturing
    b.launch()
    assert p.calls == 3
    sync = Batch(_Prepared(timing="synchronize"), 3).capture(_Stream())
    assert not sync.captured and "own streams" in sync.error
    with pytest.raises(ValueError):
        Batch(p, 0)


@pytest.mark.gpu
def test_run_batched_captures_a_registry_kernel_on_a_gpu():
    from powermodels.devices import open_device
    from powermodels.measuring.graphs import run_batched
    from powermodels.measuring.runner import CupyRunner

    config = "block_size_x=1024,nr_outer=8,nr_inner=256"  # ~70 µs per launch on Hopper
    with CupyRunner(open_device("nvml")) as runner:
        iv = run_batched(runner, "fp32", config, 390, 40)
        assert iv.shape == (400, 2) and np.all(np.diff(iv[:, 0]) > 0)
        (unit,) = runner._batches.values()
        assert unit.captured, unit.error
        loop = runner.run("fp32", config, 400)
        graph_t = float(np.median(iv[:, 1] - iv[:, 0]))
        loop_t = float(np.median(loop[:, 1] - loop[:, 0]))
        assert graph_t == pytest.approx(loop_t, rel=0.1)  # same work per launch
