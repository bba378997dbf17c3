"""A fake ``pynvml`` for tests: one simulated GPU, a call log and injectable faults.

Load a fresh copy per test (``load()``) and put it in ``sys.modules["pynvml"]``
(the ``fake_nvml`` fixture in tests/devices/conftest.py does both), so the
code under test imports it as if it were nvidia-ml-py.

Faults
------
``fail_nth(name, n, error)``
    The ``n``-th call of ``name`` from now raises ``error`` (an NVML return
    code, or any exception instance such as ``KeyboardInterrupt()``).
``fail_always(name, error)``
    Every call of ``name`` raises (a permanently broken function).
``unsupported(name)``
    Every call raises ``NVMLError(NVML_ERROR_NOT_SUPPORTED)``.
``unsupported_field(field_id)``
    ``nvmlDeviceGetFieldValues`` succeeds but that field's ``nvmlReturn`` is
    NOT_SUPPORTED.
``remove(name)``
    The function does not exist (an old nvidia-ml-py): ``AttributeError``.
``heal(name)``
    Remove the faults on ``name``.
``fail_nth(name, n, action)`` with a plain callable ``action``
    Call ``action()`` at the ``n``-th call, before the function runs (e.g.
    ``lambda: os.kill(os.getpid(), signal.SIGKILL)`` to kill the process
    mid-change).

Several GPUs: ``add_gpus(n)`` adds ``n`` GPUs after ``gpu`` (index 0), each with
its own UUID, PCI bus id, optional MIG instances (``mig_uuids``) and name;
handles come by index, UUID (or MIG UUID) and PCI bus id. They differ in
identity only: their readings and settings are ``gpu``'s.

Other processes on the GPU: append ``(pid, used_bytes)`` to ``gpu.processes``
(``nvmlDeviceGetComputeRunningProcesses`` lists them).

Across processes: ``persist(path)`` (or ``$FAKE_PYNVML_STATE`` at ``install``)
keeps the GPU's settings in a JSON file, read before and written after every
call, so a killed process leaves its locked clocks for the next one to find.

Every call is appended to ``calls`` as ``(name, args)``; ``count(name)``
counts them.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

# ---- constants (values as in nvml.h) ---------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999

NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186
NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3

nvmlClocksEventReasonSwPowerCap = 0x4

_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
    NVML_ERROR_TIMEOUT: "Timeout",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}


class NVMLError(Exception):
    """Like pynvml.NVMLError: carries the NVML return code in ``value``."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"NVML error {self.value}")


# ---- the simulated GPU -------------------------------------------------------
class FakeGPU:
    """State of the one fake GPU; units as NVML reports them (mW, mJ, MHz, °C)."""

    def __init__(self):
        self.name = "Fake H100 80GB HBM3"
        self.uuid = "GPU-00000000-fake-0000-0000-000000000000"
        self.pci_bus_id = "00000000:18:00.0"
        self.mig_uuids: list[str] = []
        self.driver = "580.00.00"
        self.count = 1
        self.power_instant_mw = 71_250
        self.power_average_mw = 70_500
        self.power_usage_mw = 71_000
        self.energy_mj = 123_456_789
        self.temperature_c = 31
        self.sm_clock_mhz = 1980
        self.mem_clock_mhz = 2619
        self.throttle_reasons = 0
        self.graphics_clocks = {
            2619: list(range(1980, 344, -15)),
            1593: list(range(1980, 344, -15)),
        }
        self.power_limit_min_mw = 200_000
        self.power_limit_max_mw = 700_000
        self.power_limit_default_mw = 700_000
        self.power_limit_mw = 700_000
        self.sm_locked: tuple | None = None
        self.mem_locked: tuple | None = None
        self.initialised = 0
        self.processes: list[tuple[int, int]] = []  # (pid, used GPU memory in bytes)


_PERSISTED = ("sm_locked", "mem_locked", "power_limit_mw", "sm_clock_mhz", "mem_clock_mhz",
              "processes")
_state_path: str | None = None


def persist(path) -> None:
    """Keep the GPU's settings in ``path`` (JSON), shared by every process using it."""
    global _state_path
    _state_path = str(path)
    if Path(_state_path).exists():
        _load_state()
    else:
        _save_state()


def _load_state() -> None:
    import json

    data = json.loads(Path(_state_path).read_text())
    for key in _PERSISTED:
        value = data[key]
        setattr(gpu, key, tuple(value) if key.endswith("_locked") and value is not None else value)
    gpu.processes = [tuple(p) for p in gpu.processes]


def _save_state() -> None:
    import json
    import os

    tmp = f"{_state_path}.{os.getpid()}.tmp"
    Path(tmp).write_text(json.dumps({k: getattr(gpu, k) for k in _PERSISTED}))
    os.replace(tmp, _state_path)


gpu = FakeGPU()
calls: list[tuple[str, tuple]] = []
_faults: dict[str, list] = {}  # name -> [("nth", remaining, error) | ("always", error)]
_field_faults: dict[int, int] = {}
_removed: set[str] = set()


def reset() -> None:
    """Fresh GPU, empty call log, no faults."""
    global gpu
    gpu = FakeGPU()
    extra_gpus.clear()
    calls.clear()
    _faults.clear()
    _field_faults.clear()
    _removed.clear()


def count(name: str) -> int:
    """How many times ``name`` was called."""
    return sum(1 for n, _ in calls if n == name)


def names() -> list[str]:
    """The names of the calls made, in order."""
    return [n for n, _ in calls]


def fail_nth(name: str, n: int = 1, error: int | BaseException = NVML_ERROR_UNKNOWN) -> None:
    """Make the ``n``-th call of ``name`` (counting from now) raise ``error``."""
    _faults.setdefault(name, []).append(["nth", n, error])


def fail_always(name: str, error: int | BaseException = NVML_ERROR_UNKNOWN) -> None:
    """Make every call of ``name`` raise ``error``."""
    _faults.setdefault(name, []).append(["always", error])


def unsupported(name: str) -> None:
    """Make ``name`` answer NOT_SUPPORTED, always."""
    fail_always(name, NVML_ERROR_NOT_SUPPORTED)


def unsupported_field(field_id: int, code: int = NVML_ERROR_NOT_SUPPORTED) -> None:
    """Make one field of ``nvmlDeviceGetFieldValues`` come back with ``code``."""
    _field_faults[field_id] = code


def remove(name: str) -> None:
    """Pretend the installed nvidia-ml-py has no function ``name``."""
    _removed.add(name)


def heal(name: str) -> None:
    """Remove every fault on ``name``."""
    _faults.pop(name, None)
    _removed.discard(name)


def _raise(error) -> None:
    if isinstance(error, BaseException):
        raise error
    if callable(error):  # an action (kill the process, ...), then the call goes on
        error()
        return
    raise NVMLError(error)


def _enter(name: str, args: tuple) -> None:
    """Log the call, then raise an injected fault if one is due."""
    calls.append((name, args))
    due = None
    for fault in _faults.get(name, []):  # count down every pending fault before raising one
        if fault[0] == "always":
            due = fault[1] if due is None else due
        elif fault[1] > 0:
            fault[1] -= 1
            if fault[1] == 0 and due is None:
                due = fault[2]
    if due is not None:
        _raise(due)


def _nvml(function):
    """Decorator: log, inject faults, and require nvmlInit for device calls."""
    name = function.__name__

    def wrapper(*args):
        if _state_path is not None:
            _load_state()
        _enter(name, args)
        if name not in ("nvmlInit", "nvmlShutdown") and gpu.initialised <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)
        out = function(*args)
        if _state_path is not None:
            _save_state()
        return out

    wrapper.__name__ = name
    return wrapper


_HANDLE = SimpleNamespace(index=0)
extra_gpus: list[tuple[SimpleNamespace, FakeGPU]] = []  # (handle, GPU) of add_gpus


def add_gpus(n: int) -> list[FakeGPU]:
    """Add ``n`` GPUs (indices 1..n, same name) with their own UUID and PCI bus id; returns them."""
    for _ in range(n):
        i = len(extra_gpus) + 1
        g = FakeGPU()
        g.uuid = f"GPU-{i:08x}-fake-0000-0000-000000000000"
        g.pci_bus_id = f"00000000:{0x18 + 0x20 * i:02X}:00.0"
        extra_gpus.append((SimpleNamespace(index=i), g))
    gpu.count = 1 + len(extra_gpus)
    return [g for _, g in extra_gpus]


def _gpus():
    return [(_HANDLE, gpu), *extra_gpus][: max(gpu.count, 1)]


def _gpu_of(handle) -> FakeGPU:
    for h, g in _gpus():
        if handle is h:
            return g
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def _check(handle) -> None:
    _gpu_of(handle)


@_nvml
def nvmlInit():
    gpu.initialised += 1


@_nvml
def nvmlShutdown():
    if gpu.initialised <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    gpu.initialised -= 1


@_nvml
def nvmlSystemGetDriverVersion():
    return gpu.driver


@_nvml
def nvmlDeviceGetCount():
    return gpu.count


@_nvml
def nvmlDeviceGetHandleByIndex(index):
    if not 0 <= index < gpu.count:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _gpus()[index][0] if index < len(_gpus()) else _HANDLE


@_nvml
def nvmlDeviceGetHandleByUUID(uuid):
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    for h, g in _gpus():
        if g.uuid == uuid:
            return h
        if uuid in g.mig_uuids:
            return SimpleNamespace(mig_of=h, uuid=uuid)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


@_nvml
def nvmlDeviceGetHandleByPciBusId(pciBusId):
    bus = pciBusId.decode() if isinstance(pciBusId, bytes) else pciBusId
    domain, rest = bus.lower().split(":", 1)
    for h, g in _gpus():
        d, r = g.pci_bus_id.lower().split(":", 1)
        if int(d, 16) == int(domain, 16) and r == rest:  # 4- or 8-digit domain
            return h
    raise NVMLError(NVML_ERROR_NOT_FOUND)


@_nvml
def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(migDevice):
    parent = getattr(migDevice, "mig_of", None)
    if parent is None:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return parent


@_nvml
def nvmlDeviceGetIndex(handle):
    return [g for _, g in _gpus()].index(_gpu_of(handle))


@_nvml
def nvmlDeviceGetPciInfo(handle):
    bus = _gpu_of(handle).pci_bus_id
    return SimpleNamespace(busId=bus, busIdLegacy=bus[4:])


@_nvml
def nvmlDeviceGetName(handle):
    return _gpu_of(handle).name


@_nvml
def nvmlDeviceGetUUID(handle):
    return _gpu_of(handle).uuid


def _field(field_id: int):
    value = SimpleNamespace(dVal=0.0, uiVal=0, ulVal=0, ullVal=0, sllVal=0, siVal=0, usVal=0)
    out = SimpleNamespace(
        fieldId=field_id,
        scopeId=0,
        timestamp=0,
        latencyUsec=0,
        valueType=NVML_VALUE_TYPE_UNSIGNED_INT,
        nvmlReturn=NVML_SUCCESS,
        value=value,
    )
    if field_id in _field_faults:
        out.nvmlReturn = _field_faults[field_id]
    elif field_id == NVML_FI_DEV_POWER_INSTANT:
        value.uiVal = gpu.power_instant_mw
    elif field_id == NVML_FI_DEV_POWER_AVERAGE:
        value.uiVal = gpu.power_average_mw
    else:
        out.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
    return out


@_nvml
def nvmlDeviceGetFieldValues(handle, fieldIds):
    _check(handle)
    return [_field(f) for f in fieldIds]


@_nvml
def nvmlDeviceGetPowerUsage(handle):
    _check(handle)
    return gpu.power_usage_mw


@_nvml
def nvmlDeviceGetTotalEnergyConsumption(handle):
    _check(handle)
    return gpu.energy_mj


@_nvml
def nvmlDeviceGetTemperature(handle, sensor):
    _check(handle)
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return gpu.temperature_c


@_nvml
def nvmlDeviceGetClockInfo(handle, clock_type):
    _check(handle)
    if clock_type in (NVML_CLOCK_SM, NVML_CLOCK_GRAPHICS):
        return gpu.sm_clock_mhz
    if clock_type == NVML_CLOCK_MEM:
        return gpu.mem_clock_mhz
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


@_nvml
def nvmlDeviceGetCurrentClocksEventReasons(handle):
    _check(handle)
    return gpu.throttle_reasons


@_nvml
def nvmlDeviceGetCurrentClocksThrottleReasons(handle):
    _check(handle)
    return gpu.throttle_reasons


@_nvml
def nvmlDeviceGetSupportedMemoryClocks(handle):
    _check(handle)
    return list(gpu.graphics_clocks)


@_nvml
def nvmlDeviceGetSupportedGraphicsClocks(handle, memoryClockMHz):
    _check(handle)
    if memoryClockMHz not in gpu.graphics_clocks:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return list(gpu.graphics_clocks[memoryClockMHz])


@_nvml
def nvmlDeviceGetPowerManagementLimitConstraints(handle):
    _check(handle)
    return [gpu.power_limit_min_mw, gpu.power_limit_max_mw]


@_nvml
def nvmlDeviceGetPowerManagementLimit(handle):
    _check(handle)
    return gpu.power_limit_mw


@_nvml
def nvmlDeviceGetPowerManagementDefaultLimit(handle):
    _check(handle)
    return gpu.power_limit_default_mw


@_nvml
def nvmlDeviceGetEnforcedPowerLimit(handle):
    _check(handle)
    return gpu.power_limit_mw


@_nvml
def nvmlDeviceSetGpuLockedClocks(handle, minGpuClockMHz, maxGpuClockMHz):
    _check(handle)
    gpu.sm_locked = (minGpuClockMHz, maxGpuClockMHz)
    gpu.sm_clock_mhz = maxGpuClockMHz


@_nvml
def nvmlDeviceResetGpuLockedClocks(handle):
    _check(handle)
    gpu.sm_locked = None


@_nvml
def nvmlDeviceSetMemoryLockedClocks(handle, minMemClockMHz, maxMemClockMHz):
    _check(handle)
    gpu.mem_locked = (minMemClockMHz, maxMemClockMHz)
    gpu.mem_clock_mhz = maxMemClockMHz


@_nvml
def nvmlDeviceResetMemoryLockedClocks(handle):
    _check(handle)
    gpu.mem_locked = None


@_nvml
def nvmlDeviceGetComputeRunningProcesses(handle):
    _check(handle)
    return [SimpleNamespace(pid=pid, usedGpuMemory=used, gpuInstanceId=0xFFFFFFFF,
                            computeInstanceId=0xFFFFFFFF) for pid, used in gpu.processes]


@_nvml
def nvmlDeviceSetPowerManagementLimit(handle, limit):
    _check(handle)
    if not gpu.power_limit_min_mw <= limit <= gpu.power_limit_max_mw:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    gpu.power_limit_mw = limit


def _hide_removed(module: ModuleType) -> None:
    """Make ``remove(name)`` act like a missing attribute on the module object."""

    class _Module(ModuleType):
        def __getattribute__(self, name):
            if name in object.__getattribute__(self, "_removed"):
                raise AttributeError(f"module 'pynvml' has no attribute {name!r}")
            return super().__getattribute__(name)

        def __dir__(self):
            removed = object.__getattribute__(self, "_removed")
            return [n for n in super().__dir__() if n not in removed]

    module.__class__ = _Module


def load(name: str = "pynvml") -> ModuleType:
    """A fresh, independent copy of this fake, named ``name``."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    _hide_removed(module)
    return module


def install(name: str = "pynvml") -> ModuleType:
    """Load a fresh copy and put it in ``sys.modules[name]`` (for subprocesses).

    With ``$FAKE_PYNVML_STATE`` set, the copy persists its GPU settings there.
    """
    import os

    module = load(name)
    sys.modules[name] = module
    if os.environ.get("FAKE_PYNVML_STATE"):
        module.persist(os.environ["FAKE_PYNVML_STATE"])
    return module
