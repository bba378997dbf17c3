"""One board warmed up several times, and several boards at one moment: the floor under a twin's 1 % target (real data, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/board_repeats_plot.py --out docs/img/board_repeats_h200.png \\
        --alpha-w-per-c 1.409 \\
        --board datasets/h200-2026-11-28/raw_recording_3a343b21 datasets/h200-2026-11-28/thermal_repeat1_3a343b21 ... \\
        --board datasets/h200-2026-11-28/raw_recording_928c1689 ...

Each ``--board`` lists one board's recordings of the same warm-up schedule, first the run the others are
compared with. For every pair of a board's runs and, run by run, every pair of boards
(:func:`powermodels.board_pair.board_pair`), the worst second and the mean of the energy per launch's
difference, as measured and at one die temperature (``--alpha-w-per-c``, a measured leakage slope; capped
series are left out there). Prints the summary (how many worst seconds are within 1 %) and draws, per
workload, each repeat's energy per launch second by second over its board's first run.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.board_pair import board_pair, board_pair_summary
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.metrics import capped_series


def pairs(boards: list[list], alpha: float | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every same-board pair and every same-run pair of boards: their summaries and the repeats' seconds."""
    summaries, seconds = [], []
    for runs in boards:
        for i, j in itertools.combinations(range(len(runs)), 2):
            pair = board_pair(runs[i], runs[j], alpha_w_per_c=alpha)
            summaries.append(board_pair_summary(pair).assign(kind="same board", a=runs[i].name, b=runs[j].name))
            if i == 0:
                seconds.append(pair.assign(board=runs[0].provenance.get("uuid", runs[0].name), run=j))
    for k in range(min(len(runs) for runs in boards)):
        for a, b in itertools.combinations([runs[k] for runs in boards], 2):
            summaries.append(board_pair_summary(board_pair(a, b, alpha_w_per_c=alpha))
                             .assign(kind="two boards", a=a.name, b=b.name))
    return pd.concat(summaries, ignore_index=True), pd.concat(seconds, ignore_index=True)


def floor_table(summary: pd.DataFrame, capped: set[str]) -> pd.DataFrame:
    """Per kind of pair and capped or not: rows, worst seconds within 1 %, their median and largest |value|."""
    rows = []
    for (kind, is_capped), g in summary.groupby(["kind", summary[schema.WORKLOAD].isin(capped)], sort=False):
        worst = g[schema.WORST_DIFF_PCT].abs()
        matched = g[schema.WORST_DIFF_MATCHED_PCT].abs().dropna()
        rows.append({"pairs": kind, "load": "capped" if is_capped else "uncapped", "rows": len(g),
                     "worst second within 1 %": int((worst <= 1.0).sum()),
                     "median |worst| (%)": round(float(worst.median()), 2), "max |worst| (%)": round(float(worst.max()), 2),
                     "at one temperature: within 1 %": int((matched <= 1.0).sum()) if len(matched) else "—",
                     "median |mean| (%)": round(float(g[schema.MEAN_DIFF_PCT].abs().median()), 2)})
    return pd.DataFrame(rows)


def plot(seconds: pd.DataFrame, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = list(dict.fromkeys(seconds[schema.WORKLOAD]))
    boards = list(dict.fromkeys(seconds["board"]))
    fig, axes = plt.subplots(1, len(workloads), figsize=(3.6 * len(workloads), 3.6), sharey=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, w in zip(np.atleast_1d(axes), workloads, strict=True):
        for (board, run), g in seconds.loc[seconds[schema.WORKLOAD] == w].groupby(["board", "run"], sort=False):
            ax.plot(g[schema.SECOND], g[schema.BOARD_DIFF_PCT], color=colours[boards.index(board) % len(colours)],
                    ls="-" if run == 1 else "--", lw=1.1, label=f"{str(board)[4:12]} run {run + 1}")
        ax.axhspan(-1, 1, color="0.9", zorder=0)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_title(w, fontsize=9)
        ax.set_xlabel("second of the warm-up")
    np.atleast_1d(axes)[0].set_ylabel("energy per launch, run / run 1 − 1 (%)")
    handles, labels = np.atleast_1d(axes)[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="upper right", ncol=2)
    fig.suptitle(title, fontsize=10, x=0.4)
    fig.tight_layout(rect=(0, 0, 0.86, 0.95))
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--board", nargs="+", action="append", required=True, help="one board's recordings, first run first")
    ap.add_argument("--alpha-w-per-c", type=float, help="a measured leakage slope (W/°C) for the one-temperature column")
    ap.add_argument("--out", type=Path, help="the figure (PNG)")
    ap.add_argument("--csv", type=Path, help="write every pair's summary here")
    args = ap.parse_args(argv)
    if any(len(runs) < 2 for runs in args.board):
        ap.error("each --board needs at least two recordings of its schedule")
    boards = [[read_recording(p) for p in runs] for runs in args.board]
    capped = set().union(*(capped_series(r) for runs in boards for r in runs))
    summary, seconds = pairs(boards, args.alpha_w_per_c)
    if args.csv:
        summary.to_csv(args.csv, index=False)
    print(markdown_table(floor_table(summary, capped)))
    if args.out:
        who = f"{len(boards)} real boards, each" if len(boards) > 1 else "One real board,"
        plot(seconds, args.out, f"{who} warmed up {min(map(len, boards))}+ times: every repeat against the board's "
                                "first run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
