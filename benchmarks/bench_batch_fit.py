"""Batched fitting vs a loop of scipy.optimize.curve_fit (thesis eq. 4.1 and 4.5).

Synthetic auto-tuning search space: N configs × K locked clocks, each config
with its own power curve (eq. 4.1, knee + slope V(f)) and time curve (eq. 4.5),
1 % measurement noise. Fits every config's frequency→power and frequency→time
model

- ``batch``: ``fit_frequency_power_batch`` + ``fit_rational_time_batch``
  (grid start + one vectorised Levenberg–Marquardt over all configs);
- ``grouped``: the same through ``GroupedEstimator`` (adds building one
  fitted estimator object per config);
- ``curve_fit loop``: ``scipy.optimize.curve_fit`` (bounded, trf) per config,
  from the usual hand-made starting values.

and compares speed and the fitted curves (relative difference of the fitted
curves at the measured clocks; SSE of ours vs curve_fit's).

Usage::

    python benchmarks/bench_batch_fit.py [--configs 10000] [--clocks 20] [--loop-configs N] [--repeats 3]

``--loop-configs`` times the curve_fit loop on the first N configs only and
extrapolates linearly (the default runs all of them). Every method runs
``--repeats`` times, interleaved (batch, grouped, loop, batch, ...), after
one untimed warm-up of the batch path; the table gives each one's median
CPU time (``time.process_time``: on a shared machine wall time mostly
measures the other processes).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import write_report
from scipy.optimize import OptimizeWarning, curve_fit

from powermodels import schema
from powermodels.models.frequency import FrequencyPowerModel, fit_frequency_power_batch
from powermodels.models.grouped import GroupedEstimator
from powermodels.models.runtime import RationalTimeModel, fit_rational_time_batch
from powermodels.models.voltage import relative_voltage
from powermodels.reporting import markdown_table

OUT = Path(__file__).parent / "results" / "batch_fit.md"


def power_fn(f, p0, a, knee, slope):
    return p0 + a * f * relative_voltage(f, knee, slope) ** 2


def time_fn(f, a, b, c, d):
    return a / (1 + b * f) + c / (1 + d * f)


def make_data(n_configs, n_clocks, seed=0):
    rng = np.random.default_rng(seed)
    f = np.linspace(705.0, 1995.0, n_clocks)
    F = np.tile(f, (n_configs, 1))
    p_true = np.column_stack([rng.uniform(30, 90, n_configs), rng.uniform(0.03, 0.15, n_configs),
                              rng.uniform(1000, 1700, n_configs), rng.uniform(0.1, 0.9, n_configs)])
    P = power_fn(F, *(p_true[:, i : i + 1] for i in range(4)))
    P *= 1 + rng.normal(0, 0.01, P.shape)
    # time: compute part ~ β/f (b large) + a memory/latency part falling slowly with f
    t_true = np.column_stack([rng.uniform(1e-3, 5e-2, n_configs), rng.uniform(2e-3, 2e-2, n_configs),
                              rng.uniform(1e-4, 2e-2, n_configs), rng.uniform(0, 2e-4, n_configs)])
    T = time_fn(F, *(t_true[:, i : i + 1] for i in range(4)))
    T *= 1 + rng.normal(0, 0.01, T.shape)
    return F, P, T


def loop_curve_fit(F, P, T):
    pw, tm, fails = [], [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", OptimizeWarning)
        for f, p, t in zip(F, P, T, strict=True):
            lo, hi = f.min(), f.max()
            try:
                par, _ = curve_fit(power_fn, f, p, p0=[p.min() / 2, p.max() / hi / 2, (lo + hi) / 2, 0.5],
                                   bounds=([0, 0, lo, 0], [np.inf, np.inf, hi, 5.0]))
            except (RuntimeError, ValueError):
                par, fails = np.full(4, np.nan), fails + 1
            pw.append(par)
            try:
                par, _ = curve_fit(time_fn, f, t, p0=[t.max(), 1e-3, t.min(), 1e-4],
                                   bounds=(0, np.inf), maxfev=10000)
            except (RuntimeError, ValueError):
                par, fails = np.full(4, np.nan), fails + 1
            tm.append(par)
    return np.array(pw), np.array(tm), fails


def agreement_table(rows) -> pd.DataFrame:
    """Agreement rows ``(model, median, q99, better, worse, rmse)`` as display strings."""
    return pd.DataFrame(
        [(name, f"{med:.2e}", f"{q99:.2e}", f"{better:.1%}", f"{worse:.2%}", f"{rmse:.2%}")
         for name, med, q99, better, worse, rmse in rows],
        columns=["model", "median max rel. diff", "99th pct max rel. diff", "ours SSE ≤ curve_fit SSE (+0.1 %)",
                 "ours SSE > curve_fit SSE (+1 %)", "median RMSE / mean (ours)"],
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=10_000)
    ap.add_argument("--clocks", type=int, default=20)
    ap.add_argument("--loop-configs", type=int, default=None, help="curve_fit loop on the first N configs")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs of every method (medians compared)")
    args = ap.parse_args(argv)
    F, P, T = make_data(args.configs, args.clocks)
    groups = np.repeat(np.arange(args.configs), args.clocks)

    n_loop = args.loop_configs or args.configs
    X = F.reshape(-1, 1)

    def batch():
        return (fit_frequency_power_batch(F.ravel(), P.ravel(), groups),
                fit_rational_time_batch(F.ravel(), T.ravel(), groups))

    def grouped():
        GroupedEstimator(FrequencyPowerModel()).fit(X, P.ravel(), groups=groups)
        GroupedEstimator(RationalTimeModel()).fit(X, T.ravel(), groups=groups)

    def loop():
        return loop_curve_fit(F[:n_loop], P[:n_loop], T[:n_loop])

    fit_frequency_power_batch(F[:50].ravel(), P[:50].ravel(), groups[: 50 * args.clocks])  # warm-up
    times = {"batch": [], "grouped": [], "loop": []}
    for _ in range(args.repeats):  # interleaved, so machine load hits every method alike
        for name, fn in (("batch", batch), ("grouped", grouped), ("loop", loop)):
            t0 = time.process_time()  # CPU time: the machine may be shared (see the report)
            out = fn()
            times[name].append(time.process_time() - t0)
            if name == "batch":
                bp, bt = out
            elif name == "loop":
                cp, ct, fails = out
    t_batch = float(np.median(times["batch"]))
    t_grouped = float(np.median(times["grouped"]))
    t_loop = float(np.median(times["loop"])) * args.configs / n_loop

    sl = slice(0, n_loop)
    power_cols = (schema.FIT_P_STATIC_W, schema.FIT_A_W_PER_MHZ, schema.FIT_KNEE_MHZ, schema.FIT_SLOPE_PER_GHZ)
    time_cols = (schema.FIT_TIME_A, schema.FIT_TIME_B_PER_MHZ, schema.FIT_TIME_C, schema.FIT_TIME_D_PER_MHZ)
    ours_p = power_fn(F[sl], *(bp[c].to_numpy()[sl, None] for c in power_cols))
    ours_t = time_fn(F[sl], *(bt[c].to_numpy()[sl, None] for c in time_cols))
    cf_p = power_fn(F[sl], *(cp[:, i : i + 1] for i in range(4)))
    cf_t = time_fn(F[sl], *(ct[:, i : i + 1] for i in range(4)))
    rows = []
    for name, ours, cf, y in (("power (eq. 4.1)", ours_p, cf_p, P[sl]), ("time (eq. 4.5)", ours_t, cf_t, T[sl])):
        ok = np.isfinite(cf).all(axis=1)
        rel = np.abs(ours[ok] / cf[ok] - 1).max(axis=1)
        sse_o = ((ours - y) ** 2).sum(axis=1)
        sse_c = np.where(ok, ((cf - y) ** 2).sum(axis=1), np.inf)
        rows.append((name, float(np.median(rel)), float(np.quantile(rel, 0.99)),
                     float(np.mean(sse_o <= sse_c * 1.001)), float(np.mean(sse_o > sse_c * 1.01)),
                     float(np.median(np.sqrt(sse_o / args.clocks) / y.mean(axis=1)))))

    lines = [
        f"# Batch fit vs curve_fit loop — {args.configs} configs × {args.clocks} clocks",
        "",
        "Command: `python benchmarks/bench_batch_fit.py" + (f" --loop-configs {n_loop}" if args.loop_configs else "")
        + (f" --repeats {args.repeats}" if args.repeats != 3 else "")
        + f"` (synthetic data, 1 % noise; CPU only). Every method: median CPU time (this process, all "
        f"threads) of {args.repeats} interleaved runs, after one untimed warm-up of the batch code; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| method | CPU time (s) | speed-up vs loop |",
        "|---|---:|---:|",
        f"| batch (`fit_frequency_power_batch` + `fit_rational_time_batch`) | {t_batch:.2f} | {t_loop / t_batch:.0f}× |",
        f"| `GroupedEstimator` fast path (builds {2 * args.configs} estimators) | {t_grouped:.2f} | {t_loop / t_grouped:.0f}× |",
        f"| loop of `scipy.optimize.curve_fit`{f' (extrapolated from {n_loop} configs)' if n_loop < args.configs else ''} | {t_loop:.1f} | 1× |",
        "",
        f"curve_fit failures (RuntimeError, no fit): {fails} of {2 * n_loop} fits.",
        "",
        "Agreement of the fitted curves at the measured clocks (configs where curve_fit converged):",
        "",
        markdown_table(agreement_table(rows), align="lrrrrr"),
    ]
    return write_report("\n".join(lines) + "\n", OUT)


if __name__ == "__main__":
    raise SystemExit(main())
