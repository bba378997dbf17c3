"""Thirty-second smoke test of the library's GPU paths before a long device call (read-only).

Compiles and runs the clock probe (``devices.clock_probe.CupyClockProbe``) 20 times and measures one
CuPy callable with ``powermodels.measure`` on NVML, printing the row's clock and thermal columns; exits
non-zero at the first failure so a long call after it can be skipped.

Usage::

    PYTHONPATH=src python3 benchmarks/gpu_smoke.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _readonly_nvml import forbid_nvml_setters  # noqa: E402


def main() -> int:
    forbid_nvml_setters()
    import cupy as cp

    import powermodels
    from powermodels.devices.clock_probe import CupyClockProbe
    from powermodels.workloads import CallableWorkload

    probe = CupyClockProbe()
    for _ in range(20):
        probe.enqueue()
    cp.cuda.runtime.deviceSynchronize()
    clocks = probe.collect_clocks()
    print(f"probe: {len(clocks)} probes, median {float(sorted(clocks)[len(clocks) // 2]):.1f} MHz, "
          f"range {clocks.min():.1f}-{clocks.max():.1f} MHz")
    a = cp.random.rand(4096, 4096, dtype=cp.float32)
    b = cp.random.rand(4096, 4096, dtype=cp.float32)
    c = cp.empty_like(a)
    row = powermodels.measure(CallableWorkload(lambda: cp.matmul(a, b, out=c), name="smoke_fp32"), device="nvml")
    row = row.row
    wanted = [k for k in row if any(s in k for s in ("energy", "clock", "temperature", "alpha", "launch"))]
    for k in wanted:
        print(f"  {k:28s} {row[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
