"""Microbenchmarks and profiling: where instruction counts and kernel features come from.

This package owns Wattchmen's microbenchmark suite (:mod:`.catalog`) and its
two backends — the real GPU with CuPy, NVML and Nsight Compute
(:mod:`.gpu`) and a simulated GPU with known per-instruction energies
(:mod:`.simulated`) — the SASS tools that compile, disassemble and count
opcodes (:mod:`.sass`), the validation workloads of an instruction calibration
(:mod:`.validation_workloads`), the PTX/ncu kernel features of the DVFS
predictor (:mod:`.profiling`) and the per-kernel ncu breakdown of an external
program (:mod:`.program_kernels`). The instruction-energy workflows in
:mod:`powermodels.workflows` drive it; the estimators in
:mod:`powermodels.models` never import it.
"""
