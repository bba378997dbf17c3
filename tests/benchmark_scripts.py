"""Load a script of ``benchmarks/`` as a module, for the tests of its functions.

The scripts are not a package: each is loaded from its file under a name of its own
(``<stem>_under_test``), with ``benchmarks/`` on ``sys.path`` because they import their
siblings (``_common``, ``_readonly_nvml``, one another's helpers).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(stem: str) -> ModuleType:
    """``benchmarks/<stem>.py`` executed as the module ``<stem>_under_test``."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(f"{stem}_under_test", BENCHMARKS / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
