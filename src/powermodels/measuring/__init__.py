"""Measuring: run a workload on a device and turn the sensor's readings into run-table rows.

This package owns everything between a device and a run table: the runners
that launch a workload on a real GPU (CuPy) or the simulated one
(:mod:`.runner`), the background NVML sampler and its ring buffer
(:mod:`.sampler`, :mod:`.ring_buffer`), CUDA-graph batching of short kernels
(:mod:`.graphs`), the measurement protocols that turn a trace into one row
(:mod:`.protocols`, one module per protocol), the long reference measurement
(:mod:`.reference`), external programs (:mod:`.program`), the energy-counter
log behind :class:`~powermodels.EnergyMeter` (:mod:`.counter_log`) and the
guards that keep a measurement alone on its GPU (:mod:`.exclusive`). It never
fits a model; CuPy is imported only when a real GPU runs.
"""
