"""The ``continuous`` protocol: Kernel Tuner's continuous mode (repeat ≥ 1 s, median power)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ... import schema
from .base import Protocol
from .launches import check_duration, launches_for, observed_means, power_column

__all__ = ["Continuous"]


@dataclass
class Continuous(Protocol):
    """Kernel Tuner's continuous mode: repeat for ≥ ``duration_s``, ``E = median(P) × t``.

    Parameters
    ----------
    duration_s : float, default=1.0
        Least total run time of the repeated launches.
    power_column : str, default=schema.POWER_USAGE_W
        Kernel Tuner reads ``nvmlDeviceGetPowerUsage``.
    max_duration_s : float, default=60
        Longest load a measurement may run; a longer ``duration_s`` is refused up front.
    """

    duration_s: float = 1.0
    power_column: str = schema.POWER_USAGE_W
    max_duration_s: float = 60.0
    name: ClassVar[str] = "continuous"

    def _measure(self, runner, workload, config, run_id):
        if not self.duration_s > 0:
            raise ValueError(f"continuous: duration_s must be > 0, got {self.duration_s}")
        check_duration(self.name, self.duration_s, self.max_duration_s, f"duration_s={self.duration_s:g}")
        n = launches_for(self.duration_s, runner.launch_time_s(workload, config))
        iv = runner.run(workload, config, n)
        start, end = float(iv[0, 0]), float(iv[-1, 1])
        trace = runner.trace(start, end, run_id=run_id)
        column = power_column(trace, self.power_column)
        power = float(np.nanmedian(trace[column].to_numpy(dtype=float)))
        t = float(np.mean(iv[:, 1] - iv[:, 0]))
        return {schema.POWER_W: power, schema.ENERGY_J: power * t, **observed_means(trace, runner)}, trace, iv
