"""InstructionEnergyModel.fit at scale: time and peak memory vs rows (issue 16).

Synthetic instruction tables (rows × opcodes, Poisson counts, known energies,
1 % noise). For each size, medians of ``--repeats`` runs of:

- ``InstructionEnergyModel.fit`` (column-scaled ridge NNLS + identifiability
  from a thin SVD of the QR factor: memory linear in the rows);
- ``scipy.optimize.nnls`` alone on the same matrix (what a user would call
  without the model: no scaling, no identifiability, no extension tables);
- the full SVD the model used before (``np.linalg.svd(full_matrices=True)``,
  a rows × rows ``U``), for the identifiability step only; skipped above
  ``--full-svd-max`` rows.

Peak memory is traced with ``tracemalloc`` (NumPy reports its buffers to it).

Usage::

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_instruction_fit.py [--rows 1000,10000,30000]
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd
from _common import write_report
from scipy.optimize import nnls

from powermodels.models import InstructionEnergyModel
from powermodels.reporting import markdown_table

OUT = Path(__file__).parent / "results" / "instruction_fit.md"


def measure(fn, repeats: int) -> tuple[float, float]:
    """Median seconds and peak traced MiB of ``fn()`` over ``repeats`` calls."""
    times, peaks = [], []
    for _ in range(repeats):
        tracemalloc.start()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        peaks.append(tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return float(np.median(times)), float(np.median(peaks))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="1000,10000,30000")
    ap.add_argument("--opcodes", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--full-svd-max", type=int, default=10000)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    for n in (int(v) for v in args.rows.split(",")):
        X = rng.poisson(5.0, (n, args.opcodes)).astype(float) * 1e6
        e = rng.uniform(1e-10, 1e-9, args.opcodes)
        y = X @ e * (1 + 0.01 * rng.standard_normal(n))
        model = InstructionEnergyModel(min_share=0.0)  # 300 opcodes: each ≈ 0.3 % of a row
        t_fit, m_fit = measure(lambda: model.fit(X, y), args.repeats)  # noqa: B023
        err = float(np.median(np.abs(model.energies_.to_numpy() - e) / e) * 100)
        t_nnls, m_nnls = measure(lambda: nnls(X, y), args.repeats)  # noqa: B023
        if n <= args.full_svd_max:
            As = X / np.linalg.norm(X, axis=0)
            t_svd, m_svd = measure(lambda: np.linalg.svd(As, full_matrices=True), 1)  # noqa: B023
            svd = (f"{t_svd:.2f}", f"{m_svd:.0f}")
        else:
            svd = ("not run", f"~{8 * n * n / 2**20:.0f} (U alone)")
        rows.append([f"{n:,} × {args.opcodes}", f"{t_fit:.2f}", f"{m_fit:.0f}", f"{err:.2f}",
                     f"{t_nnls:.2f}", f"{m_nnls:.0f}", *svd])
        print(rows[-1], flush=True)
    text = ("# InstructionEnergyModel.fit at scale\n\n"
            f"Synthetic tables, Poisson counts, 1 % noise; medians of {args.repeats} "
            "(full SVD: one run). Memory: peak traced by tracemalloc. "
            f"{os.cpu_count()} CPU cores, OPENBLAS_NUM_THREADS="
            f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}.\n\n"
            + markdown_table(pd.DataFrame(rows, columns=[
                "rows × opcodes", "fit s", "fit peak MiB", "median energy error %",
                "scipy nnls s", "nnls peak MiB", "old full SVD s", "full SVD peak MiB"])) + "\n")
    return write_report(text, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
