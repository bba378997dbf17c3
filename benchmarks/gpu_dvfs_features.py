"""DSO features on a real GPU: static PTX (Table II) and ncu runtime utilisation (Table I).

Thin caller of :func:`powermodels.workflows.dvfs_features.collect_dvfs_features`
(``powermodels dvfs-features`` is the user's command) with the H200 dataset's
workloads: registry kernels, the Wattchmen microbenchmarks and the first
held-out set. Writes ``ptx_features.csv``, ``runtime_features.csv``,
``ncu_raw.csv``, ``plan.json`` and ``meta.json`` to ``--out``.

Usage (the lead runs it on the lent GPU)::

    PYTHONPATH=src python3 benchmarks/gpu_dvfs_features.py collect --out $OUT
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    from _readonly_nvml import forbid_nvml_setters

    forbid_nvml_setters()

from powermodels.workflows.dvfs_features import (  # noqa: E402
    DEFAULT_WORKLOADS,
    collect_dvfs_features,
)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="both feature sets into --out")
    c.add_argument("--out", required=True)
    c.add_argument("--ncu", default="ncu")
    c.add_argument("--timeout", type=int, default=480)
    args = ap.parse_args(argv)
    collect_dvfs_features(args.out, DEFAULT_WORKLOADS, ncu=args.ncu, timeout=args.timeout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
