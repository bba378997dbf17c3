"""Wattchmen on a lent GPU: measure, profile, fit, predict held-out workloads (thin caller).

The workflow is :mod:`powermodels.instruction_energy.calibration` (``powermodels
calibrate-instructions`` is the user's command); this script keeps the dataset's
file names and prints the comparison tables of ``benchmarks/results/wattchmen*.md``.

``measure``  (GPU) steady-state power of every microbenchmark and of the
    held-out workloads (:mod:`powermodels.microbench.validation_workloads`), then
    both ncu passes (``--clock-control none``) and the instruction tables
    (``wattchmen_microbench.parquet``, ``wattchmen_workloads.parquet``).
    ``--set fresh``: the second held-out set plus NANOSLEEP for this run's
    static power, written to ``wattchmen_fresh_workloads.parquet``.
``analyze``  (anywhere) fits :class:`~powermodels.models.InstructionEnergyModel`
    on the microbenchmarks, predicts the held-out workloads, prints direct
    and extended MAPE, coverage and two breakdowns next to Wattchmen's H100
    numbers (16 % direct / 12 % extended, Table 7).
``rebuild``  (anywhere) the tables from the raw files of a dataset folder.

Usage::

    PYTHONPATH=src python3 benchmarks/gpu_wattchmen.py measure --out $OUT
    PYTHONPATH=src python benchmarks/gpu_wattchmen.py analyze --data datasets/h200
    PYTHONPATH=src python3 benchmarks/gpu_wattchmen.py measure --set fresh --out $OUT
    PYTHONPATH=src python benchmarks/gpu_wattchmen.py rebuild --set fresh --data datasets/h200
    PYTHONPATH=src python benchmarks/gpu_wattchmen.py analyze --set fresh --data datasets/h200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    from _readonly_nvml import forbid_nvml_setters

    forbid_nvml_setters()

from powermodels import schema  # noqa: E402
from powermodels.microbench.validation_workloads import WORKLOAD_SETS  # noqa: E402
from powermodels.models.instruction import InstructionEnergyModel  # noqa: E402
from powermodels.instruction_energy.calibration import (  # noqa: E402
    evaluate_instruction_model,
    measure_and_profile,
    prediction_table,
)
from powermodels.instruction_energy.tables import rebuild_tables  # noqa: E402

# Microbenchmarks measured with a set (the fresh set needs only this run's static power).
SET_MICRO = {"heldout": None, "fresh": ["nanosleep"]}
FRESH_TABLE = "wattchmen_fresh_workloads.parquet"
BREAKDOWN = {"heldout": "cublas_sgemm_4096,stream_triad_64M",
             "fresh": "batched_sgemm_64x1024,gather_scatter_64M"}


def cmd_measure(args) -> int:
    """Energy phase, both ncu passes and the tables, in one call (the workflow's steps 1-3)."""
    from powermodels.microbench.catalog import MICROBENCHMARKS
    from powermodels.microbench.gpu import CupyNcuBackend
    from powermodels.instruction_energy.calibration import logged

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = [s for s in args.only.split(",") if s]
    micro = [n for n in (SET_MICRO[args.set] or MICROBENCHMARKS) if not only or n in only]
    with logged(out, print) as say:
        _, mtab, wtab = measure_and_profile(CupyNcuBackend(), out, micro, [args.set],
                                            resume=args.resume, say=say)
        if args.set == "fresh":
            wtab.to_parquet(out / FRESH_TABLE)
        else:
            mtab.to_parquet(out / "wattchmen_microbench.parquet")
            wtab.to_parquet(out / "wattchmen_workloads.parquet")
        say(f"tables: {mtab.shape} microbenchmarks, {wtab.shape} workloads")
    return 0


WATTCHMEN_H100 = {"direct_mape_pct": 16.0, "extended_mape_pct": 12.0,
                  "direct_coverage_pct": 66.0, "extended_coverage_pct": 92.0}


def cmd_analyze(args) -> int:
    data = Path(args.data)
    fresh = args.set == "fresh"
    micro = prediction_table(pd.read_parquet(data / "wattchmen_microbench.parquet"))
    wl = prediction_table(pd.read_parquet(data / (FRESH_TABLE if fresh else "wattchmen_workloads.parquet")))
    y = wl[schema.ENERGY_J].to_numpy()
    lines = []
    if fresh:
        lines.append(f"fresh held-out set ({len(wl)} workloads measured after the model was frozen; "
                     "default settings, no change after seeing these errors)\n")
    per, ev = evaluate_instruction_model(micro, wl)
    results = {label: {"model": ev[f"{label}_model"], "pred": per[f"{label}_j"].to_numpy(),
                       "ape": per[f"{label}_ape_pct"].to_numpy(),
                       "cov": per[f"{label}_coverage"].to_numpy()} for label in ("direct", "extended")}
    m = results["extended"]["model"]
    lines.append(f"fit on {len(micro)} microbenchmarks: {len(m.energies_)} opcode features, "
                 f"rank {m.rank_}, relative residual {m.relative_residual_:.3f}, "
                 f"static+constant power {m.static_power_w_:.1f} W\n")
    lines.append("| workload | measured J | direct J | APE % | extended J | APE % | coverage direct % | coverage extended % |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for i, name in enumerate(wl[schema.WORKLOAD]):
        d, e = results["direct"], results["extended"]
        lines.append(f"| {name} | {y[i]:.4g} | {d['pred'][i]:.4g} | {d['ape'][i]:.1f} | "
                     f"{e['pred'][i]:.4g} | {e['ape'][i]:.1f} | {100 * d['cov'][i]:.0f} | "
                     f"{100 * e['cov'][i]:.0f} |")
    summary = {
        "direct_mape_pct": float(results["direct"]["ape"].mean()),
        "extended_mape_pct": float(results["extended"]["ape"].mean()),
        "direct_coverage_pct": float(100 * results["direct"]["cov"].mean()),
        "extended_coverage_pct": float(100 * results["extended"]["cov"].mean()),
    }
    keys = (("direct_mape_pct", "direct MAPE %"), ("extended_mape_pct", "extended MAPE %"),
            ("direct_coverage_pct", "direct coverage %"),
            ("extended_coverage_pct", "extended coverage %"))
    first = REPO / "benchmarks" / "results" / "wattchmen.json"
    if fresh and first.exists():
        tuned = json.loads(first.read_text())
        lines.append("\n| | fresh set (unbiased) | first held-out set (settings tuned on it) "
                     "| Wattchmen H100 (Table 7, §5.2.3) |")
        lines.append("|---|---|---|---|")
        for key, label in keys:
            lines.append(f"| {label} | {summary[key]:.1f} | {tuned[key]:.1f} "
                         f"| {WATTCHMEN_H100[key]:.0f} |")
    else:
        lines.append("\n| | ours (this GPU) | Wattchmen H100 (Table 7, §5.2.3) |")
        lines.append("|---|---|---|")
        for key, label in keys:
            lines.append(f"| {label} | {summary[key]:.1f} | {WATTCHMEN_H100[key]:.0f} |")
    if fresh:
        # The table's static power is this run's NANOSLEEP power (as in the first set);
        # without it the model falls back to the training run's value.
        alt = []
        for ext in ("none", "bucket"):
            p = InstructionEnergyModel(extension=ext).fit(micro).predict(
                wl.drop(columns=[schema.STATIC_POWER_W]))
            alt.append(float(np.mean(np.abs(p - y) / y) * 100))
        summary["direct_mape_training_static_pct"] = alt[0]
        summary["extended_mape_training_static_pct"] = alt[1]
        lines.append(f"\nstatic power: this run's NANOSLEEP {wl[schema.STATIC_POWER_W].iloc[0]:.1f} W "
                     f"(idle {wl[schema.IDLE_POWER_W].iloc[0]:.1f} W); with the training run's "
                     f"{m.static_power_w_:.1f} W instead: direct {alt[0]:.1f} %, extended {alt[1]:.1f} %")
    # leave-one-out over the microbenchmarks themselves (no held-out workload involved)
    loo = []
    for i in range(0 if fresh else len(micro)):
        rest = micro.drop(index=i)
        pred_i = InstructionEnergyModel().fit(rest).predict(micro.iloc[[i]])[0]
        loo.append(abs(pred_i - micro[schema.ENERGY_J].iloc[i]) / micro[schema.ENERGY_J].iloc[i])
    if not fresh:
        loo = np.array(loo) * 100
        worst = micro[schema.WORKLOAD].iloc[np.argsort(loo)[::-1][:5]].tolist()
        lines.append(f"\nleave-one-out over the {len(micro)} microbenchmarks (extended model): "
                     f"MAPE {loo.mean():.1f} %, median {np.median(loo):.1f} %, worst {worst}")
        summary["microbench_loo_mape_pct"] = float(loo.mean())
    else:
        lines.append("\nfor information only (computed after the figures above, used to choose "
                     "nothing): the other settings on the fresh set")
    # sensitivity: the same data under other model settings (MAPE over the held-out workloads)
    lines.append("\n| model settings | direct MAPE % | extended MAPE % |")
    lines.append("|---|---|---|")
    variants = [("default", {}), ("no memory-level split", {"memory_levels": False}),
                ("no sector traffic", {"memory_traffic": False}),
                ("plain NNLS (alpha=0)", {"alpha": 0.0}), ("min_share=0.01", {"min_share": 0.01}),
                ("bvls solver", {"solver": "bvls"})]
    for label, params in variants:
        mape = []
        for ext in ("none", "bucket"):
            p = InstructionEnergyModel(extension=ext, **params).fit(micro).predict(wl)
            mape.append(float(np.mean(np.abs(p - y) / y) * 100))
        lines.append(f"| {label} | {mape[0]:.1f} | {mape[1]:.1f} |")
    for name in (args.breakdown or BREAKDOWN[args.set]).split(","):
        if name not in set(wl[schema.WORKLOAD]):
            continue
        row = wl[wl[schema.WORKLOAD] == name]
        bd = m.breakdown(row)
        comp = bd.groupby(schema.COMPONENT)[schema.ENERGY_J].sum().sort_values(ascending=False)
        lines.append(f"\nbreakdown of {name} (measured {row[schema.ENERGY_J].iloc[0]:.4g} J):\n")
        lines.append("| component | J | % |")
        lines.append("|---|---|---|")
        for k, v in comp.items():
            lines.append(f"| {k} | {v:.4g} | {100 * v / comp.sum():.1f} |")
        top = bd.sort_values(schema.ENERGY_J, ascending=False).head(8)
        lines.append("\n| opcode | count | J/instr | J | source |")
        lines.append("|---|---|---|---|---|")
        for _, r in top.iterrows():
            lines.append(f"| {r[schema.OPCODE]} | {r[schema.INSTRUCTION_COUNT]:.3g} "
                         f"| {r[schema.ENERGY_PER_INSTRUCTION_J]:.3g} | {r[schema.ENERGY_J]:.4g} "
                         f"| {r[schema.ENERGY_SOURCE]} |")
    text = "\n".join(lines)
    print(text)
    out = REPO / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stem = "wattchmen_fresh" if fresh else "wattchmen"
    (out / f"{stem}.md").write_text(text + "\n")
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def cmd_rebuild(args) -> int:
    """Rebuild the instruction tables from the raw files kept in the dataset folder."""
    data = Path(args.data)
    if args.set == "fresh":
        _, table = rebuild_tables(data / "wattchmen_fresh_measure.json",
                                  data / "ncu_fresh_raw.csv.gz", data / "ncu_fresh_sectors.csv.gz")
        table.to_parquet(data / FRESH_TABLE)
        print(f"rebuilt {table.shape} fresh workload table in {data}")
        return 0
    sectors = data / "ncu_sectors.csv.gz"
    micro, wtab = rebuild_tables(data / "wattchmen_measure.json", data / "ncu_raw.csv.gz",
                                 sectors if sectors.exists() else None)
    micro.to_parquet(data / "wattchmen_microbench.parquet")
    wtab.to_parquet(data / "wattchmen_workloads.parquet")
    print(f"rebuilt {micro.shape} microbenchmark and {wtab.shape} workload tables in {data}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", default=os.environ.get("OUT", "wattchmen_out"))
    m.add_argument("--only", default="", help="comma-separated subset of microbenchmarks")
    m.add_argument("--resume", action="store_true", help="keep the items of --out/measure.json")
    m.add_argument("--set", choices=sorted(WORKLOAD_SETS), default="heldout",
                   help="workload set; 'fresh' writes " + FRESH_TABLE)
    a = sub.add_parser("analyze")
    a.add_argument("--data", default=str(REPO / "datasets" / "h200"))
    a.add_argument("--breakdown", default="", help="comma-separated workloads "
                   "(default: two per set, see BREAKDOWN)")
    a.add_argument("--set", choices=sorted(WORKLOAD_SETS), default="heldout")
    r = sub.add_parser("rebuild")
    r.add_argument("--data", default=str(REPO / "datasets" / "h200"))
    r.add_argument("--set", choices=sorted(WORKLOAD_SETS), default="heldout")
    args = p.parse_args(argv)
    return {"measure": cmd_measure, "analyze": cmd_analyze, "rebuild": cmd_rebuild}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
