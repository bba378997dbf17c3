"""The ``good_practice`` protocol: Yang et al. §V-A measurement good practice."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from ... import schema
from .base import Protocol
from .launches import check_duration, launches_for, observed_means, power_column, sensor_updates

__all__ = ["GoodPractice"]


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
    their standard error. The whole plan (trials × (delay + launches +
    controlled delays)) must fit ``max_duration_s`` (default 120 s), or it is
    refused before the first trial.
    """

    min_reps: int = 32
    min_duration_s: float = 1.0
    trials: int = 3
    max_delay_s: float = 0.5
    n_shifts: int = 8
    power_column: str = schema.POWER_INSTANT_W
    max_duration_s: float = 120.0
    random_state: int | None = None
    name: ClassVar[str] = "good_practice"

    def _window_s(self, runner) -> float:
        s = runner.sensor
        return s.average_window_s if self.power_column == schema.POWER_AVERAGE_W else s.instant_window_s

    def _measure(self, runner, workload, config, run_id):
        if self.min_reps < 1 or self.trials < 1:
            raise ValueError(f"good_practice: min_reps and trials must be >= 1, got {self.min_reps}, {self.trials}")
        rng = np.random.default_rng(self.random_state)
        sensor = runner.sensor
        window = self._window_s(runner)
        shifts = self.n_shifts if window < sensor.update_period_s else 0
        t1 = runner.launch_time_s(workload, config)
        n = launches_for(self.min_duration_s, t1, self.min_reps)
        check_duration(self.name, self.trials * (self.max_delay_s + n * t1 + shifts * window
                                                 + sensor.delay_s + sensor.update_period_s),
                       self.max_duration_s, f"{self.trials} trial(s) of {n} launches")
        chunks = np.array_split(np.arange(n), shifts + 1) if shifts else [np.arange(n)]
        chunks = [c for c in chunks if c.size]
        powers, traces, all_iv, times = [], [], [], []
        for _ in range(self.trials):
            runner.idle(float(rng.uniform(0.0, self.max_delay_s)))
            ivs, gaps = [], []
            for k, chunk in enumerate(chunks):
                ivs.append(runner.run(workload, config, int(chunk.size)))
                if k + 1 < len(chunks):
                    gaps.append(runner.idle(window))
            iv = np.vstack(ivs)
            start, end = float(iv[0, 0]), float(iv[-1, 1])
            trace = runner.trace(start, end + sensor.delay_s + sensor.update_period_s + window,
                                 run_id=run_id)
            column = power_column(trace, self.power_column)
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
                 schema.ENERGY_UNCERTAINTY_J: sem, **observed_means(trace, runner)},
                trace.reset_index(drop=True), iv)
