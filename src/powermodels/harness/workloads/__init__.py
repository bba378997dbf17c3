"""Deprecated: moved to :mod:`powermodels.workloads` (this path warns and goes away in the next release).

A real package (not an alias) so that ``powermodels.harness.workloads.spec``
and the other old submodule paths resolve to their shims here, which alias
the new modules; its own names are those of :mod:`powermodels.workloads`.
"""

from __future__ import annotations

from powermodels import workloads as _new
from powermodels.harness import warn_moved

warn_moved(__name__)

__all__ = list(_new.__all__)


def __getattr__(name: str):
    return getattr(_new, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *dir(_new)})
