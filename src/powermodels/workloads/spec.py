"""Workloads described in a campaign file (JSON/TOML): user sources, callables, programs, registry kernels.

One entry of a campaign spec's ``workloads`` list names exactly one of

``{"source": "matmul.cu", "kernel": "matmul_kernel", ...}``
    a :class:`~.source.SourceKernel`; optional ``tune_params``, ``restrictions``
    (expression strings), ``arguments`` and ``answer`` (argument specs, below),
    ``problem_size``, ``grid_div_x/y/z``, ``compiler_options``, ``atol``, ``default``;
``{"callable": "module:function"}`` or ``{"callable": "file.py:name"}``
    a :class:`~.callables.CallableWorkload` (or the ``Workload`` object the
    name refers to); optional ``args``, ``kwargs``, ``timing``, ``tune_params``,
    ``restrictions``;
``{"program": ["./app", "arg"]}``
    an external program (:mod:`powermodels.measuring.program`);
``{"registry": "sgemm"}``
    a registry kernel;

plus ``name`` (the run table's ``kernel``), ``configs`` (``"default"``,
``"all"``, a list, or ``{"sample": n, "seed": s}``) and ``simulated`` (a
:class:`~.twins.SimulatedTwin` table). Relative paths are resolved against
the folder of the campaign file.

Argument specs (``arguments``, ``answer``)::

    {"random": "float32", "size": 1000000, "seed": 1}   uniform [0, 1) (integers: 0..99)
    {"zeros": "float32", "size": [64, 64]}              also "ones"
    {"scalar": 4096, "dtype": "int32"}                  a NumPy scalar
    {"values": [1, 2, 3], "dtype": "float32"}           an array of these values
    {"file": "a.npy"}                                   numpy.load
    null                                                (answer only) not checked
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

import numpy as np

from .base import Workload
from .convert import as_workload, load_object
from .registry import registry_kernel
from .twins import as_twin

__all__ = ["ENTRY_KINDS", "make_argument", "select_configs", "workload_from_entry"]

#: The keys naming an entry's kind.
ENTRY_KINDS = ("source", "callable", "program", "registry")
_COMMON = {"name", "configs", "simulated"}
_SOURCE = {"kernel", "tune_params", "restrictions", "arguments", "answer", "problem_size", "grid_div_x",
           "grid_div_y", "grid_div_z", "compiler_options", "atol", "default"}
_CALLABLE = {"args", "kwargs", "timing", "tune_params", "restrictions"}
_ALLOWED = {"source": _SOURCE, "callable": _CALLABLE, "program": {"timeout_s"}, "registry": set()}


def _dtype(text, where: str) -> np.dtype:
    try:
        return np.dtype(text)
    except TypeError:
        raise ValueError(f"{where}: unknown dtype {text!r}") from None


def make_argument(spec, base_dir: str | Path | None = None, where: str = "argument"):
    """A NumPy array or scalar from an argument spec (module docstring); ValueError naming the problem."""
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ValueError(f"{where}: expected a table such as {{'random': 'float32', 'size': n}}, got {spec!r}")
    kinds = [k for k in ("random", "zeros", "ones", "scalar", "values", "file") if k in spec]
    if len(kinds) != 1:
        raise ValueError(f"{where}: give exactly one of random, zeros, ones, scalar, values, file; got {sorted(spec)}")
    kind = kinds[0]
    if kind == "file":
        path = Path(spec["file"])
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ValueError(f"{where}: file {str(path)!r} does not exist")
        return np.load(path, allow_pickle=False)
    if kind == "scalar":
        return _dtype(spec.get("dtype", "int32"), where).type(spec["scalar"])
    if kind == "values":
        return np.asarray(spec["values"], dtype=_dtype(spec.get("dtype", "float32"), where))
    dtype = _dtype(spec[kind], where)
    size = spec.get("size")
    if size is None:
        raise ValueError(f"{where}: {kind!r} needs a 'size' (a count or a shape)")
    shape = tuple(int(s) for s in (size if isinstance(size, (list, tuple)) else [size]))
    if kind == "zeros":
        return np.zeros(shape, dtype)
    if kind == "ones":
        return np.ones(shape, dtype)
    rng = np.random.default_rng(int(spec.get("seed", 0)))
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 100, size=shape).astype(dtype)
    if dtype in (np.float32, np.float64):
        return rng.random(shape, dtype=dtype)
    return rng.random(shape).astype(dtype)


def _resolve(path, base_dir) -> str:
    p = Path(path)
    return str(p if p.is_absolute() or base_dir is None else Path(base_dir) / p)


def workload_from_entry(entry: Mapping, base_dir: str | Path | None = None, *,
                        allow_code_outside: bool = False) -> Workload:
    """The :class:`~.base.Workload` of one ``workloads`` entry of a campaign spec (built once, cached).

    A campaign spec is code: a ``callable`` entry imports and runs its
    module. A ``"file.py:name"`` outside the spec's folder (``base_dir``) is
    refused unless ``allow_code_outside`` (``powermodels campaign
    --allow-code-outside``): a spec from elsewhere cannot reach for any file
    on the machine without the user saying so.
    """
    if not isinstance(entry, Mapping):
        raise ValueError(f"campaign spec: a workloads entry must be a table, got {entry!r}")
    key = json.dumps(entry, sort_keys=True, default=str)
    return _build(key, None if base_dir is None else str(base_dir), bool(allow_code_outside))


def _check_inside(target: str, base_dir: str | None) -> None:
    module, _, _ = str(target).rpartition(":")
    if base_dir is None or not module.endswith(".py"):
        return
    folder = Path(base_dir).resolve()
    path = (folder / module).resolve()
    if folder != path and folder not in path.parents:
        raise ValueError(f"campaign spec: callable {target!r} is outside the spec's folder {str(folder)!r}; "
                         "a spec is code: pass --allow-code-outside to run a file from elsewhere")


@lru_cache(maxsize=64)
def _build(key: str, base_dir: str | None, allow_code_outside: bool = False) -> Workload:
    entry = json.loads(key)
    kinds = [k for k in ENTRY_KINDS if k in entry]
    if len(kinds) != 1:
        raise ValueError(f"campaign spec: a workloads entry names exactly one of {list(ENTRY_KINDS)}; "
                         f"got keys {sorted(entry)}")
    kind = kinds[0]
    unknown = set(entry) - {kind} - _COMMON - _ALLOWED[kind]
    if unknown:
        raise ValueError(f"campaign spec: {kind} entry {entry[kind]!r}: unknown key(s) {sorted(unknown)}; "
                         f"allowed: {sorted(_COMMON | _ALLOWED[kind])}")
    name = entry.get("name")
    twin = as_twin(entry.get("simulated"))
    if kind == "registry":
        w = registry_kernel(entry["registry"])
        if name not in (None, w.name) or twin is not None:
            raise ValueError(f"campaign spec: registry entry {w.name!r} takes no name or simulated twin")
        return w
    if kind == "program":
        argv = entry["program"]
        if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"campaign spec: program must be a list of strings (argv), got {argv!r}")
        from .program import DEFAULT_TIMEOUT_S, ProgramWorkload

        # the program runs in the spec file's folder; its twin (if any) drives the simulated GPU;
        # "timeout_s": its bound per run (null: none), an hour when not given
        w = ProgramWorkload(list(argv), simulated=twin, cwd=base_dir,
                            timeout_s=entry.get("timeout_s", DEFAULT_TIMEOUT_S))
        if name:
            w.name = name
        return w
    if kind == "callable":
        from .callables import CallableWorkload

        if not allow_code_outside:
            _check_inside(entry["callable"], base_dir)
        target = load_object(entry["callable"], base_dir)
        if isinstance(target, Workload):
            if any(k in entry for k in _CALLABLE) or twin is not None:
                raise ValueError(f"campaign spec: {entry['callable']!r} is a Workload already; "
                                 "set its arguments and twin in Python")
            return target
        return CallableWorkload(target, args=tuple(entry.get("args", ())), kwargs=entry.get("kwargs"),
                                name=name or entry["callable"].rpartition(":")[2], simulated=twin,
                                timing=entry.get("timing", "auto"), tune_params=entry.get("tune_params"),
                                restrictions=entry.get("restrictions"))
    from .source import SourceKernel

    if "kernel" not in entry:
        raise ValueError(f"campaign spec: source entry {entry['source']!r} needs 'kernel' (the __global__ name)")
    where = f"source {entry['source']!r}"
    arguments = [make_argument(a, base_dir, f"{where} argument {i}")
                 for i, a in enumerate(entry.get("arguments", []))]
    answer = entry.get("answer")
    if answer is not None:
        answer = [make_argument(a, base_dir, f"{where} answer {i}") for i, a in enumerate(answer)]
    problem = entry.get("problem_size", 1)
    return SourceKernel(
        _resolve(entry["source"], base_dir), entry["kernel"], entry.get("tune_params"),
        restrictions=entry.get("restrictions"), arguments=arguments,
        problem_size=tuple(problem) if isinstance(problem, list) else problem,
        grid_div_x=entry.get("grid_div_x"), grid_div_y=entry.get("grid_div_y"),
        grid_div_z=entry.get("grid_div_z"), answer=answer, atol=entry.get("atol", 1e-6),
        compiler_options=entry.get("compiler_options", ()), simulated=twin, name=name,
        default=entry.get("default"),
    )


def select_configs(workload: Workload, what) -> list[dict]:
    """The configurations a spec asks for: ``"default"``, ``"all"``, a list, or ``{"sample": n, "seed": s}``."""
    if what is None or what == "default":
        return [workload.validate_config({})]
    if what == "all":
        return workload.search_space()
    if isinstance(what, Mapping) and "sample" in what:
        space = workload.search_space()
        k = min(int(what["sample"]), len(space))
        return random.Random(int(what.get("seed", 0))).sample(space, k)
    if isinstance(what, (list, tuple)):
        return [workload.validate_config(workload.parse_config(c)) for c in what]
    raise ValueError(f"campaign spec: configs of {workload.name!r} must be 'default', 'all', a list "
                     "or {'sample': n}")
