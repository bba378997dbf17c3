"""Fit the shipped twin preset and validate it leave-one-series-out on the raw H100 recording.

Usage: ``python benchmarks/twin_validation.py --out DIR [--write-preset] [--held-out RECORDING]...
[--held-out-only [--preset NAME]] [--fit-board RECORDING]... [--cap-variants]`` (~3 min on 1 core for the fit and the folds,
~20–60 s per held-out recording and ambient; no GPU).

Writes ``DIR/in_sample.md`` (the whole-recording preset replayed on its own data),
``DIR/folds.md`` (for each workload: fit-twin --hold-out-series W, replay, the held-out rows) and
the plots of each fold. ``--write-preset`` also replaces ``src/powermodels/twin/presets/h100-sxm.json``.

``--held-out RECORDING`` (repeatable) replays a recording of another board, which no fit saw, on
the preset (``twin-compare``): ``DIR/held_out_<folder>/`` gets the twin's recording, ``comparison.md``,
the overlay plots and ``warmup_seconds.csv`` (energy per launch per second, real vs twin).
``--ambient preset|recorded|recorded-causal`` (repeatable) picks where those replays take the ambient
temperature (``twin-compare --ambient``); with more than one, ``ambients.md`` / ``folds_ambients.md``
put them side by side and ``ambient.png`` draws them; ``--folds-only`` runs only the fit's folds.
``--held-out-only`` skips the fit and the folds and replays the held-out recordings on the shipped
``h100-sxm`` (or ``--preset NAME``) (e.g. ``--held-out datasets/h100-2026-11-25-session5/raw_recording_620707cb``).
``--fit-board RECORDING`` fits a preset to that recording alone and runs its own folds
(``DIR/board_<folder>/``: what a per-board twin reaches; never shipped). ``--cap-variants`` replays
the capped bf16 series of the fitting and the ``--held-out`` recordings with other cap controllers
of the fit's grid (``DIR/cap_variants.md``). docs/twin.md's session-5 numbers::

    python benchmarks/twin_validation.py --out DIR --held-out-only --cap-variants \
        --held-out datasets/h100-2026-11-25-session5/raw_recording_620707cb \
        --fit-board datasets/h100-2026-11-25-session5/raw_recording_620707cb      # ~6 min

and its ambient section (~3 min)::

    python benchmarks/twin_validation.py --out DIR --held-out-only --ambient preset --ambient recorded \
        --ambient recorded-causal --held-out datasets/h100-2026-11-25-session5/raw_recording_620707cb
    python benchmarks/twin_validation.py --out DIR --folds-only --ambient preset --ambient recorded \
        --ambient recorded-causal
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_calibration import calibrated_preset
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin import metrics
from powermodels.twin.adapt import adapt_workloads
from powermodels.twin.compare import (AMBIENTS, capped_series, compare_recordings, plot_cap_settling, plot_overlays,
                                     replay_ambient, twin_compare)
from powermodels.twin.fit import fit_twin, series_holdout
from powermodels.twin.fit_controller import GAIN_FIELDS
from powermodels.twin.preset import PRESET_DIR, load_preset, save_preset
from powermodels.twin.replay import replay

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h100" / "raw-2026-11-25"
WINDOW = {"window_s": 18.41e-3, "delay_s": 9.96e-3,
          "source": "median of the 5 characterize runs of ../shared/data/h100-2026-11-24/sensor_window"}

#: the bf16 GEMM is timed only in its series: without it, its time at the top clock comes from another
#: H100's run (../shared/data/h100-2026-11-24/user_workloads: 1.506 ms at 1493 MHz, clock-bound)
BF16_TIME = {"torch_bf16_matmul_8192": {"t_fast_s": 1.506e-3 * 1493.0 / 1980.0, "clock_share": 1.0}}


def held_out(folder, preset, out: Path, ambient: str = "recorded", calibrate: str | None = None) -> pd.DataFrame:
    """Replay a recording of a board no fit saw on ``preset``; the table, plots and per-second warm-up.

    ``calibrate``: the preset calibrated on ``folder`` first (``calibrated_preset(..., scale=calibrate)``: the
    board's first idle and each series' first second
    in-sample; ``DIR/held_out_<folder>/<ambient>-calibrated-<calibrate>/``).
    """
    real = read_recording(folder, trace_optional=True)
    dest = out / f"held_out_{Path(folder).name}" / (ambient + (f"-calibrated-{calibrate}" if calibrate else ""))
    table = twin_compare(real, calibrated_preset(preset, real, scale=calibrate), dest, ambient=ambient)
    twin = read_recording(dest / "twin", trace_optional=True)
    warmup_seconds(real, twin).to_csv(dest / "warmup_seconds.csv", index=False)
    held_out_figure(real, twin, dest / "held_out.png")
    print(f"held out {real.name} ({real.provenance.get('uuid', '?')}), ambient {table.attrs['ambient']}:")
    print(table.to_string())
    return table


def warmup_seconds(real, twin, workloads=None) -> pd.DataFrame:
    """Warm-up energy per launch per second of each series (default every one), real vs twin."""
    per_second = []
    for w in workloads or list(real.phase_rows(kind="series")["workload"]):
        a, b = metrics.warmup_energy_per_launch(real, w), metrics.warmup_energy_per_launch(twin, w)
        per_second.append(pd.DataFrame({"workload": w, "second": a["second"], "real_j": a["energy_j"],
                                        "twin_j": b["energy_j"],
                                        "error_pct": (b["energy_j"] / a["energy_j"] - 1.0) * 100.0,
                                        "real_temperature_c": a["temperature_c"],
                                        "twin_temperature_c": b["temperature_c"]}))
    return pd.concat(per_second, ignore_index=True)


def held_out_figure(real, twin, path: Path) -> None:
    """One picture for the docs: warm-up energy per launch of every series (top), the capped series' 1 s
    mean power from their start (bottom), real vs twin."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(real.phase_rows(kind="series")["workload"])
    capped = capped_series(real, names)
    fig, axes = plt.subplots(2, max(len(names), 1), figsize=(3.3 * len(names), 6.2), squeeze=False)
    for ax, w in zip(axes[0], names):
        a, b = metrics.warmup_energy_per_launch(real, w), metrics.warmup_energy_per_launch(twin, w)
        ax.plot(a["second"] + 0.5, a["energy_j"] * 1e3, "o-", ms=3, label="real")
        ax.plot(b["second"] + 0.5, b["energy_j"] * 1e3, "s--", ms=3, label="twin")
        ax.set_title(f"{w}: warm-up", fontsize=8)
        ax.set_xlabel("s since the series started", fontsize=8)
    axes[0][0].set_ylabel("energy per launch, mJ")
    axes[0][0].legend(fontsize=7)
    for k, ax in enumerate(axes[1]):
        if k < len(capped):
            plot_cap_settling(real, twin, ax, capped[k])
            ax.set_title(f"{capped[k]}: power-capped start", fontsize=8)
        else:
            ax.axis("off")
    fig.suptitle(f"real {real.provenance.get('gpu', '')} {real.provenance.get('uuid', '')[:12]} vs twin "
                 f"({twin.provenance.get('preset', '?')}; simulated)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def ambient_table(table: pd.DataFrame, keys=(schema.CHECK_METRIC, schema.WORKLOAD)) -> pd.DataFrame:
    """One row per measurement, one column per ambient: ``twin (error)``, ✗ where outside the target."""
    rows = []
    for key, g in table.groupby(list(keys), sort=False, dropna=False):
        row = dict(zip(keys, key)) | {schema.CHECK_REAL: f"{g[schema.CHECK_REAL].iloc[0]:.4g}"}
        for r in g.itertuples(index=False):
            row[r.ambient] = f"{r.twin:.4g} ({r.error:+.3g}){'' if r.within else ' ✗'}"
        row[schema.CHECK_TARGET] = f"{g[schema.CHECK_TARGET].iloc[0]:g} {g[schema.CHECK_UNIT].iloc[0]}"
        rows.append(row)
    return pd.DataFrame(rows)


def ambient_figure(folder, out: Path, ambients, path: Path) -> None:
    """Temperature over the whole recording (real, the twin with each ambient, the recorded ambient) and
    the warm-up energy error per second of each series, per ambient: one picture for the docs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from powermodels import schema
    real = read_recording(folder, trace_optional=True, probes=False)
    dest = out / f"held_out_{Path(folder).name}"
    fig, (top, bottom) = plt.subplots(1, 2, figsize=(12, 4.2), gridspec_kw={"width_ratios": [1.6, 1]})
    tr = real.trace.iloc[::50]
    top.plot(tr[schema.T_S], tr[schema.TEMPERATURE_C], "k-", lw=1, label="real")
    styles = {"preset": "C0", "recorded": "C1", "recorded-causal": "C2"}
    for ambient in ambients:
        twin = read_recording(dest / ambient / "twin", trace_optional=True, probes=False)
        tt = twin.trace.iloc[::50]
        top.plot(tt[schema.T_S], tt[schema.TEMPERATURE_C], "-", lw=1, color=styles[ambient],
                 label=f"twin, ambient {ambient}")
        if ambient != "preset":
            pts = twin.provenance["ambient"]["points"]
            top.plot([p[0] for p in pts], [p[1] for p in pts], "--", lw=1, color=styles[ambient],
                     label=f"ambient read ({ambient})")
        else:
            top.axhline(twin.provenance["ambient"]["range_c"][0], ls="--", lw=1, color=styles[ambient],
                        label="ambient of the preset")
        sec = pd.read_csv(dest / ambient / "warmup_seconds.csv")
        # the FMA loop is another kernel than the fitted one on the held-out boards: says nothing about the twin
        groups = [(w, g) for w, g in sec.groupby("workload", sort=False) if "fma" not in w]
        for k, (w, g) in enumerate(groups):
            bottom.plot(g["second"] + 0.5, g["error_pct"], ["o-", "s-", "^-"][k % 3], ms=3, color=styles[ambient],
                        label=f"{w}, {ambient}")
    top.set_xlabel("s since the recording started")
    top.set_ylabel("temperature reading, °C")
    top.legend(fontsize=7)
    top.set_title(f"real {real.provenance.get('uuid', '')[:12]} vs twin h100-sxm (simulated)", fontsize=9)
    bottom.axhspan(-1, 1, color="0.9")
    bottom.set_xlabel("s since the series started")
    bottom.set_ylabel("warm-up energy per launch, twin vs real, %")
    bottom.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fit_and_folds(rec, name: str, out: Path, provenance: dict | None = None, ambients=("preset",),
                  window: dict | None = None):
    """Fit ``rec`` whole (in-sample table, plots) and leave each 25 s series out in turn (the folds).

    Each fold is replayed with each of ``ambients`` (:data:`powermodels.twin.compare.AMBIENTS`; the
    column ``ambient`` of ``folds.md``). ``window``: the instant reading's window and delay
    (default :data:`WINDOW`, the H100's). Returns the whole-recording preset; writes ``in_sample.md``,
    ``folds.md``, ``folds_seconds.csv`` (each held-out series' warm-up per second), the plots and each
    fold's chosen cap gains into ``out``.
    """
    out.mkdir(parents=True, exist_ok=True)
    window = window or WINDOW
    preset = fit_twin(rec, name=name, sensor_window=window, provenance=provenance)
    twin = replay(rec, preset)
    table = compare_recordings(rec, twin)
    (out / "in_sample.md").write_text(markdown_table(table) + "\n")
    plot_overlays(rec, twin, out / "in_sample")
    print(table.to_string())
    rows, seconds = [], []
    first = rec.phase_rows(kind="series")["workload"].iloc[0]
    for w in list(rec.phase_rows(kind="series")["workload"]):
        fold = fit_twin(rec, name=f"{name}-without-{w}", sensor_window=window, holdout=series_holdout(rec, w),
                        workload_times=BF16_TIME)
        save_preset(fold, out / f"fold_{w}.json")
        for ambient in ambients:
            profile, note = replay_ambient(rec, fold, ambient)
            tw = replay(rec, fold, ambient=profile, ambient_source=note)
            t = compare_recordings(rec, tw)
            t.insert(0, "held out", w)
            t.insert(1, "ambient", ambient)
            sel = (t[schema.WORKLOAD] == w) | t[schema.CHECK_METRIC].str.contains("clock")
            t.loc[t[schema.CHECK_METRIC].str.contains("clock"), "held out"] = "none (natural phase in every fold)"
            held = t.loc[sel & ((t[schema.WORKLOAD] == w) | (w == first))]
            rows.append(held)
            seconds.append(warmup_seconds(rec, tw, [w]).assign(held_out=w, ambient=ambient))
            plot_overlays(rec, tw, out / f"fold_{w}_{ambient}", workloads=[w])
            print(held.to_string(), flush=True)
        json.dump(fold.fit.get("cap_gains", {}).get("chosen"), open(out / f"fold_{w}_gains.json", "w"))
    folds = pd.concat(rows, ignore_index=True)
    pd.concat(seconds, ignore_index=True).to_csv(out / "folds_seconds.csv", index=False)
    (out / "folds.md").write_text(markdown_table(folds) + "\n")
    if len(ambients) > 1:
        merged = ambient_table(folds, ("held out", schema.CHECK_METRIC, schema.WORKLOAD))
        (out / "folds_ambients.md").write_text(markdown_table(merged) + "\n")
    return preset


#: controller variants of fit_controller.CAP_GAIN_GRID replayed by --cap-variants (proportional, integral, repeat)
CAP_VARIANTS = {"shipped": None, "dead-beat: proportional 1000, repeat 1": (1000.0, 0.0, 1.0),
                "proportional 100, repeat 1": (100.0, 0.0, 1.0), "proportional 100, no repeat": (100.0, 0.0, 0.0)}


def cap_variants(folders, out: Path) -> pd.DataFrame:
    """The capped bf16 series' overshoot and settling, real and on h100-sxm with other cap controllers."""
    base = load_preset("h100-sxm")
    rows = []
    for folder in folders:
        real = read_recording(folder, trace_optional=True, probes=False)
        c = metrics.cap_overshoot(real, "torch_bf16_matmul_8192")
        rows.append({"recording": Path(folder).name, "controller": "real", schema.OVERSHOOT_W: c[schema.OVERSHOOT_W],
                     schema.SETTLING_S: c[schema.SETTLING_S]})
        for label, gains in CAP_VARIANTS.items():
            preset = base if gains is None else replace(base, physics=replace(
                base.physics, **dict(zip(GAIN_FIELDS, gains))))
            preset, _ = adapt_workloads(preset, real)
            c = metrics.cap_overshoot(replay(real, preset), "torch_bf16_matmul_8192")
            rows.append({"recording": Path(folder).name, "controller": label, schema.OVERSHOOT_W: c[schema.OVERSHOOT_W],
                         schema.SETTLING_S: c[schema.SETTLING_S]})
            print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    (out / "cap_variants.md").write_text(markdown_table(table) + "\n")
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--write-preset", action="store_true")
    ap.add_argument("--held-out", action="append", default=[], metavar="RECORDING",
                    help="a raw recording of another board: replay it on the preset (repeatable)")
    ap.add_argument("--held-out-only", action="store_true",
                    help="skip the fit and the folds of h100-sxm: the other options run on the shipped preset")
    ap.add_argument("--preset", default="h100-sxm",
                    help="with --held-out-only: the shipped preset (or preset file) the --held-out recordings are "
                         "replayed on (default h100-sxm; e.g. h200-raw for an H200 recording)")
    ap.add_argument("--fit-board", action="append", default=[], metavar="RECORDING",
                    help="fit a preset to this recording alone and run its own folds (OUT/board_<folder>/; "
                         "not shipped; repeatable)")
    ap.add_argument("--ambient", action="append", choices=AMBIENTS, default=[],
                    help="where the replays of --held-out and of the folds take the ambient temperature "
                         "(repeatable: each is run; default preset)")
    ap.add_argument("--calibrate-board", choices=("board", "workload"), action="append", default=[],
                    help="also replay each --held-out recording on the preset calibrated to its board (first idle "
                         "+ each series' first second, in-sample; repeatable)")
    ap.add_argument("--folds-only", action="store_true",
                    help="fit and run the folds of the fitting recording, nothing else (no preset written)")
    ap.add_argument("--cap-variants", action="store_true",
                    help="replay the capped bf16 series of the fitted and the --held-out recordings with other "
                         "cap controllers (OUT/cap_variants.md)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.folds_only:
        fit_and_folds(read_recording(DATA, probes=False), "h100-sxm", out, ambients=args.ambient or ["preset"])
        return
    if args.held_out_only:
        if not (args.held_out or args.fit_board or args.cap_variants):
            ap.error("--held-out-only needs --held-out RECORDING, --fit-board RECORDING or --cap-variants")
        preset = load_preset(args.preset)
    elif args.preset != "h100-sxm":
        ap.error("--preset is for --held-out-only (the fit and its folds are h100-sxm's)")
    else:
        rec = read_recording(DATA, probes=False)
        old = load_preset("h100-sxm").provenance
        keep = {k: old[k] for k in ("instant_window", "knee") if k in old}
        prov = {**keep, "command": "python benchmarks/twin_validation.py --out DIR --write-preset",
                "validation": "docs/twin.md: leave-one-series-out folds (benchmarks/twin_validation.py)"}
        preset = fit_and_folds(rec, "h100-sxm", out, prov)
        preset.provenance["fitted_from"][0]["recording"] = old["fitted_from"][0]["recording"]
        save_preset(preset, out / "h100-sxm.json")
        if args.write_preset:
            save_preset(preset, PRESET_DIR / "h100-sxm.json")
    for folder in args.held_out:
        tables = []
        for ambient in args.ambient or ["preset"]:
            for cal in [None, *args.calibrate_board]:
                label = ambient + (f", calibrated ({cal})" if cal else "")
                tables.append(held_out(folder, preset, out, ambient, cal).assign(ambient=label))
        if len(tables) > 1:
            merged = ambient_table(pd.concat(tables, ignore_index=True))
            (out / f"held_out_{Path(folder).name}" / "ambients.md").write_text(markdown_table(merged) + "\n")
        if len(args.ambient) > 1:
            drawn = [a for a in args.ambient if not (a == "recorded-causal" and "recorded" in args.ambient)]
            ambient_figure(folder, out, drawn, out / f"held_out_{Path(folder).name}" / "ambient.png")
    for folder in args.fit_board:
        board = fit_and_folds(read_recording(folder, probes=False), f"board-{Path(folder).name}",
                              out / f"board_{Path(folder).name}")
        save_preset(board, out / f"board_{Path(folder).name}" / "preset.json")
    if args.cap_variants:
        cap_variants([DATA, *args.held_out], out)


if __name__ == "__main__":
    main()
