"""Kernel registry over ``kernels/*.cu``: search spaces, restrictions, CuPy launches, simulated twins.

Every kernel the harness measures is described once here by a :class:`KernelSpec`:
its CUDA source, its tunable compile-time parameters (passed as ``-D`` macros,
Kernel Tuner style), the restrictions that reject invalid combinations, and two
ways to run it:

* on a real GPU, :func:`prepare` compiles the source with ``cupy.RawModule``
  (CuPy is imported lazily, inside the function), allocates inputs and returns
  a :class:`PreparedKernel` whose :meth:`~PreparedKernel.launch` enqueues one
  launch and whose :meth:`~PreparedKernel.check` compares the result with a
  NumPy/CuPy reference;
* on the simulated GPU, :func:`simulated_workload` returns a
  :class:`~powermodels.devices.simulated.SimulatedWorkload` whose
  time-vs-frequency and activity follow from the configuration (FLOPs, bytes
  moved, a deterministic efficiency model), so every kernel and configuration
  also runs through the same protocols without a GPU.

Kernels
-------
fp32
    Dependent FMA chains (thesis Table 5.3: ``block_size_x``, ``nr_outer``, ``nr_inner``).
sgemm
    Tiled SGEMM (thesis Table 5.4 spirit: ``MWG, NWG, KWG, MDIMC, NDIMC, VWM, VWN, SA, SB``).
stream_copy, stream_triad
    Memory-bound STREAM kernels (``block_size_x``, ``vector_width``).
square_wave
    Yang's square-wave load (run through :mod:`powermodels.harness.runner`).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = [
    "KERNELS",
    "KernelSpec",
    "PreparedKernel",
    "config_id",
    "get_kernel",
    "invalid_reasons",
    "kernel_source",
    "kernels_dir",
    "parse_config",
    "prepare",
    "search_space",
    "simulated_workload",
    "validate_config",
]

# Hopper-class throughput used by the simulated twins (H100 SXM: 132 SMs x 128 FP32
# lanes x 2 FLOP per FMA per cycle; HBM3 ~3.35 TB/s at a 2619 MHz memory clock).
N_SM = 132
FP32_FLOP_PER_CYCLE = N_SM * 128 * 2
MEM_BYTES_PER_MHZ_S = 3.35e12 / 2619.0


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


def config_id(name: str, config: Mapping[str, int]) -> str:
    """Stable string id of a configuration: ``"p1=v1,p2=v2"`` in the spec's parameter order."""
    spec = get_kernel(name)
    full = _complete(spec, config)
    return ",".join(f"{k}={full[k]}" for k in spec.tune_params)


def parse_config(name: str, text: str | Mapping[str, int] | None) -> dict[str, int]:
    """Parse ``"p1=v1,p2=v2"`` (or a dict) into a full configuration (defaults filled in).

    Raises
    ------
    ValueError
        Naming the unknown parameter or the value that is not an integer.
    """
    spec = get_kernel(name)
    if text is None or text == "":
        return dict(spec.default)
    if isinstance(text, Mapping):
        return _complete(spec, text)
    out = {}
    for part in str(text).split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"config: expected 'name=value', got {part!r}")
        try:
            out[key.strip()] = int(value)
        except ValueError:
            raise ValueError(f"config: parameter {key.strip()!r} value {value!r} is not an integer") from None
    return _complete(spec, out)


def _complete(spec: KernelSpec, config: Mapping[str, int]) -> dict[str, int]:
    unknown = set(config) - set(spec.tune_params)
    if unknown:
        raise ValueError(
            f"config: unknown parameter(s) {sorted(unknown)} for kernel {spec.name!r}; "
            f"tunable: {list(spec.tune_params)}"
        )
    full = dict(spec.default)
    full.update({k: int(v) for k, v in config.items()})
    return full


def invalid_reasons(name: str, config: Mapping[str, int]) -> list[str]:
    """The restrictions that ``config`` breaks (empty when it is valid)."""
    spec = get_kernel(name)
    full = _complete(spec, config)
    return [text for text, ok in spec.restrictions if not ok(full)]


def validate_config(name: str, config: Mapping[str, int]) -> dict[str, int]:
    """Return the full configuration, or raise ``ValueError`` naming the broken restriction."""
    full = _complete(get_kernel(name), config)
    reasons = invalid_reasons(name, full)
    if reasons:
        raise ValueError(f"config {config_id(name, full)!r} of {name!r} is invalid: {'; '.join(reasons)}")
    return full


def search_space(name: str, *, restrict: bool = True) -> list[dict[str, int]]:
    """Every configuration of kernel ``name`` (only the valid ones when ``restrict``)."""
    spec = get_kernel(name)
    keys = list(spec.tune_params)
    configs = [dict(zip(keys, values, strict=True)) for values in itertools.product(*spec.tune_params.values())]
    if restrict:
        configs = [c for c in configs if all(ok(c) for _, ok in spec.restrictions)]
    return configs


# --------------------------------------------------------------------------
# Simulated twins.
# --------------------------------------------------------------------------


def _jitter(name: str, config: Mapping[str, int], spread: float) -> float:
    """Deterministic per-configuration factor in [1 - spread, 1 + spread]."""
    digest = hashlib.sha256(f"{name}:{sorted(config.items())}".encode()).digest()
    u = int.from_bytes(digest[:8], "little") / 2**64
    return 1.0 + spread * (2.0 * u - 1.0)


def workload_cost(name: str, config: Mapping[str, int] | None = None) -> dict[str, float]:
    """FLOPs, bytes moved and modelled efficiency of one launch (what the simulated twin uses)."""
    spec = get_kernel(name)
    c = validate_config(name, config or {})
    if name == "fp32":
        flops = 8.0 * spec.problem["n"] * c["nr_outer"] * c["nr_inner"]
        # small blocks leave issue slots idle at block boundaries
        efficiency = 0.97 - 0.06 * (128 / c["block_size_x"]) ** 0.5 + 0.02 * (c["nr_inner"] == 1024)
        return {"flops": flops, "bytes": 8.0 * spec.problem["n"], "efficiency": efficiency}
    if name == "sgemm":
        m, n, k = spec.problem["m"], spec.problem["n"], spec.problem["k"]
        flops = 2.0 * m * n * k
        wpt = (c["MWG"] // c["MDIMC"]) * (c["NWG"] // c["NDIMC"])
        reuse = min(1.0, wpt / 32.0) ** 0.6
        staging = 0.7 + 0.15 * c["SA"] + 0.15 * c["SB"]
        vector = 1.0 + 0.04 * (math.log2(c["VWM"]) + math.log2(c["VWN"]))
        efficiency = float(np.clip(0.6 * reuse * staging * vector * _jitter(name, c, 0.08), 0.03, 0.8))
        # A is re-read once per block column, B once per block row (L2 helps: factor 0.5)
        traffic = 4.0 * m * n * k * (1.0 / c["NWG"] + 1.0 / c["MWG"]) * 0.5 + 12.0 * m * n
        return {"flops": flops, "bytes": traffic, "efficiency": efficiency}
    if name in ("stream_copy", "stream_triad"):
        arrays = 2 if name == "stream_copy" else 3
        nbytes = 4.0 * arrays * spec.problem["n"]
        efficiency = {1: 0.78, 2: 0.88, 4: 0.92}[c["vector_width"]] * (0.96 if c["block_size_x"] == 128 else 1.0)
        flops = 0.0 if name == "stream_copy" else 2.0 * spec.problem["n"]
        return {"flops": flops, "bytes": nbytes, "efficiency": efficiency}
    raise ValueError(f"kernel: {name!r} has no cost model (use the runner's square_wave/step)")


def simulated_workload(name: str, config: Mapping[str, int] | None = None):
    """The :class:`~powermodels.devices.simulated.SimulatedWorkload` twin of a kernel configuration.

    Core-bound time ``β / f_core`` with ``β = FLOPs / (FLOP per cycle · efficiency)``
    and memory-bound time ``α / f_mem`` with ``α = bytes / (bytes per MHz·s · efficiency)``
    (DSO eq. 2 shape); activity follows the fraction of the launch each unit is busy.
    """
    from ..devices.simulated import SimulatedWorkload

    c = validate_config(name, config or {})
    cost = workload_cost(name, c)
    eff = cost["efficiency"]
    core_work = cost["flops"] / (FP32_FLOP_PER_CYCLE * 1e6 * eff) if cost["flops"] else 0.0
    if name in ("stream_copy", "stream_triad"):
        mem_work = cost["bytes"] / (MEM_BYTES_PER_MHZ_S * eff)
    else:
        mem_work = cost["bytes"] / MEM_BYTES_PER_MHZ_S
    # activity at the nominal clocks (1980 / 2619 MHz): the busier unit sets the pace
    t_core = core_work / 1980.0
    t_mem = mem_work / 2619.0
    t = max(t_core, t_mem, 1e-9)
    if name == "fp32":
        activity, mem_activity = 0.95 * eff, 0.02
    else:
        activity = float(np.clip(0.15 + 0.8 * eff * t_core / t, 0.05, 1.0))
        mem_activity = float(np.clip(t_mem / t, 0.0, 1.0))
    return SimulatedWorkload(
        name=f"{name}[{config_id(name, c)}]",
        core_work=core_work,
        mem_work=mem_work,
        t0_s=5e-6,
        activity=activity,
        mem_activity=mem_activity,
    )


# --------------------------------------------------------------------------
# Real launches through CuPy (imported lazily).
# --------------------------------------------------------------------------

_MODULE_CACHE: dict[tuple[str, str], object] = {}


def _compile(name: str, config: Mapping[str, int]):
    import cupy as cp

    spec = get_kernel(name)
    key = (spec.source, config_id(name, config))
    module = _MODULE_CACHE.get(key)
    if module is None:
        options = ("-std=c++17", *(f"-D{k}={v}" for k, v in config.items()))
        module = cp.RawModule(code=kernel_source(name), options=options)
        _MODULE_CACHE[key] = module
    return module


@dataclass
class PreparedKernel:
    """A compiled kernel with its arguments bound: ``launch()`` enqueues one launch.

    Attributes
    ----------
    name, config : str, dict
        Kernel and full configuration.
    grid, block : tuple of int
        Launch shape.
    flops, bytes : float
        Work per launch (for reporting).
    """

    name: str
    config: dict[str, int]
    function: object
    grid: tuple[int, ...]
    block: tuple[int, ...]
    args: tuple
    flops: float
    bytes: float
    _check: Callable[[], float]

    def launch(self, stream=None) -> None:
        """Enqueue one launch on ``stream`` (the current stream when None)."""
        if stream is None:
            self.function(self.grid, self.block, self.args)
        else:
            self.function(self.grid, self.block, self.args, stream=stream)

    def check(self) -> float:
        """Run once and return the largest relative error against the reference."""
        return self._check()

    @property
    def config_id(self) -> str:
        return config_id(self.name, self.config)


def prepare(name: str, config: Mapping[str, int] | None = None, *, seed: int = 0) -> PreparedKernel:
    """Compile ``name`` with ``config`` (``cupy.RawModule``, ``-D`` macros) and bind its arguments.

    Raises
    ------
    ValueError
        If the configuration breaks a restriction (named in the message).
    """
    import cupy as cp

    c = validate_config(name, config or {})
    spec = get_kernel(name)
    fn = _compile(name, c).get_function(spec.function)
    rng = np.random.default_rng(seed)
    cost = workload_cost(name, c) if name != "square_wave" else {"flops": 0.0, "bytes": 0.0}

    if name == "fp32":
        n = spec.problem["n"]
        x = cp.asarray(rng.uniform(0.0, 1.0, n).astype(np.float32))
        out = cp.empty(n, dtype=cp.float32)
        a, b = np.float32(0.999), np.float32(0.001)
        steps = c["nr_outer"] * c["nr_inner"]

        def check() -> float:
            fn((n // c["block_size_x"],), (c["block_size_x"],), (out, x, a, b, np.int32(n)))
            x0 = cp.asnumpy(x).astype(np.float64)
            s = float(b) / (1.0 - float(a))
            an = float(a) ** steps
            ref = sum(an * (x0 + d - s) + s for d in (0.0, 0.25, 0.5, 0.75))
            return float(np.max(np.abs(cp.asnumpy(out) - ref) / np.abs(ref)))

        return PreparedKernel(name, c, fn, (n // c["block_size_x"],), (c["block_size_x"],),
                              (out, x, a, b, np.int32(n)), cost["flops"], cost["bytes"], check)

    if name == "sgemm":
        m, n, k = spec.problem["m"], spec.problem["n"], spec.problem["k"]
        A = cp.asarray(rng.standard_normal((m, k), dtype=np.float32))
        B = cp.asarray(rng.standard_normal((k, n), dtype=np.float32))
        C = cp.zeros((m, n), dtype=cp.float32)
        grid = (n // c["NWG"], m // c["MWG"])
        block = (c["NDIMC"], c["MDIMC"])
        args = (np.int32(m), np.int32(n), np.int32(k), A, B, C)

        def check() -> float:
            C.fill(0)
            fn(grid, block, args)
            ref = A.astype(cp.float64) @ B.astype(cp.float64)
            return float(cp.max(cp.abs(C - ref)) / cp.max(cp.abs(ref)))

        return PreparedKernel(name, c, fn, grid, block, args, cost["flops"], cost["bytes"], check)

    if name in ("stream_copy", "stream_triad"):
        n = spec.problem["n"]
        vw, bs = c["vector_width"], c["block_size_x"]
        a = cp.asarray(rng.standard_normal(n, dtype=np.float32))
        b = cp.asarray(rng.standard_normal(n, dtype=np.float32))
        out = cp.empty(n, dtype=cp.float32)
        blocks = N_SM * max(1, 2048 // bs) * 4
        s = np.float32(3.0)
        if name == "stream_copy":
            args = (out, a, np.int64(n // vw))
        else:
            args = (out, a, b, s, np.int64(n // vw))

        def check() -> float:
            out.fill(0)
            fn((blocks,), (bs,), args)
            ref = a if name == "stream_copy" else a + s * b
            return float(cp.max(cp.abs(out - ref)) / cp.max(cp.abs(ref)))

        return PreparedKernel(name, c, fn, (blocks,), (bs,), args, cost["flops"], cost["bytes"], check)

    if name == "square_wave":
        return square_wave_kernel(1.0, 1000)
    raise ValueError(f"kernel: {name!r} cannot be prepared")


def square_wave_kernel(amplitude: float, iterations: int, n_sm: int | None = None) -> PreparedKernel:
    """The square-wave load: one 1024-thread block on ``round(amplitude · n_sm)`` SMs.

    ``iterations`` sets the length of the FMA chain, hence the on-time; see
    :func:`powermodels.harness.runner.calibrate_square_wave`.
    """
    import cupy as cp

    if not 0.0 < amplitude <= 1.0:
        raise ValueError(f"square wave: amplitude must be in (0, 1], got {amplitude}")
    if iterations < 1:
        raise ValueError(f"square wave: iterations must be >= 1, got {iterations}")
    if n_sm is None:
        n_sm = cp.cuda.Device().attributes["MultiProcessorCount"]
    blocks = max(1, round(amplitude * n_sm))
    block = get_kernel("square_wave").default["BLOCK"]
    fn = _compile("square_wave", {"BLOCK": block}).get_function("square_wave")
    out = cp.empty(blocks * block, dtype=cp.float32)
    a, b = np.float32(0.999), np.float32(0.001)
    args = (out, a, b, np.int64(iterations))

    def check() -> float:
        fn((blocks,), (block,), args)
        x0 = (np.arange(blocks * block) % block).astype(np.float64) * np.float64(np.float32(1e-3))
        s = float(b) / (1 - float(a))
        an = float(a) ** iterations
        ref = sum(an * (x0 + d - s) + s for d in (0.0, 0.25, 0.5, 0.75))
        return float(np.max(np.abs(cp.asnumpy(out) - ref) / np.abs(ref)))

    return PreparedKernel("square_wave", {"BLOCK": block}, fn, (blocks,), (block,), args,
                          8.0 * blocks * block * iterations, 0.0, check)
