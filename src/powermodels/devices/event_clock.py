"""CUDA events on the host clock (FinGraV §IV-A, "S2 high-resolution CPU–GPU sync").

A reference event is recorded while the host brackets it with timestamps; the
bracket bounds the event's host time, and intersecting several brackets gives
the offset with a stated uncertainty (:class:`SyncEstimate`). The runner's
sampler (:mod:`powermodels.measuring.sampler`) reads the sensor on the same host
clock. CuPy is imported only when events are recorded or read.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

__all__ = ["EventClock", "SyncEstimate"]


@dataclass(frozen=True)
class SyncEstimate:
    """Where the reference event lies on the host clock.

    Attributes
    ----------
    offset_s : float
        Host time of the reference event (midpoint of the tightest bound).
    uncertainty_s : float
        Half-width of the interval that must contain it (a hard bound).
    spread_s : float
        Standard deviation of the single-bracket midpoints (what one bracket
        alone would be uncertain by).
    n : int
        Number of brackets combined.
    """

    offset_s: float
    uncertainty_s: float
    spread_s: float
    n: int


class EventClock:
    """Map CUDA events onto the host clock.

    Parameters
    ----------
    now : callable
        The host clock (``device.now``), monotonic seconds.
    stream : cupy stream, optional
        Stream the events are recorded on (the current stream when None).
    """

    def __init__(self, now=time.perf_counter, stream=None):
        self.now = now
        self.stream = stream
        self.reference = None
        self.estimate: SyncEstimate | None = None

    def calibrate(self, brackets: int = 20) -> SyncEstimate:
        """Record ``brackets`` events, each between two host timestamps, and bound the offset.

        The first event is the reference. Bracket *k* says the event's host
        time lies in ``[a_k, b_k]``; the GPU clock says it lies ``d_k`` after
        the reference, so the reference lies in ``[a_k - d_k, b_k - d_k]``.
        The intersection over *k* bounds the reference's host time.
        """
        import cupy as cp

        if brackets < 1:
            raise ValueError(f"EventClock: brackets must be >= 1, got {brackets}")
        stream = self.stream or cp.cuda.get_current_stream()
        stream.synchronize()
        events, bounds = [], []
        for _ in range(brackets):
            ev = cp.cuda.Event()
            a = self.now()
            ev.record(stream)
            ev.synchronize()
            b = self.now()
            events.append(ev)
            bounds.append((a, b))
        ref = events[0]
        d = np.array([0.0] + [cp.cuda.get_elapsed_time(ref, ev) * 1e-3 for ev in events[1:]])
        lo = np.array([a for a, _ in bounds]) - d
        hi = np.array([b for _, b in bounds]) - d
        low, high = float(lo.max()), float(hi.min())
        if high < low:  # clocks drifted or a bracket was wrong: fall back to the median
            mid = float(np.median(0.5 * (lo + hi)))
            half = float(np.median(0.5 * (hi - lo)))
        else:
            mid, half = 0.5 * (low + high), 0.5 * (high - low)
        self.reference = ref
        self.estimate = SyncEstimate(mid, half, float(np.std(0.5 * (lo + hi))), brackets)
        return self.estimate

    def host_time(self, event) -> float:
        """Host-clock time of a recorded (and completed) CUDA event."""
        import cupy as cp

        if self.reference is None:
            self.calibrate()
        return self.estimate.offset_s + cp.cuda.get_elapsed_time(self.reference, event) * 1e-3

    def host_times(self, events) -> np.ndarray:
        """Host-clock times of several completed events."""
        import cupy as cp

        if self.reference is None:
            self.calibrate()
        ref, off = self.reference, self.estimate.offset_s
        return np.array([off + cp.cuda.get_elapsed_time(ref, ev) * 1e-3 for ev in events])
