"""Vectorised smoothing filters vs FilterPy on 10^6 samples (thesis §4.3).

Runs every filter on two layouts of the same number of samples — a trace
matrix of 1000 runs × 1000 time points, and one long row of 10^6 points —
next to the reference implementation, and reports the speed ratio and the
largest absolute difference of the outputs:

- GHFilter vs ``filterpy.gh.GHFilter.batch_filter`` (one call per row);
- KalmanFilter1D vs a ``filterpy.kalman.KalmanFilter`` predict/update loop;
- MovingAverage vs pandas ``rolling(window, center=True, min_periods=1).mean()``
  on the transposed matrix (FilterPy has no moving average; pandas is itself
  vectorised C, so this ratio is not the FilterPy one).

Usage::

    python benchmarks/bench_filters.py            # writes benchmarks/results/filters.md
    python benchmarks/bench_filters.py --quick    # 10^5 samples, for a smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd
from filterpy.gh import GHFilter as FPGHFilter
from filterpy.kalman import KalmanFilter as FPKalmanFilter

from powermodels.models.smoothing import GHFilter, KalmanFilter1D, MovingAverage, kalman_gains
from powermodels.reporting import markdown_table

RESULTS = Path(__file__).resolve().parent / "results" / "filters.md"


def traces(rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """Noisy power traces: a level per row, 10 % noise, a load step half-way."""
    rng = np.random.default_rng(seed)
    Z = rng.uniform(80, 350, (rows, 1)) * (1 + 0.1 * rng.standard_normal((rows, cols)))
    Z[:, cols // 2:] += 50.0
    return np.clip(Z, 0, None)


def best_time(fn, repeats: int) -> tuple[float, np.ndarray]:
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def filterpy_gh(Z, g, h):
    return np.array([FPGHFilter(x=z[0], dx=0.0, dt=1.0, g=g, h=h).batch_filter(z)[1:, 0]
                     for z in Z])


def filterpy_kalman(Z, Q, R, P0):
    out = np.empty_like(Z)
    for r, z in enumerate(Z):
        kf = FPKalmanFilter(dim_x=1, dim_z=1)
        kf.x = np.array([[z[0]]])
        kf.F = np.eye(1)
        kf.H = np.eye(1)
        kf.P *= P0
        kf.Q *= Q
        kf.R *= R
        row = out[r]
        for i, zi in enumerate(z):
            kf.predict()
            kf.update(zi)
            row[i] = kf.x[0, 0]
    return out


def pandas_rolling(Z, window):
    return pd.DataFrame(Z.T).rolling(window, center=True, min_periods=1).mean().to_numpy().T


def table_of(rows) -> pd.DataFrame:
    """The result rows as display strings, one column per table column."""
    return pd.DataFrame(
        [(layout, f"`{ours_name}`", f"{t_ours * 1e3:.1f}", ref_name, f"{t_ref:.2f}", f"{ratio:,.0f}×", f"{diff:.1e}")
         for layout, ours_name, ref_name, t_ours, t_ref, ratio, diff in rows],
        columns=["layout", "ours", "time (ms)", "reference", "time (s)", "speed-up", "max abs diff"],
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10^5 samples instead of 10^6")
    parser.add_argument("--repeats", type=int, default=5, help="best of N for our filters")
    args = parser.parse_args(argv)
    side = 316 if args.quick else 1000
    layouts = {f"{side} runs × {side} points": (side, side),
               f"1 run × {side * side} points": (1, side * side)}

    cases = [
        ("GHFilter(g=0.2, h=0.02)", "filterpy GHFilter.batch_filter",
         lambda Z: GHFilter(g=0.2, h=0.02).fit_transform(Z), lambda Z: filterpy_gh(Z, 0.2, 0.02)),
        ("KalmanFilter1D(Q=0.01, R=1, P0=1)", "filterpy KalmanFilter loop",
         lambda Z: KalmanFilter1D(Q=0.01, R=1.0, P0=1.0).fit_transform(Z),
         lambda Z: filterpy_kalman(Z, 0.01, 1.0, 1.0)),
        ("KalmanFilter1D(Q=0, R=1, P0=1)", "filterpy KalmanFilter loop",
         lambda Z: KalmanFilter1D(Q=0.0, R=1.0, P0=1.0).fit_transform(Z),
         lambda Z: filterpy_kalman(Z, 0.0, 1.0, 1.0)),
        ("MovingAverage(window=9)", "pandas rolling(9, center=True)",
         lambda Z: MovingAverage(window=9).fit_transform(Z), lambda Z: pandas_rolling(Z, 9)),
    ]
    rows = []
    for layout, shape in layouts.items():
        Z = traces(*shape)
        for ours_name, ref_name, ours, ref in cases:
            t_ours, out = best_time(lambda ours=ours, Z=Z: ours(Z), args.repeats)
            t_ref, expected = best_time(lambda ref=ref, Z=Z: ref(Z), 1)
            diff = float(np.abs(out - expected).max())
            rows.append((layout, ours_name, ref_name, t_ours, t_ref, t_ref / t_ours, diff))
            print(f"{layout:24s} {ours_name:36s} {t_ours * 1e3:9.1f} ms  {ref_name:32s} "
                  f"{t_ref:8.2f} s  ×{t_ref / t_ours:8.0f}  max|Δ| {diff:.1e}", flush=True)

    gains, _ = kalman_gains(side * side, 0.01, 1.0, 1.0)
    lines = [
        "# Smoothing filters: vectorised vs reference",
        "",
        f"Produced by `python benchmarks/bench_filters.py{' --quick' if args.quick else ''}` on "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, NumPy {np.__version__}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        f"Ours: best of {args.repeats}; reference: one run. Traces: 10 % noise around "
        "80–350 W with a +50 W step half-way. max |Δ| in W.",
        f"KalmanFilter1D(Q=0.01) reaches its steady gain after {gains.size} steps "
        "(blocked scan before, lfilter after); Q=0 never does (blocked scan throughout).",
        "",
        markdown_table(table_of(rows), align="llrlrrr"),
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
