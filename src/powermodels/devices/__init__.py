"""Where sensor readings come from: the real GPU (NVML) or the simulated GPU."""

from __future__ import annotations

import sys

from .base import (
    NOT_AVAILABLE,
    Device,
    DeviceInfo,
    Reading,
    RestoreError,
    Settings,
    SettingsChangeRefused,
    SettingsGuard,
)

__all__ = [
    "NOT_AVAILABLE",
    "Device",
    "DeviceInfo",
    "Reading",
    "RestoreError",
    "Settings",
    "SettingsChangeRefused",
    "SettingsGuard",
    "nvml_available",
    "open_device",
]


def nvml_available(index: int = 0) -> bool:
    """Whether CUDA device ``index`` (under ``CUDA_VISIBLE_DEVICES``) can be opened through NVML."""
    import os

    from .cuda_visible import parse_cuda_visible_devices
    from .nvml import nvml_gpu_count

    visible = parse_cuda_visible_devices(os.environ.get("CUDA_VISIBLE_DEVICES"))
    return nvml_gpu_count() > index and (visible is None or len(visible) > index)


def open_device(kind: str = "auto", index: int = 0, *, quiet: bool = False, **kwargs) -> Device:
    """Open a device.

    Parameters
    ----------
    kind : {"auto", "nvml", "simulated"}, default="auto"
        "auto" picks NVML when a GPU is present, else the simulated GPU, and
        says which it picked (on stderr, unless ``quiet``).
    index : int, default=0
        CUDA device ordinal of the GPU (NVML finds it by PCI bus id or
        ``CUDA_VISIBLE_DEVICES``, see :class:`~powermodels.devices.nvml.NVMLDevice`).
    quiet : bool, default=False
        Do not announce the choice made by "auto".
    **kwargs
        Passed to the device class (e.g. ``preset="hopper", seed=0`` for the
        simulated GPU).

    Returns
    -------
    Device
    """
    if kind not in ("auto", "nvml", "simulated"):
        raise ValueError(f"open_device: kind must be 'auto', 'nvml' or 'simulated', got {kind!r}")
    if kind == "auto":
        kind = "nvml" if nvml_available(index) else "simulated"
        if not quiet:
            what = "NVIDIA GPU through NVML" if kind == "nvml" else "the simulated GPU (no NVIDIA GPU found)"
            print(f"powermodels: using {what}", file=sys.stderr)
    if kind == "nvml":
        from .nvml import NVMLDevice

        return NVMLDevice(index=index, **kwargs)
    from .simulated import SimulatedGPU

    return SimulatedGPU(**kwargs)
