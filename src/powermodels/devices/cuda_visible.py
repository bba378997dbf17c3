"""Which NVML GPU is CUDA device *n*: resolve through UUIDs and PCI bus ids, never the bare index.

CUDA numbers only the GPUs that ``CUDA_VISIBLE_DEVICES`` lets it see, in the
order listed there; NVML numbers every GPU on the host, in PCI bus order. A
scheduler (Slurm, Dask's ``LocalCUDACluster``, Kubernetes) that sets
``CUDA_VISIBLE_DEVICES=2,3`` makes CuPy's device 0 NVML's GPU 2, so a sampler
opened at NVML index 0 would read another GPU than the one the kernels run on.
Kernel Tuner and Perun open the NVML handle by UUID or PCI bus id for this
reason; :func:`resolve_nvml_handle` does the same:

1. if CuPy is already imported (the process runs kernels through it), CUDA
   itself says where device *n* sits: ``cudaDeviceGetPCIBusId`` →
   ``nvmlDeviceGetHandleByPciBusId`` (exact in every case);
2. else, with ``CUDA_VISIBLE_DEVICES`` set, its *n*-th entry: ``GPU-<uuid>``
   (or a unique prefix) → ``nvmlDeviceGetHandleByUUID``; ``MIG-<uuid>`` →
   the MIG device's parent GPU (power is only measured per physical GPU,
   shared by its MIG instances: a warning says so); an integer → that NVML
   index (CUDA's own order equals NVML's PCI order when
   ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` or the GPUs are identical; otherwise a
   warning says the match is not certain);
3. else NVML index *n* (same caveat on the order).

Parsing follows CUDA's rules: entries are comma-separated, and the list ends
at the first entry that names no GPU.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

__all__ = ["ResolvedGPU", "parse_cuda_visible_devices", "resolve_nvml_handle"]

ENV = "CUDA_VISIBLE_DEVICES"


def parse_cuda_visible_devices(value: str | None) -> list[str] | None:
    """The entries of a ``CUDA_VISIBLE_DEVICES`` value, stripped; None when unset.

    ``""`` and ``"-1"`` give ``[]`` (no GPU visible). The list ends before
    the first entry that is not an index, ``GPU-…`` or ``MIG-…``, as CUDA's does.

    Examples
    --------
    >>> parse_cuda_visible_devices("2, GPU-8f3c,MIG-1a2b")
    ['2', 'GPU-8f3c', 'MIG-1a2b']
    >>> parse_cuda_visible_devices(None) is None, parse_cuda_visible_devices("-1")
    (True, [])
    >>> parse_cuda_visible_devices("0,2,x,1")
    ['0', '2']
    """
    if value is None:
        return None
    out = []
    for item in value.split(","):
        item = item.strip()
        if not (item.isdigit() or item.startswith(("GPU-", "MIG-"))):
            break  # "", "-1", "NoDevFiles": CUDA sees nothing from here on
        out.append(item)
    return out


@dataclass(frozen=True)
class ResolvedGPU:
    """An NVML handle and how it was found.

    Attributes
    ----------
    handle : object
        The NVML device handle (the physical GPU, also for a MIG entry).
    how : str
        ``"cupy pci bus id"``, ``"CUDA_VISIBLE_DEVICES uuid"``,
        ``"CUDA_VISIBLE_DEVICES mig"``, ``"CUDA_VISIBLE_DEVICES index"`` or
        ``"nvml index"``.
    entry : str
        The ``CUDA_VISIBLE_DEVICES`` entry or PCI bus id used ("" for a bare index).
    """

    handle: object
    how: str
    entry: str = ""


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _cupy_bus_id(index: int) -> str | None:
    """PCI bus id of CUDA device ``index`` from CuPy, only if CuPy is already imported."""
    cupy = sys.modules.get("cupy")
    if cupy is None:
        return None
    try:
        return _text(cupy.cuda.runtime.deviceGetPCIBusId(index))
    except Exception:  # no driver, no such device: fall back to the environment
        return None


def _order_warning(pynvml, what: str) -> None:
    """Warn when CUDA's enumeration order may differ from NVML's (mixed GPUs, FASTEST_FIRST)."""
    if os.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") == "PCI_BUS_ID":
        return
    try:
        n = int(pynvml.nvmlDeviceGetCount())
        names = {_text(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))) for i in range(n)}
    except Exception:
        return
    if len(names) > 1:
        warnings.warn(f"NVMLDevice: {what} is taken as an NVML (PCI bus order) index, but this host "
                      f"has different GPUs ({', '.join(sorted(names))}) and CUDA numbers them "
                      "fastest first: set CUDA_DEVICE_ORDER=PCI_BUS_ID, list GPU UUIDs in "
                      "CUDA_VISIBLE_DEVICES, or import cupy first so the PCI bus id is asked",
                      stacklevel=4)


def _by_uuid(pynvml, entry: str):
    """Handle of the GPU whose UUID is ``entry`` or starts with it (CUDA accepts unique prefixes)."""
    try:
        return pynvml.nvmlDeviceGetHandleByUUID(entry)
    except Exception:
        pass
    hits = []
    for i in range(int(pynvml.nvmlDeviceGetCount())):
        handle = pynvml.nvmlDeviceGetHandleByIndex(i)
        if _text(pynvml.nvmlDeviceGetUUID(handle)).startswith(entry):
            hits.append(handle)
    if len(hits) == 1:
        return hits[0]
    raise ValueError(f"{ENV} entry {entry!r} matches {len(hits)} GPUs' UUIDs (need exactly one)")


def _entry_handle(pynvml, entry: str) -> ResolvedGPU:
    if entry.startswith("MIG-"):
        if entry.startswith("MIG-GPU-"):  # pre-R470 form MIG-GPU-<uuid>/<gi>/<ci>
            parent = _by_uuid(pynvml, entry[4:].split("/", 1)[0])
        else:
            parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(
                pynvml.nvmlDeviceGetHandleByUUID(entry))
        warnings.warn(f"NVMLDevice: {ENV} names the MIG instance {entry}; NVML measures power and "
                      "energy of the whole GPU, shared by all its MIG instances", stacklevel=4)
        return ResolvedGPU(parent, "CUDA_VISIBLE_DEVICES mig", entry)
    if entry.startswith("GPU-"):
        return ResolvedGPU(_by_uuid(pynvml, entry), "CUDA_VISIBLE_DEVICES uuid", entry)
    try:
        nvml_index = int(entry)
    except ValueError:
        raise ValueError(f"{ENV} entry {entry!r} is neither an index, GPU-<uuid> nor MIG-<uuid>") from None
    _order_warning(pynvml, f"{ENV} entry {entry}")
    return ResolvedGPU(pynvml.nvmlDeviceGetHandleByIndex(nvml_index), "CUDA_VISIBLE_DEVICES index", entry)


def resolve_nvml_handle(pynvml, index: int, environ=None) -> ResolvedGPU:
    """The NVML handle of CUDA device ``index`` (the ordinal CuPy and PyTorch use).

    Parameters
    ----------
    pynvml : module
        An initialised ``pynvml``.
    index : int
        CUDA device ordinal, as seen under ``CUDA_VISIBLE_DEVICES``.
    environ : mapping, optional
        Environment to read (``os.environ`` when None).

    Raises
    ------
    ValueError
        ``CUDA_VISIBLE_DEVICES`` leaves fewer than ``index + 1`` GPUs visible,
        or an entry names no GPU, or a UUID prefix is ambiguous.
    """
    bus = _cupy_bus_id(index)
    if bus is not None:
        try:
            return ResolvedGPU(pynvml.nvmlDeviceGetHandleByPciBusId(bus), "cupy pci bus id", bus)
        except Exception:  # an NVML too old for the format: use the environment
            pass
    env = os.environ if environ is None else environ
    entries = parse_cuda_visible_devices(env.get(ENV))
    if entries is None:
        if index:
            _order_warning(pynvml, f"CUDA device {index}")
        return ResolvedGPU(pynvml.nvmlDeviceGetHandleByIndex(index), "nvml index")
    if index >= len(entries):
        raise ValueError(f"NVMLDevice: CUDA device {index} does not exist: {ENV}="
                         f"{env.get(ENV)!r} makes {len(entries)} GPU(s) visible")
    try:
        return _entry_handle(pynvml, entries[index])
    except ValueError:
        raise
    except Exception as err:
        raise ValueError(f"NVMLDevice: {ENV} entry {entries[index]!r} (CUDA device {index}) "
                         f"names no GPU NVML knows: {err}") from err
