"""Deprecated: moved to :mod:`powermodels.workloads.twins` (this path warns and goes away in the next release).

The registry kernels' cost model that lived here too (``workload_cost``,
``simulated_workload``) is :mod:`powermodels.workloads.registry_cost`, by
name in :mod:`powermodels.workloads.registry`; both names are kept here.
"""

from __future__ import annotations

from powermodels.harness import warn_moved
from powermodels.workloads.registry import simulated_workload, workload_cost
from powermodels.workloads.twins import NOMINAL_MEM_MHZ, NOMINAL_SM_MHZ, SimulatedTwin, as_twin, twin_workload

warn_moved(__name__)

__all__ = ["NOMINAL_MEM_MHZ", "NOMINAL_SM_MHZ", "SimulatedTwin", "as_twin", "simulated_workload",
           "twin_workload", "workload_cost"]
