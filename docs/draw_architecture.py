"""Draw ``docs/img/architecture.png`` from the code: the data flow and the package layers.

The package graph is the one ``tests/test_architecture.py`` checks: every import of every
module of ``src/powermodels`` (module level and inside functions), read with :mod:`ast`,
folded into packages. A package's layer is the length of the longest import path below
it, so every arrow points down. Line counts are read from the files.

    python docs/draw_architecture.py            # writes docs/img/architecture.png
    python docs/draw_architecture.py --table    # also prints the package table (markdown)
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_architecture import MODULES, PACKAGE, SRC, line_count, package_graph  # noqa: E402

#: the data flow of DESIGN.md, each stage with the module that does it
FLOW = [
    ("workload + device", ["workloads/__init__.py", "devices/__init__.py"]),
    ("sampler", ["measuring/sampler.py"]),
    ("trace table", ["schema.py"]),
    ("protocol", ["measuring/protocols/__init__.py"]),
    ("run table", ["schema.py"]),
    ("estimators", ["models/__init__.py"]),
    ("calibration file", ["io.py"]),
]
#: packages left out of the picture: the deprecated aliases of the old paths
HIDDEN = {"harness"}


def package_lines() -> dict[str, int]:
    """Lines of code per package (a top-level module counts as its own package)."""
    out: dict[str, int] = {}
    for name, (path, _) in MODULES.items():
        parts = name.split(".")
        key = parts[1] if len(parts) > 1 else PACKAGE
        out[key] = out.get(key, 0) + line_count(path)
    return out


def package_summary(name: str) -> str:
    """The first sentence of the package's (or module's) docstring."""
    module = f"{PACKAGE}.{name}" if name != PACKAGE else PACKAGE
    path, _ = MODULES[module]
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return doc.split("\n\n")[0].replace("\n", " ").split(". ")[0].rstrip(".")


def layers(graph: dict[str, set[str]]) -> dict[str, int]:
    """Longest import path below each package (0: imports no other package).

    A package-level cycle (``test_architecture.PACKAGE_CYCLES``) is cut at its back edge.
    """
    depth: dict[str, int] = {}
    visiting: set[str] = set()

    def walk(node: str) -> int:
        if node in depth:
            return depth[node]
        visiting.add(node)
        below = [walk(t) + 1 for t in graph[node] if t not in visiting]
        visiting.discard(node)
        depth[node] = max(below, default=0)
        return depth[node]

    for node in sorted(graph):
        walk(node)
    return depth


def draw(out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    graph = {p: {t for t in ts if t not in HIDDEN} for p, ts in package_graph().items() if p not in HIDDEN}
    depth = layers(graph)
    lines = package_lines()
    flow_packages = {f.split("/")[0].removesuffix(".py") for _, files in FLOW for f in files}

    fig, (ax_flow, ax_pkg) = plt.subplots(1, 2, figsize=(15, 8.5), gridspec_kw={"width_ratios": [1, 2.6]})
    for ax in (ax_flow, ax_pkg):
        ax.set_axis_off()

    # --- the data flow -------------------------------------------------------------
    ax_flow.set_xlim(0, 1)
    ax_flow.set_ylim(-0.5, len(FLOW) - 0.3)
    ax_flow.set_title("data flow (DESIGN.md ◆)", fontsize=12, loc="left")
    for i, (stage, files) in enumerate(FLOW):
        y = len(FLOW) - 1 - i
        for f in files:
            assert (SRC / PACKAGE / f).is_file(), f"{f}: the picture names a module that does not exist"
        label = " + ".join(f.replace("/__init__.py", "/") for f in files)
        ax_flow.add_patch(FancyBboxPatch((0.06, y - 0.3), 0.88, 0.6, boxstyle="round,pad=0.02",
                                         fc="#dbe9f6", ec="#2b6ca3"))
        ax_flow.text(0.5, y + 0.08, stage, ha="center", va="center", fontsize=11, weight="bold")
        ax_flow.text(0.5, y - 0.16, label, ha="center", va="center", fontsize=8.5, family="monospace")
        if i:
            ax_flow.add_patch(FancyArrowPatch((0.5, y + 0.7), (0.5, y + 0.32), arrowstyle="-|>",
                                              mutation_scale=14, color="#2b6ca3"))

    # --- the package layers --------------------------------------------------------
    by_layer: dict[int, list[str]] = {}
    for p, d in depth.items():
        by_layer.setdefault(d, []).append(p)
    top = max(by_layer)
    pos = {}
    for d, names in by_layer.items():
        names.sort(key=lambda n: (-lines.get(n, 0), n))
        for k, n in enumerate(names):
            pos[n] = ((k + 0.5) / len(names), d / max(top, 1))
    for p, targets in graph.items():
        for t in targets:
            (x0, y0), (x1, y1) = pos[p], pos[t]
            back = depth[t] >= depth[p]  # the one allowed package cycle
            ax_pkg.add_patch(FancyArrowPatch((x0, y0 - 0.025), (x1, y1 + 0.025), arrowstyle="-|>",
                                             mutation_scale=8, lw=0.7, alpha=0.8 if back else 0.25,
                                             color="#c0392b" if back else "#555555",
                                             connectionstyle="arc3,rad=0.25" if back else "arc3"))
    for n, (x, y) in pos.items():
        flow = n in flow_packages
        ax_pkg.text(x, y, f"{n}\n{lines.get(n, 0)} lines", ha="center", va="center", fontsize=8.5,
                    bbox={"boxstyle": "round,pad=0.3", "fc": "#dbe9f6" if flow else "#f2f2f2",
                          "ec": "#2b6ca3" if flow else "#888888"})
    ax_pkg.set_xlim(-0.02, 1.02)
    ax_pkg.set_ylim(-0.08, 1.08)
    ax_pkg.set_title("packages by layer: an arrow is an import (importer → imported); blue: on the data flow;"
                     "\nred: the one package-level cycle allowed (measuring ↔ meter, see tests/test_architecture.py)",
                     fontsize=10, loc="left")
    fig.suptitle("powermodels: layers and data flow, read from the imports of src/powermodels", fontsize=13)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def table() -> str:
    """The package table of docs/architecture.md: package, lines, layer, what it owns."""
    graph = {p: ts for p, ts in package_graph().items() if p not in HIDDEN}
    depth = layers({p: {t for t in ts if t not in HIDDEN} for p, ts in graph.items()})
    lines = package_lines()
    rows = ["| package | lines | layer | its job (first sentence of its docstring) |", "|---|---:|---:|---|"]
    for p in sorted(graph, key=lambda n: (-depth[n], n)):
        if p == PACKAGE:
            kind = "`__init__.py`"
        else:
            kind = f"`{p}/`" if MODULES[f"{PACKAGE}.{p}"][1] else f"`{p}.py`"
        rows.append(f"| {kind} | {lines.get(p, 0)} | {depth[p]} | {package_summary(p)} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "architecture.png")
    parser.add_argument("--table", action="store_true", help="print the package table (markdown)")
    args = parser.parse_args(argv)
    draw(args.out)
    print(f"wrote {args.out}")
    if args.table:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
