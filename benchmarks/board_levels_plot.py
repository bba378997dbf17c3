"""How far apart boards of one part are: each board's energy per launch at one die temperature (real data, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/board_levels_plot.py --alpha-w-per-c 1.409 \\
        --mark 35bf2c4b cc4dc46e --out docs/img/board_levels_h200.png --csv levels.csv \\
        datasets/h200-2026-11-2*/raw_recording_* datasets/h200-2026-11-30/raw_recording_*

Each board counts once, by the first of its recordings given (a ``repeat`` recording of a board already read is
skipped). For every uncapped workload, :func:`powermodels.series_levels.energy_levels_across_boards` moves the
board's series power to the boards' median die temperature with the leakage slope ``--alpha-w-per-c`` and compares
its energy per launch with the median board of its part number. Prints, per part and workload, the boards, the
spread (sd, min, max) and the marked boards' place; draws one strip per part and workload.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
from _common import board_label, save_figure

from powermodels import schema
from powermodels.board_calibration.parts import board_part_number
from powermodels.files import atomic_open
from powermodels.recording import RecordingError, read_recording
from powermodels.reporting import markdown_table
from powermodels.series_levels import energy_levels_across_boards, series_levels
from powermodels.twin.metrics import capped_series


def board_levels(paths) -> pd.DataFrame:
    """The first thermal series of every uncapped workload, one board each (its first recording given)."""
    rows, seen = [], set()
    for path in paths:
        rec = read_recording(path)
        uuid = str(rec.provenance.get("uuid", rec.name))
        if uuid in seen:
            continue
        seen.add(uuid)
        capped = capped_series(rec)
        levels = series_levels(rec).drop_duplicates(schema.WORKLOAD)
        levels = levels.loc[~levels[schema.WORKLOAD].isin(capped)]
        rows.append(levels.assign(**{schema.DEVICE_UUID: uuid, schema.BOARD_PART_NUMBER: board_part_number(rec)}))
    return pd.concat(rows, ignore_index=True)


def spread_table(levels: pd.DataFrame, marks) -> pd.DataFrame:
    """Per part and workload: boards, sd / min / max of part_diff_pct, and each marked board's value."""
    rows = []
    for (part, workload), g in levels.groupby([schema.BOARD_PART_NUMBER, schema.WORKLOAD]):
        diff = g[schema.PART_DIFF_PCT]
        row = {"part": part[-4:], "workload": workload, "boards": len(g), "sd %": round(float(diff.std()), 2),
               "min %": round(float(diff.min()), 2), "max %": round(float(diff.max()), 2)}
        labels = g[schema.DEVICE_UUID].map(board_label)
        for mark in marks:
            hit = diff[labels == mark]
            row[mark] = round(float(hit.iloc[0]), 2) if len(hit) else ""
        rows.append(row)
    return pd.DataFrame(rows)


def plot(levels: pd.DataFrame, marks, path: Path) -> None:
    """One panel per workload: each part's boards as a strip, the marked boards named."""
    import matplotlib.pyplot as plt
    import numpy as np

    workloads = sorted(levels[schema.WORKLOAD].unique())
    parts = sorted(levels[schema.BOARD_PART_NUMBER].unique())
    fig, axes = plt.subplots(1, len(workloads), figsize=(4.2 * len(workloads), 4.2), sharey=True, squeeze=False)
    boards = levels.groupby(schema.BOARD_PART_NUMBER)[schema.DEVICE_UUID].nunique()
    rng = np.random.default_rng(0)  # jitter only, so the strips do not overlap; the same picture every run
    for ax, workload in zip(axes[0], workloads, strict=True):
        for k, part in enumerate(parts):
            g = levels.loc[(levels[schema.WORKLOAD] == workload) & (levels[schema.BOARD_PART_NUMBER] == part)]
            x = k + rng.uniform(-0.15, 0.15, len(g))
            labels = g[schema.DEVICE_UUID].map(board_label).to_numpy()
            marked = np.isin(labels, list(marks))
            ax.scatter(x[~marked], g[schema.PART_DIFF_PCT].to_numpy()[~marked], s=18, color="tab:blue", alpha=0.6)
            ax.scatter(x[marked], g[schema.PART_DIFF_PCT].to_numpy()[marked], s=40, color="tab:red")
            for xi, yi, name in zip(x[marked], g[schema.PART_DIFF_PCT].to_numpy()[marked], labels[marked], strict=True):
                ax.annotate(name, (xi, yi), textcoords="offset points", xytext=(6, -3), fontsize=8, color="tab:red")
        ax.axhspan(-1, 1, color="0.9", zorder=0)
        ax.axhline(0, color="0.5", lw=0.8)
        ax.set_xticks(range(len(parts)), [f"{p[-4:]} ({boards[p]})" for p in parts])
        ax.set_title(workload)
        ax.set_xlabel("board part number (boards)")
    axes[0][0].set_ylabel("energy per launch at one die:\nboard / its part's median − 1 (%)")
    fig.suptitle("Real H200 boards, one recording each: the board's own level (grey band: ±1 %)")
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--alpha-w-per-c", type=float, default=1.409, help="leakage slope, W/°C (session 15's H200 value)")
    ap.add_argument("--mark", nargs="*", default=[], help="boards (first 8 hex digits of the UUID) to name")
    ap.add_argument("--out", type=Path, help="the figure (PNG)")
    ap.add_argument("--csv", type=Path, help="write every board's row here")
    args = ap.parse_args(argv)
    try:
        levels = energy_levels_across_boards(board_levels(args.recordings), alpha_w_per_c=args.alpha_w_per_c)
    except (RecordingError, ValueError) as err:
        print(f"board_levels_plot: {err}", file=sys.stderr)
        return 2
    print(f"{levels[schema.DEVICE_UUID].nunique()} boards (real); energy per launch at each workload's median die, "
          f"{args.alpha_w_per_c} W/°C\n")
    print(markdown_table(spread_table(levels, args.mark)))
    if args.csv:
        with atomic_open(args.csv, "w") as fh:  # the folder made, the file replaced whole or not at all
            levels.to_csv(fh, index=False)
    if args.out:
        plot(levels, args.mark, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
