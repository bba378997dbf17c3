"""The registry kernels' simulated twins: a cost model per kernel (FLOPs, bytes, efficiency).

The throughput constants are Hopper-class (H100 SXM); the time and activity of
a configuration on the simulated GPU follow DSO eq. 2's shape. Every function
takes the :class:`~powermodels.workloads.registry.RegistryKernel` itself; the
functions by registry name (``workload_cost("sgemm", config)``, ...) are in
:mod:`.registry`.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

import numpy as np

__all__ = ["FP32_FLOP_PER_CYCLE", "MEM_BYTES_PER_MHZ_S", "N_SM", "kernel_cost", "kernel_twin"]

# Hopper-class throughput used by the simulated twins (H100 SXM: 132 SMs x 128 FP32
# lanes x 2 FLOP per FMA per cycle; HBM3 ~3.35 TB/s at a 2619 MHz memory clock).
N_SM = 132
FP32_FLOP_PER_CYCLE = N_SM * 128 * 2
MEM_BYTES_PER_MHZ_S = 3.35e12 / 2619.0




def _jitter(name: str, config: Mapping[str, int], spread: float) -> float:
    """Deterministic per-configuration factor in [1 - spread, 1 + spread]."""
    digest = hashlib.sha256(f"{name}:{sorted(config.items())}".encode()).digest()
    u = int.from_bytes(digest[:8], "little") / 2**64
    return 1.0 + spread * (2.0 * u - 1.0)


def kernel_cost(kernel, config: Mapping[str, int] | None = None) -> dict[str, float]:
    """FLOPs, bytes moved and modelled efficiency of one launch of a registry kernel (its twin's input).

    ``kernel`` is a :class:`~powermodels.workloads.registry.RegistryKernel`
    (its spec, and its configurations validated).
    """
    name, spec = kernel.name, kernel.spec
    c = kernel.validate_config(config or {})
    if name == "fp32":
        flops = 8.0 * spec.problem["n"] * c["nr_outer"] * c["nr_inner"]
        # small blocks leave issue slots idle at block boundaries
        efficiency = 0.97 - 0.06 * (128 / c["block_size_x"]) ** 0.5 + 0.02 * (c["nr_inner"] == 1024)
        return {"flops": flops, "bytes": 8.0 * spec.problem["n"], "efficiency": efficiency}
    if name == "sgemm":
        m, n, k = spec.problem["m"], spec.problem["n"], spec.problem["k"]
        flops = 2.0 * m * n * k
        wpt = (c["MWG"] // c["MDIMC"]) * (c["NWG"] // c["NDIMC"])
        reuse = min(1.0, wpt / 32.0) ** 0.6
        staging = 0.7 + 0.15 * c["SA"] + 0.15 * c["SB"]
        vector = 1.0 + 0.04 * (math.log2(c["VWM"]) + math.log2(c["VWN"]))
        efficiency = float(np.clip(0.6 * reuse * staging * vector * _jitter(name, c, 0.08), 0.03, 0.8))
        # A is re-read once per block column, B once per block row (L2 helps: factor 0.5)
        traffic = 4.0 * m * n * k * (1.0 / c["NWG"] + 1.0 / c["MWG"]) * 0.5 + 12.0 * m * n
        return {"flops": flops, "bytes": traffic, "efficiency": efficiency}
    if name in ("stream_copy", "stream_triad"):
        arrays = 2 if name == "stream_copy" else 3
        nbytes = 4.0 * arrays * spec.problem["n"]
        efficiency = {1: 0.78, 2: 0.88, 4: 0.92}[c["vector_width"]] * (0.96 if c["block_size_x"] == 128 else 1.0)
        flops = 0.0 if name == "stream_copy" else 2.0 * spec.problem["n"]
        return {"flops": flops, "bytes": nbytes, "efficiency": efficiency}
    raise ValueError(f"kernel: {name!r} has no cost model (use the runner's square_wave/step)")


def kernel_twin(kernel, config: Mapping[str, int] | None = None):
    """The :class:`~powermodels.devices.simulated.SimulatedWorkload` twin of a registry kernel configuration.

    Core-bound time ``β / f_core`` with ``β = FLOPs / (FLOP per cycle · efficiency)``
    and memory-bound time ``α / f_mem`` with ``α = bytes / (bytes per MHz·s · efficiency)``
    (DSO eq. 2 shape); activity follows the fraction of the launch each unit is busy.
    """
    from ..devices.simulated import SimulatedWorkload

    name = kernel.name
    c = kernel.validate_config(config or {})
    cost = kernel_cost(kernel, c)
    eff = cost["efficiency"]
    core_work = cost["flops"] / (FP32_FLOP_PER_CYCLE * 1e6 * eff) if cost["flops"] else 0.0
    if name in ("stream_copy", "stream_triad"):
        mem_work = cost["bytes"] / (MEM_BYTES_PER_MHZ_S * eff)
    else:
        mem_work = cost["bytes"] / MEM_BYTES_PER_MHZ_S
    # activity at the nominal clocks (1980 / 2619 MHz): the busier unit sets the pace
    t_core = core_work / 1980.0
    t_mem = mem_work / 2619.0
    t = max(t_core, t_mem, 1e-9)
    if name == "fp32":
        activity, mem_activity = 0.95 * eff, 0.02
    else:
        activity = float(np.clip(0.15 + 0.8 * eff * t_core / t, 0.05, 1.0))
        mem_activity = float(np.clip(t_mem / t, 0.0, 1.0))
    return SimulatedWorkload(
        name=f"{name}[{kernel.config_id(c)}]",
        core_work=core_work,
        mem_work=mem_work,
        t0_s=5e-6,
        activity=activity,
        mem_activity=mem_activity,
    )


