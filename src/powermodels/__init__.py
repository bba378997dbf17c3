"""powermodels: trustworthy GPU energy from the built-in NVML sensor, as scikit-learn models."""

from __future__ import annotations

# Public names, imported on first use so ``import powermodels`` (and so every CLI command's
# start-up) imports nothing it does not need: name -> (module, attribute).
_LAZY = {
    "open_device": (".devices", "open_device"),
    "all_estimators": (".utils", "all_estimators"),
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

__all__ = ["__version__", *_LAZY]


def _version() -> str:
    """The installed package's version (importlib.metadata: ~20 ms, so read on first use)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("powermodels")
    except PackageNotFoundError:  # running from a source tree (PYTHONPATH=src)
        return "0.1.0+src"


def __getattr__(name: str):
    if name == "__version__":
        globals()["__version__"] = value = _version()
        return value
    if name in _LAZY:
        from importlib import import_module

        module, attr = _LAZY[name]
        value = getattr(import_module(module, __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "__version__"})
