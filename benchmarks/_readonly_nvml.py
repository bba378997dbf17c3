"""Make NVML read-only for the GPU benchmarks (run as ``python benchmarks/<name>.py``).

Called before powermodels is imported, so nothing the benchmark loads can
change a clock, a power limit or any other setting of the lent GPU.
"""

from __future__ import annotations

__all__ = ["forbid_nvml_setters"]

SETTER_PREFIXES = ("nvmlDeviceSet", "nvmlDeviceReset", "nvmlDeviceClear", "nvmlSystemSet")


def forbid_nvml_setters() -> list[str]:
    """Replace every NVML setter in ``pynvml`` with a function that raises; their names ([] without pynvml)."""
    try:
        import pynvml
    except ImportError:
        return []
    blocked = []
    for name in dir(pynvml):
        if name.startswith(SETTER_PREFIXES):

            def forbidden(*args, _name=name, **kwargs):
                raise RuntimeError(f"{_name} is forbidden in this benchmark (read-only)")

            setattr(pynvml, name, forbidden)
            blocked.append(name)
    return blocked
