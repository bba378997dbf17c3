"""How well a board's recorded capped starts pin its overshoot and settling: the row's resolution (real, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/cap_start_spread.py datasets/h200-*/capstarts_* \\
        [--out DIR] [--plot docs/img/cap_start_spread_h200.png]

A thin caller of :mod:`powermodels.cap_start_spread`: every start of the recordings (pooled by board UUID),
then per board the median, the chance a perfect twin meets the 25 % row on this many starts (bootstrap; each row
and both at once), and the leave-one-board-out pooled median scored as a board-blind twin; the perfect twin's chance for 3–40 starts; and
whether the boards differ at all (Kruskal–Wallis, between-board share of variance). Prints markdown tables;
``--out`` also writes ``starts.csv`` and ``boards.csv``. Every figure is real: no simulation runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from _common import board_label, save_figure

from powermodels import cap_start_spread, schema
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table

LABELS = {schema.OVERSHOOT_W: "overshoot (W)", schema.SETTLING_S: "settling (s)"}
#: the board table's column for both rows at once
BOTH = "both rows perfect-twin chance"


def board_table(starts: pd.DataFrame, ceilings: dict, guesses: dict) -> pd.DataFrame:
    """One row per board: both rows' median, perfect-twin ceiling and pooled-guess error.

    ``ceilings`` and ``guesses`` map each scored column to its :func:`~powermodels.cap_start_spread.median_ceiling`
    and :func:`~powermodels.cap_start_spread.pooled_guess` table.
    """
    merged = None
    for column in cap_start_spread.SCORED:
        ceiling = ceilings[column][
            [schema.DEVICE_UUID, schema.START_COUNT, schema.BOARD_MEDIAN, schema.PERFECT_TWIN_CHANCE]]
        guess = guesses[column][[schema.DEVICE_UUID, schema.OTHER_BOARDS_MEDIAN, schema.CHECK_ERROR]]
        part = ceiling.merge(guess, on=schema.DEVICE_UUID).rename(columns={
            schema.BOARD_MEDIAN: f"{column} median", schema.PERFECT_TWIN_CHANCE: f"{column} perfect-twin chance",
            schema.OTHER_BOARDS_MEDIAN: f"{column} other boards", schema.CHECK_ERROR: f"{column} other boards err"})
        merged = part if merged is None else merged.merge(part.drop(columns=schema.START_COUNT), on=schema.DEVICE_UUID)
    joint = cap_start_spread.joint_ceiling(starts)[[schema.DEVICE_UUID, schema.PERFECT_TWIN_CHANCE]]
    merged = merged.merge(joint.rename(columns={schema.PERFECT_TWIN_CHANCE: BOTH}), on=schema.DEVICE_UUID)
    merged[schema.DEVICE_UUID] = merged[schema.DEVICE_UUID].map(board_label)
    return merged


def plot(starts: pd.DataFrame, boards: pd.DataFrame, by_starts: dict, path: Path) -> None:
    """Each board's starts, median and ±25 % band for both rows, and a perfect twin's chance against n starts."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6), gridspec_kw={"width_ratios": [2.2, 2.2, 1.3]})
    order = boards.sort_values(f"{schema.OVERSHOOT_W} median")[schema.DEVICE_UUID].tolist()
    short = starts[schema.DEVICE_UUID].map(board_label)
    for ax, column in zip(axes[:2], cap_start_spread.SCORED, strict=True):
        pooled = float(starts[column].median())
        for x, board in enumerate(order):
            values = starts.loc[short == board, column].to_numpy(float)
            median = float(pd.Series(values).median())
            low, high = (median * 0.75, median * 1.25) if column == schema.OVERSHOOT_W else (
                max(median, 0.1) * 0.75, max(median, 0.1) * 1.25)
            ax.fill_between([x - 0.35, x + 0.35], low, high, color="tab:green", alpha=0.25, lw=0)
            ax.plot(x + (pd.Series(range(len(values))) / max(len(values) - 1, 1) - 0.5) * 0.5, values, ".",
                    color="tab:blue", ms=5)
            ax.plot([x - 0.35, x + 0.35], [median, median], "-", color="black", lw=1.5)
        ax.axhline(pooled, color="tab:red", ls="--", lw=1, label=f"all boards' median {pooled:.2f}")
        ax.set_xticks(range(len(order)), order, rotation=70, fontsize=7)
        ax.set(ylabel=LABELS[column], title=f"{LABELS[column]}: each start (•), board median (—), ±25 % (green)")
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8, loc="upper left")
    ax = axes[2]
    for column, colour in zip(cap_start_spread.SCORED, ("tab:blue", "tab:orange"), strict=True):
        table = by_starts[column]
        ax.plot(table[schema.START_COUNT], 100 * table[schema.PERFECT_TWIN_CHANCE], "o-", color=colour, label=LABELS[column].split(" ")[0])
    counts = boards[schema.START_COUNT]
    ax.axvspan(counts.min(), counts.max(), color="grey", alpha=0.15, label="starts per board here")
    ax.set(xscale="log", xlabel="starts recorded on the board", ylabel="perfect twin within 25 % (%)",
           ylim=(0, 100), title="a perfect twin's chance to meet the row")
    ticks = by_starts[cap_start_spread.SCORED[0]][schema.START_COUNT].tolist()
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.title.set_fontsize(9)
    ax.legend(fontsize=8, loc="lower right")
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path, help="capstarts recordings (several per board pool)")
    ap.add_argument("--out", type=Path, default=None, help="write starts.csv and boards.csv here")
    ap.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    args = ap.parse_args(argv)
    starts = cap_start_spread.board_starts(read_recording(p) for p in args.recordings)
    if starts[schema.DEVICE_UUID].nunique() < 2:  # every figure here sets a board against the others
        print("cap_start_spread: the recordings hold the capped starts of one board; the spread between boards "
              "needs two or more (a board's own starts: benchmarks/cap_starts_plot.py)", file=sys.stderr)
        return 2
    ceilings = {c: cap_start_spread.median_ceiling(starts, c) for c in cap_start_spread.SCORED}
    guesses = {c: cap_start_spread.pooled_guess(starts, c) for c in cap_start_spread.SCORED}
    boards = board_table(starts, ceilings, guesses)
    print(f"{len(starts)} starts on {len(boards)} boards (real)\n")
    print(markdown_table(boards.round(3)))
    by_starts = {}
    for column in cap_start_spread.SCORED:
        summary = cap_start_spread.between_boards(starts, column)
        guess, ceiling = guesses[column], ceilings[column]
        by_starts[column] = cap_start_spread.ceiling_by_starts(starts, column)
        print(f"\n{LABELS[column]}: Kruskal–Wallis p = {summary['kruskal_p']:.3g} over {summary['boards']} boards, "
              f"between-board share of variance {summary['between_share']:.2f}; boards within 25 %: perfect twin "
              f"expects {ceiling[schema.PERFECT_TWIN_CHANCE].sum():.1f} of {len(ceiling)}, the other boards' median "
              f"meets {int(guess[schema.CHECK_WITHIN].sum())}\n")
        print(markdown_table(by_starts[column].round(3)))
    print(f"\nboth rows at once: a perfect twin expects {boards[BOTH].sum():.1f} of "
          f"{len(boards)} boards")
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        starts.to_csv(args.out / "starts.csv", index=False)
        boards.to_csv(args.out / "boards.csv", index=False)
    if args.plot:
        plot(starts, boards, by_starts, args.plot)
        print(f"\nwrote {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
