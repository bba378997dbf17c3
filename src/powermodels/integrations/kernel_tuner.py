"""Kernel Tuner observer: powermodels' energy and power for every configuration ``tune_kernel`` tries.

>>> from kernel_tuner import tune_kernel                               # doctest: +SKIP
>>> from kernel_tuner.observers.nvml import NVMLObserver               # doctest: +SKIP
>>> from powermodels.integrations.kernel_tuner import PowerModelsObserver
>>> pm = PowerModelsObserver()                                         # doctest: +SKIP
>>> results, env = tune_kernel("vector_add", source, n, args, tune_params,
...                            observers=[pm, NVMLObserver(["nvml_energy", "nvml_power"])],
...                            metrics={"GFLOP/J": lambda p: 2 * n / 1e9 / p["powermodels_energy"]})  # doctest: +SKIP

Each result then carries

``powermodels_energy``
    Energy of one kernel launch (J): the mean power between the first and
    last energy-counter updates inside Kernel Tuner's continuous benchmark
    (≥ ``continuous_duration`` s of back-to-back launches, a steady load)
    × the benchmark's time, divided by its launches.
``powermodels_power``
    Mean power over that benchmark (W).
``powermodels_energy_uncertainty``
    1-σ uncertainty of ``powermodels_energy`` (J), from the counter updates
    bracketing the window's ends (:class:`powermodels.meter.EnergyMeter`).
``powermodels_throttle_reasons``
    NVML clock-event reasons seen during the window (0: none).

How it differs from Kernel Tuner's :class:`NVMLObserver`: ``nvml_energy`` is
the *median power reading* × the launch time. On Hopper the readings it takes
are the 1 s average (``nvmlDeviceGetPowerUsage``), which lags the load, and
their gain error is up to ±5 % (Yang §IV-B); the energy counter integrates
the true power exactly, and the window is aligned to its updates.

Both hook into the same continuous benchmark (Kernel Tuner runs it once, for
the longest ``continuous_duration`` of the observers), so side by side they
measure the same launches.

Restrictions: Kernel Tuner 1.5 re-reads a lambda's source instead of calling
it (captured names are lost) and misreads many strings; pass
``restrictions=kernel_tuner_restrictions([...], tune_params)``
(:mod:`powermodels.integrations.kernel_tuner_restrictions`) to have them
evaluated as written.

Kernel Tuner is imported when this module is: ``pip install 'powermodels[kerneltuner]'``.
The observer changes no GPU setting (it never touches clocks or power limits).
"""

from __future__ import annotations

import math

try:
    from kernel_tuner.observers.observer import BenchmarkObserver, ContinuousObserver
except ImportError as err:  # one line naming the fix
    raise ImportError("powermodels.integrations.kernel_tuner needs Kernel Tuner: "
                      "pip install 'powermodels[kerneltuner]' (kernel_tuner>=1.5)") from err

from .kernel_tuner_restrictions import kernel_tuner_restrictions

__all__ = ["OBSERVABLES", "PowerModelsObserver", "kernel_tuner_restrictions"]

#: What the observer adds to each configuration's results.
OBSERVABLES = ("powermodels_energy", "powermodels_power", "powermodels_energy_uncertainty",
               "powermodels_throttle_reasons")


class _MeterWindow(ContinuousObserver):
    """The part of the observer that Kernel Tuner drives through its continuous benchmark."""

    def __init__(self, parent: PowerModelsObserver, continuous_duration: float):
        # ContinuousObserver's own __init__ checks NVML observable names; set what it sets instead
        self.parent = parent
        self.name = "powermodels"
        self.observables = list(OBSERVABLES)
        self.continuous_duration = continuous_duration
        self.results = None  # Kernel Tuner sets it to the iteration benchmark's results
        self._last: dict = {}

    def before_start(self):
        self._last = {}
        self.parent._meter_for_run().begin_window("kernel_tuner")

    def after_start(self):
        pass

    def during(self):
        pass

    def after_finish(self):
        parent = self.parent
        meter = parent._meter_for_run()
        launches = parent._launches(self.results["time"])
        if meter.simulated:  # the twin's launches stand in for the kernel on the simulated GPU
            meter.device.run(parent._twin(), launches=launches)
        # back-to-back launches of one configuration: a steady load, so no edge interpolation
        w = meter.end_window("kernel_tuner", steady=True)
        self._last = {
            "powermodels_energy": w.energy_j / launches,
            "powermodels_power": w.power_w,
            "powermodels_energy_uncertainty": w.uncertainty_j / launches,
            "powermodels_throttle_reasons": int(w.throttle_reasons),
        }
        parent.windows.append((dict(parent.params), launches, w))

    def get_results(self):
        return dict(self._last)


class PowerModelsObserver(BenchmarkObserver):
    """A Kernel Tuner observer reporting powermodels' energy and power per configuration.

    Parameters
    ----------
    device : {"auto", "nvml", "simulated"} or Device, default="auto"
        Where the energy comes from. "auto"/"nvml" open the NVML GPU Kernel
        Tuner runs on (matched by the UUID Kernel Tuner reports, else ``index``).
    index : int, default=0
        NVML index when Kernel Tuner does not report the GPU's UUID.
    continuous_duration : float, default=1
        Seconds of back-to-back launches measured per configuration; Kernel
        Tuner runs the longest of all observers' durations, and at least 1 s
        (ten counter updates on Hopper keep the edges' share ~1 %).
    simulated : SimulatedTwin, SimulatedWorkload or callable, optional
        On the simulated GPU, the kernel's twin (a callable gets the
        configuration's parameters); its launches run on the simulated GPU
        inside the window while Kernel Tuner runs the real (CPU) code.

    Attributes
    ----------
    windows : list of (params, launches, WindowMeasurement)
        Every measured window, for inspection.
    """

    def __init__(self, device="auto", *, index: int = 0, continuous_duration: float = 1.0,
                 simulated=None):
        if not (isinstance(continuous_duration, (int, float)) and continuous_duration > 0):
            raise ValueError(f"PowerModelsObserver: continuous_duration must be > 0, got {continuous_duration!r}")
        self.device = device
        self.index = index
        self.simulated = simulated
        self.continuous_observer = _MeterWindow(self, float(continuous_duration))
        self.meter = None
        self.params: dict = {}
        self.windows: list = []

    # -- Kernel Tuner's protocol -------------------------------------------

    def register_device(self, dev):
        self.dev = dev
        if self.meter is None:
            from ..meter import EnergyMeter

            device = self._open(getattr(dev, "env", None) or {})
            # a device opened here (from a kind) is this observer's to close; a Device given stays open
            self._opened = device if device is not self.device else None
            self.meter = EnergyMeter(device, sync=None)
            if self.meter.simulated and self.simulated is None:
                raise ValueError("PowerModelsObserver: on the simulated GPU the kernel needs a twin "
                                 "(simulated=SimulatedTwin(...) or a callable of the parameters)")

    def register_configuration(self, params):
        self.params = dict(params)

    def get_results(self):
        return {}  # the per-iteration benchmark is too short for the counter; see the continuous part

    def close(self) -> None:
        """Stop the meter's polling thread (and close the GPU the observer opened)."""
        if self.meter is not None:
            self.meter.close()
            self.meter = None
        opened, self._opened = getattr(self, "_opened", None), None
        if opened is not None:
            opened.close()

    # -- helpers -------------------------------------------------------------

    def _open(self, env: dict):
        from ..devices import Device, open_device

        if isinstance(self.device, Device) or self.device == "simulated":
            return self.device if isinstance(self.device, Device) else open_device("simulated")
        uuid = str(env.get("uuid") or "")
        if uuid and self.device in ("auto", "nvml"):
            from ..devices.nvml import nvml_gpu_count

            for i in range(nvml_gpu_count()):
                dev = open_device("nvml", index=i)
                if dev.info.uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                    return dev
                dev.close()
        return open_device(self.device, index=self.index)

    def _launches(self, time_ms: float) -> int:
        """The launches Kernel Tuner made in its continuous benchmark (its own formula).

        It runs ``ceil(duration / time)`` launches with ``duration`` the longest
        ``continuous_duration`` of all observers, and at least 1 s.
        """
        duration = 1.0
        for obs in getattr(getattr(self, "dev", None), "observers", None) or [self]:
            cont = getattr(obs, "continuous_observer", None)
            if cont is not None:
                duration = max(duration, float(cont.continuous_duration))
        if not (math.isfinite(time_ms) and time_ms > 0):
            raise ValueError(f"PowerModelsObserver: Kernel Tuner measured a launch time of {time_ms!r} ms")
        return math.ceil(duration / (time_ms / 1e3))

    def _meter_for_run(self):
        if self.meter is None:
            raise RuntimeError("PowerModelsObserver: Kernel Tuner did not register a device first")
        return self.meter

    def _twin(self):
        from ..workloads.twins import as_twin, twin_workload

        name = "kernel[" + ",".join(f"{k}={v}" for k, v in self.params.items()) + "]"
        return twin_workload(as_twin(self.simulated), name, self.params)
