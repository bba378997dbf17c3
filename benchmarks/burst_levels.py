"""Does a board's power at a fixed clock and die temperature hold one level, or move between levels? (real recordings, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/burst_levels.py datasets/h200-2026-11-2*/raw_recording_* \\
        [--alpha-w-per-c 1.409] [--out levels.csv] [--show raw_recording_b55f945c] \\
        [--plot docs/img/burst_levels_h200.png] [--twin OUT/PRESET/RECORDING/twin ...]

A raw recording's natural part runs each uncapped workload in ~16 short bursts at the top clock, between capped
pressure entries. :func:`powermodels.series_vs_bursts.burst_levels` brings each burst's counter power to one die
temperature (the leakage slope ``--alpha-w-per-c``) and :func:`~powermodels.series_vs_bursts.level_persistence`
reads, per recording and workload, the spread of those levels and the correlation of consecutive bursts' levels.
The twin's power depends on the clock, activity and die alone, so its replays show what the method reads without
such a state (``--twin``, given last: it takes every path after it). Prints both per workload and the real
recordings against the twins; ``--out`` writes every burst, ``--plot`` draws the spread
against the correlation and, with ``--show``, one recording's levels in time.
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
from powermodels.series_vs_bursts import burst_levels_all, level_persistence

#: the leakage slope of the H200 measured in session 15 (W/°C), as board_repeats_plot.py takes it
DEFAULT_ALPHA_W_PER_C = 1.409


#: a change of level between consecutive bursts counted as a step (the ~1.5 % apart levels seen in session 29)
STEP_PCT = 1.25


def summary(persistence: pd.DataFrame, levels: pd.DataFrame) -> pd.DataFrame:
    """Per workload: recordings, the burst levels' median and largest spread, their median lag-1 correlation, and
    how many changes between consecutive bursts of a recording exceed :data:`STEP_PCT`."""
    by = persistence.groupby(schema.WORKLOAD)
    changes = (levels.sort_values(schema.T0_S).groupby([schema.RECORDING_NAME, schema.WORKLOAD])[schema.BURST_LEVEL_PCT]
               .diff().abs().dropna())
    steps = changes.groupby(levels.loc[changes.index, schema.WORKLOAD])
    table = pd.DataFrame({
        "recordings": by.size(),
        "median level sd %": by[schema.LEVEL_SD_PCT].median().round(2),
        "max level sd %": by[schema.LEVEL_SD_PCT].max().round(2),
        "median lag-1 corr": by[schema.LEVEL_LAG1_CORR].median().round(2),
        "lag-1 corr > 0": by[schema.LEVEL_LAG1_CORR].apply(lambda c: f"{int((c > 0).sum())} of {c.size}"),
        f"steps > {STEP_PCT:g} %": steps.apply(lambda c: f"{int((c > STEP_PCT).sum())} of {c.size}"),
    })
    return table.reset_index()


def real_against_twin(real: pd.DataFrame, twin: pd.DataFrame) -> pd.DataFrame:
    """Per workload: two-sided Mann-Whitney p of the real recordings' level spreads and lag-1 correlations against
    the twins' (are the boards' levels wider, more persistent, than what the reading spreads on its own?)."""
    from scipy.stats import mannwhitneyu

    rows = []
    for workload in sorted(set(real[schema.WORKLOAD]) & set(twin[schema.WORKLOAD])):
        r, t = (x.loc[x[schema.WORKLOAD] == workload] for x in (real, twin))
        rows.append({schema.WORKLOAD: workload, **{
            f"{name} p": float(f"{mannwhitneyu(r[col].dropna(), t[col].dropna()).pvalue:.2g}")
            for name, col in (("level sd", schema.LEVEL_SD_PCT), ("lag-1 corr", schema.LEVEL_LAG1_CORR))}})
    return pd.DataFrame(rows)


def broken_line(levels: pd.DataFrame, gap_s: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """Burst starts and levels with a NaN wherever two bursts lie more than ``gap_s`` apart (no line across)."""
    t = levels[schema.T0_S].to_numpy(float)
    y = levels[schema.BURST_LEVEL_PCT].to_numpy(float)
    cut = np.flatnonzero(np.diff(t) > gap_s) + 1
    return np.insert(t, cut, np.nan), np.insert(y, cut, np.nan)


def plot(real: pd.DataFrame, twin: pd.DataFrame | None, levels: pd.DataFrame, twin_levels: pd.DataFrame | None,
         show: str | None, path: Path) -> None:
    """Left: each recording's level spread against its lag-1 correlation; right: ``show``'s levels in time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2 if show else 1, figsize=(12 if show else 6.5, 4.2), squeeze=False)
    ax = axes[0, 0]
    workloads = sorted(real[schema.WORKLOAD].unique())
    for i, workload in enumerate(workloads):
        r = real.loc[real[schema.WORKLOAD] == workload]
        ax.plot(r[schema.LEVEL_LAG1_CORR], r[schema.LEVEL_SD_PCT], "o", ms=4, alpha=0.7, color=f"C{i}",
                label=f"{workload} (real)")
        if twin is not None:
            t = twin.loc[twin[schema.WORKLOAD] == workload]
            ax.plot(t[schema.LEVEL_LAG1_CORR], t[schema.LEVEL_SD_PCT], "o", ms=5, mfc="none", color=f"C{i}",
                    label=f"{workload} (twins)")
    ax.axvline(0.0, color="grey", lw=1)
    ax.set_xlabel("correlation of consecutive bursts' levels")
    ax.set_ylabel("spread of the burst levels (sd), %")
    ax.legend(fontsize=7)
    if show:
        ax = axes[0, 1]
        for i, workload in enumerate(workloads):
            one = levels.loc[(levels[schema.RECORDING_NAME] == show) & (levels[schema.WORKLOAD] == workload)]
            ax.plot(*broken_line(one), "o-", ms=4, color=f"C{i}", label=f"{workload} (real)")
            if twin_levels is not None:
                own = twin_levels.loc[twin_levels[schema.RECORDING_NAME].str.endswith("/" + show)
                                      & (twin_levels[schema.WORKLOAD] == workload)]
                ax.plot(*broken_line(own), "x--", ms=4, color=f"C{i}", alpha=0.6,
                        label=f"{workload} (twin)")
        ax.axhline(0.0, color="grey", lw=1)
        ax.set_xlabel("burst start, s into the recording (lines join bursts under 10 s apart)")
        ax.set_ylabel("burst level at the median die − median, %")
        ax.set_title(show, fontsize=9)
        ax.legend(fontsize=7)
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--alpha-w-per-c", type=float, default=DEFAULT_ALPHA_W_PER_C,
                    help="leakage slope bringing each burst to the median die (W/°C; 0 reads power as is)")
    ap.add_argument("--twin", nargs="+", type=Path, default=[], help="twins' recordings to read the same way")
    ap.add_argument("--out", type=Path, help="write every burst's level here (CSV; a 'source' column says which)")
    ap.add_argument("--plot", type=Path, help="draw the spread against the correlation here (PNG)")
    ap.add_argument("--show", help="a real recording's name (folder) whose levels --plot draws in time")
    args = ap.parse_args(argv)
    try:
        levels, twin_levels = read_real_and_twin(
            args.recordings, args.twin, lambda recs: burst_levels_all(recs, alpha_w_per_c=args.alpha_w_per_c))
    except (RecordingError, ValueError) as err:
        print(f"burst_levels: {err}", file=sys.stderr)
        return 2
    real = level_persistence(levels)
    if real.empty:
        print("burst_levels: no workload with enough top-clock bursts in the recordings given", file=sys.stderr)
        return 2
    if args.show and args.show not in set(levels[schema.RECORDING_NAME]):
        print(f"burst_levels: --show {args.show!r} is not one of the recordings given", file=sys.stderr)
        return 2
    twin = level_persistence(twin_levels) if twin_levels is not None else None
    print(f"{len(real)} workload runs of {real[schema.RECORDING_NAME].nunique()} recordings on "
          f"{real[schema.DEVICE_UUID].nunique()} boards (real); each burst's counter power from "
          f"{args.alpha_w_per_c:g} W/°C to its workload's median burst die\n")
    print(markdown_table(summary(real, levels)))
    if twin is not None and not twin.empty:
        print(f"\n{len(twin)} workload runs of twins' recordings\n")
        print(markdown_table(summary(twin, twin_levels)))
        print("\nreal against twins (two-sided Mann-Whitney)\n")
        print(markdown_table(real_against_twin(real, twin)))
    if args.out:
        write_real_and_twin(args.out, levels, twin_levels, float_format="%.6g")
    if args.plot:
        plot(real, twin, levels, twin_levels, args.show, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
