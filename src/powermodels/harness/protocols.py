"""Measurement protocols: traces in, run-table rows out.

Each protocol drives a :class:`~powermodels.harness.runner.Runner` (a real GPU
or the simulated one — the same code) and turns the trace it recorded into one
run-table row (:data:`schema.RUN_TABLE`):

=================  ==========================================================
``naive``          one launch, one reading right after it (the practice Yang
                   §V-B criticises): ``energy = P_reading × t_kernel``.
``continuous``     Kernel Tuner style: repeat the kernel for ≥ ``duration_s``
                   (1 s) and take ``median(power) × t_kernel``.
``good_practice``  Yang §V-A: ≥ 32 repetitions or ≥ ``min_duration_s``,
                   several trials separated by random delays, readings during
                   the rise time discarded, readings shifted by the sensor
                   delay, and — when the averaging window is a fraction of the
                   update period — evenly spaced controlled delays that shift
                   the load's phase against the sensor.
``steady_state``   Wattchmen §3.3: idle power first, then run until power and
                   temperature settle, then take the energy from the counter
                   over a steady window.
``counter``        the default (:mod:`.counter_protocol`, ~1 s): back-to-back
                   launches, energy-counter difference between two observed
                   counter updates / the launches between them; falls back to
                   ``good_practice`` where the device has no counter
                   (:func:`default_protocol`).
=================  ==========================================================

Every row carries the per-launch kernel time (CUDA events, or the simulated
launch times), power, energy per launch, mean temperature and observed clocks,
and — where the runner knows it (simulated truth, external meter) — the
reference energy over exactly the same launches.
"""

from __future__ import annotations

import math
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from .. import schema
from . import workloads
from .exclusive import throttle_summary
from .runner import Runner

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "Continuous",
    "GoodPractice",
    "Measurement",
    "Naive",
    "Protocol",
    "SteadyState",
    "default_protocol",
    "make_protocol",
    "sensor_updates",
]


@dataclass
class Measurement:
    """What one protocol run produced.

    Attributes
    ----------
    row : dict
        One run-table row (keys are :mod:`powermodels.schema` constants, plus
        one key per tunable parameter of the kernel).
    trace : pandas.DataFrame
        The trace table of the run (``run_id`` = ``row[schema.RUN_ID]``).
    launches : ndarray of shape (n, 2)
        Host-clock [start, end] of every measured launch.
    """

    row: dict
    trace: pd.DataFrame
    launches: np.ndarray = field(repr=False)

    def run_table(self) -> pd.DataFrame:
        return pd.DataFrame([self.row])


# --------------------------------------------------------------------------
# Helpers on trace tables.
# --------------------------------------------------------------------------


def _column(trace: pd.DataFrame, preferred: str) -> str:
    """``preferred`` if the trace has finite values in it, else the first power column that has."""
    for name in (preferred, schema.POWER_INSTANT_W, schema.POWER_USAGE_W, schema.POWER_AVERAGE_W):
        if name in trace.columns and np.isfinite(trace[name].to_numpy(dtype=float)).any():
            return name
    raise ValueError(f"trace table: no finite power values in column {preferred!r} or any other power column")


def _launches_for(seconds: float, launch_s: float, at_least: int = 1) -> int:
    """Launches of ``launch_s`` each that fill ``seconds`` (at least ``at_least``)."""
    return max(at_least, math.ceil(seconds / max(launch_s, 1e-9)))


def _require(trace: pd.DataFrame, *columns: str) -> None:
    for c in columns:
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing (have {list(trace.columns)})")


def _window(trace: pd.DataFrame, start: float, end: float) -> pd.DataFrame:
    _require(trace, schema.T_S)
    t = trace[schema.T_S].to_numpy()
    return trace.loc[(t >= start) & (t <= end)]


def _mean(trace: pd.DataFrame, column: str) -> float:
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
    w = _window(trace, start, end)
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
    _require(trace, schema.T_S, column)
    t = trace[schema.T_S].to_numpy(dtype=float)
    v = trace[column].to_numpy(dtype=float)
    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    if v.size < 2:
        return t[:0], v[:0]
    new = np.flatnonzero(v[1:] != v[:-1]) + 1
    return t[new], v[new]


def _new_run_id() -> str:
    return uuid.uuid4().hex[:16]


class Protocol(ABC):
    """A measurement protocol: ``measure(runner, workload, config) -> Measurement``."""

    name: ClassVar[str]

    def params(self) -> dict:
        return asdict(self)

    @abstractmethod
    def _measure(self, runner: Runner, kernel: workloads.Workload, config: dict,
                 run_id: str) -> tuple[dict, pd.DataFrame, np.ndarray]:
        """Run ``kernel`` (a Workload, its full valid ``config``) and return
        (protocol-specific row fields, trace, launch intervals)."""

    def measure(self, runner: Runner, workload, config: dict | str | None = None, *,
                repeat: int = 0, run_id: str | None = None) -> Measurement:
        """Measure ``workload`` with ``config`` on ``runner``; one run-table row and its trace.

        Parameters
        ----------
        runner : Runner
            Real or simulated.
        workload : Workload or str
            A :class:`~powermodels.harness.workloads.Workload`, or anything
            :func:`~powermodels.harness.workloads.as_workload` converts (a
            registry name such as ``"sgemm"``, ``"module:function"``, a callable).
            Its ``name`` is the row's ``kernel``.
        config : dict or str, optional
            Configuration (defaults filled in); a ``"p=v,..."`` string is parsed.
        repeat : int, default=0
            Recorded in the row.
        run_id : str, optional
            Id linking the row to its trace; a random one when None.
        """
        if not isinstance(runner, Runner):
            raise ValueError(f"runner: expected a Runner, got {type(runner).__name__}")
        workload = workloads.as_workload(workload)
        config = workload.validate_config(workload.parse_config(config))
        run_id = run_id or _new_run_id()
        wall0 = time.perf_counter()
        fields, trace, launches = self._measure(runner, workload, config, run_id)
        launches = np.asarray(launches, dtype=float).reshape(-1, 2)
        n = len(launches)
        reference = runner.reference_energy_j(launches)
        busy = float((launches[:, 1] - launches[:, 0]).sum())
        row = {
            schema.KERNEL: workload.name,
            schema.CONFIG: workload.config_id(config),
            **config,
            schema.DEVICE: runner.device_name,
            schema.PROTOCOL: self.name,
            schema.REPEAT: int(repeat),
            schema.RUN_ID: run_id,
            schema.LAUNCHES: n,
            schema.TIME_S: busy / n,
            schema.REFERENCE_ENERGY_J: reference / n if np.isfinite(reference) else math.nan,
            schema.REFERENCE_POWER_W: reference / busy if np.isfinite(reference) and busy > 0 else math.nan,
        }
        row.update(fields)
        # clock events while the measured launches ran, so throttled runs can be filtered
        row.update(throttle_summary(_window(trace, launches[:, 0].min(), launches[:, 1].max())
                                    if n and schema.T_S in trace.columns else trace))
        row[schema.WALL_S] = time.perf_counter() - wall0
        return Measurement(row, trace, launches)


def _observed(trace: pd.DataFrame) -> dict:
    return {
        schema.TEMPERATURE_C: _mean(trace, schema.TEMPERATURE_C),
        schema.SM_CLOCK_MHZ: _mean(trace, schema.SM_CLOCK_MHZ),
        schema.MEM_CLOCK_MHZ: _mean(trace, schema.MEM_CLOCK_MHZ),
    }


# --------------------------------------------------------------------------
# The protocols.
# --------------------------------------------------------------------------


@dataclass
class Naive(Protocol):
    """One launch, one reading (the first after the kernel ends); ``E = P × t``.

    Parameters
    ----------
    power_column : str, default=schema.POWER_USAGE_W
        The reading a user would take (``nvmlDeviceGetPowerUsage`` / nvidia-smi).
    """

    power_column: str = schema.POWER_USAGE_W
    name: ClassVar[str] = "naive"

    def _measure(self, runner, kernel, config, run_id):
        iv = runner.run(kernel, config, 1)
        start, end = float(iv[0, 0]), float(iv[-1, 1])
        trace = runner.trace(start - 0.01, end + 0.05, run_id=run_id)
        column = _column(trace, self.power_column)
        after = trace.loc[trace[schema.T_S] >= end, column].dropna()
        power = float(after.iloc[0]) if len(after) else float(trace[column].dropna().iloc[-1])
        t = end - start
        return ({schema.POWER_W: power, schema.ENERGY_J: power * t,
                 **_observed(_window(trace, start, end + 0.05))}, trace, iv)


@dataclass
class Continuous(Protocol):
    """Kernel Tuner's continuous mode: repeat for ≥ ``duration_s``, ``E = median(P) × t``.

    Parameters
    ----------
    duration_s : float, default=1.0
        Least total run time of the repeated launches.
    power_column : str, default=schema.POWER_USAGE_W
        Kernel Tuner reads ``nvmlDeviceGetPowerUsage``.
    """

    duration_s: float = 1.0
    power_column: str = schema.POWER_USAGE_W
    name: ClassVar[str] = "continuous"

    def _measure(self, runner, kernel, config, run_id):
        if not self.duration_s > 0:
            raise ValueError(f"continuous: duration_s must be > 0, got {self.duration_s}")
        n = _launches_for(self.duration_s, runner.launch_time_s(kernel, config))
        iv = runner.run(kernel, config, n)
        start, end = float(iv[0, 0]), float(iv[-1, 1])
        trace = runner.trace(start, end, run_id=run_id)
        column = _column(trace, self.power_column)
        power = float(np.nanmedian(trace[column].to_numpy(dtype=float)))
        t = float(np.mean(iv[:, 1] - iv[:, 0]))
        return {schema.POWER_W: power, schema.ENERGY_J: power * t, **_observed(trace)}, trace, iv


@dataclass
class GoodPractice(Protocol):
    """Yang et al. §V-A measurement good practice.

    1. Run ≥ ``min_reps`` repetitions and ≥ ``min_duration_s`` (Yang: 32 or
       5 s; shorter here by default is allowed — the point of the product —
       at the price of a wider uncertainty). When the sensor's window is a
       fraction of its update period, insert ``n_shifts`` controlled delays of
       one window each, evenly spaced, to shift the load's phase.
    2. ``trials`` separate trials with a random 0–``max_delay_s`` delay before each.
    3. Post-process: the trace is reduced to the sensor's own updates
       (:func:`sensor_updates`), each update at ``u`` is shifted back by the
       sensor delay to the window it describes, ``[u - delay - window, u - delay]``;
       updates whose window starts within the rise time of the trial, ends
       after the last launch, or overlaps a controlled delay are discarded.

    The row's power and energy are the means over trials; the uncertainty is
    their standard error.
    """

    min_reps: int = 32
    min_duration_s: float = 1.0
    trials: int = 3
    max_delay_s: float = 0.5
    n_shifts: int = 8
    power_column: str = schema.POWER_INSTANT_W
    random_state: int | None = None
    name: ClassVar[str] = "good_practice"

    def _window_s(self, runner) -> float:
        s = runner.sensor
        return s.average_window_s if self.power_column == schema.POWER_AVERAGE_W else s.instant_window_s

    def _measure(self, runner, kernel, config, run_id):
        if self.min_reps < 1 or self.trials < 1:
            raise ValueError(f"good_practice: min_reps and trials must be >= 1, got {self.min_reps}, {self.trials}")
        rng = np.random.default_rng(self.random_state)
        sensor = runner.sensor
        window = self._window_s(runner)
        shifts = self.n_shifts if window < sensor.update_period_s else 0
        n = _launches_for(self.min_duration_s, runner.launch_time_s(kernel, config), self.min_reps)
        chunks = np.array_split(np.arange(n), shifts + 1) if shifts else [np.arange(n)]
        chunks = [c for c in chunks if c.size]
        powers, traces, all_iv, times = [], [], [], []
        for _ in range(self.trials):
            runner.idle(float(rng.uniform(0.0, self.max_delay_s)))
            ivs, gaps = [], []
            for k, chunk in enumerate(chunks):
                ivs.append(runner.run(kernel, config, int(chunk.size)))
                if k + 1 < len(chunks):
                    gaps.append(runner.idle(window))
            iv = np.vstack(ivs)
            start, end = float(iv[0, 0]), float(iv[-1, 1])
            trace = runner.trace(start, end + sensor.delay_s + sensor.update_period_s + window,
                                 run_id=run_id)
            column = _column(trace, self.power_column)
            # each sensor update at u describes [u - delay - window, u - delay] (Yang §IV-C)
            u, p = sensor_updates(trace, column)
            w1 = u - sensor.delay_s
            w0 = w1 - window
            rise = sensor.rise_time_s
            keep = (w0 >= start + rise) & (w1 <= end)
            for g0, g1 in gaps:  # the update's window saw a controlled delay
                keep &= ~((w1 > g0) & (w0 < g1))
            if not keep.any():  # run shorter than rise time + window: use what there is
                keep = (w1 > start) & (w0 < end)
                if not keep.any():
                    keep = np.ones_like(u, dtype=bool)
            p = p[keep]
            powers.append(float(p.mean()))
            traces.append(trace)
            all_iv.append(iv)
            times.append(float(np.mean(iv[:, 1] - iv[:, 0])))
        iv = np.vstack(all_iv)
        trace = pd.concat(traces, ignore_index=True)
        trace = trace.loc[~trace[schema.T_S].duplicated()].sort_values(schema.T_S, kind="stable")
        energies = np.array(powers) * np.array(times)
        sem = float(energies.std(ddof=1) / math.sqrt(len(energies))) if len(energies) > 1 else math.nan
        return ({schema.POWER_W: float(np.mean(powers)), schema.ENERGY_J: float(energies.mean()),
                 schema.ENERGY_UNCERTAINTY_J: sem, **_observed(trace)},
                trace.reset_index(drop=True), iv)


@dataclass
class SteadyState(Protocol):
    """Wattchmen §3.3 steady-state measurement.

    Measures the idle power for ``idle_s``, runs the kernel in chunks of
    ``chunk_s`` until chunk-mean power changes by less than
    ``settle_power_rel`` and temperature by less than ``settle_temp_c`` for
    ``settle_chunks`` consecutive chunks (or ``max_duration_s`` passes), then
    runs a steady window of ``measure_s`` whose energy comes from the
    energy counter (slope of joules vs time; the power readings when the
    device has no counter).
    """

    idle_s: float = 1.0
    chunk_s: float = 0.5
    settle_power_rel: float = 0.01
    settle_temp_c: float = 0.5
    settle_chunks: int = 2
    max_duration_s: float = 30.0
    measure_s: float = 2.0
    power_column: str = schema.POWER_INSTANT_W
    name: ClassVar[str] = "steady_state"

    def _measure(self, runner, kernel, config, run_id):
        if not (self.chunk_s > 0 and self.measure_s > 0 and self.idle_s >= 0):
            raise ValueError("steady_state: chunk_s and measure_s must be > 0 and idle_s >= 0")
        idle0, idle1 = runner.idle(self.idle_s) if self.idle_s > 0 else (runner.now(), runner.now())
        t1 = runner.launch_time_s(kernel, config)
        per_chunk = _launches_for(self.chunk_s, t1)
        previous, settled, started = None, 0, None
        while True:
            iv = runner.run(kernel, config, per_chunk)
            started = float(iv[0, 0]) if started is None else started
            chunk = runner.trace(float(iv[0, 0]), float(iv[-1, 1]), run_id=run_id)
            column = _column(chunk, self.power_column)
            now = (_mean(chunk, column), _mean(chunk, schema.TEMPERATURE_C))
            if previous is not None:
                dp = abs(now[0] - previous[0]) / max(abs(previous[0]), 1e-9)
                dt = abs(now[1] - previous[1]) if np.isfinite(now[1]) and np.isfinite(previous[1]) else 0.0
                settled = settled + 1 if dp < self.settle_power_rel and dt < self.settle_temp_c else 0
            previous = now
            if settled >= self.settle_chunks or float(iv[-1, 1]) - started >= self.max_duration_s:
                break
        n = _launches_for(self.measure_s, t1)
        iv = runner.run(kernel, config, n)
        start, end = float(iv[0, 0]), float(iv[-1, 1])
        trace = runner.trace(idle0, end, run_id=run_id)
        column = _column(trace, self.power_column)
        idle_trace = _window(trace, idle0 + 0.5 * (idle1 - idle0), idle1)
        power = counter_power_w(trace, start, end)
        if not np.isfinite(power):
            power = _mean(_window(trace, start, end), column)
        t = float(np.mean(iv[:, 1] - iv[:, 0]))
        steady = _window(trace, start, end)
        return ({schema.POWER_W: power, schema.ENERGY_J: power * t,
                 schema.IDLE_POWER_W: _mean(idle_trace, column), **_observed(steady)}, trace, iv)


PROTOCOLS: dict[str, type[Protocol]] = {
    cls.name: cls for cls in (Naive, Continuous, GoodPractice, SteadyState)
}


def make_protocol(name: str, **params) -> Protocol:
    """Protocol ``name`` with ``params`` (e.g. ``make_protocol("continuous", duration_s=0.5)``)."""
    try:
        cls = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"protocol: unknown protocol {name!r}; known: {sorted(PROTOCOLS)}") from None
    try:
        return cls(**params)
    except TypeError as err:
        raise ValueError(f"protocol {name!r}: bad parameters {params}: {err}") from None


#: The protocol ``measure``, campaigns and :func:`powermodels.measure` use unless told otherwise.
DEFAULT_PROTOCOL = "counter"


def default_protocol(runner: Runner, **params) -> Protocol:
    """The default protocol for ``runner``'s device: ``counter`` where it has an energy counter.

    A device without one gets ``good_practice`` (with a :class:`RuntimeWarning`);
    ``params`` go to whichever protocol is chosen, and those the fallback does
    not know are dropped with the warning naming them.
    """
    from .counter_protocol import has_energy_counter

    if has_energy_counter(runner):
        return make_protocol(DEFAULT_PROTOCOL, **params)
    known = {f for f in GoodPractice.__dataclass_fields__}
    dropped = sorted(set(params) - known)
    import warnings

    warnings.warn(f"{runner.device_name} reports no energy counter: measuring with good_practice "
                  f"instead of {DEFAULT_PROTOCOL}" + (f" (ignoring {dropped})" if dropped else ""),
                  RuntimeWarning, stacklevel=2)
    return make_protocol(GoodPractice.name, **{k: v for k, v in params.items() if k in known})


# last: counter_protocol builds on this module and registers "counter" in PROTOCOLS
from . import counter_protocol  # noqa: E402,F401
