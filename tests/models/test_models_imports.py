"""DESIGN.md ◆: models/ imports numpy/scipy/pandas/sklearn/joblib only — never hardware code."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import powermodels.models

MODELS = Path(powermodels.models.__file__).parent
ALLOWED = {"__future__", "numpy", "scipy", "pandas", "sklearn", "joblib", "powermodels", "collections",
           "copy", "dataclasses", "math", "numbers", "typing", "warnings", "functools", "itertools", "re",
           "abc", "os", "sys"}  # os/sys: pointing deprecation warnings at the caller's line (_columns.py)
FORBIDDEN = ("powermodels.devices", "powermodels.harness", "powermodels.measuring", "powermodels.workloads",
             "powermodels.campaigns", "powermodels.microbench", "powermodels.commands", "powermodels.sensor",
             "cupy", "pynvml")


def _imports(path: Path):
    package = "powermodels.models"
    for node in ast.walk(ast.parse(path.read_text())):  # walk: lazy imports inside functions too
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against powermodels.models
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield f"{base}.{node.module}" if node.module else base
            else:
                yield node.module


def test_models_import_no_hardware_or_harness_code():
    found = {(p.name, name) for p in MODELS.glob("*.py") for name in _imports(p)}
    assert found, "no imports parsed"
    bad = sorted((f, n) for f, n in found if n.startswith(FORBIDDEN) or n.split(".")[0] not in ALLOWED)
    assert not bad, f"models/ imports outside its allowed set: {bad}"


def test_importing_models_loads_neither_cupy_nor_pynvml():
    code = ("import sys, powermodels.models; "
            "print([m for m in sys.modules if m.split('.')[0] in ('cupy', 'pynvml') "
            "or m.startswith(('powermodels.harness', 'powermodels.measuring', 'powermodels.workloads', "
            "'powermodels.campaigns', 'powermodels.microbench', 'powermodels.sensor'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
