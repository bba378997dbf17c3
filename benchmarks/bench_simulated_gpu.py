"""CPU cost of the SimulatedGPU per simulated second, and of reading traces from it.

Target (issue 2): a 10 s simulated run takes well under 1 s of CPU. Each
scenario simulates 10 s on a fresh :class:`SimulatedGPU` and reports process
CPU time for the simulation and for a 1 kHz trace over it:

- idle;
- a steady FP32 load (1000 launches of 10 ms);
- 10 µs kernels with 5 µs gaps (666 667 launches, far below the 0.2 ms grid);
- a 50 ms / 48 ms square wave;
- FP32 under a 350 W power cap (the clock controller at work every 1 ms).

Usage::

    python benchmarks/bench_simulated_gpu.py     # writes benchmarks/results/simulated_gpu.md
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

from powermodels.devices.simulated import EXAMPLE_WORKLOADS, SimulatedGPU

RESULTS = Path(__file__).resolve().parent / "results" / "simulated_gpu.md"
SECONDS = 10.0


def _idle(gpu):
    gpu.idle(SECONDS)


def _fp32(gpu):
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=int(SECONDS / 0.01))


def _tiny(gpu):
    gpu.run(EXAMPLE_WORKLOADS["tiny"], launches=int(SECONDS / 15e-6), gap_s=5e-6)


def _square(gpu):
    gpu.square_wave(0.050, 0.048, periods=int(SECONDS / 0.098))


def _capped(gpu):
    with gpu.settings_guard(power_limit_w=350.0, allow_changes=True):
        gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=int(SECONDS / 0.0138))


SCENARIOS = [("idle", _idle), ("steady FP32, 10 ms launches", _fp32),
             ("10 µs kernels + 5 µs gaps", _tiny), ("square wave 50/48 ms", _square),
             ("FP32 capped at 350 W", _capped)]


def main() -> None:
    rows = []
    for name, scenario in SCENARIOS:
        gpu = SimulatedGPU(seed=0)
        c0 = time.process_time()
        scenario(gpu)
        c1 = time.process_time()
        trace = gpu.trace(0.0, gpu.now(), sample_period_s=1e-3)
        c2 = time.process_time()
        rows.append((name, gpu.now(), c1 - c0, c2 - c1, len(trace)))
    lines = [
        "# SimulatedGPU speed",
        "",
        f"`python benchmarks/bench_simulated_gpu.py` on {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; process CPU time.",
        "",
        "| scenario | simulated s | CPU s (simulate) | CPU s (1 kHz trace) | trace rows |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, sim, cpu_sim, cpu_trace, n in rows:
        lines.append(f"| {name} | {sim:.2f} | {cpu_sim:.3f} | {cpu_trace:.3f} | {n} |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text)


if __name__ == "__main__":
    main()
