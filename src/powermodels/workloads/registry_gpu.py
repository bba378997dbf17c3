"""The registry kernels on a real GPU: compiled with ``cupy.RawModule`` (imported lazily), arguments bound.

:func:`prepare_registry_kernel` compiles a registry kernel (the
:class:`~powermodels.workloads.registry.RegistryKernel` itself: its spec, its
validated configurations) with its configuration as ``-D`` macros,
allocates its inputs and returns a :class:`PreparedKernel` whose
:meth:`~PreparedKernel.launch` enqueues one launch and whose
:meth:`~PreparedKernel.check` compares the result with a NumPy/CuPy reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .base import PreparedRaw
from .registry_cost import N_SM, kernel_cost

__all__ = ["PreparedKernel", "prepare_registry_kernel", "prepare_square_wave"]

_MODULE_CACHE: dict[tuple[str, str], object] = {}


def _compile(kernel, config: Mapping[str, int]):
    import cupy as cp

    key = (kernel.spec.source, kernel.config_id(config))
    module = _MODULE_CACHE.get(key)
    if module is None:
        options = ("-std=c++17", *(f"-D{k}={v}" for k, v in config.items()))
        module = cp.RawModule(code=kernel.source_text(), options=options)
        _MODULE_CACHE[key] = module
    return module


@dataclass
class PreparedKernel(PreparedRaw):
    """A compiled kernel with its arguments bound: ``launch()`` enqueues one launch.

    Attributes
    ----------
    name, config : str, dict
        Kernel and full configuration.
    grid, block : tuple of int
        Launch shape.
    flops, bytes : float
        Work per launch (for reporting).
    workload : RegistryKernel
        The kernel (names the configuration).
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
    workload: object = field(default=None, repr=False, compare=False)

    def check(self) -> float:
        """Run once and return the largest relative error against the reference."""
        return self._check()

    @property
    def config_id(self) -> str:
        return self.workload.config_id(self.config)


def prepare_registry_kernel(kernel, config: Mapping[str, int] | None = None, *, seed: int = 0) -> PreparedKernel:
    """Compile ``kernel`` with ``config`` (``cupy.RawModule``, ``-D`` macros) and bind its arguments.

    Raises
    ------
    ValueError
        If the configuration breaks a restriction (named in the message).
    """
    import cupy as cp

    name, spec = kernel.name, kernel.spec
    c = kernel.validate_config(config or {})
    fn = _compile(kernel, c).get_function(spec.function)
    rng = np.random.default_rng(seed)
    cost = kernel_cost(kernel, c) if name != "square_wave" else {"flops": 0.0, "bytes": 0.0}

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
                              (out, x, a, b, np.int32(n)), cost["flops"], cost["bytes"], check, kernel)

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

        return PreparedKernel(name, c, fn, grid, block, args, cost["flops"], cost["bytes"], check, kernel)

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

        return PreparedKernel(name, c, fn, (blocks,), (bs,), args, cost["flops"], cost["bytes"], check, kernel)

    if name == "square_wave":
        return prepare_square_wave(kernel, 1.0, 1000)
    raise ValueError(f"kernel: {name!r} cannot be prepared")


def prepare_square_wave(kernel, amplitude: float, iterations: int, n_sm: int | None = None) -> PreparedKernel:
    """The square-wave load (``kernel``: the registry's ``square_wave``): one 1024-thread block on
    ``round(amplitude · n_sm)`` SMs.

    ``iterations`` sets the length of the FMA chain, hence the on-time; see
    :func:`powermodels.measuring.runner.calibrate_square_wave`.
    """
    import cupy as cp

    if not 0.0 < amplitude <= 1.0:
        raise ValueError(f"square wave: amplitude must be in (0, 1], got {amplitude}")
    if iterations < 1:
        raise ValueError(f"square wave: iterations must be >= 1, got {iterations}")
    if n_sm is None:
        n_sm = cp.cuda.Device().attributes["MultiProcessorCount"]
    blocks = max(1, round(amplitude * n_sm))
    block = kernel.spec.default["BLOCK"]
    fn = _compile(kernel, {"BLOCK": block}).get_function("square_wave")
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
                          8.0 * blocks * block * iterations, 0.0, check, kernel)
