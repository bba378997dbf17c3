"""A user's CUDA source with tunable parameters, Kernel Tuner style.

What a Kernel Tuner user already writes — source file, kernel name,
``tune_params``, ``restrictions``, ``arguments``, ``problem_size``,
``grid_div_x/y/z``, ``answer``/``verify``/``atol``, ``compiler_options`` —
becomes a :class:`SourceKernel` that every protocol and campaign runs:

* each configuration is compiled with its parameters as ``-D`` macros, plus
  ``block_size_x/y/z`` and ``grid_size_x/y/z`` (defaults 256, 1, 1 for block
  sizes that are not tuned) and ``kernel_tuner=1`` — the defines Kernel Tuner adds;
* the block is ``(block_size_x, block_size_y, block_size_z)``; the grid is
  ``ceil(problem_size / prod(grid_div))`` per dimension, where ``grid_div_x``
  defaults to ``["block_size_x"]`` (and so on) and its entries are parameter
  names or expressions;
* arguments are NumPy arrays (copied to the GPU once per configuration) and
  NumPy scalars (their dtype fixes the C type);
* with ``answer`` (or ``verify``), every configuration's first run is checked
  against the reference before it is measured, as Kernel Tuner does.

The non-GPU parts — restrictions, the grid, defines, arguments, finding the
kernel in the source, and an ``nvcc`` compile check (:meth:`SourceKernel.compile_check`)
— work without a GPU.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from .base import PreparedRaw, Workload, WorkloadError, check_tunable_names, format_value
from .expressions import Expression, make_restrictions
from .twins import as_twin, twin_workload

__all__ = ["BLOCK_SIZE_NAMES", "PreparedSource", "SourceKernel", "global_functions"]

#: Kernel Tuner's thread-block parameter names and the defaults of those not tuned.
BLOCK_SIZE_NAMES = ("block_size_x", "block_size_y", "block_size_z")
_BLOCK_DEFAULTS = (256, 1, 1)
_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def global_functions(source: str) -> list[str]:
    """Names of the ``__global__`` functions in CUDA ``source`` (comments ignored)."""
    text = _COMMENTS.sub(" ", source)
    text = re.sub(r"__launch_bounds__\s*\([^)]*\)", " ", text)
    return re.findall(r"__global__\s+[^;{(]*?\b(\w+)\s*\(", text)


def _first_error(text: str) -> str:
    """The first line of compiler output that says ``error`` (else the first line)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln
    return lines[0] if lines else "(no compiler output)"


class SourceKernel(Workload):
    """A tunable CUDA kernel from a user's source file (Kernel Tuner conventions).

    Parameters
    ----------
    source : path or str
        The ``.cu`` file (relative paths against the current folder), or the
        CUDA source text itself (a string containing ``__global__``).
    kernel_name : str
        The ``__global__`` function to launch (``name<T>`` for a template).
    tune_params : dict of str to sequence
        Values of each tunable parameter (passed as ``-Dname=value``).
    restrictions : str, callable, tuple or list of them, optional
        Kernel Tuner restrictions: expressions over the parameters such as
        ``"block_size_x*tile_x <= 1024"`` (parsed safely, never ``eval``), or
        callables of the configuration dict or named after tunables, or Kernel
        Tuner's ``(callable, [names])`` tuples (:func:`~.expressions.make_restrictions`).
    arguments : list of numpy arrays and numpy scalars
        The kernel's arguments, in order.
    problem_size : int, str, tuple or callable
        Threads to cover per dimension (up to 3); strings are parameter
        expressions; a callable takes the configuration. Default 1.
    grid_div_x, grid_div_y, grid_div_z : list of str or callable, optional
        Divisors of the problem size (product of parameter expressions);
        default ``["block_size_x"]`` etc. ``[]`` means no division.
    answer : list, optional
        Expected outputs, one entry per argument (``None`` where not checked).
    atol : float, default=1e-6
        Tolerance of the answer check (maximum absolute difference).
    verify : callable, optional
        ``verify(answer, result, atol=atol) -> bool`` replacing the default check.
    compiler_options : list of str, optional
        Extra NVRTC/nvcc options.
    simulated : SimulatedTwin, dict or callable, optional
        Twin on the simulated GPU; its fields may be expressions of the parameters.
    name : str, optional
        The run table's ``kernel`` value; ``kernel_name`` when None.
    default : dict, optional
        The default configuration; the first valid one when None.
    """

    kind = "source"

    def __init__(self, source, kernel_name: str, tune_params: Mapping | None = None, *,
                 restrictions=None, arguments: Sequence = (), problem_size=1,
                 grid_div_x=None, grid_div_y=None, grid_div_z=None, answer: Sequence | None = None,
                 atol: float = 1e-6, verify: Callable | None = None,
                 compiler_options: Sequence[str] = (), simulated=None, name: str | None = None,
                 default: Mapping | None = None):
        self.path, self.code = self._read(source)
        if not isinstance(kernel_name, str) or not kernel_name.strip():
            raise ValueError(f"source kernel: kernel_name must be a non-empty string, got {kernel_name!r}")
        self.kernel_name = kernel_name.strip()
        found = global_functions(self.code)
        base = self.kernel_name.split("<", 1)[0].strip()
        if base not in found:
            raise ValueError(f"source kernel: no __global__ function {base!r} in {self._where()}; "
                             f"found: {found}")
        self.name = name or self.kernel_name
        self.tune_params = {}
        for k, values in (tune_params or {}).items():
            if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
                values = [values]
            values = tuple(v.item() if hasattr(v, "item") else v for v in values)
            if not values:
                raise ValueError(f"source kernel {self.name!r}: tunable {k!r} has no values")
            if not re.fullmatch(r"[A-Za-z_]\w*", str(k)):
                raise ValueError(f"source kernel {self.name!r}: tunable {k!r} is not a valid macro name")
            self.tune_params[str(k)] = values
        check_tunable_names(f"source kernel {self.name!r}", self.tune_params)
        names = [*self.tune_params, *BLOCK_SIZE_NAMES]
        self.restrictions = make_restrictions(restrictions, self.tune_params)
        self.arguments = self._check_arguments(arguments)
        self.problem_size = self._dims(problem_size, names, "problem_size")
        divs = []
        for axis, (given, block) in enumerate(zip((grid_div_x, grid_div_y, grid_div_z), BLOCK_SIZE_NAMES,
                                                  strict=True)):
            divs.append(self._divisor(given if given is not None else [block], names, "xyz"[axis]))
        self.grid_div = tuple(divs)
        if answer is not None and len(answer) != len(self.arguments):
            raise ValueError(f"source kernel {self.name!r}: answer has {len(answer)} entries for "
                             f"{len(self.arguments)} arguments (None where not checked)")
        self.answer = list(answer) if answer is not None else None
        self.atol = float(atol)
        if verify is not None and not callable(verify):
            raise ValueError(f"source kernel {self.name!r}: verify must be callable")
        self.verify = verify
        if isinstance(compiler_options, str):
            compiler_options = compiler_options.split()
        self.compiler_options = tuple(str(o) for o in compiler_options)
        self.twin = as_twin(simulated)
        if default is not None:
            self._default_cache = self.validate_config(self._complete_given(default))

    # -- construction helpers -------------------------------------------------

    def _complete_given(self, default: Mapping) -> dict:
        missing = set(self.tune_params) - set(default)
        if missing:
            raise ValueError(f"source kernel {self.name!r}: default lacks {sorted(missing)}")
        return {k: self._coerce(k, v) for k, v in default.items()}

    @staticmethod
    def _read(source) -> tuple[Path | None, str]:
        if isinstance(source, str) and "__global__" in source:
            return None, source
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"source kernel: file {str(path)!r} does not exist")
        return path.resolve(), path.read_text()

    def _where(self) -> str:
        return repr(str(self.path)) if self.path is not None else "the source text"

    def _check_arguments(self, arguments) -> tuple:
        out = []
        for i, a in enumerate(arguments):
            if isinstance(a, np.ndarray):
                out.append(a)
            elif isinstance(a, np.generic):
                out.append(a)
            elif isinstance(a, (bool, int, float)):
                raise ValueError(f"source kernel {self.name!r}: argument {i} is a Python {type(a).__name__}; "
                                 f"pass a NumPy scalar (e.g. np.int32({a})) so its C type is explicit")
            else:
                raise ValueError(f"source kernel {self.name!r}: argument {i} is a {type(a).__name__}; "
                                 "expected a NumPy array or scalar")
        return tuple(out)

    def _dims(self, value, names, what) -> tuple:
        if callable(value):
            return (value,)
        if isinstance(value, (int, np.integer, str)):
            value = (value,)
        if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= 3:
            raise ValueError(f"source kernel {self.name!r}: {what} must be an int, an expression or "
                             f"1 to 3 of them, got {value!r}")
        return tuple(Expression(v, names) if isinstance(v, str) else int(v) for v in value)

    def _divisor(self, value, names, axis):
        if callable(value):
            return value
        if isinstance(value, str):
            value = [value]
        return tuple(Expression(v, names) if isinstance(v, str) else int(v) for v in value)

    # -- per configuration ------------------------------------------------------

    def _env(self, config: Mapping) -> dict:
        env = dict(zip(BLOCK_SIZE_NAMES, _BLOCK_DEFAULTS, strict=True))
        env.update(config)
        return env

    def block(self, config: Mapping | None = None) -> tuple[int, int, int]:
        """Thread-block shape: ``block_size_x/y/z`` (256, 1, 1 when not tuned)."""
        env = self._env(self.validate_config(config or {}))
        return tuple(int(env[n]) for n in BLOCK_SIZE_NAMES)

    def grid(self, config: Mapping | None = None) -> tuple[int, int, int]:
        """Grid shape: ``ceil(problem_size / prod(grid_div))`` per dimension (Kernel Tuner)."""
        env = self._env(self.validate_config(config or {}))
        if len(self.problem_size) == 1 and callable(self.problem_size[0]) \
                and not isinstance(self.problem_size[0], Expression):
            size = self.problem_size[0](dict(env))
            size = tuple(np.atleast_1d(size).tolist())
        else:
            size = tuple(p(env) if isinstance(p, Expression) else p for p in self.problem_size)
        size = (*size, 1, 1, 1)[:3]
        grid = []
        for axis, (n, div) in enumerate(zip(size, self.grid_div, strict=True)):
            d = div(dict(env)) if callable(div) else \
                math.prod(e(env) if isinstance(e, Expression) else e for e in div)
            if not d or d <= 0:
                raise ValueError(f"source kernel {self.name!r}: grid divisor of {'xyz'[axis]} is {d} "
                                 f"for {self.config_id(config)!r}")
            grid.append(max(1, math.ceil(n / d)))
        return tuple(grid)

    def defines(self, config: Mapping | None = None) -> dict[str, str]:
        """The ``-D`` macros of ``config``: its parameters, block and grid sizes, ``kernel_tuner``."""
        full = self.validate_config(config or {})
        out = {k: format_value(v) for k, v in full.items()}
        for n, v in zip(BLOCK_SIZE_NAMES, self.block(full), strict=True):
            out.setdefault(n, str(v))
        for n, v in zip(("grid_size_x", "grid_size_y", "grid_size_z"), self.grid(full), strict=True):
            out.setdefault(n, str(v))
        out.setdefault("kernel_tuner", "1")
        return out

    def options(self, config: Mapping | None = None) -> tuple[str, ...]:
        """Compiler options of ``config`` (``-std=c++17``, the defines, include folder, extras)."""
        opts = [*(f"-D{k}={v}" for k, v in self.defines(config).items())]
        if not any(o.lstrip("-").startswith("std=") for o in self.compiler_options):
            opts.insert(0, "-std=c++17")  # the user's own standard wins, as in Kernel Tuner
        if self.path is not None:
            opts.append(f"-I{self.path.parent}")
        return (*opts, *self.compiler_options)

    def compile_check(self, config: Mapping | None = None, *, arch: str = "sm_90",
                      nvcc: str | None = None) -> None:
        """Compile ``config`` with ``nvcc`` (no GPU needed); ``WorkloadError`` with the first error.

        Raises
        ------
        FileNotFoundError
            When ``nvcc`` is not on the path.
        """
        nvcc = nvcc or shutil.which("nvcc")
        if nvcc is None:
            raise FileNotFoundError("nvcc not found: install the CUDA toolkit to check a source without a GPU")
        cid = self.config_id(config)
        with tempfile.TemporaryDirectory() as tmp:
            src = self.path  # the user's file, so the error names its lines
            if src is None:
                src = Path(tmp) / "kernel.cu"
                src.write_text(self.code)
            cmd = [nvcc, f"-arch={arch}", "-cubin", *self.options(config), "-o", str(Path(tmp) / "k.cubin"), str(src)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise WorkloadError(f"source kernel {self.name!r} ({cid}) does not compile: "
                                f"{_first_error(done.stderr or done.stdout)}")

    # -- running ----------------------------------------------------------------

    def prepare(self, config=None) -> PreparedSource:
        """Compile ``config`` (``cupy.RawModule``), copy the arguments, check the answer if given."""
        import cupy as cp

        full = self.validate_config(config or {})
        cid = self.config_id(full)
        try:
            module = cp.RawModule(code=self.code, options=self.options(full),
                                  name_expressions=[self.kernel_name])
            fn = module.get_function(self.kernel_name)
        except Exception as err:
            if type(err).__name__ != "CompileException":
                raise
            raise WorkloadError(f"source kernel {self.name!r} ({cid}) does not compile: "
                                f"{_first_error(str(err))}") from None
        prepared = PreparedSource(self, full, fn, self.grid(full), self.block(full))
        if self.answer is not None or self.verify is not None:
            prepared.check()
        else:  # one launch, so a configuration the GPU cannot run fails here, named
            prepared.run_once(prepared.args)
        return prepared

    def gpu_arguments(self) -> tuple:
        """Fresh GPU copies of the arrays (scalars as they are)."""
        import cupy as cp

        return tuple(cp.asarray(a) if isinstance(a, np.ndarray) else a for a in self.arguments)

    def compare(self, results: Sequence, config_id: str = "") -> float:
        """Largest absolute difference of ``results`` (host arrays) from ``answer``; WorkloadError above atol."""
        if self.verify is not None:
            try:
                ok = self.verify(self.answer, list(results), atol=self.atol)
            except Exception as err:
                raise WorkloadError(f"source kernel {self.name!r} ({config_id}): verify raised "
                                    f"{type(err).__name__}: {err}") from err
            if not ok:
                raise WorkloadError(f"source kernel {self.name!r} ({config_id}): verify rejected the result")
            return 0.0
        worst = 0.0
        for i, (expected, got) in enumerate(zip(self.answer, results, strict=True)):
            if expected is None:
                continue
            expected, got = np.asarray(expected), np.asarray(got)
            if expected.shape != got.shape and expected.size != got.size:
                raise WorkloadError(f"source kernel {self.name!r} ({config_id}): argument {i} has "
                                    f"{got.size} values, answer {expected.size}")
            err = float(np.max(np.abs(got.reshape(-1).astype(float) - expected.reshape(-1).astype(float)),
                               initial=0.0))
            if not np.isfinite(err) or err > self.atol:
                raise WorkloadError(f"source kernel {self.name!r} ({config_id}): argument {i} differs "
                                    f"from the answer by {err:.3g} > atol {self.atol:g}")
            worst = max(worst, err)
        return worst

    def simulated(self, config=None):
        if self.twin is None:
            return super().simulated(config)
        full = self.validate_config(config or {})
        return twin_workload(self.twin, f"{self.name}[{self.config_id(full)}]", full)

    def describe(self) -> str:
        return f"source kernel {self.kernel_name!r} in {self._where()}"


class PreparedSource(PreparedRaw):
    """A compiled configuration of a :class:`SourceKernel` with its arguments on the GPU."""

    timing = "events"

    def __init__(self, kernel: SourceKernel, config: dict, function, grid, block):
        self.kernel, self.config, self.function = kernel, config, function
        self.grid, self.block = tuple(grid), tuple(block)
        self.args = kernel.gpu_arguments()

    def run_once(self, args: tuple) -> None:
        """Launch once with ``args`` and wait; a CUDA error (e.g. too many resources) as WorkloadError."""
        import cupy as cp

        try:
            self.function(self.grid, self.block, args)
            cp.cuda.runtime.deviceSynchronize()
        except Exception as err:
            if "CUDA" not in type(err).__name__ and "cuda" not in type(err).__module__:
                raise
            raise WorkloadError(f"source kernel {self.kernel.name!r} ({self.kernel.config_id(self.config)}) "
                                f"failed to run with grid {self.grid}, block {self.block}: {err}") from None

    def check(self) -> float:
        """Run once on fresh copies of the arguments and compare with the answer (0 without one)."""
        if self.kernel.answer is None and self.kernel.verify is None:
            return 0.0
        import cupy as cp

        args = self.kernel.gpu_arguments()
        self.run_once(args)
        results = [cp.asnumpy(a) if isinstance(a, cp.ndarray) else a for a in args]
        return self.kernel.compare(results, self.kernel.config_id(self.config))
