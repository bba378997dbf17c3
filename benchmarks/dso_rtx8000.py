"""DSO's own setting on a second GPU: train on 138 microbenchmarks, test on 20 real applications.

Data: ../shared/data/nv-dvfs-benchmark-rtx8000 (the DSO authors' RTX 8000
measurements). The power limit and clocks come from the data's own
``rtx8000-dvfs.cfg``; everything else from the sweep. Through the library
workflow (``powermodels.workflows.dvfs_predictor``):

1. the regressor (DSO's MLP, gradient boosting, extra trees, random forest,
   ridge on log features), the feature set (DCGM + PTX, DCGM only, each with
   and without the profiling run's power over the power limit,
   ``schema.FEAT_POWER_OF_LIMIT``) and the target (DSO's parameter shares, or
   the measured curves that eq. 1-2 are fitted to, ``models.dvfs_curves``)
   are chosen by cross-validation over the six microbenchmark applications —
   the 20 test applications are not looked at — for time (eq. 2) and power
   (eq. 1) separately;
2. the chosen predictor is refitted on all trusted microbenchmarks and
   applied to the applications' profiling runs (their highest clock);
3. reported beside it: the fitted floor (each application's own eq. 1-2
   fit) and the measured energy saved at the clocks the models pick.

Usage: python benchmarks/dso_rtx8000.py [--data DIR] [--seeds 3]
Writes benchmarks/results/dso_rtx8000.md.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import write_report

from powermodels import schema
from powermodels.microbench.profiling import read_nv_dvfs_benchmark
from powermodels.models.dvfs_curves import TARGET_KINDS
from powermodels.models.dvfs_optimizer import eta_for_slowdown
from powermodels.models.dvfs_regimes import DVFSRegimeWarning
from powermodels.models.dvfs_selection import CANDIDATES
from powermodels.models.dvfs_targets import kernel_parameters
from powermodels.workflows.dvfs_predictor import (
    best_per_quantity,
    combine_models,
    evaluate_models,
    fitted_models,
    predict_models,
    profiles_of,
    read_nv_dvfs_config,
    train_dvfs_predictor,
    with_power_feature,
)

HERE = Path(__file__).resolve().parent
DEFAULT_DATA = HERE.parent.parent / "shared" / "data" / "nv-dvfs-benchmark-rtx8000"
MAX_SLOWDOWN = 0.05


def feature_sets(table: pd.DataFrame) -> dict[str, list[str]]:
    runtime = [c for c in schema.RUNTIME_FEATURES if c in table.columns]
    ptx = [c for c in table.columns if c.startswith((schema.PTX_INSTRUCTION_PREFIX,
                                                     schema.PTX_TYPE_PREFIX, schema.PTX_SPACE_PREFIX))]
    power = [schema.FEAT_POWER_OF_LIMIT] if schema.FEAT_POWER_OF_LIMIT in table.columns else []
    return {"DCGM + PTX (DSO)": runtime + ptx, "DCGM only": runtime,
            "DCGM + power": runtime + power, "DCGM + PTX + power": runtime + ptx + power}


def energy_outcome(runs, models, p_max_w):
    """Measured saving, slowdown and applications over the limit at the clock the model picks.

    Per application the largest η with predicted slowdown ≤ 5 %; returns the mean measured
    saving and slowdown against the highest clock (percent) and how many applications'
    measured slowdown exceeds 5 %.
    """
    sav, slow = [], []
    for k, prm in models.items():
        g = runs[runs[schema.KERNEL] == k].set_index(schema.SM_CLOCK_MHZ)
        clocks = np.unique(runs[[schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]].to_numpy(), axis=0)
        c = eta_for_slowdown(prm, clocks, max_slowdown=MAX_SLOWDOWN, p_max_w=p_max_w)
        ref, got = g.loc[g.index.max()], g.loc[c.sm_clock_mhz]
        sav.append(1 - got[schema.ENERGY_J] / ref[schema.ENERGY_J])
        slow.append(got[schema.TIME_S] / ref[schema.TIME_S] - 1)
    slow = np.asarray(slow)
    return 100 * np.mean(sav), 100 * np.mean(slow), int((slow > MAX_SLOWDOWN + 1e-9).sum())


def oracle_saving(runs) -> float:
    """Mean measured saving at each application's best measured clock with measured slowdown ≤ 5 %."""
    out = []
    for _, g in runs.groupby(schema.KERNEL):
        g = g.groupby(schema.SM_CLOCK_MHZ)[[schema.TIME_S, schema.ENERGY_J]].mean()
        ref = g.loc[g.index.max()]
        ok = g[g[schema.TIME_S] <= ref[schema.TIME_S] * (1 + MAX_SLOWDOWN)]
        out.append(1 - ok[schema.ENERGY_J].min() / ref[schema.ENERGY_J])
    return 100 * float(np.mean(out))


def plot_heldout(real, per_app, floor, models, cv_scores, path: Path) -> None:
    """Per-application held-out MAPE (predicted vs fitted floor) and the worst time curves."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    apps = list(per_app.index)
    names = [a.split(":")[0] for a in apps]
    fig = plt.figure(figsize=(13, 8.5))
    grid = fig.add_gridspec(2, 4, height_ratios=[1.2, 1])
    x = np.arange(len(apps))
    for row, (col, label, cv) in enumerate((("time_mape", "time", cv_scores[0]),
                                            ("power_mape", "power", cv_scores[1]))):
        ax = fig.add_subplot(grid[0, 2 * row:2 * row + 2])
        ax.bar(x - 0.2, per_app[col], 0.4, label=f"predicted, seed 0 (mean {per_app[col].mean():.2f} %)")
        ax.bar(x + 0.2, floor.loc[apps, col], 0.4, color="0.7",
               label=f"own eq. 1-2 fit (floor, {floor[col].mean():.2f} %)")
        ax.axhline(5, color="k", lw=0.8, ls=":", label="target 5 %")
        ax.axhline(cv, color="C3", lw=0.8, ls="--", label=f"CV on microbenchmarks {cv:.2f} %")
        ax.set_xticks(x, names, rotation=70, fontsize=7)
        ax.set_ylabel(f"{label} MAPE over 10 clocks, %")
        ax.set_title(f"held-out {label}: 20 real applications", fontsize=10)
        ax.legend(fontsize=7)
    worst = per_app["time_mape"].sort_values(ascending=False).index[:4]
    for j, k in enumerate(worst):
        ax = fig.add_subplot(grid[1, j])
        g = real[real[schema.KERNEL] == k].sort_values(schema.SM_CLOCK_MHZ)
        fc, fm = g[schema.SM_CLOCK_MHZ].to_numpy(), g[schema.MEM_CLOCK_MHZ].to_numpy()
        t_ref = g[schema.TIME_S].iloc[-1]
        ax.plot(fc, g[schema.TIME_S] / t_ref, "o", label="measured")
        ax.plot(fc, models[k].time(fc, fm) / t_ref, "-", label="predicted")
        ax.set_title(f"{k.split(':')[0]}: time {per_app.loc[k, 'time_mape']:.1f} %", fontsize=9)
        ax.set_xlabel("core clock, MHz")
        if j == 0:
            ax.set_ylabel("time / time at 1710 MHz")
            ax.legend(fontsize=7)
    fig.suptitle("DSO predictor on the real RTX 8000 (DSO authors' data): trained on 138 "
                 "microbenchmarks, tested on 20 applications", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def compute_share(runs) -> pd.Series:
    """Per kernel, the least-squares share c of time that scales as 1/f_c: T/T_ref = 1 + c·(f_ref/f − 1)."""
    out = {}
    for k, g in runs.groupby(schema.KERNEL):
        g = g.groupby(schema.SM_CLOCK_MHZ)[schema.TIME_S].mean()
        x = g.index.max() / g.index.to_numpy() - 1
        out[k] = float(x @ (g.to_numpy() / g.loc[g.index.max()] - 1) / (x @ x))
    return pd.Series(out)


def plot_coverage(micro, real, path: Path) -> None:
    """Where the applications lie against the microbenchmarks: compute share vs DRAM activity."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 5))
    for runs, marker, label in ((micro, "o", None), (real, "x", "real application")):
        c = compute_share(runs)
        top = runs[runs[schema.SM_CLOCK_MHZ] == runs[schema.SM_CLOCK_MHZ].max()]
        dram = top.groupby(schema.KERNEL)[schema.FEAT_DRAM_ACTIVE].mean().loc[c.index]
        if label is None:
            apps = np.array([k.split(":")[0] for k in c.index])
            for app in np.unique(apps):
                ax.scatter(dram[apps == app], c[apps == app], s=14, label=f"microbenchmark {app}")
        else:
            ax.scatter(dram, c, marker=marker, c="k", s=40, label=label)
            for k in c.index:
                ax.annotate(k.split(":")[0], (dram[k], c[k]), fontsize=7, xytext=(3, 2),
                            textcoords="offset points")
    ax.set_xlabel("DRAM active at 1710 MHz (DCGM)")
    ax.set_ylabel("compute share c: T/T_ref = 1 + c·(1710/f − 1)")
    ax.set_title("RTX 8000: which time curves the microbenchmarks cover", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "dso_rtx8000.md")
    ap.add_argument("--feature-sets", nargs="+", default=None,
                    help="cross-validate only these feature sets (names as in the report)")
    ap.add_argument("--targets", nargs="+", default=list(TARGET_KINDS), choices=TARGET_KINDS,
                    help="cross-validate only these targets (shares: DSO's; curve: models.dvfs_curves)")
    ap.add_argument("--candidates", nargs="+", default=list(CANDIDATES), choices=CANDIDATES,
                    help="cross-validate only these regressors")
    ap.add_argument("--cv-out", type=Path, default=None,
                    help="write the cross-validation rows (CSV) and stop before the test")
    ap.add_argument("--cv-from", type=Path, nargs="+", default=(),
                    help="cross-validation rows of an earlier run of this script (CSV, --cv-out); "
                         "their (targets, feature set, candidate) rows are not cross-validated again")
    ap.add_argument("--reuse-only", action="store_true",
                    help="cross-validate nothing: choose among the --cv-from rows only (the report "
                         "lists the combinations no run cross-validated)")
    ap.add_argument("--plot", type=Path, default=None,
                    help="draw the held-out per-application errors and the worst time curves (PNG)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    meta = read_nv_dvfs_config(args.data / "rtx8000-dvfs.cfg")
    # the profiling run's power over the board's limit (from the cfg) is one more candidate feature
    micro = with_power_feature(read_nv_dvfs_benchmark(args.data / "rtx8000-dvfs-microbenchmark.csv"),
                               meta["p_max_w"])
    real = with_power_feature(read_nv_dvfs_benchmark(args.data / "rtx8000-dvfs-real.csv"), meta["p_max_w"])
    cols = [c for c in micro.columns if c in real.columns]
    micro, real = micro[cols], real[cols]
    seeds = tuple(range(args.seeds))

    # 1. model selection on the microbenchmarks only
    sets = feature_sets(micro)
    unknown = [n for n in (args.feature_sets or []) if n not in sets]
    if unknown:
        raise ValueError(f"--feature-sets: {unknown[0]!r} is not one of {list(sets)}")
    # rows written before the curve targets existed are DSO's shares
    reused = [pd.read_csv(f).assign(targets=lambda d: d.get("targets", "shares"),
                                    seeds=lambda d: d.get("seeds", np.nan)) for f in args.cv_from]
    cv_rows = [r for df in reused for r in df.to_dict("records")]
    done = {(r["targets"], r["features"], r["candidate"]) for r in cv_rows}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DVFSRegimeWarning)
        for targets in args.targets:
            for name, fcols in sets.items():
                if args.feature_sets is not None and name not in args.feature_sets:
                    continue
                todo = tuple(c for c in args.candidates if (targets, name, c) not in done)
                if not todo or args.reuse_only:
                    continue
                print(f"cross-validating {targets}: {name}: {', '.join(todo)}", flush=True)
                tr = train_dvfs_predictor(micro, fcols, seeds=seeds, candidates=todo, targets=targets,
                                          progress=lambda m: print(m, flush=True))
                cv_rows += [{"features": name, **r, "seeds": len(seeds)} for r in tr.cv.to_dict("records")]
    cv = pd.DataFrame(cv_rows).sort_values("cv_mape", ignore_index=True)
    cv["setting"] = cv["targets"] + ": " + cv["features"]
    if args.cv_out is not None:
        cv.to_csv(args.cv_out, index=False)
        print(f"wrote {args.cv_out}")
        return 0
    if "seeds" not in cv.columns:
        cv["seeds"] = len(seeds)
    # said in the report: a (targets, feature set, candidate) that no run cross-validated is not a choice
    missing = [(t, n, c) for t in TARGET_KINDS for n in sets for c in CANDIDATES
               if (t, n, c) not in set(zip(cv["targets"], cv["features"], cv["candidate"], strict=True))]
    if missing:
        print(f"{len(missing)} (targets, feature set, candidate) not cross-validated: {missing}")
    # eq. 2 (time) and eq. 1 (power) each from the predictor whose CV scored that quantity best
    choice = {q: (*setting.split(": ", 1), cand) for q, (setting, cand) in best_per_quantity(cv, "setting").items()}
    (t_tgt, t_set, t_cand), (p_tgt, p_set, p_cand) = choice["time"], choice["power"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DVFSRegimeWarning)
        chosen = train_dvfs_predictor(micro, sets[p_set], candidate=p_cand, seeds=(0,), targets=p_tgt)
    regime_lines = list(dict.fromkeys(str(w.message) for w in caught
                                      if issubclass(w.category, DVFSRegimeWarning)))
    voltage = (chosen.voltage_knee_mhz, chosen.voltage_slope_per_ghz)

    # 2. test on the 20 applications, once, with the chosen model (seeds for stability)
    with warnings.catch_warnings(record=True) as caught_test:
        warnings.simplefilter("always", DVFSRegimeWarning)
        test_table = kernel_parameters(real, **chosen.voltage)
    res, per_app, first_models = [], None, None
    for seed in seeds:
        models = {}
        for quantity, (tgt, fset, cand) in choice.items():
            tr = train_dvfs_predictor(micro, sets[fset], candidate=cand, seeds=(seed,), voltage=voltage,
                                      targets=tgt)
            models[quantity] = predict_models(tr, profiles_of(real, sets[fset], test_table))
        models = combine_models(models["time"], models["power"])
        ev = evaluate_models(real, models)
        res.append((ev["time_mape"].mean(), ev["power_mape"].mean(),
                    *energy_outcome(real, models, meta["p_max_w"])))
        per_app = ev if per_app is None else per_app
        first_models = models if first_models is None else first_models
    res = np.array(res)
    floor_models = fitted_models(test_table)
    floor = evaluate_models(real, floor_models)
    f_sav, f_slow, f_over = energy_outcome(real, floor_models, meta["p_max_w"])
    best_sav = oracle_saving(real)
    elapsed = time.perf_counter() - t_start

    m, s = res.mean(axis=0), res.std(axis=0)
    cv_t = float(cv.loc[(cv["setting"] == f"{t_tgt}: {t_set}") & (cv["candidate"] == t_cand), "cv_time_mape"].iloc[0])
    cv_p = float(cv.loc[(cv["setting"] == f"{p_tgt}: {p_set}") & (cv["candidate"] == p_cand), "cv_power_mape"].iloc[0])
    if args.plot is not None:
        plot_heldout(real, per_app, floor, first_models, (cv_t, cv_p), args.plot)
        plot_coverage(micro, real, args.plot.with_name(args.plot.stem + "_coverage.png"))
    lines = [
        "# DSO on the RTX 8000 (train: 138 microbenchmarks, test: 20 real applications)",
        "",
        f"Command: `python benchmarks/dso_rtx8000.py --seeds {args.seeds}"
        + (" --cv-from " + " ".join(f.name for f in args.cv_from) if args.cv_from else "")
        + (" --reuse-only" if args.reuse_only else "")
        + f"` ({elapsed:.0f} s"
        + ("; the cross-validation rows of the --cv-from files were computed by earlier runs of this "
           "script, `--targets T --feature-sets NAME --candidates C --cv-out FILE`" if args.cv_from else "") + "). "
        f"Data: {args.data.name}; P_max {meta['p_max_w']:.0f} W from its rtx8000-dvfs.cfg. "
        f"V(f) chosen on the microbenchmarks: knee {chosen.voltage_knee_mhz:.0f} MHz, slope "
        f"{chosen.voltage_slope_per_ghz:g}/GHz. Fits: Huber loss on relative residuals, regime "
        "clocks excluded with a warning. MAPE: mean over kernels of each kernel's MAPE over its "
        "10 clocks (all measured points, excluded ones included; the CV scores the kept points).",
        "",
        "## Model selection: grouped CV on the microbenchmarks (6 applications, leave-one-out)",
        "",
        "Mean ± sd over the seeds of each row; the test applications are not used. Chosen per quantity "
        f"(DSO eq. 1 and eq. 2 share no parameter, §IV-B): time (eq. 2) **{t_cand}, {t_set}, "
        f"{t_tgt} targets** (lowest CV time MAPE), power (eq. 1) **{p_cand}, {p_set}, {p_tgt} "
        "targets** (lowest CV power MAPE). Targets: `shares` are DSO's parameter shares (§IV-D); "
        "`curve` the measured log time and power ratios at the 10 clocks, to which eq. 1-2 are "
        "fitted (`models.dvfs_curves`).",
        "",
        *([f"Not cross-validated (too slow for this run, so not candidates): "
           + "; ".join(f"{c} on {n} ({t})" for t, n, c in missing) + "."] if missing else []),
        "",
        "| targets | features | candidate | CV time MAPE % | CV power MAPE % | CV mean % | seeds |",
        "|---|---|---|---|---|---|---|",
        *[f"| {r.targets} | {r.features} | {r.candidate} | {r.cv_time_mape:.2f} ± {r.cv_time_sd:.2f} | "
          f"{r.cv_power_mape:.2f} ± {r.cv_power_sd:.2f} | {r.cv_mape:.2f} | {r.seeds:.0f} |"
          for r in cv.itertuples()],
        "",
        "## Held-out test: 20 real applications",
        "",
        "| model | time MAPE % | power MAPE % | energy saved % (measured) | slowdown % (measured) "
        "| applications > 5 % slower (measured) |",
        "|---|---|---|---|---|---|",
        f"| **predicted: time {t_cand} ({t_set}, {t_tgt}), power {p_cand} ({p_set}, {p_tgt})**, "
        f"mean ± sd over {args.seeds} seeds | "
        f"**{m[0]:.2f} ± {s[0]:.2f}** | **{m[1]:.2f} ± {s[1]:.2f}** | {m[2]:.1f} ± {s[2]:.1f} | "
        f"{m[3]:.1f} ± {s[3]:.1f} | {m[4]:.1f} of {len(test_table)} |",
        f"| same predictors, grouped CV on the microbenchmarks (what chose them) | {cv_t:.2f} | {cv_p:.2f} "
        "| | | |",
        f"| fitted floor: each application's own eq. 1-2 fit | {floor['time_mape'].mean():.2f} | "
        f"{floor['power_mape'].mean():.2f} | {f_sav:.1f} | {f_slow:.1f} | {f_over} of {len(test_table)} |",
        f"| best measured clock with measured slowdown ≤ 5 % (hindsight bound) | | | {best_sav:.1f} | | 0 |",
        "| DSO paper, V100, predicted (DCGM + PTX) | 4.6 | 4.9 | ~19 | ≤ 5 | |",
        "",
        "Energy: per application the largest η with predicted slowdown ≤ 5 %; saving and slowdown "
        "measured at the chosen clock against the highest clock. The hindsight bound picks, per "
        "application, the measured clock of least measured energy among those at most 5 % slower.",
        "",
        "## Regime changes found (excluded from the fits, warned)",
        "",
        *([f"- training: {line}" for line in regime_lines] or ["- training: none"]),
        *([f"- test: {w.message}" for w in caught_test] or ["- test: none"]),
        "",
        "## Per application (seed 0 predicted vs fitted floor)",
        "",
        "| application | time MAPE predicted % | power MAPE predicted % | time floor % | power floor % |",
        "|---|---|---|---|---|",
        *[f"| {k} | {per_app.loc[k, 'time_mape']:.2f} | {per_app.loc[k, 'power_mape']:.2f} | "
          f"{floor.loc[k, 'time_mape']:.2f} | {floor.loc[k, 'power_mape']:.2f} |" for k in per_app.index],
    ]
    return write_report("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    raise SystemExit(main())
