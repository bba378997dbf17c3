"""Per-workload held-out error of the Wattchmen table on each GPU, from ``analyze``'s JSON files.

``benchmarks/gpu_wattchmen_transfer.py analyze`` writes, beside its report, what it chose by
leave-one-microbenchmark-out CV and each held-out workload's error
(``benchmarks/results/wattchmen_transfer_<dataset>.json``). This draws them side by side: one
bar per table and workload, and the ±10 % target band. ``LABEL=PATH`` takes the table analyze
reports first (the toggling-operand one where there is a choice); ``LABEL=PATH@1`` the next (the
fixed-operand comparison).

Usage::

    PYTHONPATH=src python benchmarks/plot_wattchmen_heldout.py \\
        "H100 1cd80a2b=benchmarks/results/wattchmen_transfer_h100_wattchmen.json" \\
        "H200=benchmarks/results/wattchmen_transfer_datasets_h200.json" \\
        --out docs/img/wattchmen_heldout.png
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def load(spec: str) -> tuple[str, dict]:
    """``LABEL=PATH[@INDEX]`` → (label, that table of the JSON; 0: the one analyze reports first)."""
    label, _, path = spec.partition("=")
    path, _, index = path.partition("@")
    if not path:
        raise SystemExit(f"{spec!r}: give LABEL=PATH or LABEL=PATH@INDEX")
    tables = json.loads(Path(path).read_text())["tables"]
    return label, tables[int(index or 0)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("tables", nargs="+", help="LABEL=PATH of an analyze JSON")
    p.add_argument("--out", default="docs/img/wattchmen_heldout.png")
    args = p.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    runs = [load(s) for s in args.tables]
    names = list(runs[0][1]["per_workload_error_pct"])
    for _, t in runs[1:]:
        names += [n for n in t["per_workload_error_pct"] if n not in names]
    width = 0.8 / len(runs)
    fig, ax = plt.subplots(figsize=(14, 5.2))
    x = np.arange(len(names))
    for k, (label, t) in enumerate(runs):
        err = [t["per_workload_error_pct"].get(n, np.nan) for n in names]
        ax.bar(x + (k - (len(runs) - 1) / 2) * width, err, width,
               label=f"{label}: held-out {t['heldout_mape_pct']:.1f} % (CV {t['cv_mape_pct']:.1f} %)")
    ax.axhspan(-10, 10, color="0.9", zorder=0)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(x, names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("energy error % (predicted vs measured)")
    ax.set_title("Wattchmen table, settings chosen by leave-one-microbenchmark-out CV: held-out workloads")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
