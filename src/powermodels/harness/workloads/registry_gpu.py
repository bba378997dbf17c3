"""Deprecated: moved to :mod:`powermodels.workloads.registry_gpu` (this path warns and goes away in the next release).

``prepare(name, config)`` and ``square_wave_kernel`` by registry name are in
:mod:`powermodels.workloads.registry` now (the GPU module takes the kernel
itself); all three old names are kept here.
"""

from __future__ import annotations

from powermodels.harness import warn_moved
from powermodels.workloads.registry import prepare, square_wave_kernel
from powermodels.workloads.registry_gpu import PreparedKernel

warn_moved(__name__)

__all__ = ["PreparedKernel", "prepare", "square_wave_kernel"]
