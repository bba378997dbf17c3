"""Leave one board out: a preset moved to the median of the other boards, replayed on the board left out (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_pooled_boards.py --preset h200-raw --out DIR \\
        datasets/h200-2026-11-2*/raw_recording*

For each board of the recordings (their ``provenance["uuid"]``; the preset's own fitting board is scored
too, marked in-sample), the levels of every *other* board (:func:`powermodels.board_calibration.pooled.board_levels`)
give a pooled preset (:func:`~powermodels.board_calibration.pooled.pooled_preset`, ``scale`` board and workload, thermal
factor on), and each of the board's recordings is replayed on the preset as fitted (board-blind) and on
the pooled ones, with the ambient ``twin-compare`` uses (recorded-causal). Rows: the warm-up worst second
per workload and the cooling worst second, as :func:`powermodels.twin.compare.compare_recordings` scores
them. Writes ``DIR/rows.csv`` and ``DIR/summary.md`` and prints the summary; ``--save-pooled FILE``
also writes the preset pooled over **all** boards (a candidate for shipping, validated by the rows).
``--variants`` picks the presets replayed (``"pooled (board + cap)"`` also pools each board's settled capped
clock, ``board_levels(cap=True)``; none: no replay, only ``--save-pooled``), ``--save-cap`` pools it into the
saved preset (``h200-raw-pooled-cap``, session 16). ``--save-parts DIR`` writes one preset per board part number,
its memory factor pooled over that part's boards and the rest over all (``h200-raw-part-000`` and ``-001``,
session 17).
Replays are simulated; the recordings are real. ~1 min per replay on one core.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_calibration import board_levels, pooled_preset
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.compare import compare_recordings, replay_setup
from powermodels.twin.preset import load_preset, save_preset
from powermodels.twin.replay import replay

#: the presets a held-out board can be replayed on (``--variants``)
VARIANTS = ("board-blind", "pooled (board)", "pooled (workload)", "pooled (board + cap)", "pooled (part memory + cap)")
WARMUP, COOLING = "warm-up energy per launch, worst second", "cooling temperature, worst second of 30 s"


def fitting_boards(preset) -> set[str]:
    return {str(r.get("uuid")) for r in preset.provenance.get("fitted_from", []) if r.get("uuid")}


def scored_rows(real, preset, variant: str, board: str, in_sample: bool) -> list[dict]:
    adapted, profile = replay_setup(real, preset)
    twin = replay(real, adapted, seed=0, ambient=profile)
    table = compare_recordings(real, twin)
    table = table.loc[table[schema.CHECK_METRIC].isin([WARMUP, COOLING])]
    return [{"board": board, "recording": real.name, "variant": variant, "in_sample": in_sample, **row}
            for row in table.to_dict("records")]


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per board and variant: each warm-up worst second (%), the worst cooling (°C), rows within."""
    out = []
    for (board, variant), g in rows.groupby(["board", "variant"], sort=False):
        warm = g.loc[g[schema.CHECK_METRIC] == WARMUP]
        cool = g.loc[g[schema.CHECK_METRIC] == COOLING]
        worst_warm = warm.loc[warm[schema.CHECK_ERROR].abs().groupby(warm[schema.WORKLOAD]).idxmax()]
        out.append({"board": board[4:12], "variant": variant, "recordings": g["recording"].nunique(),
                    **{w[:12]: round(float(e), 2) for w, e in zip(worst_warm[schema.WORKLOAD], worst_warm[schema.CHECK_ERROR],
                                                                 strict=True)},
                    "warm-up within": f"{int(warm[schema.CHECK_WITHIN].sum())}/{len(warm)}",
                    "cooling worst (°C)": float(cool[schema.CHECK_ERROR].abs().max()) if len(cool) else float("nan"),
                    "cooling within": f"{int(cool[schema.CHECK_WITHIN].sum())}/{len(cool)}",
                    "in_sample": bool(g["in_sample"].any())})
    return pd.DataFrame(out)


def plot(rows: pd.DataFrame, path: Path, title: str) -> None:
    """Each held-out board's warm-up worst seconds, one marker per variant: where the pooled preset moves them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    warm = rows.loc[(rows[schema.CHECK_METRIC] == WARMUP) & ~rows["in_sample"]]
    workloads = list(dict.fromkeys(warm[schema.WORKLOAD]))
    boards = list(dict.fromkeys(warm["board"]))
    variants = list(dict.fromkeys(warm["variant"]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(3.6 * len(workloads), 3.8), sharey=True)
    for ax, w in zip(axes, workloads, strict=True):
        for k, (v, marker) in enumerate(zip(variants, "oDs^", strict=False)):
            g = warm.loc[(warm[schema.WORKLOAD] == w) & (warm["variant"] == v)]
            x = [boards.index(b) + 0.2 * (k - 1) for b in g["board"]]
            ax.plot(x, g[schema.CHECK_ERROR], marker, ls="none", label=v, alpha=0.85)
        ax.axhspan(-1, 1, color="0.9", zorder=0)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(boards)), [b[4:12] for b in boards], rotation=60, fontsize=7)
        ax.set_title(w, fontsize=9)
    axes[0].set_ylabel("twin / real − 1, worst second of the warm-up (%)")
    fig.legend(*axes[0].get_legend_handles_labels(), fontsize=7, loc="upper right")
    fig.suptitle(title, fontsize=10, x=0.4)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path, dpi=120)


def save_parts(preset, recs, args, cap: bool) -> None:
    """One preset per board part number of ``recs`` (``--save-parts``), with the recordings and command in its provenance."""
    levels = board_levels(preset, recs, cap=cap, domains=True)
    parts = sorted(p for p in levels[schema.BOARD_PART_NUMBER].unique() if p)
    if not parts:
        raise SystemExit("--save-parts: no recording says its board part number (provenance or nvidia_smi.txt)")
    for part in parts:
        name = f"{args.pooled_name or preset.name}-part-{part.rsplit('-', 1)[-1]}"
        pooled = pooled_preset(preset, levels, scale="domains", name=name, memory_part=part)
        pooled = replace(pooled, provenance={**pooled.provenance, "pooled_from": [str(p) for p in args.recordings],
                                             "pooled_command": "python benchmarks/twin_pooled_boards.py "
                                                               + " ".join(sys.argv[1:])})
        save_preset(pooled, args.save_parts / f"{name}.json")
        print(name, json.dumps({k: v for k, v in pooled.fit["pooled_boards"].items() if k not in ("recordings",)},
                               default=str), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--save-pooled", type=Path, help="write the preset pooled over every board here")
    ap.add_argument("--pooled-name", help="the saved pooled preset's name")
    ap.add_argument("--save-scale", choices=("board", "workload"), default="board",
                    help="the saved preset's scale (choose it by the rows: the held-out boards)")
    ap.add_argument("--plot", type=Path, help="draw the held-out boards' warm-up rows to this PNG")
    ap.add_argument("--from-rows", action="store_true", help="redraw the summary and plot from OUT/rows.csv, no replay")
    ap.add_argument("--variants", nargs="*", choices=VARIANTS, default=list(VARIANTS[:3]),
                    help="which presets replay each held-out board (default: the first three; none: only --save-pooled); "
                         "'pooled (board + cap)' also moves the settled capped clock to the other boards' median "
                         "(board_levels(cap=True)); 'pooled (part memory + cap)' pools core and memory apart, the "
                         "memory over the other boards of the held-out board's part number (session 17)")
    ap.add_argument("--save-cap", action="store_true", help="the saved preset also pools the settled capped clock")
    ap.add_argument("--save-parts", type=Path, metavar="DIR",
                    help="write one preset per board part number into DIR, named <pooled-name or preset>-part-<last "
                         "group of the part number>: core, idle, thermal (and with --save-cap the capped clock) pooled "
                         "over every board, the memory factor over that part's boards (pooled_preset(scale='domains', "
                         "memory_part=...); session 17)")
    ap.add_argument("recordings", nargs="*")
    args = ap.parse_args(argv)
    title = f"{args.preset} board-blind and moved to the median of the other boards (leave one board out; twin vs real)"
    if args.from_rows:
        rows = pd.read_csv(args.out / "rows.csv")
        print(markdown_table(summary(rows)))
        if args.plot:
            plot(rows, args.plot, title)
        return 0
    if not args.recordings:
        ap.error("give the recordings (or --from-rows)")
    preset = load_preset(args.preset)
    recs = [read_recording(p) for p in args.recordings]
    cap = "pooled (board + cap)" in args.variants or args.save_cap
    levels = board_levels(preset, recs, cap=cap)
    # the part variant reads the capped clock against each board's domains calibration (board_levels' docstring)
    by_domains = (board_levels(preset, recs, cap=True, domains=True)
                  if "pooled (part memory + cap)" in args.variants else None)
    if args.save_parts:
        save_parts(preset, recs, args, cap)
    args.out.mkdir(parents=True, exist_ok=True)
    levels.to_csv(args.out / "levels.csv", index=False)
    own = fitting_boards(preset)
    rows = []
    for board in (levels[schema.DEVICE_UUID].unique() if args.variants else ()):
        others = levels.loc[levels[schema.DEVICE_UUID] != board]
        uncapped = others.drop(columns=[schema.CAP_CORE_SCALE], errors="ignore")
        # (levels, scale) of each variant's pool; None: the preset as fitted
        make = {"board-blind": None, "pooled (board)": (uncapped, "board"), "pooled (workload)": (uncapped, "workload"),
                "pooled (board + cap)": (others, "board"), "pooled (part memory + cap)": None}
        variants = {v: preset if make[v] is None else pooled_preset(preset, make[v][0], scale=make[v][1])
                    for v in args.variants if v != "pooled (part memory + cap)"}
        if by_domains is not None:
            part = by_domains.loc[by_domains[schema.DEVICE_UUID] == board, schema.BOARD_PART_NUMBER].iloc[0]
            try:
                variants["pooled (part memory + cap)"] = pooled_preset(
                    preset, by_domains.loc[by_domains[schema.DEVICE_UUID] != board], scale="domains", memory_part=part)
            except ValueError as err:  # no other board of its part (or its part unknown): say so, score the rest
                print(f"{board[:12]}: pooled (part memory + cap) not scored: {err}", flush=True)
        for rec in (r for r in recs if str(r.provenance.get("uuid")) == board):
            for variant, p in variants.items():
                print(f"{board[:12]} {rec.name}: {variant}", flush=True)
                rows += scored_rows(rec, p, variant, board, board in own)
        pd.DataFrame(rows).to_csv(args.out / "rows.csv", index=False)  # kept as it grows: a long run can stop
    if rows:
        text = markdown_table(summary(pd.DataFrame(rows)))
        (args.out / "summary.md").write_text(text + "\n")
        print(text)
        if args.plot:
            plot(pd.DataFrame(rows), args.plot, title)
    if args.save_pooled:
        kept = levels if args.save_cap else levels.drop(columns=[schema.CAP_CORE_SCALE], errors="ignore")
        pooled = pooled_preset(preset, kept, scale=args.save_scale, name=args.pooled_name)
        save_preset(pooled, args.save_pooled)
        print(json.dumps(pooled.fit["pooled_boards"], indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
