"""Two boards of one host side by side, and capped starts against the rest before them (real data, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/board_pair_plot.py --out docs/img/board_pair_h200.png \\
        --pair datasets/h200-2026-11-28/raw_recording_ef3dd380 datasets/h200-2026-11-28/raw_recording_1717480a \\
        --alpha-w-per-c 1.409 --starts datasets/h200-2026-11-28/capstarts_*

Left: board B's energy per launch over board A's, second by second, as measured and with B's power
brought to A's die temperature (:func:`powermodels.board_pair.board_pair`; ``--alpha-w-per-c`` is a
measured leakage slope, named in the caption). Middle: both boards' die temperature through each series
and the idle after it. Right: every capped start's overshoot against the idle before it
(:func:`powermodels.twin.metrics.cap_starts`), one colour per board. Prints the summary table and each
board's start medians.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_pair import board_pair, board_pair_summary, cooling_pair
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin import metrics


def board_of(rec) -> str:
    return rec.board[:12]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--pair", nargs=2, required=True, metavar=("A", "B"))
    ap.add_argument("--alpha-w-per-c", type=float, required=True)
    ap.add_argument("--starts", nargs="*", default=[], help="capstarts recordings (any boards)")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a, b = (read_recording(p) for p in args.pair)
    pair = board_pair(a, b, alpha_w_per_c=args.alpha_w_per_c)
    cooling = cooling_pair(a, b)
    print(markdown_table(board_pair_summary(pair, cooling).round(2)))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    for (w, g), colour in zip(pair.groupby(schema.WORKLOAD, sort=False), plt.cm.tab10.colors, strict=False):
        ax.plot(g[schema.SECOND], g[schema.BOARD_DIFF_PCT], "-", color=colour, label=f"{w}")
        if g[schema.BOARD_DIFF_MATCHED_PCT].notna().any():
            ax.plot(g[schema.SECOND], g[schema.BOARD_DIFF_MATCHED_PCT], "--", color=colour)
    ax.axhspan(-1, 1, color="0.9", zorder=0, label="±1 % (the twin's target)")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.set(xlabel="second of the series from idle", ylabel="energy per launch, B / A − 1 (%)")
    ax.set_title(f"B {board_of(b)} / A {board_of(a)}: measured (—), at A's die temperature (- -)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax = axes[1]
    for (w, g), colour in zip(pair.groupby(schema.WORKLOAD, sort=False), plt.cm.tab10.colors, strict=False):
        c = cooling.loc[cooling[schema.WORKLOAD] == w]
        n = len(g)
        ax.plot(g[schema.SECOND] + 1, g[schema.TEMPERATURE_A_C], "-", color=colour, lw=1)
        ax.plot(g[schema.SECOND] + 1, g[schema.TEMPERATURE_B_C], ":", color=colour, lw=1.5)
        ax.plot(n + c[schema.SECOND], c[schema.TEMPERATURE_A_C], "-", color=colour, lw=1)
        ax.plot(n + c[schema.SECOND], c[schema.TEMPERATURE_B_C], ":", color=colour, lw=1.5)
    ax.set(xlabel="second (series, then the idle after it)", ylabel="die temperature (°C)",
           title=f"A {board_of(a)} (—), B {board_of(b)} (···)")
    ax = axes[2]
    rows = []
    for path in args.starts:
        rec = read_recording(path)
        for w in metrics.capped_series(rec)[:1]:
            rows.append(metrics.cap_starts(rec, w).assign(board=board_of(rec)))
    if rows:
        starts = pd.concat(rows, ignore_index=True)
        boards = list(dict.fromkeys(starts["board"]))
        for j, (board, colour) in enumerate(zip(boards, plt.cm.Set1.colors, strict=False)):
            g = starts.loc[starts["board"] == board]
            jitter = 1.0 + 0.06 * (j - (len(boards) - 1) / 2)
            ax.plot(g[schema.REST_S] * jitter, g[schema.OVERSHOOT_W], "o", color=colour, alpha=0.75,
                    label=f"{board}: median {g[schema.OVERSHOOT_W].median():.1f} W ({len(g)} starts)")
        ax.set_xscale("log")
        ax.set(xlabel="idle before the start (s, log)", ylabel="first-second mean above settled (W)",
               title="capped bf16 GEMM starts from idle")
        ax.legend(fontsize=7)
        starts[schema.REST_S] = starts[schema.REST_S].round()  # each rest as asked (the sleeps overrun by ms)
        print(markdown_table(starts.groupby(["board", schema.REST_S])[
            [schema.OVERSHOOT_W, schema.SETTLING_S, schema.START_TEMPERATURE_C]].median().round(2).reset_index()))
    fig.suptitle("Real H200s (same host, same schedule, same moment); dashed: B's power moved by "
                 f"α = {args.alpha_w_per_c:g} W/°C to A's die temperature", fontsize=10)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
