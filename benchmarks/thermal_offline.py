"""Cold, warm and hot energy per launch on recorded warm-ups, raw and at a reference temperature (issue 19).

Without a GPU: the analysis of issue 19's done-means on real H100 recordings
and on the simulated GPU, with the library's own code
(:func:`powermodels.thermal.series.series_states`: α learned from the first
≤ 10 s of each warm-up, counter-protocol windows cold / warm / hot, the 2–14 s
reference, all moved to one reference temperature).

    python benchmarks/thermal_offline.py extract --raw ../shared/data/h100-2026-11-25-raw \
        --out datasets/h100/thermal_2026-11-25
    python benchmarks/thermal_offline.py analyze --data datasets/h100/thermal_2026-11-25 \
        --series datasets/h100/thermal_2026-11-24/warmup_series.json --out docs/img

``extract`` keeps the thermal phase of the raw recording (30 s idle, then 25 s
back to back, per workload) in the project's trace-table form; ``analyze``
prints the tables (markdown) and writes ``thermal_h100.png`` (energy per launch
vs temperature, raw and normalised) and ``thermal_simulated.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from _common import save_figure

from powermodels import schema
from powermodels.reporting import markdown_table
from powermodels.thermal.alpha import pooled_alpha, regime_of
from powermodels.thermal.normalise import AlphaEstimate, assumed_alpha, normalise
from powermodels.thermal.series import series_states
from powermodels.thermal.spans import counter_spans

TRACE_FIELDS = (schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ,
                schema.TEMPERATURE_C, schema.THROTTLE_REASONS)


# -- extract ---------------------------------------------------------------------------------

def extract(raw: Path, out: Path) -> None:
    """The raw recording's thermal phase as trace + launch tables per workload (parquet)."""
    trace, launches, meta = series_tables(raw)
    out.mkdir(parents=True, exist_ok=True)
    trace.to_parquet(out / "trace.parquet", index=False)
    launches.to_parquet(out / "launches.parquet", index=False)
    prov = json.loads((raw / "provenance.json").read_text())
    (out / "series.json").write_text(json.dumps({"source": prov, "series": meta}, indent=1))
    print(f"wrote {out}: {len(meta)} warm-ups")


def series_tables(raw: Path) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """The raw recording's thermal series (trace with ``run_id`` = workload, launches, load start/end)."""
    phases = pd.read_parquet(raw / "phases.parquet")
    trace = pd.read_parquet(raw / "trace.parquet")
    energy = pd.read_parquet(raw / "energy.parquet")
    launches = pd.read_parquet(raw / "launches.parquet")
    series = phases[(phases["phase"] == "thermal") & (phases["kind"] == "series")]
    traces, lrows, meta = [], [], []
    for _, ph in series.iterrows():
        w, t0, t1 = ph["workload"], float(ph["t0_s"]), float(ph["t1_s"])
        lo = t0 - 2.0  # 2 s of the idle before: the start state
        tr = trace[(trace["t_s"] >= lo) & (trace["t_s"] <= t1)]
        # readings change on a ~100 ms grid: keep the rows where any of them changed
        values = tr[list(TRACE_FIELDS)].to_numpy(dtype=float)
        changed = np.r_[True, np.any(values[1:] != values[:-1], axis=1)]
        tr = tr.loc[changed, ["t_s", *TRACE_FIELDS]].assign(**{schema.ENERGY_COUNTER_J: np.nan})
        en = energy[(energy["t_s"] >= lo) & (energy["t_s"] <= t1)][["t_s", "energy_counter_j"]]
        both = pd.concat([tr, en.rename(columns={"energy_counter_j": schema.ENERGY_COUNTER_J})],
                         ignore_index=True).sort_values("t_s", kind="stable")
        both = both.loc[~both["t_s"].duplicated()].ffill()
        # the energy counter only on its own reads (NaN elsewhere), as the project's sampler records it
        both[schema.ENERGY_COUNTER_J] = both[schema.ENERGY_COUNTER_J].where(both["t_s"].isin(en["t_s"]))
        both.insert(0, schema.RUN_ID, w)
        traces.append(both)
        la = launches[(launches["phase"] == "thermal") & (launches["workload"] == w)]
        lrows.append(pd.DataFrame({schema.WORKLOAD: w, schema.START_S: la["start_s"].to_numpy(),
                                   schema.END_S: la["end_s"].to_numpy(),
                                   schema.LAUNCHES: la["launches"].to_numpy()}))
        meta.append({"workload": w, "load_start_s": t0, "load_end_s": t1})
    return pd.concat(traces, ignore_index=True), pd.concat(lrows, ignore_index=True), meta


# -- analyze ---------------------------------------------------------------------------------

def per_launch(launches: pd.DataFrame) -> np.ndarray:
    """Intervals of single launches (a batch of k counts as k equal launches)."""
    k = int(launches[schema.LAUNCHES].iloc[0])
    iv = launches[[schema.START_S, schema.END_S]].to_numpy(dtype=float)
    if k > 1:
        edges = iv[:, :1] + (iv[:, 1:] - iv[:, :1]) * np.arange(k + 1)[None, :] / k
        iv = np.column_stack([edges[:, :-1].ravel(), edges[:, 1:].ravel()])
    return iv


def analyze_recording(data: Path) -> tuple[pd.DataFrame, dict, dict]:
    """series_states per warm-up of an extracted recording: α learned from its first 10 s, and pooled."""
    trace = pd.read_parquet(data / "trace.parquet")
    launches = pd.read_parquet(data / "launches.parquet")
    series = json.loads((data / "series.json").read_text())
    meta = series["series"]
    # a capped window is settled at the board's enforced limit (the recording's provenance)
    limit = series.get("source", {}).get("power_limit_w")
    own, tables, inputs = {}, [], {}
    for m in meta:
        w = m["workload"]
        tr = trace[trace[schema.RUN_ID] == w]
        iv = per_launch(launches[launches[schema.WORKLOAD] == w])
        inputs[w] = (tr, iv, m["load_start_s"])
        table, own[w] = series_states(tr, iv, load_start_s=m["load_start_s"], power_limit_w=limit)
        if own[w] is None:
            print(f"{w}: α not identified from its first 10 s", file=sys.stderr)
        tables.append(table.assign(**{schema.WORKLOAD: w, "alpha": "own 10 s"}))
    fixed = [a for a in own.values() if a is not None and a.regime == "fixed_clock"]
    board = pooled_alpha(fixed, float(np.median([a.sm_clock_mhz for a in fixed]))) if fixed else None
    for w, (tr, iv, start) in inputs.items():
        if own[w] is not None and own[w].regime != "fixed_clock":
            continue  # the pool is of fixed-clock α: capped work keeps its own
        first = tables[[t[schema.WORKLOAD].iloc[0] for t in tables].index(w)]
        clock = float(first[schema.SM_CLOCK_MHZ].iloc[0]) if schema.SM_CLOCK_MHZ in first else math.nan
        alpha, how = (board, "board pool") if board is not None and abs(clock - board.sm_clock_mhz) <= 30 else \
            (None, "")
        if own[w] is None and alpha is None:  # as alpha_for: nothing learned or pooled at this clock
            power = float(first.loc[first[schema.THERMAL_STATE] == "reference", schema.POWER_W].iloc[0])
            regime = regime_of(counter_spans(tr, iv, start_s=start + 0.5, end_s=start + 10.0))
            alpha, how = assumed_alpha(power, regime), "assumed"
        if alpha is None:
            continue
        t_ref = own[w].reference_temperature_c if own[w] is not None else round(float(first[schema.TEMPERATURE_C].mean()))
        table, _ = series_states(tr, iv, load_start_s=start, alpha=alpha, reference_temperature_c=t_ref,
                                 power_limit_w=limit)
        if own[w] is None:  # the row the protocol would write: replace the un-normalised one
            tables = [t for t in tables if t[schema.WORKLOAD].iloc[0] != w]
        tables.append(table.assign(**{schema.WORKLOAD: w, "alpha": how}))
    return pd.concat(tables, ignore_index=True), own, {"board": board}


def _spread(values) -> float:
    v = np.asarray(values, dtype=float)
    return float((v.max() - v.min()) / v.mean()) if v.size else math.nan


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per workload and α: raw and normalised spread of cold/warm/hot, worst gap to the reference."""
    rows = []
    for (w, how), g in table.groupby([schema.WORKLOAD, "alpha"], sort=False):
        states = g[g[schema.THERMAL_STATE] != "reference"]
        ref = g[g[schema.THERMAL_STATE] == "reference"].iloc[0]
        rows.append({
            "workload": w, "alpha": how,
            "alpha %/°C": 100 * ref[schema.CORRECTION_ALPHA_W_PER_C] / ref[schema.POWER_W],
            "± %/°C": 100 * ref[schema.ALPHA_UNCERTAINTY_W_PER_C] / ref[schema.POWER_W],
            "T cold/warm/hot °C": "/".join(f"{t:.0f}" for t in states[schema.TEMPERATURE_C]),
            "T_ref °C": ref[schema.REFERENCE_TEMPERATURE_C],
            "raw spread %": 100 * _spread(states[schema.ENERGY_J]),
            "at-ref spread %": 100 * _spread(states[schema.ENERGY_AT_REF_J]),
            "worst vs ref (at ref) %": 100 * float(np.max(np.abs(states[schema.ENERGY_AT_REF_J].to_numpy()
                                                                 / ref[schema.ENERGY_AT_REF_J] - 1))),
            "transient": bool(states[schema.TRANSIENT].any()),
        })
    return pd.DataFrame(rows)


def alpha_from_cumulative(s: pd.DataFrame, *, skip_s: float = 0.0, capped: bool = False) -> AlphaEstimate:
    """α from a series read every ~0.26 s (counter, launches so far, temperature).

    The counter is exact but each read shows its last update (0–100 ms old), so
    energy between two reads is ±30 % noisy; its cumulative value is not: fit
    ``e = c + E0·n + β·Σ(T − T̄)·Δn`` (joules against launches and their
    temperature-weighted count), β the energy per launch per °C; α = β / t.
    """
    s = s[s["t"] >= s["t"].iloc[0] + skip_s]
    e = s["e"].to_numpy(float) / 1e3
    n = s["n"].to_numpy(float) - s["n"].iloc[0]
    temp = s["temp"].to_numpy(float)
    dn = np.diff(n, prepend=n[0])
    k = np.cumsum((temp - temp.mean()) * dn)
    X = np.column_stack([np.ones_like(n), n, k])
    coef, *_ = np.linalg.lstsq(X, e - e[0], rcond=None)
    resid = e - e[0] - X @ coef
    cov = np.linalg.inv(X.T @ X) * float(resid @ resid) / max(len(e) - 3, 1)
    t_launch = float((s["t"].iloc[-1] - s["t"].iloc[0]) / n[-1])
    beta, se = float(coef[2]), float(math.sqrt(cov[2, 2]))
    power = float(coef[1]) / t_launch
    return AlphaEstimate(beta / t_launch, se / t_launch, "learned", regime="power_capped" if capped else "fixed_clock",
                         power_w=power, temperature_min_c=float(temp.min()), temperature_max_c=float(temp.max()),
                         spans=len(e), reference_temperature_c=float(round(0.5 * (temp.min() + temp.max()))),
                         detail=f"cumulative fit over {temp.min():.0f}–{temp.max():.0f} °C")


def series_json_rows(path: Path) -> pd.DataFrame:
    """The 2026-11-24 warm-up series: α from its 20 s series, its real protocol rows normalised."""
    d = json.loads(path.read_text())
    rows = []
    for w in d["workloads"]:
        if "series" not in w:
            continue
        s = pd.DataFrame(w["series"])
        capped = bool((s["reasons"].astype(int) & 0x4).any())
        # under the cap: after the controller's first 2 s (issue 19: 1.200 / 1.216 J then 1.163 J)
        alpha = alpha_from_cumulative(s, skip_s=2.0 if capped else 0.0, capped=capped)
        t_ref = alpha.reference_temperature_c
        for state in ("cold", "warm"):
            for r in w[state]:
                m = normalise(energy_j=r["energy_j"], power_w=r["power_w"], time_s=r["time_s"],
                              temperature_c=r["temp"], alpha=alpha, reference_temperature_c=t_ref)
                rows.append({schema.WORKLOAD: w["name"], schema.THERMAL_STATE: state,
                             schema.TEMPERATURE_C: r["temp"], schema.ENERGY_J: r["energy_j"], **m,
                             "alpha %/°C": 100 * alpha.relative_per_c,
                             "± %/°C": 100 * alpha.uncertainty_w_per_c / alpha.power_w})
    return pd.DataFrame(rows)


def plot(table: pd.DataFrame, path: Path, title: str) -> None:
    """Energy per launch vs temperature per workload: raw (grey) and at T_ref (blue), % of the reference."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(table[schema.WORKLOAD]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(3.6 * len(workloads), 3.5), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        g = table[table[schema.WORKLOAD] == w]
        g = g[g["alpha"] == g["alpha"].iloc[0]]  # the α the protocol would use
        ref = g[g[schema.THERMAL_STATE] == "reference"].iloc[0]
        base = float(ref[schema.ENERGY_AT_REF_J])
        for state, marker in (("cold", "o"), ("warm", "s"), ("hot", "^"), ("reference", "*")):
            r = g[g[schema.THERMAL_STATE] == state]
            ax.plot(r[schema.TEMPERATURE_C], 100 * (r[schema.ENERGY_J] / base - 1), marker, color="0.6",
                    ms=8, label=f"{state}, raw")
            ax.errorbar(r[schema.TEMPERATURE_C], 100 * (r[schema.ENERGY_AT_REF_J] / base - 1),
                        yerr=100 * r[schema.ENERGY_AT_REF_UNCERTAINTY_J] / base, fmt=marker, color="C0", ms=8,
                        label=f"{state}, at T_ref")
        ax.axhspan(-1, 1, color="C2", alpha=0.12)
        ax.set_title(f"{w}\nα {g['alpha'].iloc[0]} {100 * ref[schema.CORRECTION_ALPHA_W_PER_C] / ref[schema.POWER_W]:.2f}"
                     f" %/°C, T_ref {ref[schema.REFERENCE_TEMPERATURE_C]:.0f} °C", fontsize=8)
        ax.set_xlabel("die temperature (°C)")
    axes[0][0].set_ylabel("energy per launch − reference at T_ref (%)")
    axes[0][-1].legend(fontsize=6, loc="best")
    fig.suptitle(title, fontsize=9)
    save_figure(fig, path)


def plot_rows(rows: pd.DataFrame, path: Path, title: str) -> None:
    """The 2026-11-24 protocol rows: energy per launch vs temperature, raw and at T_ref."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(rows[schema.WORKLOAD]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 3.4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        g = rows[rows[schema.WORKLOAD] == w]
        for state, marker in (("cold", "o"), ("warm", "s")):
            r = g[g[schema.THERMAL_STATE] == state]
            ax.plot(r[schema.TEMPERATURE_C], r[schema.ENERGY_J], marker, color="0.6", label=f"{state}, raw")
            ax.errorbar(r[schema.TEMPERATURE_C], r[schema.ENERGY_AT_REF_J], yerr=r[schema.ENERGY_AT_REF_UNCERTAINTY_J],
                        fmt=marker, color="C0", label=f"{state}, at {g[schema.REFERENCE_TEMPERATURE_C].iloc[0]:.0f} °C")
        ax.set_title(f"{w} (α {g['alpha %/°C'].iloc[0]:.2f} ± {g['± %/°C'].iloc[0]:.2f} %/°C)", fontsize=8)
        ax.set_xlabel("die temperature (°C)")
        ax.set_ylabel("energy per launch (J)")
        ax.legend(fontsize=6)
    fig.suptitle(title, fontsize=9)
    save_figure(fig, path)


def simulated_table(seconds: float = 25.0) -> pd.DataFrame:
    """The same analysis on simulated warm-ups (idle 30 s, then ``seconds`` back to back)."""
    from powermodels.measuring.graphs import run_launches
    from powermodels.measuring.runner import make_runner

    tables = []
    for w in ("sgemm", "stream_triad"):
        with make_runner("simulated") as runner:
            runner.idle(30.0)
            t1 = runner.launch_time_s(w)
            iv = run_launches(runner, w, None, int(seconds / t1))
            trace = runner.trace(iv[0, 0] - 1.0, iv[-1, 1], run_id=w)
            table, _ = series_states(trace, iv, load_start_s=float(iv[0, 0]))
            tables.append(table.assign(**{schema.WORKLOAD: w, "alpha": "own 10 s"}))
    return pd.concat(tables, ignore_index=True)


def analyze(data: Path, series: Path | None, out: Path) -> None:
    table, own, pooled = analyze_recording(data)
    pd.set_option("display.width", 200)
    print("## Real H100 (raw recording 2026-11-25, thermal phase): α learned per workload\n")
    for w, a in own.items():
        print(f"- {w}: " + (a.detail if a is not None else "not identified"))
    if pooled["board"] is not None:
        print(f"- board pool: {pooled['board'].alpha_w_per_c:.3f} ± {pooled['board'].uncertainty_w_per_c:.3f} W/°C "
              f"({pooled['board'].detail})")
    print()
    print(markdown_table(summary(table), ".2f"))
    cols = [schema.WORKLOAD, "alpha", schema.THERMAL_STATE, schema.LOAD_S, schema.TEMPERATURE_C, schema.ENERGY_J,
            schema.ENERGY_AT_REF_J, schema.ENERGY_AT_REF_UNCERTAINTY_J, schema.SETTLE_S, schema.TRANSIENT]
    print()
    print(markdown_table(table[cols], ".4f"))
    plot(table, out / "thermal_h100.png", "real H100 (2026-11-25 raw recording): cold / warm / hot, raw (grey) "
         "and at T_ref (blue), α from the first 10 s")
    if series is not None:
        rows = series_json_rows(series)
        print("\n## Real H100 (2026-11-24): the project's own default-protocol rows, α from the 20 s series\n")
        cols = [schema.WORKLOAD, schema.THERMAL_STATE, schema.TEMPERATURE_C, schema.ENERGY_J, schema.ENERGY_AT_REF_J,
                schema.ENERGY_AT_REF_UNCERTAINTY_J, schema.REFERENCE_TEMPERATURE_C, "alpha %/°C", "± %/°C",
                schema.ALPHA_REGIME]
        print(markdown_table(rows[cols], ".4f"))
        plot_rows(rows, out / "thermal_h100_rows.png", "real H100 (2026-11-24): default-protocol rows, raw (grey) "
                  "and at T_ref (blue), α from the 20 s series")
        for w, g in rows.groupby(schema.WORKLOAD, sort=False):
            print(f"\n{w}: raw spread {100 * _spread(g[schema.ENERGY_J]):.2f} %, at "
                  f"{g[schema.REFERENCE_TEMPERATURE_C].iloc[0]:.0f} °C {100 * _spread(g[schema.ENERGY_AT_REF_J]):.2f} %")
    sim = simulated_table()
    print("\n## Simulated GPU (default physics), same analysis\n")
    print(markdown_table(summary(sim), ".2f"))
    plot(sim, out / "thermal_simulated.png", "simulated GPU: cold / warm / hot, raw (grey) and at T_ref (blue)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("extract", help="the raw recording's thermal phase into a dataset folder")
    e.add_argument("--raw", type=Path, required=True)
    e.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("analyze", help="tables and plots of cold / warm / hot")
    a.add_argument("--data", type=Path, required=True)
    a.add_argument("--series", type=Path)
    a.add_argument("--out", type=Path, default=Path("docs/img"))
    args = p.parse_args(argv)
    if args.cmd == "extract":
        extract(args.raw, args.out)
    else:
        analyze(args.data, args.series, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
