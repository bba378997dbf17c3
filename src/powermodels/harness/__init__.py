"""Deprecated: the old home of measuring, workloads, campaigns and microbenchmarks (issue 23).

``powermodels.harness`` held five jobs; each now has its own package:
:mod:`powermodels.measuring`, :mod:`powermodels.workloads`,
:mod:`powermodels.campaigns` and :mod:`powermodels.microbench`. The old import
paths keep working for one release: importing one warns with a
:class:`DeprecationWarning` naming the new path and gives the very same module
object (so ``monkeypatch`` and ``isinstance`` behave as before), except
``harness.campaign``, which also keeps ``run_campaign(cluster=...)``. They go
away in the next release.

Old → new: :data:`MOVED` (also in ``docs/architecture.md``).
"""

from __future__ import annotations

import importlib
import sys

from powermodels.deprecation import warn_moved_path

__all__ = ["MOVED", "alias_module", "warn_moved"]

#: old module (``powermodels.harness.X``) -> its new module
MOVED: dict[str, str] = {
    "powermodels.harness.runner": "powermodels.measuring.runner",
    "powermodels.harness.sampler": "powermodels.measuring.sampler",
    "powermodels.harness.ring_buffer": "powermodels.measuring.ring_buffer",
    "powermodels.harness.exclusive": "powermodels.measuring.exclusive",
    "powermodels.harness.reference": "powermodels.measuring.reference",
    "powermodels.harness.program": "powermodels.measuring.program",
    "powermodels.harness.counter_log": "powermodels.measuring.counter_log",
    "powermodels.harness.graphs": "powermodels.measuring.graphs",
    "powermodels.harness.protocols": "powermodels.measuring.protocols",
    "powermodels.harness.counter_protocol": "powermodels.measuring.protocols.counter",
    "powermodels.harness.campaign": "powermodels.campaigns",
    "powermodels.harness.campaign_store": "powermodels.campaigns.store",
    "powermodels.harness.microbench": "powermodels.microbench.catalog",
    "powermodels.harness.microbench_gpu": "powermodels.microbench.gpu",
    "powermodels.harness.microbench_sim": "powermodels.microbench.simulated",
    "powermodels.harness.sass": "powermodels.microbench.sass",
    "powermodels.harness.profiling": "powermodels.microbench.profiling",
    "powermodels.harness.validation_workloads": "powermodels.microbench.validation_workloads",
    "powermodels.harness.program_kernels": "powermodels.microbench.program_kernels",
    "powermodels.harness.workloads": "powermodels.workloads",
    "powermodels.harness.workloads.base": "powermodels.workloads.base",
    "powermodels.harness.workloads.callables": "powermodels.workloads.callables",
    "powermodels.harness.workloads.convert": "powermodels.workloads.convert",
    "powermodels.harness.workloads.expressions": "powermodels.workloads.expressions",
    "powermodels.harness.workloads.pressure": "powermodels.workloads.pressure",
    "powermodels.harness.workloads.registry": "powermodels.workloads.registry",
    "powermodels.harness.workloads.registry_gpu": "powermodels.workloads.registry_gpu",
    "powermodels.harness.workloads.source": "powermodels.workloads.source",
    "powermodels.harness.workloads.spec": "powermodels.workloads.spec",
    "powermodels.harness.workloads.twins": "powermodels.workloads.twins",
}


def warn_moved(old: str) -> None:
    """Warn that ``old`` moved to ``MOVED[old]`` (a :class:`DeprecationWarning` at the importer's line)."""
    warn_moved_path(old, MOVED[old], __name__)


def alias_module(old: str) -> None:
    """Make ``import old`` give the new module itself (one module object, one set of classes)."""
    warn_moved(old)
    sys.modules[old] = importlib.import_module(MOVED[old])
