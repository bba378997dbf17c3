"""The real GPU, read through NVML (``nvidia-ml-py``, imported as ``pynvml``).

``pynvml`` is imported lazily, inside :func:`nvml_gpu_count` and
:class:`NVMLDevice`, so the package imports on a machine without a GPU, a
driver or even ``nvidia-ml-py``.

Reading never raises. A quantity the GPU, the driver or the installed
``pynvml`` does not offer reads as :data:`~powermodels.devices.base.NOT_AVAILABLE`
(NaN) and is remembered, so a sampler thread polling at 1 kHz does not pay
for a failing call again; other (transient) NVML errors also read as NaN but
are retried on the next call. See :attr:`NVMLDevice.unavailable`.

Changing settings goes only through :meth:`Device.settings_guard
<powermodels.devices.base.Device.settings_guard>`, whose restore logic lives in
:class:`~powermodels.devices.base.SettingsGuard`. NVML cannot read back
whether clocks are locked (nor to what), so :meth:`NVMLDevice.current_settings`
reports the clocks as ``None`` and a guard restores clocks by *resetting* them
to the driver default (``nvmlDeviceResetGpuLockedClocks`` /
``nvmlDeviceResetMemoryLockedClocks``); a lock made outside powermodels
before the guard is therefore not put back. The power limit is read and put
back to its previous value.
"""

from __future__ import annotations

import math
import time
import warnings

from .base import NOT_AVAILABLE, Device, DeviceInfo, Reading, Settings
from .cuda_visible import resolve_nvml_handle

__all__ = ["NVMLDevice", "nvml_gpu_count"]

# NVML field ids (nvml.h); literal so the module does not need pynvml to import.
FIELD_POWER_AVERAGE = 185  # NVML_FI_DEV_POWER_AVERAGE, mW, ~1 s window on Hopper
FIELD_POWER_INSTANT = 186  # NVML_FI_DEV_POWER_INSTANT, mW, ~25 ms window on Hopper
_POWER_FIELDS = (FIELD_POWER_INSTANT, FIELD_POWER_AVERAGE)

# Return codes that mean "this GPU/driver/binding will never answer this call":
# NOT_SUPPORTED (3), NO_PERMISSION (4), NOT_FOUND (6), FUNCTION_NOT_FOUND (13).
_PERMANENT_CODES = frozenset({3, 4, 6, 13})
_NVML_SUCCESS = 0

# Clock "event" reasons were called "throttle" reasons before driver r535.
_EVENT_REASONS = "nvmlDeviceGetCurrentClocksEventReasons"
_THROTTLE_REASONS = "nvmlDeviceGetCurrentClocksThrottleReasons"

# nvmlValueType_t -> attribute of the nvmlValue_t union.
_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def nvml_gpu_count() -> int:
    """Number of NVIDIA GPUs NVML can see; 0 when NVML, the driver or pynvml is absent.

    Never raises: any failure to load or initialise NVML means "no GPU".
    """
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return 0
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:
        return 0
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _is_permanent(err: BaseException) -> bool:
    """Whether an error from a read means the call will never work on this GPU."""
    if isinstance(err, AttributeError):  # the installed pynvml lacks the function
        return True
    return getattr(err, "value", None) in _PERMANENT_CODES


def _as_text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NVMLDevice(Device):
    """An NVIDIA GPU read and (under guard) controlled through NVML.

    Parameters
    ----------
    index : int, default=0
        CUDA device ordinal of the GPU (what CuPy and PyTorch call device
        ``index``, under ``CUDA_VISIBLE_DEVICES``). The NVML handle is found
        from it by PCI bus id (CuPy already imported) or through
        ``CUDA_VISIBLE_DEVICES`` (UUID, MIG parent or index), never by
        taking it as NVML's own index when that variable is set
        (:func:`~powermodels.devices.cuda_visible.resolve_nvml_handle`;
        ``info.extra`` records how).

    Attributes
    ----------
    unavailable : dict of str to str
        Reads found unsupported so far, with the reason; they return NaN
        without calling NVML again.

    Notes
    -----
    :meth:`read` costs one ``nvmlDeviceGetFieldValues`` call for both power
    fields (186 instant, 185 average: on Hopper a 25 ms and a 1 s boxcar every
    100 ms, Yang §II-C and Fig. 14) plus ``nvmlDeviceGetPowerUsage`` (the 1 s
    average on Ampere and newer, Yang §II-C),
    the GPU temperature, the SM and memory clocks and the clock-event
    (throttle) reasons — each about 1 µs on an H100/H200. The total-energy
    counter is *not* part of :meth:`read`: it takes milliseconds a call on
    Hopper, so read it with :meth:`read_energy_j` on a slower cadence.

    Examples
    --------
    >>> from powermodels.devices.nvml import NVMLDevice  # doctest: +SKIP
    >>> gpu = NVMLDevice(0)                              # doctest: +SKIP
    >>> gpu.read().power_instant_w  # idle H200, driver 580  # doctest: +SKIP
    78.292
    """

    def __init__(self, index: int = 0):
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise ValueError(f"NVMLDevice: index must be a non-negative int, got {index!r}")
        import pynvml

        self._nvml = pynvml
        self.index = index
        self.unavailable: dict[str, str] = {}
        self._closed = False
        pynvml.nvmlInit()
        try:
            resolved = resolve_nvml_handle(pynvml, index)
        except BaseException:
            pynvml.nvmlShutdown()
            raise
        self._handle = resolved.handle
        pci = self._call("pci_info", "nvmlDeviceGetPciInfo", self._handle)
        nvml_index = self._call("nvml_index", "nvmlDeviceGetIndex", self._handle)
        self._info = DeviceInfo(
            name=self._text_or_empty("nvmlDeviceGetName", self._handle) or f"NVIDIA GPU {index}",
            kind="nvml",
            index=index,
            uuid=self._text_or_empty("nvmlDeviceGetUUID", self._handle),
            driver=self._text_or_empty("nvmlSystemGetDriverVersion"),
            extra={"resolved_by": resolved.how, "cuda_visible_entry": resolved.entry,
                   "pci_bus_id": "" if pci is None else _as_text(pci.busId),
                   "nvml_index": None if nvml_index is None else int(nvml_index)},
        )
        # Constants looked up once: read() runs at >= 1 kHz.
        self._temperature_sensor = getattr(pynvml, "NVML_TEMPERATURE_GPU", 0)
        self._clock_sm = getattr(pynvml, "NVML_CLOCK_SM", 1)
        self._clock_mem = getattr(pynvml, "NVML_CLOCK_MEM", 2)
        self._reasons_function = _EVENT_REASONS

    # ------------------------------------------------------------------ reads
    def _call(self, key: str, function: str, *args):
        """Call ``pynvml.<function>(*args)``; ``None`` if it fails (never raises).

        ``key`` names the quantity in :attr:`unavailable`; a permanent failure
        is remembered there and the call is not made again.
        """
        if key in self.unavailable:
            return None
        try:
            return getattr(self._nvml, function)(*args)
        except Exception as err:
            if _is_permanent(err):
                self.unavailable[key] = f"{function}: {err or type(err).__name__}"
            return None

    def _text_or_empty(self, function: str, *args) -> str:
        value = self._call(function, function, *args)
        return "" if value is None else _as_text(value)

    @property
    def info(self) -> DeviceInfo:
        return self._info

    def now(self) -> float:
        """``time.perf_counter()``: monotonic host clock, in seconds."""
        return time.perf_counter()

    def _power_fields_w(self) -> tuple[float, float]:
        """(instant, average) power in watts from one ``nvmlDeviceGetFieldValues`` call."""
        values = self._call("power_fields", "nvmlDeviceGetFieldValues", self._handle, _POWER_FIELDS)
        if values is None:
            return NOT_AVAILABLE, NOT_AVAILABLE
        out = []
        for field_id, value in zip(_POWER_FIELDS, values, strict=False):
            key = f"field_{field_id}"
            if key in self.unavailable:
                out.append(NOT_AVAILABLE)
                continue
            code = value.nvmlReturn
            if code != _NVML_SUCCESS:
                if code in _PERMANENT_CODES:
                    self.unavailable[key] = (
                        f"nvmlDeviceGetFieldValues field {field_id}: return {code}"
                    )
                out.append(NOT_AVAILABLE)
                continue
            raw = getattr(value.value, _VALUE_ATTR.get(value.valueType, "uiVal"))
            out.append(raw / 1000.0)  # mW -> W
        out += [NOT_AVAILABLE] * (2 - len(out))  # a short answer must not crash a sampler
        return out[0], out[1]

    def read(self) -> Reading:
        """One reading of power (instant, average, usage), temperature, clocks and throttle reasons.

        ``t_s`` is the host time half-way through the power-field call, the
        quantity a sampler aligns. Unsupported quantities are NaN;
        ``throttle_reasons`` is 0 when unknown.
        """
        handle = self._handle
        t0 = time.perf_counter()
        instant_w, average_w = self._power_fields_w()
        t1 = time.perf_counter()
        usage = self._call("power_usage", "nvmlDeviceGetPowerUsage", handle)
        temperature = self._call(
            "temperature", "nvmlDeviceGetTemperature", handle, self._temperature_sensor
        )
        sm = self._call("sm_clock", "nvmlDeviceGetClockInfo", handle, self._clock_sm)
        mem = self._call("mem_clock", "nvmlDeviceGetClockInfo", handle, self._clock_mem)
        reasons = self._call("throttle_reasons", self._reasons_function, handle)
        if (
            reasons is None
            and self._reasons_function == _EVENT_REASONS
            and ("throttle_reasons" in self.unavailable)
        ):
            # Older driver or nvidia-ml-py: fall back, once, to the pre-r535 name.
            del self.unavailable["throttle_reasons"]
            self._reasons_function = _THROTTLE_REASONS
            reasons = self._call("throttle_reasons", self._reasons_function, handle)
        return Reading(
            t_s=0.5 * (t0 + t1),
            power_instant_w=instant_w,
            power_average_w=average_w,
            power_usage_w=NOT_AVAILABLE if usage is None else usage / 1000.0,
            temperature_c=NOT_AVAILABLE if temperature is None else float(temperature),
            sm_clock_mhz=NOT_AVAILABLE if sm is None else float(sm),
            mem_clock_mhz=NOT_AVAILABLE if mem is None else float(mem),
            throttle_reasons=0 if reasons is None else int(reasons),
        )

    def read_energy_j(self) -> float:
        """Total energy since the driver loaded, in joules (NVML counts mJ); NaN if unsupported."""
        millijoules = self._call(
            "energy_counter", "nvmlDeviceGetTotalEnergyConsumption", self._handle
        )
        return NOT_AVAILABLE if millijoules is None else millijoules / 1000.0

    def supported_clocks(self) -> dict[float, list[float]]:
        """Supported graphics (SM) clocks in MHz, descending, for each memory clock in MHz.

        Empty when the GPU does not report them; a memory clock whose graphics
        clocks cannot be read is left out.
        """
        memory = self._call(
            "supported_memory_clocks", "nvmlDeviceGetSupportedMemoryClocks", self._handle
        )
        table: dict[float, list[float]] = {}
        for mem in sorted(memory or (), reverse=True):
            try:
                graphics = self._nvml.nvmlDeviceGetSupportedGraphicsClocks(self._handle, mem)
            except Exception:
                continue
            table[float(mem)] = sorted((float(f) for f in graphics), reverse=True)
        return table

    def power_limits_w(self) -> tuple[float, float, float]:
        """(minimum, maximum, current) power-management limit in watts; NaN where unknown."""
        constraints = self._call(
            "power_limit_constraints", "nvmlDeviceGetPowerManagementLimitConstraints", self._handle
        )
        low, high = (
            (NOT_AVAILABLE, NOT_AVAILABLE)
            if constraints is None
            else (
                constraints[0] / 1000.0,
                constraints[1] / 1000.0,
            )
        )
        return low, high, self._current_power_limit_w()

    def _current_power_limit_w(self) -> float:
        limit = self._call("power_limit", "nvmlDeviceGetPowerManagementLimit", self._handle)
        return NOT_AVAILABLE if limit is None else limit / 1000.0

    def default_power_limit_w(self) -> float:
        """The driver's default power-management limit in watts; NaN if unknown."""
        limit = self._call(
            "default_power_limit", "nvmlDeviceGetPowerManagementDefaultLimit", self._handle
        )
        return NOT_AVAILABLE if limit is None else limit / 1000.0

    def enforced_power_limit_w(self) -> float:
        """The limit the GPU actually enforces (the lowest of all limits) in watts; NaN if unknown."""
        limit = self._call("enforced_power_limit", "nvmlDeviceGetEnforcedPowerLimit", self._handle)
        return NOT_AVAILABLE if limit is None else limit / 1000.0

    def compute_processes(self) -> list[int] | None:
        """Pids of the compute processes on this GPU (``nvmlDeviceGetComputeRunningProcesses``).

        None when the GPU, driver or binding cannot list them (e.g. some vGPU
        setups); never raises. In a container NVML may report host pids.
        """
        procs = self._call("compute_processes", "nvmlDeviceGetComputeRunningProcesses", self._handle)
        return None if procs is None else [int(p.pid) for p in procs]

    def clock_probe(self):
        """The on-GPU clock probe (:class:`~powermodels.devices.clock_probe.CupyClockProbe`)
        with its buffer on this GPU (CUDA device ``index``); None when CuPy, its CUDA runtime or
        the device's memory is missing (rows then say their clock is NVML's reading)."""
        try:
            from .clock_probe import CupyClockProbe

            with self.cuda_device():
                return CupyClockProbe()
        except Exception:  # no CuPy, no CUDA runtime or no device memory: the reading stands in
            return None

    def cuda_device(self):
        """Context in which CuPy's current device (that of the calling thread) is this GPU:
        CUDA device ``index``, the ordinal the NVML handle was resolved from."""
        import cupy as cp

        return cp.cuda.Device(self.index)

    def current_settings(self) -> Settings:
        """``Settings(None, None, current power limit)``.

        NVML cannot tell whether clocks are locked, so clocks are reported as
        ``None`` (default) and a guard restores them by resetting the locks.
        An unknown power limit is also ``None``, i.e. restored to the default.
        """
        limit = self._current_power_limit_w()
        return Settings(None, None, None if math.isnan(limit) else limit)

    # ---------------------------------------------------------------- setters
    # Only SettingsGuard calls these. They raise on any NVML error: the guard
    # undoes what was applied and reports what could not be restored.
    @staticmethod
    def _mhz(name: str, mhz: float) -> int:
        if (
            isinstance(mhz, bool)
            or not isinstance(mhz, (int, float))
            or not math.isfinite(mhz)
            or mhz <= 0
        ):
            raise ValueError(f"{name} must be a positive finite clock in MHz, got {mhz!r}")
        return round(float(mhz))

    def _apply_sm_clock(self, mhz: float | None) -> None:
        if mhz is None:
            self._nvml.nvmlDeviceResetGpuLockedClocks(self._handle)
            return
        value = self._mhz("sm_clock_mhz", mhz)
        self._nvml.nvmlDeviceSetGpuLockedClocks(self._handle, value, value)

    def _apply_mem_clock(self, mhz: float | None) -> None:
        if mhz is None:
            self._nvml.nvmlDeviceResetMemoryLockedClocks(self._handle)
            return
        value = self._mhz("mem_clock_mhz", mhz)
        self._nvml.nvmlDeviceSetMemoryLockedClocks(self._handle, value, value)

    def _apply_power_limit(self, watts: float | None) -> None:
        if watts is None:
            milliwatts = int(self._nvml.nvmlDeviceGetPowerManagementDefaultLimit(self._handle))
        else:
            if (
                isinstance(watts, bool)
                or not isinstance(watts, (int, float))
                or not math.isfinite(watts)
                or watts <= 0
            ):
                raise ValueError(
                    f"power_limit_w must be a positive finite number of watts, got {watts!r}"
                )
            low, high, _ = self.power_limits_w()
            if not (math.isnan(low) or math.isnan(high)) and not low <= watts <= high:
                raise ValueError(
                    f"power_limit_w={watts} W is outside this GPU's range [{low}, {high}] W"
                )
            milliwatts = round(float(watts) * 1000.0)
        self._nvml.nvmlDeviceSetPowerManagementLimit(self._handle, milliwatts)

    # --------------------------------------------------------------- teardown
    def close(self) -> None:
        """Restore any guard still open on this device, then shut NVML down (once)."""
        if self._closed:
            return
        from .settings_restore import open_guards

        for guard in reversed(open_guards(self)):
            failures = guard._restore(reason="device closed")
            if failures:
                warnings.warn(
                    f"{self._info.name}: could not restore {'; '.join(failures)}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        self._closed = True
        try:
            self._nvml.nvmlShutdown()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"NVMLDevice(index={self.index})  # {self._info.name}, driver {self._info.driver}"
