"""The total-energy counter: its observed updates, and windows aligned to them.

The built-in total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``)
is the exact integral of the GPU's power, published in whole millijoules at
its own updates (~100 ms apart on Hopper, with jitter). A sampler that reads
it every few ms sees each update as a new value; the update was published
between the read before and that read (:func:`counter_updates`). The energy
between two updates, divided by the launches that ran between them
(:func:`launches_inside`), is a launch's energy without any sensor model
(:func:`aligned_window`, :class:`CounterWindow`; the ``counter`` protocol's
method, :mod:`powermodels.measuring.protocols.counter`).

These are pure functions of a trace table and launch intervals: the
protocols (:mod:`powermodels.measuring`) and the thermal state of a row
(:mod:`powermodels.thermal`) both build on them, so they live below both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import schema

__all__ = ["STALLED_BRACKET_FACTOR", "CounterWindow", "aligned_window", "counter_quantum", "counter_updates",
           "launches_inside", "mean_power_between_updates"]

#: An update whose read bracket is wider than this many times the median bracket came from a read that
#: stalled (10–120 ms on the H100 recordings): it is placed by its neighbours'
#: grid (:func:`powermodels.natural_dvfs.clock_windows.local_grid_updates`,
#: :func:`powermodels.twin.metrics.counter_updates`), not at the read that first showed it.
STALLED_BRACKET_FACTOR = 2.0


def counter_updates(trace: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The counter's updates the sampler saw: bracket lower ends, upper ends and new values.

    The counter is read on its own cadence (rows where ``energy_counter_j`` is
    finite). A read whose value differs from the previous read's saw a new
    update, published after the previous read and no later than this one, so
    the update lies in ``(t_prev, t_now]``. The first read is no update (its
    value may be old).

    Returns
    -------
    lo, hi, joules : ndarray
        Bracket of every observed update on the trace's clock and the counter
        value it published.
    """
    for c in (schema.T_S, schema.ENERGY_COUNTER_J):
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing (have {list(trace.columns)})")
    t = trace[schema.T_S].to_numpy(dtype=float)
    j = trace[schema.ENERGY_COUNTER_J].to_numpy(dtype=float)
    ok = np.isfinite(j)
    t, j = t[ok], j[ok]
    if j.size < 2:
        return t[:0], t[:0], j[:0]
    if np.any(np.diff(t) <= 0):
        raise ValueError("trace: t_s of the energy-counter readings is not increasing")
    if np.any(np.diff(j) < 0):
        raise ValueError("trace: the energy counter decreased (a reset or a wrap); measure again")
    new = np.flatnonzero(j[1:] != j[:-1]) + 1
    return t[new - 1], t[new], j[new]


def launches_inside(launches: np.ndarray, start_s: float, end_s: float, counts=None) -> float:
    """Launches within ``[start_s, end_s]``: each counts the fraction of its duration inside.

    ``counts`` (optional, one per interval) makes each interval a batch of
    that many launches (a raw recording's rows), counted pro rata the same way.
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    dur = iv[:, 1] - iv[:, 0]
    inside = np.clip(np.minimum(iv[:, 1], end_s) - np.maximum(iv[:, 0], start_s), 0.0, None)
    whole = dur <= 0  # a zero-length launch inside the window counts whole
    frac = np.where(whole, ((iv[:, 0] >= start_s) & (iv[:, 0] <= end_s)).astype(float),
                    inside / np.where(whole, 1.0, dur))
    if counts is not None:
        frac = frac * np.asarray(counts, dtype=float).reshape(-1)
    return float(frac.sum())


@dataclass(frozen=True)
class CounterWindow:
    """Energy between two counter updates and the launches that ran between them.

    Attributes
    ----------
    start_s, end_s : float
        Estimated publication instants of the two updates (bracket middles).
    start_half_s, end_half_s : float
        Half-widths of their brackets.
    energy_j : float
        Counter difference between the two updates.
    launches : float
        Launches inside ``[start_s, end_s]`` (fractions at the edges).
    updates : int
        Counter updates spanned.
    quantum_j : float
        Counter resolution used for the uncertainty.
    """

    start_s: float
    end_s: float
    start_half_s: float
    end_half_s: float
    energy_j: float
    launches: float
    updates: int
    quantum_j: float

    @property
    def energy_per_launch_j(self) -> float:
        return self.energy_j / self.launches if self.launches > 0 else math.nan

    @property
    def power_w(self) -> float:
        """Mean power over the window (counter difference / window length)."""
        return self.energy_j / (self.end_s - self.start_s)

    @property
    def uncertainty_j(self) -> float:
        """1-σ uncertainty of the energy per launch: bracket widths and counter quantisation."""
        # an end misplaced by δ moves δ·P joules between "inside" and "outside"
        t_rel = math.hypot(self.start_half_s, self.end_half_s) / math.sqrt(3.0) / (self.end_s - self.start_s)
        q = self.quantum_j * math.sqrt(2.0 / 12.0) / self.energy_j if self.energy_j > 0 else 0.0
        return abs(self.energy_per_launch_j) * math.hypot(t_rel, q)


def mean_power_between_updates(times: np.ndarray, joules: np.ndarray, start_s: float, end_s: float) -> float:
    """Mean power (W) between the first counter update at or after ``start_s`` and the last before ``end_s``.

    ``times`` and ``joules`` are the updates' instants and values in time order (e.g.
    :func:`powermodels.twin.metrics.counter_updates` of a recording); NaN when fewer than two
    updates lie in the window.
    """
    i, j = int(np.searchsorted(times, start_s)), int(np.searchsorted(times, end_s)) - 1
    return float((joules[j] - joules[i]) / (times[j] - times[i])) if j > i else float("nan")


def counter_quantum(joules: np.ndarray) -> float:
    steps = np.diff(np.unique(joules))
    steps = steps[steps > 0]
    return float(min(steps.min(), 1e-3)) if steps.size else 1e-3


def aligned_window(trace: pd.DataFrame, launches: np.ndarray, start_s: float, end_s: float,
                   max_updates: int | None = None) -> CounterWindow | None:
    """The longest span between two counter updates whose brackets lie inside ``[start_s, end_s]``.

    Parameters
    ----------
    trace : pandas.DataFrame
        Trace table with ``energy_counter_j`` readings.
    launches : array of shape (n, 2)
        Launch intervals on the trace's clock.
    start_s, end_s : float
        The span of back-to-back load the window must stay within.
    max_updates : int, optional
        Use at most this many update intervals (the first ones).

    Returns
    -------
    CounterWindow or None
        None when fewer than two updates fall inside.
    """
    lo, hi, joules = counter_updates(trace)
    inside = (lo >= start_s) & (hi <= end_s)
    idx = np.flatnonzero(inside)
    if idx.size < 2:
        return None
    a = idx[0]
    b = idx[-1] if max_updates is None else idx[min(max_updates, idx.size - 1)]
    ta, tb = 0.5 * (lo[a] + hi[a]), 0.5 * (lo[b] + hi[b])
    return CounterWindow(
        start_s=float(ta), end_s=float(tb),
        start_half_s=float(0.5 * (hi[a] - lo[a])), end_half_s=float(0.5 * (hi[b] - lo[b])),
        energy_j=float(joules[b] - joules[a]),
        launches=launches_inside(launches, ta, tb),
        updates=int(b - a),
        quantum_j=counter_quantum(joules),
    )
