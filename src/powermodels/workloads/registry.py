"""The registry kernels over ``kernels/*.cu``: specs, search spaces, restrictions.

Every registry kernel is described once by a :class:`KernelSpec`: its CUDA
source, its tunable compile-time parameters (passed as ``-D`` macros, Kernel
Tuner style), the restrictions that reject invalid combinations and its
default configuration. :class:`RegistryKernel` is its :class:`~.base.Workload`;
the module-level functions (``config_id(name, config)``, ...) are the same
operations by registry name.

Kernels
-------
fp32
    Dependent FMA chains (thesis Table 5.3: ``block_size_x``, ``nr_outer``, ``nr_inner``).
sgemm
    Tiled SGEMM (thesis Table 5.4 spirit: ``MWG, NWG, KWG, MDIMC, NDIMC, VWM, VWN, SA, SB``).
stream_copy, stream_triad
    Memory-bound STREAM kernels (``block_size_x``, ``vector_width``).
square_wave
    Yang's square-wave load (run through :mod:`powermodels.measuring.runner`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from .base import Workload
from .registry_cost import FP32_FLOP_PER_CYCLE, MEM_BYTES_PER_MHZ_S, N_SM, kernel_cost, kernel_twin
from .registry_gpu import PreparedKernel, prepare_registry_kernel, prepare_square_wave

__all__ = [
    "FP32_FLOP_PER_CYCLE",
    "KERNELS",
    "MEM_BYTES_PER_MHZ_S",
    "N_SM",
    "KernelSpec",
    "RegistryKernel",
    "config_id",
    "get_kernel",
    "invalid_reasons",
    "kernel_source",
    "kernels_dir",
    "parse_config",
    "prepare",
    "registry_kernel",
    "search_space",
    "simulated_workload",
    "square_wave_kernel",
    "validate_config",
    "workload_cost",
]


def kernels_dir() -> Path:
    """The folder holding the CUDA sources.

    Looked up, in order: ``$POWERMODELS_KERNELS``; the installed package data
    ``powermodels/kernels``; the source tree's top-level ``kernels/`` (running
    with ``PYTHONPATH=src``).
    """
    env = os.environ.get("POWERMODELS_KERNELS")
    if env:
        path = Path(env)
        if not path.is_dir():
            raise FileNotFoundError(f"POWERMODELS_KERNELS={env!r} is not a folder")
        return path
    try:
        packaged = resources.files("powermodels") / "kernels"
        if packaged.is_dir():
            return Path(str(packaged))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - odd loaders
        pass
    tree = Path(__file__).resolve().parents[3] / "kernels"
    if tree.is_dir():
        return tree
    raise FileNotFoundError("kernels/ not found: neither package data nor the source tree has it")


def kernel_source(name: str) -> str:
    """The CUDA source text of kernel ``name``."""
    spec = get_kernel(name)
    return (kernels_dir() / spec.source).read_text()


# --------------------------------------------------------------------------
# Specs, search spaces and restrictions.
# --------------------------------------------------------------------------

Restriction = tuple[str, Callable[[Mapping[str, int]], bool]]


@dataclass(frozen=True)
class KernelSpec:
    """A kernel: source, function, tunable parameters, restrictions, default config.

    Parameters
    ----------
    name : str
        Registry name (the run table's ``kernel``).
    source : str
        File name in :func:`kernels_dir`.
    function : str
        ``extern "C"`` function in the source.
    tune_params : dict of str to tuple of int
        Search space: values per compile-time parameter, in a fixed order.
    restrictions : tuple of (description, predicate)
        A configuration is valid when every predicate is true.
    default : dict of str to int
        The configuration :func:`prepare` uses when given none.
    problem : dict
        Problem size (not tuned).
    """

    name: str
    source: str
    function: str
    tune_params: dict[str, tuple[int, ...]]
    restrictions: tuple[Restriction, ...] = ()
    default: dict[str, int] = field(default_factory=dict)
    problem: dict[str, int] = field(default_factory=dict)
    description: str = ""


def _sgemm_threads(c):
    return c["MDIMC"] * c["NDIMC"]


def _sgemm_smem_bytes(c):
    return 4 * (c["SA"] * c["KWG"] * (c["MWG"] + 1) + c["SB"] * c["KWG"] * c["NWG"])


SGEMM_RESTRICTIONS: tuple[Restriction, ...] = (
    ("MWG % MDIMC == 0", lambda c: c["MWG"] % c["MDIMC"] == 0),
    ("NWG % NDIMC == 0", lambda c: c["NWG"] % c["NDIMC"] == 0),
    ("KWG % VWM == 0", lambda c: c["KWG"] % c["VWM"] == 0),
    ("NWG % VWN == 0", lambda c: c["NWG"] % c["VWN"] == 0),
    ("64 <= MDIMC*NDIMC <= 1024 threads", lambda c: 64 <= _sgemm_threads(c) <= 1024),
    ("thread tile (MWG/MDIMC)*(NWG/NDIMC) <= 64 registers",
     lambda c: (c["MWG"] // max(c["MDIMC"], 1)) * (c["NWG"] // max(c["NDIMC"], 1)) <= 64),
    ("shared memory <= 48 KiB", lambda c: _sgemm_smem_bytes(c) <= 48 * 1024),
    # vector widths only matter for the tiles staged in shared memory: one
    # value each for the global-read variants, so no configuration is a duplicate
    ("VWM == 1 when SA == 0", lambda c: c["SA"] == 1 or c["VWM"] == 1),
    ("VWN == 1 when SB == 0", lambda c: c["SB"] == 1 or c["VWN"] == 1),
)

FP32_RESTRICTIONS: tuple[Restriction, ...] = (
    ("block_size_x divides the thread count",
     lambda c: (N_SM * 2048) % c["block_size_x"] == 0),
)

STREAM_RESTRICTIONS: tuple[Restriction, ...] = (
    ("vector_width in (1, 2, 4)", lambda c: c["vector_width"] in (1, 2, 4)),
)

def _stream(function: str, description: str) -> KernelSpec:
    """One of ``stream.cu``'s kernels: same tunables, restrictions and size."""
    return KernelSpec(
        name=function,
        source="stream.cu",
        function=function,
        tune_params={"block_size_x": (128, 256, 512, 1024), "vector_width": (1, 2, 4)},
        restrictions=STREAM_RESTRICTIONS,
        default={"block_size_x": 256, "vector_width": 4},
        problem={"n": 1 << 27},
        description=description,
    )


KERNELS: dict[str, KernelSpec] = {
    "fp32": KernelSpec(
        name="fp32",
        source="fp32.cu",
        function="fp32_kernel",
        tune_params={
            "block_size_x": (128, 256, 512, 1024),
            "nr_outer": (8, 16, 32, 64),
            "nr_inner": (256, 1024),
        },
        restrictions=FP32_RESTRICTIONS,
        default={"block_size_x": 1024, "nr_outer": 64, "nr_inner": 1024},
        problem={"n": N_SM * 2048},
        description="dependent FMA chains, thesis Table 5.3",
    ),
    "sgemm": KernelSpec(
        name="sgemm",
        source="sgemm.cu",
        function="sgemm",
        tune_params={
            "MWG": (16, 32, 64, 128),
            "NWG": (16, 32, 64, 128),
            "KWG": (16, 32),
            "MDIMC": (8, 16, 32),
            "NDIMC": (8, 16, 32),
            "VWM": (1, 2, 4),
            "VWN": (1, 2, 4),
            "SA": (0, 1),
            "SB": (0, 1),
        },
        restrictions=SGEMM_RESTRICTIONS,
        default={"MWG": 64, "NWG": 64, "KWG": 16, "MDIMC": 16, "NDIMC": 16,
                 "VWM": 4, "VWN": 4, "SA": 1, "SB": 1},
        problem={"m": 2048, "n": 2048, "k": 2048},
        description="tiled SGEMM, thesis Table 5.4 spirit",
    ),
    "stream_copy": _stream("stream_copy", "STREAM copy c = a"),
    "stream_triad": _stream("stream_triad", "STREAM triad a = b + s c"),
    "square_wave": KernelSpec(
        name="square_wave",
        source="square_wave.cu",
        function="square_wave",
        tune_params={"BLOCK": (1024,)},
        default={"BLOCK": 1024},
        description="Yang's square-wave load (FMA chain of calibrated length)",
    ),
}


def get_kernel(name: str) -> KernelSpec:
    """The :class:`KernelSpec` registered as ``name``."""
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(f"kernel: unknown kernel {name!r}; known: {sorted(KERNELS)}") from None


class RegistryKernel(Workload):
    """One of the registry kernels (:data:`KERNELS`) as a :class:`~.base.Workload`.

    Two instances of the same name are equal (runners cache by workload and config).

    Parameters
    ----------
    name : str
        Registry name (``fp32``, ``sgemm``, ``stream_copy``, ``stream_triad``, ``square_wave``).
    """

    kind = "registry"

    def __init__(self, name: str):
        self.spec = get_kernel(name)
        self.name = self.spec.name
        self.tune_params = self.spec.tune_params
        self.restrictions = self.spec.restrictions

    @property
    def default(self) -> dict:
        return dict(self.spec.default)

    def source_text(self) -> str:
        """The CUDA source text."""
        return kernel_source(self.name)

    def prepare(self, config=None):
        return prepare_registry_kernel(self, config)

    def simulated(self, config=None):
        return kernel_twin(self, config)

    def __eq__(self, other) -> bool:
        return isinstance(other, RegistryKernel) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("registry", self.name))


_INSTANCES: dict[str, RegistryKernel] = {}


def registry_kernel(name: str) -> RegistryKernel:
    """The shared :class:`RegistryKernel` of ``name`` (ValueError listing the known names)."""
    if name not in _INSTANCES:
        _INSTANCES[name] = RegistryKernel(name)
    return _INSTANCES[name]


def config_id(name: str, config: Mapping[str, int]) -> str:
    """Stable string id of a configuration: ``"p1=v1,p2=v2"`` in the spec's parameter order."""
    return registry_kernel(name).config_id(config)


def parse_config(name: str, text: str | Mapping[str, int] | None) -> dict[str, int]:
    """Parse ``"p1=v1,p2=v2"`` (or a dict) into a full configuration (defaults filled in).

    Raises
    ------
    ValueError
        Naming the unknown parameter or the value that is not an integer.
    """
    return registry_kernel(name).parse_config(text)


def invalid_reasons(name: str, config: Mapping[str, int]) -> list[str]:
    """The restrictions that ``config`` breaks (empty when it is valid)."""
    return registry_kernel(name).invalid_reasons(config)


def validate_config(name: str, config: Mapping[str, int]) -> dict[str, int]:
    """Return the full configuration, or raise ``ValueError`` naming the broken restriction."""
    return registry_kernel(name).validate_config(config)


def search_space(name: str, *, restrict: bool = True) -> list[dict[str, int]]:
    """Every configuration of kernel ``name`` (only the valid ones when ``restrict``)."""
    return registry_kernel(name).search_space(restrict=restrict)


def prepare(name: str, config: Mapping[str, int] | None = None, *, seed: int = 0) -> PreparedKernel:
    """Compile kernel ``name`` with ``config`` on the current CUDA device and bind its arguments.

    See :func:`~powermodels.workloads.registry_gpu.prepare_registry_kernel`.

    Raises
    ------
    ValueError
        If the configuration breaks a restriction (named in the message).
    """
    return prepare_registry_kernel(registry_kernel(name), config, seed=seed)


def square_wave_kernel(amplitude: float, iterations: int, n_sm: int | None = None) -> PreparedKernel:
    """The square-wave load: one 1024-thread block on ``round(amplitude · n_sm)`` SMs.

    ``iterations`` sets the length of the FMA chain, hence the on-time; see
    :meth:`powermodels.measuring.cupy_runner.CupyRunner.calibrate_square_wave`.
    """
    return prepare_square_wave(registry_kernel("square_wave"), amplitude, iterations, n_sm)


def workload_cost(name: str, config: Mapping[str, int] | None = None) -> dict[str, float]:
    """FLOPs, bytes moved and modelled efficiency of one launch (what the simulated twin uses)."""
    return kernel_cost(registry_kernel(name), config)


def simulated_workload(name: str, config: Mapping[str, int] | None = None):
    """The :class:`~powermodels.devices.simulated.SimulatedWorkload` twin of a kernel configuration.

    Core-bound time ``β / f_core`` with ``β = FLOPs / (FLOP per cycle · efficiency)``
    and memory-bound time ``α / f_mem`` with ``α = bytes / (bytes per MHz·s · efficiency)``
    (DSO eq. 2 shape); activity follows the fraction of the launch each unit is busy
    (:func:`~powermodels.workloads.registry_cost.kernel_twin`).
    """
    return kernel_twin(registry_kernel(name), config)
