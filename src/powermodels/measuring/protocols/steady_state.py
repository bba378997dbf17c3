"""The ``steady_state`` protocol: Wattchmen §3.3 (idle power, settle, counter energy over a steady window)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ... import schema
from .base import Protocol
from .launches import (
    check_duration,
    column_mean,
    counter_power_w,
    launches_for,
    observed_means,
    power_column,
    trace_window,
)

__all__ = ["SteadyState"]


@dataclass
class SteadyState(Protocol):
    """Wattchmen §3.3 steady-state measurement.

    Measures the idle power for ``idle_s``, runs the workload in chunks of
    ``chunk_s`` until chunk-mean power changes by less than
    ``settle_power_rel`` and temperature by less than ``settle_temp_c`` for
    ``settle_chunks`` consecutive chunks (or ``max_duration_s`` passes), then
    runs a steady window of ``measure_s`` whose energy comes from the
    energy counter (slope of joules vs time; the power readings when the
    device has no counter). ``max_duration_s`` bounds the whole measurement
    (idle, settling and the steady window): settling stops in time for the
    steady window, and ``idle_s + chunk_s + measure_s`` beyond it is refused up front.
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

    def _measure(self, runner, workload, config, run_id):
        if not (self.chunk_s > 0 and self.measure_s > 0 and self.idle_s >= 0):
            raise ValueError("steady_state: chunk_s and measure_s must be > 0 and idle_s >= 0")
        check_duration(self.name, self.idle_s + self.chunk_s + self.measure_s, self.max_duration_s,
                       f"idle_s={self.idle_s:g} + chunk_s={self.chunk_s:g} + measure_s={self.measure_s:g}")
        idle0, idle1 = runner.idle(self.idle_s) if self.idle_s > 0 else (runner.now(), runner.now())
        t1 = runner.launch_time_s(workload, config)
        per_chunk = launches_for(self.chunk_s, t1)
        previous, settled = None, 0
        while True:
            iv = runner.run(workload, config, per_chunk)
            chunk = runner.trace(float(iv[0, 0]), float(iv[-1, 1]), run_id=run_id)
            column = power_column(chunk, self.power_column)
            now = (column_mean(chunk, column), column_mean(chunk, schema.TEMPERATURE_C))
            if previous is not None:
                dp = abs(now[0] - previous[0]) / max(abs(previous[0]), 1e-9)
                dt = abs(now[1] - previous[1]) if np.isfinite(now[1]) and np.isfinite(previous[1]) else 0.0
                settled = settled + 1 if dp < self.settle_power_rel and dt < self.settle_temp_c else 0
            previous = now
            elapsed = float(iv[-1, 1]) - idle0
            if settled >= self.settle_chunks or elapsed + self.chunk_s + self.measure_s > self.max_duration_s:
                break
        n = launches_for(self.measure_s, t1)
        iv = runner.run(workload, config, n)
        start, end = float(iv[0, 0]), float(iv[-1, 1])
        trace = runner.trace(idle0, end, run_id=run_id)
        column = power_column(trace, self.power_column)
        idle_trace = trace_window(trace, idle0 + 0.5 * (idle1 - idle0), idle1)
        power = counter_power_w(trace, start, end)
        if not np.isfinite(power):
            power = column_mean(trace_window(trace, start, end), column)
        t = float(np.mean(iv[:, 1] - iv[:, 0]))
        steady = trace_window(trace, start, end)
        return ({schema.POWER_W: power, schema.ENERGY_J: power * t,
                 schema.IDLE_POWER_W: column_mean(idle_trace, column), **observed_means(steady, runner)}, trace, iv)
