"""Very short launches batched so the GPU stays busy: CUDA graphs of N launches.

A 10 µs kernel launched from a Python loop leaves the GPU idle between
launches: each CuPy launch and each CUDA event costs a few microseconds of
host time, so the host, not the GPU, sets the pace, and the power (and
energy per launch) measured is that of a half-idle GPU. Capturing ``N``
launches of a prepared workload into a CUDA graph (``stream.begin_capture()``
… ``stream.end_capture()``) and launching the graph replays them back to back
on the GPU for one host call; events go between graphs, not between launches.

Each graph's [start, end] is split evenly into its ``N`` launches
(:func:`spread`): inside a graph every launch runs the same work back to back,
so the split is the mean launch time, which is all the protocols use.

Work that cannot be captured (a callable that synchronises, allocates from
a pool that is not capture-safe, or runs on its framework's own stream) is
batched as a plain loop of ``N`` launches instead: still one event pair per
batch, but the host pays every launch (:attr:`Batch.captured` says which).
Only :func:`run_batched` and :meth:`Batch.capture` touch CuPy (imported lazily).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..deprecation import renamed_keywords

__all__ = ["Batch", "batch_size", "batch_sizes", "rebatch", "run_batched", "run_launches", "spread"]


def batch_size(launch_s: float, *, below_s: float = 2e-4, target_s: float = 2e-3,
               max_batch: int = 4096) -> int:
    """Launches per batch for launches of ``launch_s``: 1 at or above ``below_s``, else ≈ ``target_s`` worth."""
    if not (math.isfinite(launch_s) and launch_s > 0):
        raise ValueError(f"batch_size: launch_s must be a positive time, got {launch_s!r}")
    if not (below_s >= 0 and target_s > 0 and max_batch >= 1):
        raise ValueError("batch_size: need below_s >= 0, target_s > 0 and max_batch >= 1")
    if launch_s >= below_s:
        return 1
    return int(min(max_batch, max(1, round(target_s / launch_s))))


def rebatch(batch: int, t_first: float, launches: np.ndarray, **batch_params) -> int:
    """The batch once more launches than the first were timed: ``batch`` unless it was 1 and they say short.

    One launch is timed by two CUDA events around one host call, so a host pause
    between them (the garbage collector, another thread holding the GIL) makes it
    look long, never short: a 21 µs add then ran a 12 s reference host-paced on a
    real H200 (25.7 µs per launch, 9 % more energy per launch than its graph rows).
    The median of ``launches`` (intervals, one or more) and the first time decide
    together (the shorter wins). Callers decide before the launches they measure, so that
    these run in one mode (the α warm-up probes 50 ms first).

    Parameters
    ----------
    batch : int
        The batch chosen from the first launch (1: one launch per host call).
    t_first : float
        The first launch's time, seconds.
    launches : array of shape (n, 2)
        [start, end] of the launches timed since, at ``batch``.
    **batch_params
        ``below_s``, ``target_s``, ``max_batch`` of :func:`batch_size`.

    Returns
    -------
    int
        Launches per batch from now on.
    """
    if int(batch) != 1 or not len(launches):
        return int(batch)
    t = float(np.median(np.diff(np.asarray(launches, dtype=float).reshape(-1, 2), axis=1)))
    return batch_size(max(min(float(t_first), t), 1e-9), **batch_params)


def batch_sizes(launches: int, batch: int) -> list[int]:
    """``launches`` cut into batches of ``batch`` (the last one shorter when it does not divide)."""
    if launches < 1 or batch < 1:
        raise ValueError(f"batch_sizes: launches and batch must be >= 1, got {launches}, {batch}")
    full, rest = divmod(int(launches), int(batch))
    return [int(batch)] * full + ([rest] if rest else [])


def spread(intervals: np.ndarray, sizes) -> np.ndarray:
    """Per-launch [start, end] from each batch's [start, end], split evenly among its ``sizes[i]`` launches."""
    iv = np.asarray(intervals, dtype=float).reshape(-1, 2)
    sizes = np.asarray(sizes, dtype=int)
    if len(sizes) != len(iv) or np.any(sizes < 1):
        raise ValueError(f"spread: need one size >= 1 per interval, got {len(sizes)} sizes for {len(iv)} intervals")
    owner = np.repeat(np.arange(len(iv)), sizes)
    k = np.arange(sizes.sum()) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    step = (iv[:, 1] - iv[:, 0]) / sizes
    start = iv[owner, 0] + k * step[owner]
    return np.column_stack([start, start + step[owner]])


class Batch:
    """``n`` launches of a prepared workload as one unit: a captured CUDA graph or a plain loop.

    Parameters
    ----------
    prepared : object with ``launch(stream=None)``
        A prepared workload (registry kernel, source kernel, callable).
    n : int
        Launches per batch.
    """

    def __init__(self, prepared, n: int):
        if n < 1:
            raise ValueError(f"Batch: n must be >= 1, got {n}")
        self.prepared = prepared
        self.n = int(n)
        self.graph = None
        self.error: str | None = None

    @property
    def captured(self) -> bool:
        return self.graph is not None

    def capture(self, stream) -> Batch:
        """Capture the ``n`` launches on ``stream`` (a non-default stream) into a graph.

        A capture that fails leaves the plain loop in place and the reason in
        :attr:`error`; a workload timed by device synchronisation is never captured.
        """
        if getattr(self.prepared, "timing", "events") == "synchronize":
            self.error = "the workload runs on its own streams (timed by synchronisation)"
            return self
        capturing = False
        try:
            with stream:
                stream.begin_capture()
                capturing = True
                for _ in range(self.n):
                    self.prepared.launch(stream)
                capturing = False
                self.graph = stream.end_capture()
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"
            self.graph = None
            if capturing:
                try:
                    stream.end_capture()  # end the invalidated capture so the stream is usable
                except Exception:
                    pass
        return self

    def launch(self, stream=None) -> None:
        """Enqueue the ``n`` launches on ``stream``."""
        if self.graph is not None:
            self.graph.launch(stream=stream)
        else:
            for _ in range(self.n):
                self.prepared.launch(stream)


def run_batched(runner, workload, config, launches: int, batch: int,
                back_to_back: Callable | None = None) -> np.ndarray:
    """Run ``workload`` about ``launches`` times on a :class:`~powermodels.measuring.runner.CupyRunner` in batches.

    The launch count is rounded up to whole batches. Batches are timed with
    CUDA events between them (``runner.clock`` puts them on the host clock)
    and each batch's interval is split evenly among its launches.

    Returns
    -------
    ndarray of shape (batches × batch, 2)
        Per-launch [start, end] host times.
    """
    import cupy as cp

    from .cupy_runner import back_to_back as _b2b

    if batch < 1 or launches < 1:
        raise ValueError(f"run_batched: launches and batch must be >= 1, got {launches}, {batch}")
    with runner.device.cuda_device():  # graph, stream and events on the runner's GPU
        prepared = runner.prepared(workload, config)
        cache = runner.__dict__.setdefault("_batches", {})
        live = getattr(runner, "_prepared", None)
        if live is not None:
            # drop the graphs of workloads the runner evicted (keep_prepared): a Batch holds its
            # prepared workload, so a kept one would pin every configuration's GPU arrays
            kept = {id(p) for p in live.values()}
            for k in [k for k in cache if k[0] not in kept]:
                del cache[k]
        key = (id(prepared), int(batch))
        if key not in cache:
            cache[key] = Batch(prepared, batch).capture(cp.cuda.Stream(non_blocking=True))
        unit = cache[key]
        n = math.ceil(launches / batch)
        stream = cp.cuda.get_current_stream()
        events = (back_to_back or _b2b)(unit, n, getattr(runner, "in_flight", 8), stream)
        runner.clock.calibrate(8)
        t = runner.clock.host_times(events)
        return spread(np.column_stack([t[:-1], t[1:]]), [batch] * n)


@renamed_keywords(kernel="workload")
def run_launches(runner, workload, config, launches: int, batch: int = 1) -> np.ndarray:
    """``runner.run`` back to back; on a real GPU, batches of ``batch`` launches as CUDA graphs.

    Batching (:func:`run_batched`) needs a runner
    with prepared workloads and a CUDA-event clock (``CupyRunner``); the
    simulated runner runs them without its per-call host gap (``run_graphs``).
    ``kernel=`` (the old name of ``workload``) still works, with a DeprecationWarning.
    """
    if batch > 1 and hasattr(runner, "prepared") and hasattr(runner, "clock") \
            and getattr(runner.prepared(workload, config), "timing", "events") != "synchronize":
        # (work on its framework's own streams is timed by synchronising, launch by launch)
        return run_batched(runner, workload, config, int(launches), int(batch))
    if batch > 1 and hasattr(runner, "run_graphs"):  # the simulated GPU: no host gap inside a graph
        return np.asarray(runner.run_graphs(workload, config, int(launches), int(batch)))
    return np.asarray(runner.run(workload, config, int(launches)))

