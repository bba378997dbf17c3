"""A workload's power in its long series against its short bursts at the same clock and die (real recordings, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/series_vs_bursts.py [--match-c 1.5] [--out gaps.csv] \\
        [--twin OUT/twin ...] [--plot docs/img/series_vs_bursts_h200.png] datasets/h200-2026-11-2*/raw_recording_*

The twin's power is a function of the clock, the activity and the die temperature; where a raw recording's bursts
(natural part) and its series (thermal part) ran one uncapped workload at the same clock and die temperature, such a
twin draws the same power in both. :func:`powermodels.series_vs_bursts.series_against_bursts` reads, per recording
and workload, the series' counter power over its seconds 3-10 against the bursts' at the series' die (within
``--match-c`` °C). Prints each workload's spread over the recordings; ``--twin`` adds the same for twins' recordings
(``twin-compare`` output folders' ``twin/``), ``--out`` writes every row, ``--plot`` draws both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from _common import read_real_and_twin, save_figure, write_real_and_twin

from powermodels import schema
from powermodels.recording import RecordingError
from powermodels.reporting import markdown_table
from powermodels.series_vs_bursts import DEFAULT_MATCH_C, series_against_bursts_all


def summary(gaps: pd.DataFrame) -> pd.DataFrame:
    """Per workload: rows with matched bursts, boards, and the gap's min / median / max and spread (%)."""
    matched = gaps.loc[gaps[schema.BURSTS_MATCHED] > 0]
    by = matched.groupby(schema.WORKLOAD)
    table = by[schema.SERIES_BURST_GAP_PCT].agg(["count", "min", "median", "max", "std"]).round(2)
    table.insert(1, "boards", by[schema.DEVICE_UUID].nunique())
    return table.rename(columns={"count": "rows"}).reset_index()


def plot(real: pd.DataFrame, twin: pd.DataFrame | None, path: Path) -> None:
    """Each workload's gap, one dot per real recording (filled) and per twin recording (open)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted(real[schema.WORKLOAD].unique())
    fig, ax = plt.subplots(figsize=(8, 1.4 + 0.8 * len(workloads)))
    jitter = np.random.default_rng(0)
    for i, workload in enumerate(workloads):
        x = real.loc[real[schema.WORKLOAD] == workload, schema.SERIES_BURST_GAP_PCT].dropna().to_numpy(float)
        ax.plot(x, i + 0.12 + jitter.uniform(-0.1, 0.1, x.size), "o", ms=4, alpha=0.7, color=f"C{i}",
                label="real recordings" if i == 0 else None)
        if twin is not None:
            y = twin.loc[twin[schema.WORKLOAD] == workload, schema.SERIES_BURST_GAP_PCT].dropna().to_numpy(float)
            ax.plot(y, i - 0.22 + jitter.uniform(-0.05, 0.05, y.size), "o", ms=5, mfc="none", color="k",
                    label="twins' replays" if i == 0 else None)
    ax.axvline(0.0, color="grey", lw=1)
    ax.set_yticks(range(len(workloads)), workloads)
    ax.set_xlabel("series power over its bursts' at the same clock and die temperature − 1, %")
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--match-c", type=float, default=DEFAULT_MATCH_C,
                    help="a burst is matched when its mean die reading is within this of the series' (°C)")
    ap.add_argument("--twin", nargs="+", type=Path, default=[], help="twins' recordings to read the same way")
    ap.add_argument("--out", type=Path, help="write every row here (CSV; a 'source' column says real or twin)")
    ap.add_argument("--plot", type=Path, help="draw the gaps per workload here (PNG)")
    args = ap.parse_args(argv)
    try:
        real, twin = read_real_and_twin(
            args.recordings, args.twin, lambda recs: series_against_bursts_all(recs, match_c=args.match_c))
    except (RecordingError, ValueError) as err:
        print(f"series_vs_bursts: {err}", file=sys.stderr)
        return 2
    if real.empty:
        print("series_vs_bursts: no uncapped workload with bursts and a top-clock series in the recordings given",
              file=sys.stderr)
        return 2
    print(f"{len(real)} series on {real[schema.DEVICE_UUID].nunique()} boards (real); gap = the series' counter "
          f"power over seconds 3-10 against its bursts' within {args.match_c:g} °C of its die, at the top clock\n")
    print(markdown_table(summary(real)))
    if twin is not None and not twin.empty:
        print(f"\n{len(twin)} series of twins' recordings\n")
        print(markdown_table(summary(twin)))
    if args.out:
        write_real_and_twin(args.out, real, twin)
    if args.plot:
        plot(real, twin, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
