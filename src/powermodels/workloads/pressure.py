"""The tensor-core pressure load of natural-DVFS calibration (``powermodels calibrate``).

A large bf16 GEMM keeps a Hopper GPU at its software power cap (H100: 700 W, clock-event
reason 0x4) and its power controller then lowers the SM clock — between 1110 and 1980 MHz on
the lent H100 with no setting changed. That moving clock is what natural-DVFS calibration
measures the user's workloads at (:mod:`powermodels.workflows.calibrate`).
"""

from __future__ import annotations

from .callables import CallableWorkload
from .twins import SimulatedTwin

__all__ = ["pressure_gemm"]

#: Twin of the pressure load: full core and heavy memory activity; 1.6 ms at the nominal clocks
#: (2·8192³ FLOP at ~700 TFLOP/s of bf16).
PRESSURE_TWIN = SimulatedTwin(time_s=1.6e-3, activity=1.0, mem_activity=0.8)


def _setup(n: int):
    """bf16 operands on the current device: PyTorch when installed, else CuPy (float16)."""
    try:
        import torch

        if torch.cuda.is_available():
            a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
            return {"a": a, "b": b, "out": torch.empty_like(a), "lib": "torch"}
    except ImportError:
        pass
    import cupy as cp

    a = cp.random.standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((n, n), dtype=cp.float32).astype(cp.float16)
    return {"a": a, "b": b, "out": cp.empty_like(a), "lib": "cupy"}


def _gemm(*, a, b, out, lib, n=None):
    """One GEMM into ``out`` (no allocation per call)."""
    if lib == "torch":
        import torch

        torch.matmul(a, b, out=out)
    else:
        import cupy as cp

        cp.matmul(a, b, out=out)


def pressure_gemm(n: int = 8192) -> CallableWorkload:
    """A bf16 (PyTorch) or fp16 (CuPy) ``n × n`` GEMM that holds the power cap; simulated twin included."""
    if not (isinstance(n, int) and 256 <= n <= 65536):
        raise ValueError(f"pressure_gemm: n must be an int in [256, 65536], got {n!r}")
    return CallableWorkload(_gemm, setup=lambda: _setup(n), name=f"pressure_gemm_bf16_{n}",
                            simulated=PRESSURE_TWIN)
