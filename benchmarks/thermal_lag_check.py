"""Does NVML's lagging temperature explain the at-ref misses of issue 19? (offline, real H100 data)

Hypothesis (session 5): NVML's temperature (whole °C, a lagging sensor) trails the die temperature
that drives leakage, so energy per launch against the *reported* temperature is not one line between
a fast warm-up and a steady hot state, and α from a ≤ 10 s cold warm-up under-corrects.

Two tests, no GPU:

1. **Continuous series** (25–30 s of back-to-back load from idle, full-rate traces; three boards:
   GPU-620707cb ``datasets/h100-2026-11-25-session5/raw_recording_620707cb``, GPU-0b4f1a7f
   ``…/natural_dvfs/recording``, GPU-14ab84a0 ``datasets/h100/thermal_2026-11-25``): energy per
   200 ms counter span against the reading shifted by a lag τ (the die at t ≈ the reading at t + τ),
   τ = 0 … 3 s. Per τ: the residual sd of one line over the whole load, and the error at 20–25 s of
   the line fitted on 0.5–10 s (what the warm-up learns vs the hot state). A real lag would give one
   τ > 0 that lowers both on every board and workload.
2. **The gpu_thermal rows** (session 4 GPU-a2b20798 ×2 runs, session 5 GPU-0b4f1a7f and
   GPU-2db598e1; no traces): the present method (:func:`powermodels.thermal.heldout.rescore_rows`
   with each run's cached fits) with the row temperature taken as the window's mean reading (as
   now), its last reading, or their mean — the lag proxies the rows allow.

    PYTHONPATH=src python benchmarks/thermal_lag_check.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from powermodels import schema  # noqa: E402
from powermodels.reporting import markdown_table  # noqa: E402
from powermodels.thermal.heldout import STATES, cached_fits, rescore_rows, state_figures  # noqa: E402
from powermodels.thermal.spans import counter_spans  # noqa: E402
from thermal_offline import per_launch, series_tables  # noqa: E402

SERIES = {"620707cb": "h100-2026-11-25-session5/raw_recording_620707cb",
          "0b4f1a7f": "h100-2026-11-25-session5/natural_dvfs/recording",
          "14ab84a0": "h100/thermal_2026-11-25"}
RUNS = {"a2b20798 (s4 run 1)": "h100-2026-11-25-session4/thermal",
        "a2b20798 (s4 run 2)": "h100-2026-11-25-session4/thermal_repeat",
        "0b4f1a7f (s5)": "h100-2026-11-25-session5/thermal_0b4f1a7f",
        "2db598e1 (s5)": "h100-2026-11-25-session5/thermal_2db598e1"}
LAGS_S = (0.0, 0.5, 1.0, 2.0, 3.0)


def _series(datasets: Path, rel: str):
    folder = datasets / rel
    if (folder / "phases.parquet").is_file():
        return series_tables(folder)
    import json

    return (pd.read_parquet(folder / "trace.parquet"), pd.read_parquet(folder / "launches.parquet"),
            json.loads((folder / "series.json").read_text())["series"])


def _reading_at(trace: pd.DataFrame, t: np.ndarray) -> np.ndarray:
    """The temperature reading in force at each instant of ``t`` (readings hold until the next)."""
    tt = trace[schema.T_S].to_numpy(dtype=float)
    v = trace[schema.TEMPERATURE_C].to_numpy(dtype=float)
    ok = np.isfinite(v)
    tt, v = tt[ok], v[ok]
    return v[np.clip(np.searchsorted(tt, t, side="right") - 1, 0, v.size - 1)]


def series_lag_table(datasets: Path) -> pd.DataFrame:
    out = []
    for board, rel in SERIES.items():
        trace, launches, meta = _series(datasets, rel)
        for m in meta:
            w = m["workload"]
            if "bf16" in w:
                continue  # capped: its own regime
            tr = trace[trace[schema.RUN_ID] == w]
            s0 = float(m["load_start_s"])
            sp = counter_spans(tr, per_launch(launches[launches[schema.WORKLOAD] == w]), start_s=s0 + 0.5)
            lo, hi = sp[schema.START_S].to_numpy(dtype=float), sp[schema.END_S].to_numpy(dtype=float)
            e = sp[schema.ENERGY_J].to_numpy(dtype=float)
            row = {"board": board, "workload": w.split("[")[0]}
            for tau in LAGS_S:
                temp = np.array([_reading_at(tr, np.linspace(a + tau, b + tau, 9)).mean() for a, b in zip(lo, hi)])
                ok = hi + tau <= s0 + 25.0
                line = np.polyfit(temp[ok], e[ok], 1)
                sd = 100 * np.std(e[ok] - np.polyval(line, temp[ok])) / e.mean()
                early, late = ok & (hi - s0 <= 10.0), ok & (lo - s0 >= 20.0)
                warm_up = np.polyfit(temp[early], e[early], 1)
                err = 100 * np.mean(e[late] - np.polyval(warm_up, temp[late])) / np.mean(e[late])
                row[f"τ {tau:g} s: sd % / 20–25 s err %"] = f"{sd:.2f} / {err:+.2f}"
            out.append(row)
    return pd.DataFrame(out)


def row_variant_table(datasets: Path) -> pd.DataFrame:
    out = []
    for run, rel in RUNS.items():
        folder = datasets / rel
        rows = pd.read_csv(folder / "thermal_rows.csv")
        rows = rows[rows[schema.THERMAL_STATE].isin((*STATES, "reference"))]
        rows = rows.assign(t_mean_end=0.5 * (rows[schema.TEMPERATURE_C] + rows[schema.TEMPERATURE_END_C]))
        fits = cached_fits(folder / "alpha_cache.json")
        variants = {}
        for name, column in (("window mean (present)", schema.TEMPERATURE_C), ("last reading", schema.TEMPERATURE_END_C),
                             ("(mean + last)/2", "t_mean_end")):
            new, _ = rescore_rows(rows, fits=fits, temperature_column=column)
            variants[name] = new
        for w in dict.fromkeys(rows[schema.WORKLOAD]):
            g = rows[rows[schema.WORKLOAD] == w]
            if g[schema.ALPHA_REGIME].iloc[0] != "fixed_clock":
                continue
            row = {"run (board)": run, "workload": w}
            for name, new in variants.items():
                f = state_figures(new[new[schema.WORKLOAD] == w])
                met = f["spread_pct"] <= 1.0 and abs(f["worst_vs_ref_pct"]) <= 2.0
                row[f"{name}: spread / vs ref %"] = f"{f['spread_pct']:.2f} / {f['worst_vs_ref_pct']:+.2f} {'✓' if met else '✗'}"
            out.append(row)
    return pd.DataFrame(out)


def main() -> int:
    datasets = REPO / "datasets"
    print(markdown_table(series_lag_table(datasets)))
    print()
    rows = row_variant_table(datasets)
    print(markdown_table(rows))
    print()
    for column in rows.columns[2:]:
        print(f"{column.split(':')[0]}: {int(rows[column].str.endswith('✓').sum())} of {len(rows)} rows meet both targets")
    return 0


if __name__ == "__main__":
    sys.exit(main())
