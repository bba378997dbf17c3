"""Shared helpers of the protocols: trace windows, launch counts, counter updates and windows.

Every protocol (and the long reference measurement, :mod:`..reference`, and
external programs, :mod:`..program`) builds on these: which power column a
trace has, the readings inside a span of the host clock, the mean
temperature and clocks over it, how many launches fill a duration, the
sensor's own updates in a trace, and — for the energy counter — its observed
updates, the launches between two of them and the aligned
:class:`CounterWindow` (the method is described in :mod:`.counter`).
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ... import schema
from ...deprecation import renamed_keywords
from ...devices.clock_probe import CLOCK_STEP_MHZ, PROBE_SPIN_NS, TIMER_TICK_NS

__all__ = [
    "CounterWindow",
    "aligned_window",
    "column_mean",
    "counter_power_w",
    "counter_quantum",
    "counter_updates",
    "has_energy_counter",
    "launches_for",
    "launches_inside",
    "new_run_id",
    "observed_clock",
    "observed_means",
    "power_column",
    "require_columns",
    "run_launches",
    "sensor_updates",
    "trace_window",
]


def power_column(trace: pd.DataFrame, preferred: str) -> str:
    """``preferred`` if the trace has finite values in it, else the first power column that has."""
    for name in (preferred, schema.POWER_INSTANT_W, schema.POWER_USAGE_W, schema.POWER_AVERAGE_W):
        if name in trace.columns and np.isfinite(trace[name].to_numpy(dtype=float)).any():
            return name
    raise ValueError(f"trace table: no finite power values in column {preferred!r} or any other power column")


#: Most launches one measurement may plan: their [start, end] times alone take 16 bytes each.
MAX_LAUNCHES = 1_000_000


def launches_for(seconds: float, launch_s: float, at_least: int = 1) -> int:
    """Launches of ``launch_s`` each that fill ``seconds`` (at least ``at_least``).

    Raises
    ------
    ValueError
        More than :data:`MAX_LAUNCHES` would be needed (a launch far shorter
        than the window: give each launch more work, or a shorter window).
    """
    n = max(at_least, math.ceil(seconds / max(launch_s, 1e-9)))
    if n > MAX_LAUNCHES:
        raise ValueError(f"a launch of {launch_s:.3g} s needs {n:,} launches to fill {seconds:.3g} s; "
                         f"a measurement takes at most {MAX_LAUNCHES:,} (give each launch more work "
                         "or ask for a shorter time)")
    return n


def check_duration(protocol: str, planned_s: float, max_duration_s: float, what: str) -> None:
    """Refuse, before anything runs, a measurement planned to last longer than ``max_duration_s``."""
    if not planned_s <= max_duration_s:
        raise ValueError(f"{protocol}: {what} needs about {planned_s:.3g} s of load, more than "
                         f"max_duration_s={max_duration_s:g} (raise max_duration_s or ask for less)")


def require_columns(trace: pd.DataFrame, *columns: str) -> None:
    for c in columns:
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing (have {list(trace.columns)})")


def trace_window(trace: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    require_columns(trace, schema.T_S)
    t = trace[schema.T_S].to_numpy()
    return trace.loc[(t >= start) & (t <= end)]


def column_mean(trace: pd.DataFrame, column: str) -> float:
    if column not in trace.columns or trace.empty:
        return math.nan
    values = trace[column].to_numpy(dtype=float)
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else math.nan


def counter_power_w(trace: pd.DataFrame, start: float, end: float) -> float:
    """Mean power over ``[start, end]`` from the energy counter: least-squares slope of joules vs time.

    The counter updates in steps (~100 ms on Hopper), so the slope over the
    window is used rather than the difference of two interpolated values.
    Returns NaN when fewer than two counter readings fall in the window.
    """
    if schema.ENERGY_COUNTER_J not in trace.columns:
        return math.nan
    w = trace_window(trace, start, end)
    j = w[schema.ENERGY_COUNTER_J].to_numpy(dtype=float)
    ok = np.isfinite(j)
    if ok.sum() < 2:
        return math.nan
    t = w[schema.T_S].to_numpy(dtype=float)[ok]
    j = j[ok]
    if t[-1] - t[0] <= 0:
        return math.nan
    slope = np.polyfit(t - t[0], j - j[0], 1)[0]
    return float(slope)


def sensor_updates(trace: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """Times and values of the sensor's own updates in a trace sampled faster than it updates.

    A reading holds its value until the sensor's next update, so the first
    sample of every new value marks an update (to within one sample period).
    The first sample of the trace is not an update (its value may be old).
    """
    require_columns(trace, schema.T_S, column)
    t = trace[schema.T_S].to_numpy(dtype=float)
    v = trace[column].to_numpy(dtype=float)
    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    if v.size < 2:
        return t[:0], v[:0]
    new = np.flatnonzero(v[1:] != v[:-1]) + 1
    return t[new], v[new]


def new_run_id() -> str:
    return uuid.uuid4().hex[:16]


def observed_means(trace: pd.DataFrame, runner=None) -> dict:
    """Mean temperature, SM and memory clock over ``trace``, and where the SM clock came from
    (:func:`observed_clock`)."""
    return {
        schema.TEMPERATURE_C: column_mean(trace, schema.TEMPERATURE_C),
        schema.SM_CLOCK_MHZ: column_mean(trace, schema.SM_CLOCK_MHZ),
        schema.MEM_CLOCK_MHZ: column_mean(trace, schema.MEM_CLOCK_MHZ),
        **observed_clock(trace, runner),
    }


def observed_clock(trace: pd.DataFrame, runner=None) -> dict:
    """The SM clock of the launches in ``trace``'s span: probed on the GPU, else NVML's reading.

    With the runner's probes (:meth:`Runner.probed_clocks`) in the span: their mean, their
    range and ``clock_source = "probe"``. Otherwise the reading's mean with
    ``clock_source = "nvml"`` and an uncertainty of half the range it spanned plus one clock
    step: the reading is a ~100 ms sensor that lags the clock and can show a clock one step
    off for seconds (``docs/recordings.md``).
    """
    t = trace[schema.T_S].to_numpy(float) if schema.T_S in trace else np.empty(0)
    probed = runner.probed_clocks(t.min(), t.max()) if runner is not None and t.size else np.empty(0)
    if probed.size:
        spread = float(np.ptp(probed))
        return {schema.SM_CLOCK_MHZ: float(np.mean(probed)), schema.CLOCK_RANGE_MHZ: spread,
                schema.CLOCK_UNCERTAINTY_MHZ: spread / 2 + float(np.max(probed)) * TIMER_TICK_NS / PROBE_SPIN_NS,
                schema.CLOCK_SOURCE: "probe"}
    f = trace[schema.SM_CLOCK_MHZ].to_numpy(float) if schema.SM_CLOCK_MHZ in trace else np.empty(0)
    f = f[np.isfinite(f)]
    spread = float(np.ptp(f)) if f.size else math.nan
    return {schema.CLOCK_RANGE_MHZ: spread, schema.CLOCK_UNCERTAINTY_MHZ: spread / 2 + CLOCK_STEP_MHZ,
            schema.CLOCK_SOURCE: "nvml"}



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


def launches_inside(launches: np.ndarray, start_s: float, end_s: float) -> float:
    """Launches within ``[start_s, end_s]``: each counts the fraction of its duration inside."""
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    dur = iv[:, 1] - iv[:, 0]
    inside = np.clip(np.minimum(iv[:, 1], end_s) - np.maximum(iv[:, 0], start_s), 0.0, None)
    whole = dur <= 0  # a zero-length launch inside the window counts whole
    frac = np.where(whole, ((iv[:, 0] >= start_s) & (iv[:, 0] <= end_s)).astype(float),
                    inside / np.where(whole, 1.0, dur))
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

    Returns None when fewer than two updates fall inside.
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


def has_energy_counter(runner) -> bool:
    """Whether ``runner``'s device reports a total-energy counter (one read, ~4 ms on Hopper)."""
    try:
        return math.isfinite(float(runner.device.read_energy_j()))
    except Exception:
        return False


@renamed_keywords(kernel="workload")
def run_launches(runner, workload, config, launches: int, batch: int = 1) -> np.ndarray:
    """``runner.run`` back to back; on a real GPU, batches of ``batch`` launches as CUDA graphs.

    Batching (:func:`~powermodels.measuring.graphs.run_batched`) needs a runner
    with prepared workloads and a CUDA-event clock (``CupyRunner``); the
    simulated GPU has no launch overhead, so it simply runs the launches.
    ``kernel=`` (the old name of ``workload``) still works, with a DeprecationWarning.
    """
    if batch > 1 and hasattr(runner, "prepared") and hasattr(runner, "clock") \
            and getattr(runner.prepared(workload, config), "timing", "events") != "synchronize":
        # (work on its framework's own streams is timed by synchronising, launch by launch)
        from ..graphs import run_batched

        return run_batched(runner, workload, config, int(launches), int(batch))
    return np.asarray(runner.run(workload, config, int(launches)))

