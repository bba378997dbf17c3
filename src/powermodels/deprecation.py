"""Old keyword names that keep working for one release, with a :class:`DeprecationWarning`.

Used where a public function's parameter was renamed (issue 23: ``kernel`` →
``workload`` where a workload is meant); the old name still works for one
release and the warning names the new one.
"""

from __future__ import annotations

import functools
import importlib
import sys
import warnings
from collections.abc import Callable

__all__ = ["moved_module", "renamed_keywords", "warn_moved_path"]


def renamed_keywords(**old_to_new: str) -> Callable:
    """Decorator: accept each ``old=`` keyword as its ``new`` name, with a DeprecationWarning.

    Passing both names is a :class:`TypeError` naming them.

    Examples
    --------
    >>> @renamed_keywords(kernel="workload")
    ... def run(workload, config=None):
    ...     return workload
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     run(kernel="fp32"), str(caught[0].message)
    ('fp32', 'run(kernel=...) is deprecated: use workload=...')
    """

    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{function.__name__}() got both {old}= (deprecated) and {new}=")
                    warnings.warn(f"{function.__name__}({old}=...) is deprecated: use {new}=...",
                                  DeprecationWarning, stacklevel=2)
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper

    return decorate



def warn_moved_path(old: str, new: str, *inside: str) -> None:
    """Warn that module ``old`` moved to ``new``, at the line that imported ``old``.

    The warning's ``stacklevel`` steps over this module's frames, ``old``'s own and those of the
    packages named in ``inside`` (a package of old paths calling this through its own helper);
    ``warnings.warn`` itself steps over importlib's frames above level 1 (counting them too
    overshot the stack and the warning was attributed to ``sys``: a script importing an old path,
    where only ``__main__``'s DeprecationWarnings show, saw none).
    """
    ours = (__name__, old, *inside)
    frame, level = sys._getframe(), 0
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if any(name == p or name.startswith(p + ".") for p in ours):
            level += 1
        elif not frame.f_code.co_filename.startswith("<frozen importlib"):
            break
        frame = frame.f_back
    warnings.warn(f"{old} moved to {new}; the old path is deprecated and goes away in the next release",
                  DeprecationWarning, stacklevel=level + 1)


def moved_module(old: str, new: str) -> None:
    """Make the module ``old`` an alias of ``new`` (one module object), with a DeprecationWarning.

    Called at the top of the file left at the old path, e.g. ``moved_module(__name__,
    "powermodels.instruction_energy.tables")``: ``import old`` then gives ``new`` itself, so its
    classes and module-level state are the same objects under both names.
    """
    warn_moved_path(old, new)
    sys.modules[old] = importlib.import_module(new)
