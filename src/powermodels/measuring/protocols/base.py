"""The :class:`Protocol` interface and the :class:`Measurement` it returns.

A protocol drives a :class:`~powermodels.measuring.runner.Runner` (a real GPU
or the simulated one — the same code) and turns the trace it recorded into one
run-table row (:data:`schema.RUN_TABLE`); the protocols themselves are listed
in :mod:`powermodels.measuring.protocols`.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from ... import schema, workloads
from ..exclusive import throttle_summary
from ...thermal.spans import thermal_state
from ..runner_base import Runner
from .launches import new_run_id, trace_window

__all__ = ["Measurement", "Protocol"]


@dataclass
class Measurement:
    """What one protocol run produced.

    Attributes
    ----------
    row : dict
        One run-table row (keys are :mod:`powermodels.schema` constants, plus
        one key per tunable parameter of the workload).
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



class Protocol(ABC):
    """A measurement protocol: ``measure(runner, workload, config) -> Measurement``."""

    name: ClassVar[str]

    def params(self) -> dict:
        return asdict(self)

    @abstractmethod
    def _measure(self, runner: Runner, workload: workloads.Workload, config: dict,
                 run_id: str) -> tuple[dict, pd.DataFrame, np.ndarray]:
        """Run ``workload`` (a Workload, its full valid ``config``) and return
        (protocol-specific row fields, trace, launch intervals)."""

    def measure(self, runner: Runner, workload, config: dict | str | None = None, *,
                repeat: int = 0, run_id: str | None = None) -> Measurement:
        """Measure ``workload`` with ``config`` on ``runner``; one run-table row and its trace.

        Parameters
        ----------
        runner : Runner
            Real or simulated.
        workload : Workload or str
            A :class:`~powermodels.workloads.Workload`, or anything
            :func:`~powermodels.workloads.as_workload` converts (a
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
        run_id = run_id or new_run_id()
        limit = getattr(self, "max_duration_s", None)
        if limit is not None and getattr(runner.device.info, "kind", "") == "simulated":
            # a twin's launch time is known without running it: refuse one longer than the bound
            launch_s = runner.launch_time_s(workload, config)
            if not launch_s <= limit:
                raise ValueError(f"{self.name}: one launch of {workload.name!r} takes {launch_s:.3g} s, "
                                 f"more than max_duration_s={limit:g}")
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
        row.update(throttle_summary(trace_window(trace, launches[:, 0].min(), launches[:, 1].max())
                                    if n and schema.T_S in trace.columns else trace))
        # every row says its board and thermal state (the counter protocol adds the figure at T_ref)
        row.setdefault(schema.DEVICE_UUID, runner.device.info.uuid)
        if schema.TEMPERATURE_START_C not in row and n and schema.T_S in trace.columns:
            row.update(thermal_state(trace, float(launches[:, 0].min()), float(launches[:, 1].max())))
        row.setdefault(schema.LAUNCH_MODE, "back_to_back")
        row[schema.WALL_S] = time.perf_counter() - wall0
        return Measurement(row, trace, launches)

