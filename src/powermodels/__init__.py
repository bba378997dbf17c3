"""powermodels: trustworthy GPU energy from the built-in NVML sensor, as scikit-learn models."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("powermodels")
except PackageNotFoundError:  # running from a source tree (PYTHONPATH=src)
    __version__ = "0.1.0+src"

from .devices import open_device
from .utils import all_estimators

# Heavier public names, imported on first use so ``import powermodels`` stays light:
# name -> (module, attribute).
_LAZY = {
    "measure": (".api", "measure"),
    "Measurement": (".measuring.protocols", "Measurement"),
    "Workload": (".workloads", "Workload"),
    "SourceKernel": (".workloads", "SourceKernel"),
    "CallableWorkload": (".workloads", "CallableWorkload"),
    "SimulatedTwin": (".workloads", "SimulatedTwin"),
    "EnergyMeter": (".meter", "EnergyMeter"),
    "WindowMeasurement": (".meter", "WindowMeasurement"),
    "ProgramWorkload": (".workloads.program", "ProgramWorkload"),
    "measure_program": (".measuring.program", "measure_program"),
}

__all__ = ["__version__", "all_estimators", "open_device", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        module, attr = _LAZY[name]
        value = getattr(import_module(module, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
