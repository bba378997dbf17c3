"""Zeus-compatible energy windows: switch from Zeus with one import.

Code written for Zeus's ``ZeusMonitor`` (``ml-energy/zeus``, ``zeus.monitor``)
runs unchanged on powermodels' :class:`~powermodels.meter.EnergyMeter`::

    # from zeus.monitor import ZeusMonitor
    from powermodels.integrations.zeus import ZeusMonitor

    monitor = ZeusMonitor(gpu_indices=[0])
    monitor.begin_window("step")
    train_one_step()
    mes = monitor.end_window("step")
    print(mes.time, mes.gpu_energy[0], mes.total_energy)

The same calls and arguments as Zeus documents them — ``ZeusMonitor(gpu_indices,
cpu_indices, approx_instant_energy, log_file, sync_execution_with)``,
``begin_window(key, sync_execution=True, restart=False)``,
``end_window(key, sync_execution=True, cancel=False)``, ``reset_windows()``,
the ``gpu_indices`` attribute — and the same :class:`Measurement` fields
(``time``, ``gpu_energy`` by GPU index, ``cpu_energy``, ``dram_energy``,
``soc_energy``, ``total_energy``). Nothing of Zeus is imported or needed.

What differs (see ``docs/workloads.md``, "Coming from Zeus"):

* **Each GPU's energy comes with its 1-σ uncertainty**
  (``Measurement.gpu_energy_uncertainty``) and the full
  :class:`~powermodels.meter.WindowMeasurement` (``Measurement.windows``:
  bounds, clocks, temperature, throttle reasons).
* **Windows shorter than the energy counter's update period** (~100 ms on
  Hopper): Zeus reports the counter difference, which is 0 when no update fell
  inside the window (with ``approx_instant_energy=True``: the instant power ×
  the window's time). powermodels never reports 0: it interpolates the counter
  between the updates around each end, says so (a ``RuntimeWarning``,
  ``windows[i].short``) and gives an uncertainty of about one update's energy.
  ``approx_instant_energy`` is accepted and changes nothing.
* **The end of a window**: like Zeus, ``end_window`` returns at once; the
  energy since the counter's last update is that update interval's power ×
  the time since, and the uncertainty says so. ``ZeusMonitor(..., wait=True)``
  waits instead for the first update after the window (up to ~0.1 s on
  Hopper; all GPUs of the monitor in parallel) so both ends are bracketed.
* **No CPU or DRAM energy** (RAPL is not read): ``cpu_energy`` and
  ``dram_energy`` are None, as in Zeus where CPU measurement is unavailable;
  asking for CPUs (``cpu_indices`` non-empty) is an error.
* ``gpu_indices`` are CUDA ordinals as the framework sees them (after
  ``CUDA_VISIBLE_DEVICES``), as in Zeus; each GPU's NVML handle is found by
  its PCI bus id or UUID (:mod:`powermodels.devices.cuda_visible`).
* Without a GPU the simulated GPU stands in (``device="auto"``, said on
  stderr); pass ``device="nvml"`` to refuse that.
"""

from __future__ import annotations

import math
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..meter import EnergyMeter, WindowMeasurement

__all__ = ["Measurement", "ZeusMonitor"]

SYNC_FRAMEWORKS = ("torch", "jax", "cupy")


@dataclass
class Measurement:
    """One window's time and energy, with Zeus's fields (and powermodels' uncertainty).

    Attributes
    ----------
    time : float
        Seconds the window lasted.
    gpu_energy : dict of int to float
        Energy (J) per GPU index (CUDA ordinals after ``CUDA_VISIBLE_DEVICES``).
    cpu_energy, dram_energy : None
        Not measured (no RAPL); None as in Zeus without CPU measurement.
    soc_energy : None
        Not measured (no SoC).
    gpu_energy_uncertainty : dict of int to float
        1-σ uncertainty of each GPU's energy (J); not in Zeus.
    windows : dict of int to WindowMeasurement
        Each GPU's full measurement; not in Zeus (empty for a cancelled window).
    """

    time: float
    gpu_energy: dict
    cpu_energy: dict | None = None
    dram_energy: dict | None = None
    soc_energy: object = None
    gpu_energy_uncertainty: dict = field(default_factory=dict)
    windows: dict = field(default_factory=dict)

    @property
    def total_energy(self) -> float:
        """Energy of all measured GPUs in the window (J)."""
        return sum(self.gpu_energy.values())

    @property
    def total_energy_uncertainty(self) -> float:
        """1-σ of :attr:`total_energy` (J), the GPUs' uncertainties taken as independent."""
        return math.sqrt(sum(u * u for u in self.gpu_energy_uncertainty.values()))


def _visible_gpu_count() -> int:
    """GPUs a CUDA program of this process sees (``CUDA_VISIBLE_DEVICES`` applied)."""
    from ..devices.cuda_visible import ENV, parse_cuda_visible_devices
    from ..devices.nvml import nvml_gpu_count

    listed = parse_cuda_visible_devices(os.environ.get(ENV))
    return len(listed) if listed is not None else nvml_gpu_count()


def _synchronizer(framework: str, gpu_indices: list[int]):
    """Wait for the work ``framework`` queued on the GPUs; a no-op when the framework is not in use."""
    if framework not in SYNC_FRAMEWORKS:
        raise ValueError(f"ZeusMonitor: sync_execution_with must be one of {SYNC_FRAMEWORKS}, "
                         f"got {framework!r}")

    def sync() -> None:
        module = sys.modules.get(framework)  # only a framework the program imported has work queued
        if module is None:
            return
        if framework == "torch":
            if module.cuda.is_available() and module.cuda.is_initialized():
                for i in gpu_indices:
                    module.cuda.synchronize(i)
        elif framework == "cupy":
            for i in gpu_indices:
                module.cuda.Device(i).synchronize()
        else:  # JAX runs a device's work in order: a trivial computation on it finishes after it
            devices = {d.id: d for d in module.devices()}
            for i in gpu_indices:
                if i in devices:
                    module.device_put(0.0, devices[i]).block_until_ready()

    return sync


class ZeusMonitor:
    """Zeus's ``ZeusMonitor`` interface on powermodels' :class:`~powermodels.meter.EnergyMeter`.

    Parameters
    ----------
    gpu_indices : list of int, optional
        CUDA ordinals of the GPUs to measure (after ``CUDA_VISIBLE_DEVICES``);
        all visible GPUs when None (one, the simulated GPU, without NVIDIA GPUs).
    cpu_indices : list of int, optional
        Must be None or empty: CPU and DRAM energy are not measured.
    approx_instant_energy : bool, default=False
        Accepted for Zeus code; short windows are never reported as 0 here
        (see the module docstring).
    log_file : str or Path, optional
        CSV written as Zeus writes it: ``start_time,window_name,elapsed_time,gpu<i>_energy…``,
        one row per ended window.
    sync_execution_with : {"torch", "jax", "cupy"}, default="torch"
        Framework whose queued GPU work is waited for at both ends of a window
        (when that framework is imported).
    device : {"auto", "nvml", "simulated"}, Device, or dict of int to Device, default="auto"
        Not in Zeus: where the readings come from ("auto": NVML when a GPU is
        present, else the simulated GPU). A Device (one GPU index) or a dict
        mapping each index to a Device is used as given and left open.
    wait : bool, default=False
        Not in Zeus. False: ``end_window`` returns at once, as Zeus's does, and
        takes the energy since the counter's last update as that update
        interval's power × the time since (a larger uncertainty;
        :meth:`powermodels.meter.EnergyMeter.end_window`). True: it waits for
        the counter's first update after the window (up to ~0.1 s on Hopper)
        so both ends are bracketed — for a window after which the GPU idles
        anyway; in a loop of windows the GPU idles during every wait, and the
        next window's start, interpolated across that idle-to-busy change,
        reads low (simulated: −3.3 % per 0.5 s step with True, 0.0 % with False).

    Attributes
    ----------
    gpu_indices : list of int
        The GPUs measured.
    meters : dict of int to EnergyMeter
        One meter per GPU.
    """

    def __init__(self, gpu_indices: list[int] | None = None, cpu_indices: list[int] | None = None,
                 approx_instant_energy: bool = False, log_file: str | Path | None = None,
                 sync_execution_with: str = "torch", *, device="auto", wait: bool = False):
        if cpu_indices:
            raise ValueError(f"ZeusMonitor: cpu_indices={cpu_indices!r}: powermodels measures GPU energy "
                             "only (no RAPL); pass cpu_indices=None or []")
        self.approx_instant_energy = bool(approx_instant_energy)
        self.wait = bool(wait)
        self.cpu_indices: list[int] = []
        self.gpu_indices = self._indices(gpu_indices, device)
        self._sync = _synchronizer(sync_execution_with, self.gpu_indices)
        self.sync_with = sync_execution_with
        self.meters: dict[int, EnergyMeter] = {}
        try:
            for i in self.gpu_indices:
                given = device.get(i) if isinstance(device, dict) else device
                self.meters[i] = EnergyMeter(given, index=i, sync=None)  # synchronized here, once
        except BaseException:
            self.close()
            raise
        self._starts: dict[str, float] = {}
        self.log_file = None
        if log_file is not None:
            self.log_file = open(log_file, "w")  # noqa: SIM115 - kept open like Zeus's, closed by close()
            self.log_file.write("start_time,window_name,elapsed_time,"
                                + ",".join(f"gpu{i}_energy" for i in self.gpu_indices) + "\n")
            self.log_file.flush()

    @staticmethod
    def _indices(gpu_indices, device) -> list[int]:
        if isinstance(device, dict):
            if gpu_indices is None:
                gpu_indices = sorted(device)
            missing = [i for i in gpu_indices if i not in device]
            if missing:
                raise ValueError(f"ZeusMonitor: no device given for GPU index(es) {missing}")
        if gpu_indices is None:
            count = _visible_gpu_count() if device in ("auto", "nvml") else 0
            gpu_indices = list(range(count)) if count else [0]
        indices = list(gpu_indices)
        if not indices or len(set(indices)) != len(indices) or not all(
                isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in indices):
            raise ValueError(f"ZeusMonitor: gpu_indices must be distinct integers >= 0, got {gpu_indices!r}")
        if not isinstance(device, (str, dict)) and len(indices) != 1:
            raise ValueError("ZeusMonitor: one Device serves one GPU index; pass a dict {index: Device}")
        return indices

    # -- Zeus's window API ----------------------------------------------------

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Begin window ``key`` on every GPU (after waiting for queued work when ``sync_execution``).

        A key that is open is a ``ValueError``, unless ``restart`` (then the
        open window is dropped and begun again), as in Zeus.
        """
        if key in self._starts:
            if not restart:
                raise ValueError(f"Measurement window {key!r} already exists")
            self._cancel(key)
        if sync_execution:
            self._sync()
        begun = []
        try:
            for i, meter in self.meters.items():
                meter.begin_window(key)
                begun.append(i)
        except BaseException:
            for i in begun:
                self.meters[i].cancel_window(key)
            raise
        self._starts[key] = time.time()

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """End window ``key`` and return its :class:`Measurement` (zeros when ``cancel``, as in Zeus)."""
        if key not in self._starts:
            raise ValueError(f"Measurement window {key!r} does not exist")
        if sync_execution:
            self._sync()
        if cancel:
            self._cancel(key)
            return Measurement(time=0.0, gpu_energy={i: 0.0 for i in self.gpu_indices},
                               gpu_energy_uncertainty={i: 0.0 for i in self.gpu_indices})
        start = self._starts.pop(key)
        with warnings.catch_warnings(record=True) as caught:  # the meters' notes, said at the caller
            warnings.simplefilter("always")
            windows = self._end_all(key)
        for w in caught:
            warnings.warn(w.message, w.category, stacklevel=2)
        first = windows[self.gpu_indices[0]]
        result = Measurement(time=first.time_s, gpu_energy={i: w.energy_j for i, w in windows.items()},
                             gpu_energy_uncertainty={i: w.uncertainty_j for i, w in windows.items()},
                             windows=windows)
        if self.log_file is not None:
            self.log_file.write(f"{start},{key},{result.time},"
                                + ",".join(str(result.gpu_energy[i]) for i in self.gpu_indices) + "\n")
            self.log_file.flush()
        return result

    def reset_windows(self) -> None:
        """Drop every open window without measuring it."""
        for key in list(self._starts):
            self._cancel(key)

    def close(self) -> None:
        """Stop every meter's polling thread (and close the GPUs opened here) and the log file."""
        for meter in getattr(self, "meters", {}).values():
            meter.close()
        self.meters = {}
        if getattr(self, "log_file", None) is not None:
            self.log_file.close()
            self.log_file = None

    def __enter__(self) -> ZeusMonitor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers ----------------------------------------------------------------

    def _cancel(self, key: str) -> None:
        self._starts.pop(key, None)
        for meter in self.meters.values():
            if key in meter.open_windows:
                meter.cancel_window(key)

    def _end_all(self, key: str) -> dict[int, WindowMeasurement]:
        """End ``key`` on every GPU at once: each waits for its counter update in parallel."""
        if len(self.meters) == 1:
            (i, meter), = self.meters.items()
            return {i: meter.end_window(key, wait=self.wait)}
        with ThreadPoolExecutor(max_workers=len(self.meters)) as pool:
            futures = {i: pool.submit(meter.end_window, key, wait=self.wait) for i, meter in self.meters.items()}
            return {i: f.result() for i, f in futures.items()}
