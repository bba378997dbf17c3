"""Every ``benchmarks/gpu_*.py`` (run by the lead on a lent GPU) leaves the GPU's settings alone.

DESIGN.md ◆: never change the lent GPU's settings. The benchmarks make NVML
read-only with ``_readonly_nvml.forbid_nvml_setters()`` before anything of
powermodels runs, and any ``ncu`` they start keeps the GPU's clocks. Read from
the files with :mod:`ast`: nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
GPU_SCRIPTS = sorted(BENCHMARKS.glob("gpu_*.py"))


def _calls(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", None)) == name
               for n in ast.walk(node))


def _imports_powermodels(node: ast.stmt) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name.split(".")[0] == "powermodels" for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "powermodels"


def test_there_are_gpu_benchmarks():
    assert len(GPU_SCRIPTS) >= 10


@pytest.mark.parametrize("path", GPU_SCRIPTS, ids=lambda p: p.name)
def test_a_gpu_benchmark_forbids_nvml_setters_before_powermodels_runs(path):
    """Called at module level before powermodels is imported, or first thing in ``main``
    (imports of powermodels bind no NVML function, so nothing can run a setter before ``main``)."""
    tree = ast.parse(path.read_text(), str(path))
    assert _calls(tree, "forbid_nvml_setters"), f"{path.name} never calls forbid_nvml_setters()"
    for stmt in tree.body:
        if _calls(stmt, "forbid_nvml_setters") and not isinstance(stmt, ast.FunctionDef):
            return  # module level, before the first import of powermodels below
        if _imports_powermodels(stmt):
            main = next((f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "main"), None)
            assert main is not None and _calls(main, "forbid_nvml_setters"), (
                f"{path.name} imports powermodels (line {stmt.lineno}) before forbid_nvml_setters() "
                "and its main() does not call it")
            return


def ncu_without_clock_control(text: str) -> list[str]:
    """``[ncu, ...]`` command lists in ``text`` that profile without ``--clock-control none``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.List) and node.elts and ast.unparse(node.elts[0]) in ("'ncu'", "ncu", "args.ncu"):
            items = [ast.unparse(e) for e in node.elts]
            if "'-i'" in items:  # reading a saved report runs nothing on the GPU
                continue
            if not ("'--clock-control'" in items and "'none'" in items):
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


def test_ncu_without_clock_control_is_found():
    text = ("cmd = ['ncu', '--csv', 'python', 'x.py']\nok = [ncu, '--clock-control', 'none', 'x']\n"
            "read = [ncu, '-i', 'r.ncu-rep', '--csv']\n")
    assert ncu_without_clock_control(text) == ["line 1: ['ncu', '--csv', 'python', 'x.py']"]


@pytest.mark.parametrize("path", GPU_SCRIPTS, ids=lambda p: p.name)
def test_a_gpu_benchmark_runs_ncu_only_without_clock_control(path):
    assert not ncu_without_clock_control(path.read_text()), path.name
