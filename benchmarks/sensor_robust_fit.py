"""Instant-window fit on short cuts of the real H200 square waves: old single-start fit vs now.

Cuts every square-wave run of the H200 recordings in ``datasets/h200`` (H8's
``sensor_*``, the harness's square waves, and the ``powermodels characterize``
runs of 4 s and 9 s) to its first L s of load (idle before kept) or its last L s
of load plus the idle after, L ∈ {0.2, 1.0, 1.5, …, 3.5} s, and fits the instant
field's boxcar window:

* *before*: the fit as it was (``BoxcarWindow`` with windows ≤ 1.5 s, delays
  0–200 ms, one delay for all runs, Nelder-Mead from the single best grid point:
  ``n_starts=1``);
* *now*: :func:`powermodels.sensor.report.characterize_traces` with its defaults
  (windows ≤ 2 update periods, delays within half an update period, each run's
  delay free within ± a tenth of the update period, 4 starts), with the
  window's identifiability interval (``BoxcarWindow.window_interval_s_``) and
  whether it is wide enough for ``characterize`` to warn.

Writes ``benchmarks/results/sensor_robust_fit_<gpu>.md``.

Usage::

    python benchmarks/sensor_robust_fit.py [--data datasets/h200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.sensor.report import attach_loads, characterize_traces
from powermodels.sensor.window import BoxcarWindow

REPO = Path(__file__).resolve().parents[1]
LOADS_S = (0.2, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5)
RANGE_S = (0.020, 0.035)


def recordings(data: Path):
    """``{name: (square, step)}`` for H8's sensor_* traces and the harness's square waves."""
    out = {"sensor_square": (pd.read_parquet(data / "sensor_square.parquet"),
                             pd.read_parquet(data / "sensor_step.parquet"))}
    traces = pd.read_parquet(data / "harness_square_wave_traces.parquet")
    loads = pd.read_parquet(data / "harness_square_wave_loads.parquet")
    traces = attach_loads(traces, loads)
    is_step = traces[schema.RUN_ID] == "step_3s"
    out["harness_square_wave"] = (traces[~is_step], traces[is_step])
    for s in ("4s", "9s"):
        if (data / f"characterize_cli_{s}_square.parquet").exists():
            out[f"characterize_cli_{s}"] = (pd.read_parquet(data / f"characterize_cli_{s}_square.parquet"),
                                            pd.read_parquet(data / f"characterize_cli_{s}_step.parquet"))
    return out


def cut(square: pd.DataFrame, load_s: float | None, keep: str) -> pd.DataFrame:
    """Every run cut to ``load_s`` of load, from its start (``head``) or its end (``tail``)."""
    if load_s is None:
        return square
    runs = []
    for _, g in square.groupby(schema.RUN_ID, sort=False):
        t = g[schema.T_S].to_numpy()
        on = t[g[schema.LOAD_ACTIVITY].to_numpy() > 0]
        runs.append(g[t <= on[0] + load_s] if keep == "head" else g[t >= on[-1] - load_s])
    return pd.concat(runs, ignore_index=True)


def before(square: pd.DataFrame):
    try:
        w = BoxcarWindow(n_starts=1).fit(square)
    except ValueError:
        return float("nan"), float("nan")
    return w.window_s_, w.delay_s_


def now(square: pd.DataFrame, step: pd.DataFrame):
    result = characterize_traces(square, step, fields=(schema.POWER_INSTANT_W,))
    row = result.row(schema.POWER_INSTANT_W)
    return (row[schema.WINDOW_S], row[schema.DELAY_S], row[schema.UPDATE_PERIOD_S],
            row[schema.WINDOW_LO_S], row[schema.WINDOW_HI_S], bool(result.warnings()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(REPO / "datasets" / "h200"))
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args(argv)
    data = Path(args.data)
    rows = []
    for name, (square, step) in recordings(data).items():
        for keep, load_s in [("head", None)] + [(k, s) for k in ("head", "tail") for s in LOADS_S]:
            sq = cut(square, load_s, keep)
            wb, db = before(sq)
            wn, dn, up, lo, hi, wide = now(sq, step)
            rows.append({"traces": name, "cut": "full" if load_s is None else f"{keep} {load_s:g} s",
                         "before_window_ms": wb * 1e3, "before_delay_ms": db * 1e3,
                         "now_window_ms": wn * 1e3, "now_delay_ms": dn * 1e3, "update_ms": up * 1e3,
                         "lo_ms": lo * 1e3, "hi_ms": hi * 1e3, "wide": wide})
            print(rows[-1], file=sys.stderr)
    table = pd.DataFrame(rows)

    def outside(col, unwarned=False):
        w = table[col].to_numpy() / 1e3
        out = ~((w >= RANGE_S[0]) & (w <= RANGE_S[1]))
        return int(np.sum(out & ~table.wide.to_numpy(dtype=bool) if unwarned else out))

    lines = [f"# Instant window on short cuts of the real {data.name.upper()} square waves", "",
             "| traces | cut | before: window [ms] | before: delay [ms] | now: window [ms] "
             "| now: delay [ms] | update period [ms] | now: interval [ms] | warns |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        lines.append(f"| {r.traces} | {r.cut} | {r.before_window_ms:.2f} | {r.before_delay_ms:.2f} "
                     f"| {r.now_window_ms:.2f} | {r.now_delay_ms:.2f} | {r.update_ms:.2f} "
                     f"| {r.lo_ms:.1f}–{r.hi_ms:.1f} | {'yes' if r.wide else 'no'} |")
    lines += ["", f"Outside {RANGE_S[0] * 1e3:.0f}–{RANGE_S[1] * 1e3:.0f} ms (NaN = nothing left after "
                  f"the discard): before {outside('before_window_ms')} of {len(table)}, "
                  f"now {outside('now_window_ms')} of {len(table)}, {outside('now_window_ms', True)} of "
                  "them without a warning. Interval: windows whose profile loss is within "
                  "max(10 %, F-test 95 %) + 0.002 of the best; 'warns': `characterize` prints a warning "
                  "(hi/lo > 2, sampled fraction open by > 0.5, or the interval reaching an end of the "
                  f"search range): {int(table.wide.sum())} of {len(table)}.",
              "", f"Command: `python benchmarks/sensor_robust_fit.py {' '.join(argv or sys.argv[1:])}`."]
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"sensor_robust_fit_{data.name}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
