"""Shared helpers of the protocols: trace windows, launch counts, counter updates and windows.

Every protocol (and the long reference measurement, :mod:`..reference`, and
external programs, :mod:`..program`) builds on these: which power column a
trace has, the readings inside a span of the host clock, the mean
temperature and clocks over it, how many launches fill a duration, the
sensor's own updates in a trace, and — for the energy counter — its observed
updates, the launches between two of them and the aligned
:class:`CounterWindow` (the method is described in :mod:`.counter`; the
counter's functions live in :mod:`powermodels.energy_counter`, below the
protocols and :mod:`powermodels.thermal`, and are named here too).
"""

from __future__ import annotations

import math
import uuid

import numpy as np
import pandas as pd

from ... import schema
from ...devices.clock_probe import CLOCK_STEP_MHZ, PROBE_SPIN_NS, TIMER_TICK_NS
from ...energy_counter import CounterWindow, aligned_window, counter_quantum, counter_updates, launches_inside
from ..graphs import run_launches

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



def has_energy_counter(runner) -> bool:
    """Whether ``runner``'s device reports a total-energy counter (one read, ~4 ms on Hopper)."""
    try:
        return math.isfinite(float(runner.device.read_energy_j()))
    except Exception:
        return False
