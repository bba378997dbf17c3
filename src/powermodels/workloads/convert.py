"""``as_workload``: whatever a user hands over, as a :class:`~.base.Workload`.

Accepted: a :class:`~.base.Workload`; a registry name (``"sgemm"``); a
``"module:function"`` or ``"path/to/file.py:function"`` string naming a Python
callable or a ready-made :class:`~.base.Workload` object; a Python callable;
a list of strings (an external program's argv,
:class:`powermodels.measuring.program.ProgramWorkload`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path

from .base import Workload
from .registry import KERNELS, registry_kernel

__all__ = ["as_workload", "load_object"]


def load_object(target: str, base_dir: str | Path | None = None):
    """The object named by ``"module:attr"`` or ``"file.py:attr"`` (``attr`` may be dotted).

    A ``.py`` path is resolved against ``base_dir`` (the current folder when None)
    and imported under its stem.

    Raises
    ------
    ValueError
        When the module cannot be imported or has no such attribute (one line).
    """
    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"callable: expected 'module:function', got {target!r}")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_absolute() and base_dir is not None:
            path = Path(base_dir) / path
        if not path.is_file():
            raise ValueError(f"callable {target!r}: file {str(path)!r} does not exist")
        name = f"powermodels_user_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:
            del sys.modules[name]
            raise ValueError(f"callable {target!r}: importing {str(path)!r} raised "
                             f"{type(err).__name__}: {err}") from err
    else:
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ValueError(f"callable {target!r}: cannot import module {module_name!r} ({err})") from err
        except Exception as err:
            raise ValueError(f"callable {target!r}: importing {module_name!r} raised "
                             f"{type(err).__name__}: {err}") from err
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"callable {target!r}: module {module_name!r} has no attribute {attr!r}") from None
    return obj


def as_workload(obj, *, base_dir: str | Path | None = None) -> Workload:
    """``obj`` as a :class:`~.base.Workload`.

    Parameters
    ----------
    obj : Workload, str, callable or list of str
        A workload; a registry name; ``"module:function"`` / ``"file.py:name"``
        (a callable, or a module-level ``Workload`` object); a callable (run
        with no arguments, see :class:`~.callables.CallableWorkload`); an argv list
        (an external program).
    base_dir : path, optional
        Folder that relative ``file.py`` paths are resolved against.

    Raises
    ------
    ValueError
        Naming what could not be converted.
    """
    if isinstance(obj, Workload):
        return obj
    if isinstance(obj, str):
        if obj in KERNELS:
            return registry_kernel(obj)
        if ":" in obj:
            target = load_object(obj, base_dir)
            if isinstance(target, Workload):
                return target
            if not callable(target):
                raise ValueError(f"callable {obj!r}: {type(target).__name__} is neither a function "
                                 "nor a Workload")
            return _callable(target, name=obj.rpartition(":")[2])
        raise ValueError(f"workload: {obj!r} is neither a registry kernel {sorted(KERNELS)} nor "
                         "'module:function'")
    if isinstance(obj, (list, tuple)) and obj and all(isinstance(a, str) for a in obj):
        from .program import ProgramWorkload

        return ProgramWorkload(list(obj))
    if callable(obj):
        return _callable(obj)
    raise ValueError(f"workload: cannot use a {type(obj).__name__} as a workload (give a registry name, "
                     "'module:function', a callable, a Workload or an argv list)")


def _callable(fn, name: str | None = None) -> Workload:
    from .callables import CallableWorkload

    try:
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # builtins without a signature
        required = []
    if required:
        raise ValueError(f"callable {name or getattr(fn, '__name__', fn)!r} needs argument(s) "
                         f"{[p.name for p in required]}: bind them with CallableWorkload(fn, args=...)")
    return CallableWorkload(fn, name=name)
