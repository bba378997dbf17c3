"""Where a twin's warm-up row misses: its power, or its launches per second (twin vs real, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/warmup_miss_split.py [--from-s 2] [--out split.csv] [--drift drift.csv] \\
        [--slopes slopes.csv] [--cooling cooling.csv] OUT… \\
        --real datasets/h200-2026-11-29/raw_recording_*

``OUT`` is a ``twin-compare`` output folder (its ``twin/`` recording names the real recording it replayed in its
provenance's ``schedule_from``; the real one is found among ``--real`` by that name). Each series' warm-up miss is
split into its power and its launches per second (:func:`powermodels.warmup_split.warmup_miss_split`); printed per workload over all the folders:
the medians of each factor and of the die's difference (twin minus real), and how many rows miss 1 % at their worst
second. Each column is its own median, so the columns only nearly multiply. ``--drift`` splits the same rows the
other way (:func:`powermodels.board_pair.warmup_drift`): the board's and the twin's rise from seconds 2-4 to 20-24,
and the gap at both ends, so a miss of the twin's level (the gap the same at both ends) is told from one of its
warming (the gap growing). ``--slopes`` fits each series' energy per launch against its own die over seconds 2-25,
board and twin (:func:`powermodels.board_pair.warmup_temperature_slope`). ``--cooling`` reads the die every second
of the idle after each series, board and twin (:func:`powermodels.board_pair.cooling_pair`), and prints the median
twin-minus-board difference per second: where in the cooling a twin's network misses.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_pair import board_pair, cooling_pair, warmup_drift, warmup_temperature_slope
from powermodels.files import atomic_open
from powermodels.recording import RecordingError, read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.compare import TARGETS
from powermodels.warmup_split import warmup_miss_split

#: the warm-up row's target, % at the worst second
TARGET_PCT = TARGETS["warmup_pct"]
#: the seconds of a series the warm-up row reads (warmup_energy_per_launch's default, as compare reads it)
SECONDS = 25


def summary(split: pd.DataFrame) -> pd.DataFrame:
    """Per workload: rows, rows missing the target, and the medians of the factors."""
    by = split.groupby(schema.WORKLOAD)
    factors = [schema.ENERGY_PER_LAUNCH_ERROR_PCT, schema.POWER_ERROR_PCT, schema.LAUNCH_RATE_ERROR_PCT,
               schema.DIE_DIFFERENCE_C]
    table = by[factors].median().round(2)
    table.insert(0, "rows", by.size())
    table.insert(1, f"over {TARGET_PCT:g} %",
                 by[schema.WARMUP_WORST_PCT].apply(lambda x: int((x.abs() > TARGET_PCT).sum())))
    return table.reset_index()


def drift_summary(drift: pd.DataFrame) -> pd.DataFrame:
    """Per workload: the medians of the board's and the twin's rise through the warm-up, how often the twin rises
    more, and the median gap at both ends."""
    excess = drift[schema.DRIFT_B_PCT] - drift[schema.DRIFT_A_PCT]
    by = drift.assign(excess=excess).groupby(schema.WORKLOAD)
    table = by[[schema.DRIFT_A_PCT, schema.DRIFT_B_PCT, "excess", schema.EARLY_DIFF_PCT, schema.LATE_DIFF_PCT,
                schema.DIE_RISE_A_C, schema.DIE_RISE_B_C]].median().round(2)
    table = table.rename(columns={schema.DRIFT_A_PCT: "real rise %", schema.DRIFT_B_PCT: "twin rise %",
                                  "excess": "twin − real, points", schema.EARLY_DIFF_PCT: "gap at 2-4 s %",
                                  schema.LATE_DIFF_PCT: "gap at 20-24 s %", schema.DIE_RISE_A_C: "real die rise °C",
                                  schema.DIE_RISE_B_C: "twin die rise °C"})
    table.insert(0, "rows", by.size())
    table.insert(4, "twin rises more", by["excess"].apply(lambda x: int((x > 0).sum())))
    return table.reset_index()


def slope_summary(slopes: pd.DataFrame) -> pd.DataFrame:
    """Per workload: the median warm-up slope of board and twin, and how many series have both slopes and a board
    slope below the twin's."""
    both = slopes.dropna(subset=[schema.WARMUP_SLOPE_A_PCT_PER_C, schema.WARMUP_SLOPE_B_PCT_PER_C])
    by = both.groupby(schema.WORKLOAD)
    table = by[[schema.WARMUP_SLOPE_A_PCT_PER_C, schema.WARMUP_SLOPE_B_PCT_PER_C, schema.DIE_SPAN_A_C,
                schema.DIE_SPAN_B_C]].median().round(3)
    table = table.rename(columns={schema.WARMUP_SLOPE_A_PCT_PER_C: "real %/°C", schema.WARMUP_SLOPE_B_PCT_PER_C:
                                  "twin %/°C", schema.DIE_SPAN_A_C: "real die span °C",
                                  schema.DIE_SPAN_B_C: "twin die span °C"})
    table.insert(0, "rows with both", by.size())
    table.insert(1, "real below twin", by.apply(
        lambda g: int((g[schema.WARMUP_SLOPE_A_PCT_PER_C] < g[schema.WARMUP_SLOPE_B_PCT_PER_C]).sum())))
    return table.reset_index()


#: the seconds after a series' end that --cooling prints (every one is written)
COOLING_SECONDS = (1, 2, 3, 4, 5, 10, 30)


def cooling_summary(cooling: pd.DataFrame) -> pd.DataFrame:
    """Per workload, and all together: the median twin − board die (°C) at :data:`COOLING_SECONDS` after the load,
    and how many series read the twin 1.5 °C or more cooler at second 2."""
    diff = cooling.assign(d=cooling[schema.TEMPERATURE_B_C] - cooling[schema.TEMPERATURE_A_C])
    diff = diff.loc[diff[schema.SECOND].isin(COOLING_SECONDS)]
    wide = diff.pivot_table(index=[schema.RECORDING_NAME, schema.WORKLOAD], columns=schema.SECOND, values="d")
    rows = [("all", wide)] + [(w, g) for w, g in wide.groupby(level=schema.WORKLOAD)]
    table = pd.DataFrame([{schema.WORKLOAD: w, "series": len(g),
                           **{f"{sec} s": round(float(g[sec].median()), 2) for sec in g.columns},
                           "twin ≥ 1.5 °C cooler at 2 s": int((g[2] <= -1.5).sum()) if 2 in g.columns else 0}
                          for w, g in rows])
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outs", nargs="+", type=Path, help="twin-compare output folders (each with twin/); give them "
                    "before --real, or end --real's list with --")
    ap.add_argument("--real", nargs="+", type=Path, required=True, help="the real recordings they replayed")
    ap.add_argument("--from-s", type=float, default=2.0, help="first second read (the warm-up row's)")
    ap.add_argument("--out", type=Path, help="write every row here (CSV)")
    ap.add_argument("--drift", type=Path, metavar="CSV",
                    help="also split each row into its level and its drift (board_pair.warmup_drift: the rise from "
                         "seconds 2-4 to 20-24, real and twin) and write every row here")
    ap.add_argument("--cooling", type=Path, metavar="CSV",
                    help="also read the die every second of the idle after each series, real and twin "
                         "(board_pair.cooling_pair), and write every row here")
    ap.add_argument("--slopes", type=Path, metavar="CSV",
                    help="also fit each series' energy per launch against its die over seconds 2-25, real and twin "
                         "(board_pair.warmup_temperature_slope), and write every row here")
    args = ap.parse_args(argv)
    try:
        reals = {p.name: p for p in args.real}
        if len(reals) < len(args.real):
            raise ValueError("two --real recordings have the same folder name; a twin names only the folder it "
                             "replayed, so give each name once")
        parts, drifts, slopes, coolings = [], [], [], []
        for out in args.outs:
            twin = read_recording(out / "twin")
            name = str(twin.provenance.get("schedule_from", ""))
            if name not in reals:
                raise ValueError(f"{out}: its twin replayed {name or 'an unnamed recording'}, which is not among --real")
            real = read_recording(reals[name])
            parts.append(warmup_miss_split(real, twin, from_s=args.from_s))
            if args.drift or args.slopes:
                pair = board_pair(real, twin)
            if args.drift:
                drifts.append(warmup_drift(pair).assign(**{schema.RECORDING_NAME: name}))
            if args.slopes:
                slopes.append(warmup_temperature_slope(pair).assign(**{schema.RECORDING_NAME: name}))
            if args.cooling:
                coolings.append(cooling_pair(real, twin).assign(**{schema.RECORDING_NAME: name}))
    except (RecordingError, ValueError) as err:
        print(f"warmup_miss_split: {err}", file=sys.stderr)
        return 2
    split = pd.concat(parts, ignore_index=True)
    if split.empty:
        print("warmup_miss_split: no series in both a real recording and its twin", file=sys.stderr)
        return 2
    print(f"{len(split)} series on {split[schema.DEVICE_UUID].nunique()} boards (twin vs real), seconds "
          f"{args.from_s:g} to {SECONDS}: (1 + energy per launch error) = (1 + power error) / (1 + launch-rate error), "
          "mean errors in %, die twin minus real in °C\n")
    print(markdown_table(summary(split)))
    if args.out:
        with atomic_open(args.out, "w") as fh:  # the folder made, the file replaced whole or not at all
            split.to_csv(fh, index=False)
    extra = ((args.drift, drifts, drift_summary, "The same rows as level and drift: each one's energy per launch from "
              "seconds 2-4 to 20-24 (rise), and twin over real at both ends (gap)"),
             (args.slopes, slopes, slope_summary, "Each series' energy per launch against its own die over seconds "
              "2-25 (% per °C of its mean; NaN where the die moved less than 0.5 °C)"),
             (args.cooling, coolings, cooling_summary, "The cooling after each series: twin − real die (°C) at each "
              "second after the load, medians"))
    for path, frames, summarise, title in extra:
        if path:
            rows = pd.concat(frames, ignore_index=True)
            print(f"\n{title}\n")
            print(markdown_table(summarise(rows)))
            with atomic_open(path, "w") as fh:
                rows.to_csv(fh, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
