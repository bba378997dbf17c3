"""A Python callable that enqueues GPU work (CuPy, PyTorch, JAX, Numba...) as a workload.

The callable is called with its arguments bound once; each call is one
execution. How the runner times it (``timing``):

``"events"``
    CUDA events recorded on the current CuPy stream before and after the
    call. Right when the callable enqueues its work on that stream — CuPy and
    Numba by default, PyTorch while its current stream is the default stream
    (the legacy default stream, which CuPy's default stream also is).
``"synchronize"``
    A device synchronize before and after, timed on the host clock. Needed
    when the framework enqueues on streams of its own (JAX; PyTorch inside
    ``torch.cuda.stream(s)``); it includes the host's launch overheads.
``"auto"`` (default)
    Detected in :meth:`CallableWorkload.prepare`: ``"synchronize"`` when
    PyTorch's current stream is not CuPy's, else three probes compare the
    time the events span with the host time of call + device synchronize —
    when the work runs elsewhere the events see almost none of it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping

from .base import TIMINGS, Prepared, Workload, WorkloadError, check_tunable_names
from .expressions import make_restrictions
from .twins import as_twin, twin_workload

__all__ = ["CallableWorkload", "PreparedCallable", "detect_timing"]


class CallableWorkload(Workload):
    """A Python callable as a workload: ``fn(*args, **kwargs)`` is one execution.

    Parameters
    ----------
    fn : callable
        Enqueues the GPU work of one execution on the current device.
    args : tuple, default=()
        Positional arguments, bound once.
    kwargs : dict, optional
        Keyword arguments, bound once.
    setup : callable, optional
        Called once in :meth:`prepare` (with the configuration as keyword
        arguments when there are ``tune_params``). Its return value feeds the
        call: a tuple is appended to ``args``, a dict merged into ``kwargs``,
        anything else (not None) appended as one argument.
    teardown : callable, optional
        Called by ``close()``: with setup's return value when ``setup`` is
        given, else with no argument.
    name : str, optional
        The run table's ``kernel`` value; ``fn.__name__`` when None.
    simulated : SimulatedTwin, SimulatedWorkload, dict or callable, optional
        Its twin on the simulated GPU (see :mod:`.twins`).
    timing : {"auto", "events", "synchronize"}, default="auto"
        How to time an execution (module docstring).
    tune_params : dict of str to sequence, optional
        Tunable parameters, passed to ``fn`` (and ``setup``) as keyword arguments.
    restrictions : str, callable or list, optional
        Restrictions on ``tune_params`` (:func:`~.expressions.make_restrictions`).
    """

    kind = "callable"

    def __init__(self, fn: Callable, *, args=(), kwargs: Mapping | None = None,
                 setup: Callable | None = None, teardown: Callable | None = None,
                 name: str | None = None, simulated=None, timing: str = "auto",
                 tune_params: Mapping | None = None, restrictions=None):
        if not callable(fn):
            raise ValueError(f"CallableWorkload: fn must be callable, got {type(fn).__name__}")
        for what, f in (("setup", setup), ("teardown", teardown)):
            if f is not None and not callable(f):
                raise ValueError(f"CallableWorkload: {what} must be callable, got {type(f).__name__}")
        if timing not in ("auto", *TIMINGS):
            raise ValueError(f"CallableWorkload: timing must be 'auto', 'events' or 'synchronize', got {timing!r}")
        self.fn = fn
        self.args = tuple(args) if isinstance(args, (list, tuple)) else (args,)
        self.kwargs = dict(kwargs or {})
        self.setup, self.teardown = setup, teardown
        self.name = name or getattr(fn, "__name__", None) or type(fn).__name__
        self.timing = timing
        self.tune_params = {k: tuple(v) for k, v in (tune_params or {}).items()}
        for k, v in self.tune_params.items():
            if not v:
                raise ValueError(f"CallableWorkload: tunable {k!r} has no values")
        check_tunable_names(f"callable {self.name!r}", self.tune_params)
        self.restrictions = make_restrictions(restrictions, self.tune_params)
        self.twin = as_twin(simulated)

    def bind(self, config: Mapping | None = None):
        """Run ``setup`` and return ``(args, kwargs, state)`` of the call for ``config``."""
        config = self.validate_config(config or {})
        args, kwargs, state = self.args, {**self.kwargs, **config}, None
        if self.setup is not None:
            try:
                state = self.setup(**config)
            except Exception as err:
                raise WorkloadError(f"callable {self.name!r}: setup raised {type(err).__name__}: {err}") from err
            if isinstance(state, tuple):
                args = args + state
            elif isinstance(state, Mapping):
                kwargs = {**kwargs, **state}
            elif state is not None:
                args = (*args, state)
        return args, kwargs, state

    def prepare(self, config=None) -> PreparedCallable:
        """Bind, call once (a warm-up that also checks it runs) and settle the timing."""
        args, kwargs, state = self.bind(config)
        prepared = PreparedCallable(self, args, kwargs, state)
        try:
            prepared.launch()
            prepared.timing = detect_timing(prepared.launch) if self.timing == "auto" else self.timing
        except BaseException:
            prepared.close()
            raise
        return prepared

    def simulated(self, config=None):
        if self.twin is None:
            return super().simulated(config)
        full = self.validate_config(config or {})
        cid = self.config_id(full)
        return twin_workload(self.twin, f"{self.name}[{cid}]" if cid else self.name, full)


class PreparedCallable(Prepared):
    """A :class:`CallableWorkload` with its arguments bound."""

    def __init__(self, workload: CallableWorkload, args: tuple, kwargs: dict, state):
        self.workload, self.args, self.kwargs, self.state = workload, args, kwargs, state
        self.timing = workload.timing if workload.timing != "auto" else "events"
        self._closed = False

    def launch(self, stream=None) -> None:
        """Call the function once (it enqueues on the current stream or its framework's own)."""
        try:
            self.workload.fn(*self.args, **self.kwargs)
        except Exception as err:
            raise WorkloadError(f"callable {self.workload.name!r} raised {type(err).__name__}: {err}") from err

    def close(self) -> None:
        if self._closed or self.workload.teardown is None:
            return
        self._closed = True
        if self.workload.setup is not None:
            self.workload.teardown(self.state)
        else:
            self.workload.teardown()


def _torch_stream_differs() -> bool:
    """True when PyTorch is in use and its current CUDA stream is not CuPy's."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return False
    import cupy as cp

    return int(torch.cuda.current_stream().cuda_stream) != int(cp.cuda.get_current_stream().ptr)


def detect_timing(call: Callable[[], None], probes: int = 3) -> str:
    """``"events"`` when ``call``'s GPU work runs on the current CuPy stream, else ``"synchronize"``.

    On the current stream the events bracket the work, so the time between
    them is about the host time of call + device synchronize; on another
    stream the second event is passed as soon as it is recorded, so the
    events span only the enqueue time. The median of ``probes`` ratios decides.
    """
    import cupy as cp

    if _torch_stream_differs():
        return "synchronize"
    stream = cp.cuda.get_current_stream()
    ratios = []
    for _ in range(probes):
        cp.cuda.runtime.deviceSynchronize()
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        t0 = time.perf_counter()
        e0.record(stream)
        call()
        e1.record(stream)
        cp.cuda.runtime.deviceSynchronize()
        host = time.perf_counter() - t0
        gpu = cp.cuda.get_elapsed_time(e0, e1) * 1e-3
        # under 50 µs the two cannot be told apart, and either timing is right to that precision
        ratios.append(1.0 if host < 50e-6 else gpu / host)
        if host > 0.1:  # one long call is a clear probe; more would only delay a training step
            break
    ratios.sort()
    return "events" if ratios[len(ratios) // 2] >= 0.5 else "synchronize"
