"""A trace cut into energy-counter spans, the thermal state of a window, and cap settling.

The total-energy counter is the exact integral of the GPU's power, published
every ~100 ms on Hopper. Between two of its updates the energy per launch is
exact once the launches in between are counted (the ``counter`` protocol's
method, :func:`~powermodels.energy_counter.aligned_window`); a
warm-up cut into such spans gives energy per launch, power, temperature and
clock every few hundred milliseconds — what α is fitted on (:mod:`.alpha`) and
what tells whether the power-cap controller has settled (:func:`cap_settled`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema
from ..energy_counter import counter_updates, launches_inside

__all__ = [
    "SPAN_COLUMNS",
    "cap_settled",
    "counter_spans",
    "extend_until_settled",
    "power_capped",
    "settled_spans",
    "thermal_state",
]

#: Columns of the span table :func:`counter_spans` returns (schema names; per launch where
#: the run table's are: ``energy_j`` and ``time_s`` per launch).
SPAN_COLUMNS = (schema.START_S, schema.END_S, schema.LAUNCHES, schema.ENERGY_J, schema.POWER_W,
                schema.TIME_S, schema.TEMPERATURE_C, schema.SM_CLOCK_MHZ,
                schema.THROTTLE_POWER_CAP_FRACTION)

_POWER_CAP_BITS = 0x4 | 0x80  # SW power cap, HW power brake (NVML clock-event reasons)


def _readings(trace: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    if column not in trace.columns:
        return np.empty(0), np.empty(0)
    t = trace[schema.T_S].to_numpy(dtype=float)
    v = trace[column].to_numpy(dtype=float)
    ok = np.isfinite(v)
    return t[ok], v[ok]


def counter_spans(trace: pd.DataFrame, launches: np.ndarray, *, start_s: float | None = None,
                  end_s: float | None = None, updates_per_span: int = 2) -> pd.DataFrame:
    """Energy per launch, power, temperature and clock between energy-counter updates.

    Parameters
    ----------
    trace : pandas.DataFrame
        Trace table with ``energy_counter_j`` (and, where known,
        ``temperature_c``, ``sm_clock_mhz``, ``throttle_reasons``).
    launches : array of shape (n, 2)
        Launch intervals on the trace's clock (back to back over the spans).
    start_s, end_s : float, optional
        Only spans whose update brackets lie inside ``[start_s, end_s]``
        (default: the launches' first start and last end).
    updates_per_span : int, default=2
        Counter update intervals per span (2 ≈ 200 ms on Hopper: short enough
        to follow a warm-up, long enough that one update's jitter is small).

    Returns
    -------
    pandas.DataFrame
        One row per span, columns :data:`SPAN_COLUMNS`; empty when fewer
        than ``updates_per_span + 1`` updates fall inside.
    """
    if isinstance(updates_per_span, bool) or int(updates_per_span) != updates_per_span or updates_per_span < 1:
        raise ValueError(f"counter_spans: updates_per_span must be an int >= 1, got {updates_per_span!r}")
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    if iv.shape[0] == 0:
        raise ValueError("counter_spans: no launches")
    lo_s = float(iv[0, 0]) if start_s is None else float(start_s)
    hi_s = float(iv[-1, 1]) if end_s is None else float(end_s)
    lo, hi, joules = counter_updates(trace)
    keep = (lo >= lo_s) & (hi <= hi_s)
    lo, hi, joules = lo[keep], hi[keep], joules[keep]
    mid = 0.5 * (lo + hi)
    k = int(updates_per_span)
    t_temp, temp = _readings(trace, schema.TEMPERATURE_C)
    t_clock, clock = _readings(trace, schema.SM_CLOCK_MHZ)
    t_all = trace[schema.T_S].to_numpy(dtype=float)
    reasons = (trace[schema.THROTTLE_REASONS].to_numpy() if schema.THROTTLE_REASONS in trace.columns
               else np.zeros(len(trace), dtype=int))
    rows = []
    for a in range(0, mid.size - k, k):
        t0, t1 = float(mid[a]), float(mid[a + k])
        n = launches_inside(iv, t0, t1)
        if n <= 0 or t1 <= t0:
            continue
        energy = float(joules[a + k] - joules[a])
        inside = (iv[:, 1] > t0) & (iv[:, 0] < t1)
        in_all = (t_all >= t0) & (t_all <= t1)
        rows.append((t0, t1, n, energy / n, energy / (t1 - t0),
                     float(np.mean(iv[inside, 1] - iv[inside, 0])),
                     _mean_between(t_temp, temp, t0, t1), _mean_between(t_clock, clock, t0, t1),
                     float(np.mean((reasons[in_all].astype(np.int64) & _POWER_CAP_BITS) != 0))
                     if in_all.any() else math.nan))
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS))


def _mean_between(t: np.ndarray, v: np.ndarray, t0: float, t1: float) -> float:
    inside = (t >= t0) & (t <= t1)
    if inside.any():
        return float(v[inside].mean())
    before = np.flatnonzero(t <= t0)  # a slow reading: the last value before the span holds
    return float(v[before[-1]]) if before.size else math.nan


def thermal_state(trace: pd.DataFrame, start_s: float, end_s: float) -> dict:
    """Die temperature at a window's start and end (the readings nearest inside it).

    Returns
    -------
    dict
        ``temperature_start_c``, ``temperature_end_c`` (schema names); NaN
        where the trace has no temperature.
    """
    t, v = _readings(trace, schema.TEMPERATURE_C)
    inside = np.flatnonzero((t >= start_s) & (t <= end_s))
    if inside.size:
        first, last = float(v[inside[0]]), float(v[inside[-1]])
    else:
        before = np.flatnonzero(t <= start_s)
        first = last = float(v[before[-1]]) if before.size else math.nan
    return {schema.TEMPERATURE_START_C: first, schema.TEMPERATURE_END_C: last}


def power_capped(spans: pd.DataFrame, *, share: float = 0.5) -> bool:
    """Whether the power-cap clock-event reason was active in more than ``share`` of the spans' readings."""
    cap = spans[schema.THROTTLE_POWER_CAP_FRACTION].to_numpy(dtype=float) if len(spans) else np.empty(0)
    cap = cap[np.isfinite(cap)]
    return bool(cap.size and cap.mean() > share)


def cap_settled(spans: pd.DataFrame, *, lookback_s: float = 1.0, tolerance: float = 0.005) -> bool:
    """Whether the power-cap controller has settled over the last ``lookback_s`` of spans.

    Under the cap the controller overshoots and then moves power (and the clock)
    for seconds (lent H100, bf16 GEMM 8192²: the counter read ~770 W over the
    first 0.5 s and drifted from ~730 W at 2 s to ~700 W at 12 s). Settled
    means the energy per launch over the last ``lookback_s`` has no trend
    larger than ``tolerance`` (relative, across the lookback), judged from a
    least-squares line through the spans, and the lookback holds at least
    three spans.
    """
    if len(spans) < 3:
        return False
    end = float(spans[schema.END_S].iloc[-1])
    last = spans.loc[spans[schema.START_S].to_numpy(dtype=float) >= end - lookback_s]
    if len(last) < 3:
        return False
    t = 0.5 * (last[schema.START_S].to_numpy(dtype=float) + last[schema.END_S].to_numpy(dtype=float))
    e = last[schema.ENERGY_J].to_numpy(dtype=float)
    slope = np.polyfit(t - t.mean(), e, 1)[0]
    change = abs(slope) * (t[-1] - t[0]) / float(np.mean(e))
    return bool(change <= tolerance)


def settled_spans(spans: pd.DataFrame, *, lookback_s: float = 1.0, tolerance: float = 0.005) -> pd.DataFrame:
    """The spans from the first ``lookback_s`` over which the controller had settled (:func:`cap_settled`).

    Under the power cap a warm-up's first seconds are the controller's overshoot,
    not a temperature effect; α of the capped regime is fitted on what follows.
    Empty when it never settled.
    """
    ends = spans[schema.END_S].to_numpy(dtype=float)
    starts = spans[schema.START_S].to_numpy(dtype=float)
    for i in range(2, len(spans)):
        if cap_settled(spans.iloc[: i + 1], lookback_s=lookback_s, tolerance=tolerance):
            return spans.loc[starts >= ends[i] - lookback_s]
    return spans.iloc[:0]


def extend_until_settled(run_more, trace_until, launches: np.ndarray, start_s: float, *,
                         max_settle_s: float = 5.0, lookback_s: float = 1.0,
                         tolerance: float = 0.005) -> tuple[np.ndarray, pd.DataFrame, float, bool]:
    """Keep the load on while the power-cap controller moves, at most ``max_settle_s`` more.

    Parameters
    ----------
    run_more : callable
        ``run_more()`` runs about one counter update period more of the same
        launches back to back and returns their ``(n, 2)`` intervals.
    trace_until : callable
        ``trace_until(end_s)`` returns the trace up to ``end_s``.
    launches : array of shape (n, 2)
        The measuring run's launches so far.
    start_s : float
        Start of the measuring run.

    Returns
    -------
    launches : ndarray
        All launches, the added ones included.
    trace : pandas.DataFrame
    settle_s : float
        Load added waiting for the controller.
    transient : bool
        True when the cap reason was active and the last ``lookback_s`` still
        drifted after ``max_settle_s``.

    Without the cap reason in the run, nothing is added.
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    end0 = float(iv[-1, 1])
    trace = trace_until(end0)
    spans = counter_spans(trace, iv, start_s=start_s, end_s=end0, updates_per_span=1)
    if not power_capped(spans, share=0.0):
        return iv, trace, 0.0, False
    while not cap_settled(spans, lookback_s=lookback_s, tolerance=tolerance):
        if float(iv[-1, 1]) - end0 >= max_settle_s:
            return iv, trace, float(iv[-1, 1]) - end0, True
        iv = np.vstack([iv, run_more()])
        trace = trace_until(float(iv[-1, 1]))
        spans = counter_spans(trace, iv, start_s=start_s, end_s=float(iv[-1, 1]), updates_per_span=1)
    return iv, trace, float(iv[-1, 1]) - end0, False
