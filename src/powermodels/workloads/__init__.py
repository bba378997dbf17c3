"""Workloads: what the harness runs — registry kernels, user CUDA sources, Python callables, programs.

Every runner, protocol and campaign takes a :class:`Workload` (or anything
:func:`as_workload` converts: a registry name, ``"module:function"``, a
callable, an argv list). The kinds:

=============================  ================================================
:class:`RegistryKernel`        the five kernels of ``kernels/*.cu`` (``fp32``,
                               ``sgemm``, ``stream_copy``, ``stream_triad``,
                               ``square_wave``), with cost-model twins
:class:`SourceKernel`          a user's ``.cu`` kernel with tunable ``-D``
                               parameters, restrictions, grid from the problem
                               size (Kernel Tuner semantics), NumPy arguments
                               and an optional reference check
:class:`CallableWorkload`      a Python callable enqueuing GPU work (CuPy,
                               PyTorch, JAX, Numba)
``ProgramWorkload``            an external program
                               (:mod:`powermodels.measuring.program`)
=============================  ================================================

A user workload runs on the simulated GPU through its :class:`SimulatedTwin`.
The registry's functions by name (``config_id("sgemm", config)``, ...) are
kept for existing code.
"""

from __future__ import annotations

from .base import TIMINGS, Prepared, PreparedRaw, Workload, WorkloadError, format_value, parse_value
from .callables import CallableWorkload, PreparedCallable, detect_timing
from .convert import as_workload, load_object
from .expressions import Expression, Restriction, make_restrictions
from .registry import (
    FP32_FLOP_PER_CYCLE,
    FP32_RESTRICTIONS,
    KERNELS,
    MEM_BYTES_PER_MHZ_S,
    N_SM,
    SGEMM_RESTRICTIONS,
    STREAM_RESTRICTIONS,
    KernelSpec,
    RegistryKernel,
    config_id,
    get_kernel,
    invalid_reasons,
    kernel_source,
    kernels_dir,
    parse_config,
    prepare,
    registry_kernel,
    search_space,
    simulated_workload,
    square_wave_kernel,
    validate_config,
    workload_cost,
)
from .registry_gpu import PreparedKernel
from .source import BLOCK_SIZE_NAMES, PreparedSource, SourceKernel, global_functions
from .spec import make_argument, select_configs, workload_from_entry
from .twins import NOMINAL_MEM_MHZ, NOMINAL_SM_MHZ, SimulatedTwin, as_twin, twin_workload

__all__ = [
    "BLOCK_SIZE_NAMES",
    "FP32_FLOP_PER_CYCLE",
    "FP32_RESTRICTIONS",
    "KERNELS",
    "MEM_BYTES_PER_MHZ_S",
    "NOMINAL_MEM_MHZ",
    "NOMINAL_SM_MHZ",
    "N_SM",
    "SGEMM_RESTRICTIONS",
    "STREAM_RESTRICTIONS",
    "TIMINGS",
    "CallableWorkload",
    "Expression",
    "KernelSpec",
    "Prepared",
    "PreparedCallable",
    "PreparedKernel",
    "PreparedRaw",
    "PreparedSource",
    "RegistryKernel",
    "Restriction",
    "SimulatedTwin",
    "SourceKernel",
    "Workload",
    "WorkloadError",
    "as_twin",
    "as_workload",
    "config_id",
    "detect_timing",
    "format_value",
    "get_kernel",
    "global_functions",
    "invalid_reasons",
    "kernel_source",
    "kernels_dir",
    "load_object",
    "make_argument",
    "make_restrictions",
    "parse_config",
    "parse_value",
    "prepare",
    "registry_kernel",
    "search_space",
    "select_configs",
    "simulated_workload",
    "square_wave_kernel",
    "twin_workload",
    "validate_config",
    "workload_cost",
    "workload_from_entry",
]
