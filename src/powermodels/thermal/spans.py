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

from .. import clock_events, schema
from ..energy_counter import aligned_window, counter_updates, launches_inside

__all__ = [
    "SPAN_COLUMNS",
    "POWER_CAP_BITS",
    "CAP_POWER_TOLERANCE",
    "CAP_WINDOW_S",
    "cap_held",
    "cap_power_held",
    "capped_row_window",
    "cap_settled",
    "enforced_power_limit_w",
    "continuous_spans",
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

#: NVML clock-event reasons of the power cap: SW power cap, HW power brake.
POWER_CAP_BITS = clock_events.POWER_CAP


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
                     float(np.mean((reasons[in_all].astype(np.int64) & POWER_CAP_BITS) != 0))
                     if in_all.any() else math.nan))
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS))


def _mean_between(t: np.ndarray, v: np.ndarray, t0: float, t1: float) -> float:
    inside = (t >= t0) & (t <= t1)
    if inside.any():
        return float(v[inside].mean())
    before = np.flatnonzero(t <= t0)  # a slow reading: the last value before the span holds
    return float(v[before[-1]]) if before.size else math.nan


def continuous_spans(spans: pd.DataFrame, launches: np.ndarray, *, max_idle_share: float = 0.01,
                     gap_s: float = 0.005, restart_s: float = 0.35) -> pd.DataFrame:
    """The spans over which the load ran without a break, and long enough after the last break.

    α is fitted on these only. A span holding an idle gap charges the idle energy to its launches
    (energy per launch too high), and after a gap the die has cooled within its ~0.17 s pole (the
    H100 twin's fit) while the 1 °C, ~100 ms reading has not followed (energy per launch too low
    for the reading). The online warm-up reads the trace between its load pieces, so these gaps
    sit in its hotter part: on the simulated GPU, 20–100 ms host gaps after each piece turned the
    true 0.90 W/°C into 1.19–3.47 W/°C with a 10× wider uncertainty — the pattern of session 4's real
    H100 warm-ups (``datasets/h100-2026-11-25-session4``: 0.43–1.06 %/°C learned, ±40–90 %, where the
    cold→hot rows imply 0.2–0.3 %/°C).

    Parameters
    ----------
    spans : pandas.DataFrame
        :func:`counter_spans` of ``launches``.
    launches : array of shape (n, 2)
    max_idle_share : float, default=0.01
        Largest share of a span with no launch running.
    gap_s : float, default=0.005
        A pause between launches longer than this is a break in the load.
    restart_s : float, default=0.35
        Load left out after a break (two of the die's thermal poles).
    """
    if not len(spans):
        return spans
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    pause = iv[1:, 0] - iv[:-1, 1]
    restarts = iv[1:, 0][pause > gap_s]
    keep = []
    for t0, t1 in zip(spans[schema.START_S].to_numpy(dtype=float), spans[schema.END_S].to_numpy(dtype=float)):
        busy = float(np.clip(np.minimum(iv[:, 1], t1) - np.maximum(iv[:, 0], t0), 0.0, None).sum())
        recent = restarts[(restarts > t0 - restart_s) & (restarts < t1)]
        keep.append(busy >= (1.0 - max_idle_share) * (t1 - t0) and recent.size == 0)
    return spans.loc[np.asarray(keep, dtype=bool)]


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


#: Relative distance from the enforced power limit within which a capped load's mean power counts as
#: held by the controller (:func:`cap_held`). 2 % (14 W at 700 W): over 1 s windows of continuous capped
#: load from cold the real H100s read 692–708 W after 5 s on GPU-0b4f1a7f and 693–703 W on GPU-14ab84a0
#: (GPU-620707cb, whose counter publishes some updates late: 700–740 W), while session 4's unsettled rows
#: read 797–879 W (``benchmarks/cap_settling_real.py``; docs/thermal.md has the table).
CAP_POWER_TOLERANCE = 0.02

#: Length of the load window a capped row is judged and reported over, s: long enough that the
#: counter's ~100 ms publication jitter (2.2–2.3 % per 100 ms span on GPU-0b4f1a7f and GPU-14ab84a0, 6.6 % on
#: GPU-620707cb) averages down, short enough to keep a capped row near 1.5 s.
CAP_WINDOW_S = 1.0


def cap_power_held(spans: pd.DataFrame, power_limit_w: float | None, *, lookback_s: float = CAP_WINDOW_S,
                   tolerance: float = CAP_POWER_TOLERANCE) -> bool:
    """Whether the load's mean power over the last ``lookback_s`` of spans is within ``tolerance`` of the limit.

    The power is the spans' energy over the launches' busy time (energy per launch / time per
    launch: what the row reports), so idle gaps in the load cannot hide a load that runs above
    the limit. Without a known limit (None or NaN) the criterion does not apply (True).
    """
    if power_limit_w is None or not math.isfinite(power_limit_w) or power_limit_w <= 0:
        return True
    power = _mean_power(_last(spans, lookback_s))
    return bool(math.isfinite(power) and abs(power - power_limit_w) <= tolerance * power_limit_w)


def _last(spans: pd.DataFrame, lookback_s: float, skip_s: float = 0.0) -> pd.DataFrame:
    """The spans wholly inside the ``lookback_s`` that ends ``skip_s`` before the last span's end."""
    if not len(spans):
        return spans
    end = float(spans[schema.END_S].iloc[-1]) - skip_s
    starts, ends = spans[schema.START_S].to_numpy(dtype=float), spans[schema.END_S].to_numpy(dtype=float)
    return spans.loc[(starts >= end - lookback_s - 1e-9) & (ends <= end + 1e-9)]


def _mean_power(spans: pd.DataFrame) -> float:
    """Energy over busy launch time of ``spans`` (NaN when empty)."""
    if not len(spans):
        return math.nan
    n = spans[schema.LAUNCHES].to_numpy(dtype=float)
    energy = float(np.sum(spans[schema.ENERGY_J].to_numpy(dtype=float) * n))
    busy = float(np.sum(spans[schema.TIME_S].to_numpy(dtype=float) * n))
    return energy / busy if busy > 0 else math.nan


def _covered(spans: pd.DataFrame, lookback_s: float, share: float = 0.8) -> bool:
    return bool(len(spans) >= 3 and float(spans[schema.END_S].iloc[-1] - spans[schema.START_S].iloc[0])
                >= share * lookback_s)


def capped_row_window(trace: pd.DataFrame, launches: np.ndarray, start_s: float, end_s: float, *,
                      window_s: float = CAP_WINDOW_S):
    """The counter window a capped row reports and :func:`cap_held` judges: the last ``window_s`` of load.

    Returns
    -------
    window : CounterWindow or None
        :func:`~powermodels.energy_counter.aligned_window` over ``[max(start_s, end_s − window_s), end_s]``
        (None with fewer than two counter updates inside).
    power_w : float
        Its energy per launch over the mean time per launch of the launches it overlaps (the row's
        ``power_w``); NaN without a window.
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    window = aligned_window(trace, iv, max(float(start_s), float(end_s) - window_s), float(end_s))
    if window is None or window.launches <= 0:
        return window, math.nan
    keep = (iv[:, 1] > window.start_s) & (iv[:, 0] < window.end_s)
    return window, float(window.energy_per_launch_j / np.mean(iv[keep, 1] - iv[keep, 0]))


def cap_held(trace: pd.DataFrame, launches: np.ndarray, start_s: float, end_s: float,
             power_limit_w: float | None, *, window_s: float = CAP_WINDOW_S,
             tolerance: float = CAP_POWER_TOLERANCE) -> bool:
    """Whether the power-cap controller holds the limit over the last ``window_s`` of load.

    Settled means the mean power of :func:`capped_row_window` — the very window the row then reports —
    is within ``tolerance`` of the enforced ``power_limit_w``, and the window covers at least 80 % of
    ``window_s``. A mean over ≥ 1 s, not a trend of 100 ms spans: each span's power jitters by 2–7 %
    (the counter's publication times), so the earlier rule (no trend above 0.5 % across the last
    second) passed only 22–34 % of its checks on a *settled* real load and left every session-5
    capped row ``transient`` (``benchmarks/cap_settling_real.py``). Without a known limit the last
    ``window_s`` must read within ``tolerance`` of the ``window_s`` before it.
    """
    window, power = capped_row_window(trace, launches, start_s, end_s, window_s=window_s)
    if window is None or not math.isfinite(power) or window.end_s - window.start_s < 0.8 * window_s:
        return False
    if power_limit_w is not None and math.isfinite(power_limit_w) and power_limit_w > 0:
        return bool(abs(power - power_limit_w) <= tolerance * power_limit_w)
    if end_s - 2 * window_s < start_s:
        return False
    _, before = capped_row_window(trace, launches, start_s, end_s - window_s, window_s=window_s)
    return bool(math.isfinite(before) and abs(power - before) <= tolerance * before)


def enforced_power_limit_w(device) -> float:
    """The power limit the board enforces now, W (NaN when the device cannot say).

    NVML devices report the enforced limit (``nvmlDeviceGetEnforcedPowerLimit``: the lowest of the
    user, default and board limits); others their current limit (``power_limits_w()[2]``; the
    simulated GPU's is its cap). Only read, never set.
    """
    for read in (getattr(device, "enforced_power_limit_w", None),
                 lambda: device.power_limits_w()[2]):
        if read is None:
            continue
        try:
            watts = float(read())
        except Exception:  # noqa: BLE001 - an unreadable limit disables the criterion, it must not fail a row
            continue
        if math.isfinite(watts) and watts > 0:
            return watts
    return math.nan


def cap_settled(spans: pd.DataFrame, *, lookback_s: float = CAP_WINDOW_S, tolerance: float = CAP_POWER_TOLERANCE,
                power_limit_w: float | None = None) -> bool:
    """Whether the power-cap controller had settled over the last ``lookback_s`` of ``spans``.

    The span-table form of :func:`cap_held` (what α fitting and :mod:`.series` use): the spans'
    mean power over the last ``lookback_s`` (energy over busy launch time) within ``tolerance`` of
    ``power_limit_w``; without a limit, within ``tolerance`` of the ``lookback_s`` before. The
    lookback must hold at least three spans covering 80 % of it. Session 4's H100 rows
    (``datasets/h100-2026-11-25-session4``) read a flat 797–855 W for 2–4 s under a 700 W limit:
    flat is not settled, at the limit is.
    """
    last = _last(spans, lookback_s)
    if not _covered(last, lookback_s):
        return False
    if power_limit_w is not None and math.isfinite(power_limit_w) and power_limit_w > 0:
        return cap_power_held(last, power_limit_w, lookback_s=lookback_s, tolerance=tolerance)
    before = _last(spans, lookback_s, skip_s=lookback_s)
    if not _covered(before, lookback_s):
        return False
    now, then = _mean_power(last), _mean_power(before)
    return bool(math.isfinite(now) and math.isfinite(then) and abs(now - then) <= tolerance * then)


def settled_spans(spans: pd.DataFrame, *, lookback_s: float = CAP_WINDOW_S,
                  tolerance: float = CAP_POWER_TOLERANCE) -> pd.DataFrame:
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
                         max_settle_s: float = 5.0, window_s: float = CAP_WINDOW_S,
                         tolerance: float = CAP_POWER_TOLERANCE,
                         power_limit_w: float | None = None) -> tuple[np.ndarray, pd.DataFrame, float, bool]:
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
    max_settle_s : float, default=5.0
        Longest extra load: the bound on waiting.
    window_s : float, default=1.0
        The window judged (:func:`cap_held`) and then reported by the row (:func:`capped_row_window`).
    tolerance : float, default=0.02
        Largest relative distance of the window's mean power from ``power_limit_w``.
    power_limit_w : float, optional
        The enforced power limit (read from the device).

    Returns
    -------
    launches : ndarray
        All launches, the added ones included.
    trace : pandas.DataFrame
    settle_s : float
        Load added waiting for the controller.
    transient : bool
        True when the cap reason was active and the last ``window_s`` was still
        away from the limit after ``max_settle_s``.

    Without the cap reason in the run, nothing is added. On the real H100s a capped bf16 GEMM's
    1 s mean reaches 700 W ± 2 % 1.0–1.1 s after a start from idle (three boards,
    ``benchmarks/cap_settling_real.py``), so from cold this adds ~0.5–1 s, and far less than 5 s.
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    end0 = float(iv[-1, 1])
    trace = trace_until(end0)
    spans = counter_spans(trace, iv, start_s=start_s, end_s=end0, updates_per_span=1)
    if not power_capped(spans, share=0.0):
        return iv, trace, 0.0, False
    while not cap_held(trace, iv, start_s, float(iv[-1, 1]), power_limit_w, window_s=window_s, tolerance=tolerance):
        if float(iv[-1, 1]) - end0 >= max_settle_s:
            return iv, trace, float(iv[-1, 1]) - end0, True
        iv = np.vstack([iv, run_more()])
        trace = trace_until(float(iv[-1, 1]))
    return iv, trace, float(iv[-1, 1]) - end0, False
