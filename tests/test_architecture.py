"""The house rules on the package's shape, read from the source (issue 23).

* **No import cycles** inside ``powermodels``. Every ``import`` counts — at
  module level *and* inside functions: a function-level import is still a
  dependency (the function cannot run without the other module), and the four
  circles of issue 23 all closed through function-level imports. Imports under
  ``if TYPE_CHECKING:`` do not count (they never run). Importing ``a.b.c``
  runs ``a/__init__`` and ``a/b/__init__`` too, so those are edges as well.
* **No module over 450 lines** and **no package (with its subpackages) over
  4000 lines**, except the allow-listed ones below, each with its reason; the
  lists may only shrink (an entry that is no longer too long fails, so it is
  removed).
* **No private name imported across modules** (``from .x import _name``, or
  ``x._name`` on a module ``x`` bound by an import; dunders such as
  ``__version__`` are not private). Same allow-list rule.

The imports are read with :mod:`ast` from the files, so the test needs no GPU
and imports nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "powermodels"
MAX_MODULE_LINES = 450
MAX_PACKAGE_LINES = 4000

#: module (path under src/powermodels) -> why it may stay over MAX_MODULE_LINES for now
LONG_MODULES = {
    "schema.py": "every column name of every table lives here by design (DESIGN.md ◆); splitting "
                 "it is a migration of its own",
}
#: package folder (under src/powermodels) -> why it may stay over MAX_PACKAGE_LINES for now
LARGE_PACKAGES = {
    "models": "twenty estimators; not split into sub-packages yet (the column convention landed first)",
}
#: (importing module, imported module, name) -> why the private import stays for now
PRIVATE_IMPORTS: dict[tuple[str, str, str], str] = {
}


def all_modules() -> dict[str, tuple[Path, bool]]:
    """Dotted name -> (file, is a package ``__init__``) of every module of the package."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


MODULES = all_modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _from_import_target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from … import`` in ``module`` reads from (relative levels resolved)."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _import_nodes(tree: ast.AST):
    """Every Import/ImportFrom, at any depth, except those under ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _owner(name: str) -> str | None:
    """The module of the package that ``name`` (a module or an attribute path) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def module_imports(module: str) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) of every import in ``module``, resolved."""
    path, is_package = MODULES[module]
    found = []
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names]
            continue
        target = _from_import_target(module, is_package, node)
        for alias in node.names:
            if f"{target}.{alias.name}" in MODULES:  # ``from pkg import submodule``
                found.append((f"{target}.{alias.name}", None))
            else:
                found.append((target, alias.name))
    return [(t, n) for t, n in found if t == PACKAGE or t.startswith(PACKAGE + ".")]


def module_graph() -> dict[str, set[str]]:
    graph = {m: set() for m in MODULES}
    for module in MODULES:
        for target, _ in module_imports(module):
            owner = _owner(target)
            if owner is None:
                continue
            parts = owner.split(".")
            for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__
                step = ".".join(parts[:i])
                if step in MODULES and step != module and not module.startswith(step + "."):
                    graph[module].add(step)
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def loop_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One closed path through a cycle's modules, for the failure message."""
    members = set(component)
    path, seen = [component[0]], {component[0]}
    while True:
        nxt = sorted(graph[path[-1]] & members)
        back = [n for n in nxt if n in seen]
        if back:
            return path[path.index(back[0]):] + [back[0]]
        path.append(next(n for n in nxt if n not in seen))
        seen.add(path[-1])


def test_the_walk_sees_the_package():
    graph = module_graph()
    assert len(MODULES) > 100 and sum(map(len, graph.values())) > 200
    # a function-level import and an ``if TYPE_CHECKING`` one, both in campaigns/
    assert "powermodels.campaigns.plan" not in graph["powermodels.campaigns.executor"]
    assert "powermodels.measuring.runner" in graph["powermodels.campaigns.run"]


def test_no_import_cycles():
    graph = module_graph()
    loops = [" -> ".join(loop_in(c, graph)) for c in import_cycles(graph)]
    assert not loops, "import cycles inside powermodels:\n" + "\n".join(loops)


def package_of(module: str) -> str:
    """The top-level package (or top-level module) of ``powermodels`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def package_graph() -> dict[str, set[str]]:
    """Package -> the packages it imports (from :func:`module_graph`, edges inside one package dropped)."""
    graph: dict[str, set[str]] = {}
    for module, targets in module_graph().items():
        graph.setdefault(package_of(module), set())
        for target in targets:
            graph.setdefault(package_of(target), set())
            if package_of(target) != package_of(module):
                graph[package_of(module)].add(package_of(target))
    return graph


#: package-level cycles allowed for now, with the reason (the list may only shrink)
PACKAGE_CYCLES = {
    ("measuring", "meter"): "EnergyMeter (powermodels.meter, a public path) is a measuring-layer "
                            "module: it reads measuring.counter_log and measure_program uses it",
}


def test_packages_form_layers():
    cycles = {tuple(c) for c in import_cycles(package_graph())}
    assert cycles <= set(PACKAGE_CYCLES), f"package-level import cycles: {sorted(cycles - set(PACKAGE_CYCLES))}"
    gone = sorted(set(PACKAGE_CYCLES) - cycles)
    assert not gone, f"no longer a cycle, remove from PACKAGE_CYCLES: {gone}"
    assert "devices" not in package_graph()["models"]  # ◆ models never import hardware code


#: all that ``models/`` may import from the package (◆ estimators import numpy/scipy/pandas/sklearn
#: and the column names; never devices, measuring, workloads, campaigns or anything else)
MODELS_MAY_IMPORT = {"schema", "deprecation"}
#: libraries that need a GPU or its driver: never imported by ``models/``, not even in a function
HARDWARE_LIBRARIES = {"cupy", "pynvml", "torch", "cuda", "pycuda", "numba", "jax", "kernel_tuner"}


def hardware_imports(module: str) -> list[str]:
    """``module:line name`` of every import of a hardware library in ``module``, at any depth."""
    path, _ = MODULES[module]
    found = []
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module or ""] if not node.level else [])
        found += [f"{module}:{node.lineno} {n}" for n in names if n.split(".")[0] in HARDWARE_LIBRARIES]
    return found


def test_models_import_only_the_schema_and_no_hardware_library():
    assert package_graph()["models"] <= MODELS_MAY_IMPORT, (
        f"models/ imports {sorted(package_graph()['models'] - MODELS_MAY_IMPORT)}")
    found = [h for m in MODULES if m.startswith(f"{PACKAGE}.models") for h in hardware_imports(m)]
    assert not found, f"models/ imports hardware libraries: {found}"
    # the check sees a function-level import: devices/nvml.py imports pynvml inside functions
    assert any(h.endswith(" pynvml") for h in hardware_imports(f"{PACKAGE}.devices.nvml"))


def test_a_cycle_is_found_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(graph) == [["a", "b", "c"]]
    assert loop_in(["a", "b", "c"], graph) == ["a", "b", "c", "a"]


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_over_450_lines():
    long = {str(p.relative_to(SRC / PACKAGE)): line_count(p) for p, _ in MODULES.values()
            if line_count(p) > MAX_MODULE_LINES}
    assert set(long) <= set(LONG_MODULES), (
        f"modules over {MAX_MODULE_LINES} lines (split them along their jobs): "
        f"{ {k: v for k, v in long.items() if k not in LONG_MODULES} }")
    shrunk = sorted(set(LONG_MODULES) - set(long))
    assert not shrunk, f"no longer over {MAX_MODULE_LINES} lines, remove from LONG_MODULES: {shrunk}"


def test_no_package_over_4000_lines():
    root = SRC / PACKAGE
    sizes = {str(d.relative_to(root)): sum(line_count(p) for p in d.rglob("*.py"))
             for d in root.iterdir() if d.is_dir() and (d / "__init__.py").exists()}
    large = {d: n for d, n in sizes.items() if n > MAX_PACKAGE_LINES}
    assert set(large) <= set(LARGE_PACKAGES), f"packages over {MAX_PACKAGE_LINES} lines: {large}"
    shrunk = sorted(set(LARGE_PACKAGES) - set(large))
    assert not shrunk, f"no longer over {MAX_PACKAGE_LINES} lines, remove from LARGE_PACKAGES: {shrunk}"


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_attribute_uses(module: str) -> set[tuple[str, str, str]]:
    """(module, other module, name) for each ``other._name`` read through a module bound by an import.

    ``from . import base`` then ``base._lock`` is the same dependency on a private
    name as ``from .base import _lock``; so is ``import powermodels.x as x``.
    """
    path, is_package = MODULES[module]
    tree = ast.parse(path.read_text(), str(path))
    bound: dict[str, str] = {}  # local name -> module of the package it refers to
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname and a.name in MODULES:
                    bound[a.asname] = a.name
            continue
        target = _from_import_target(module, is_package, node)
        for a in node.names:
            if f"{target}.{a.name}" in MODULES:
                bound[a.asname or a.name] = f"{target}.{a.name}"
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.insert(0, value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            target = ".".join([bound[value.id], *chain])
            if target in MODULES and target != module:
                found.add((module, target, node.attr))
    return found


def test_a_private_attribute_of_a_module_is_found(tmp_path, monkeypatch):
    pkg = tmp_path / PACKAGE
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("_x = 1\n")
    (pkg / "b.py").write_text("from . import a\nimport powermodels.a as aa\n\ndef f():\n"
                              "    return a._x + aa._x + a.__name__.__len__()\n")
    monkeypatch.setitem(MODULES, f"{PACKAGE}.a", (pkg / "a.py", False))
    monkeypatch.setitem(MODULES, f"{PACKAGE}.b", (pkg / "b.py", False))
    assert private_attribute_uses(f"{PACKAGE}.b") == {(f"{PACKAGE}.b", f"{PACKAGE}.a", "_x")}


def test_no_private_name_imported_across_modules():
    found = set()
    for module in MODULES:
        found |= private_attribute_uses(module)
        for target, name in module_imports(module):
            if name and name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                owner = _owner(target)
                if owner != module:
                    found.add((module, owner, name))
    assert found <= set(PRIVATE_IMPORTS), (
        "private names imported across modules (make them public or move them): "
        f"{sorted(found - set(PRIVATE_IMPORTS))}")
    gone = sorted(set(PRIVATE_IMPORTS) - found)
    assert not gone, f"no longer imported, remove from PRIVATE_IMPORTS: {gone}"


@pytest.mark.parametrize("package", ["measuring", "measuring.protocols", "workloads", "campaigns",
                                     "microbench", "harness", "natural_dvfs"])
def test_every_package_says_what_it_owns(package):
    path, _ = MODULES[f"{PACKAGE}.{package}"]
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and len(doc.split()) >= 25, f"{package}/__init__.py needs a paragraph saying what it owns"
