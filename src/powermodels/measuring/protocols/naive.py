"""The ``naive`` protocol: one launch, one reading right after it (Yang §V-B criticises it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ... import schema
from .base import Protocol
from .launches import observed_means, power_column, trace_window

__all__ = ["Naive"]


@dataclass
class Naive(Protocol):
    """One launch, one reading (the first after the kernel ends); ``E = P × t``.

    Parameters
    ----------
    power_column : str, default=schema.POWER_USAGE_W
        The reading a user would take (``nvmlDeviceGetPowerUsage`` / nvidia-smi).
    max_duration_s : float, default=60
        Longest launch (refused up front where its time is known: the simulated GPU).
    """

    power_column: str = schema.POWER_USAGE_W
    max_duration_s: float = 60.0
    name: ClassVar[str] = "naive"

    def _measure(self, runner, workload, config, run_id):
        iv = runner.run(workload, config, 1)
        start, end = float(iv[0, 0]), float(iv[-1, 1])
        trace = runner.trace(start - 0.01, end + 0.05, run_id=run_id)
        column = power_column(trace, self.power_column)
        after = trace.loc[trace[schema.T_S] >= end, column].dropna()
        power = float(after.iloc[0]) if len(after) else float(trace[column].dropna().iloc[-1])
        t = end - start
        return ({schema.POWER_W: power, schema.ENERGY_J: power * t,
                 **observed_means(trace_window(trace, start, end + 0.05), runner)}, trace, iv)
