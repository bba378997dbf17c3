"""Where a twin's warm-up row misses: its power, or its launches per second (twin vs real, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/warmup_miss_split.py [--from-s 2] [--out split.csv] OUT… \\
        --real datasets/h200-2026-11-29/raw_recording_*

``OUT`` is a ``twin-compare`` output folder (its ``twin/`` recording names the real recording it replayed in its
provenance's ``schedule_from``; the real one is found among ``--real`` by that name). Each series' warm-up miss is
split into its power and its launches per second (:func:`powermodels.warmup_split.warmup_miss_split`); printed per workload over all the folders:
the medians of each factor and of the die's difference (twin minus real), and how many rows miss 1 % at their worst
second. Each column is its own median, so the columns only nearly multiply.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from powermodels import schema
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("outs", nargs="+", type=Path, help="twin-compare output folders (each with twin/); give them "
                    "before --real, or end --real's list with --")
    ap.add_argument("--real", nargs="+", type=Path, required=True, help="the real recordings they replayed")
    ap.add_argument("--from-s", type=float, default=2.0, help="first second read (the warm-up row's)")
    ap.add_argument("--out", type=Path, help="write every row here (CSV)")
    args = ap.parse_args(argv)
    try:
        reals = {p.name: p for p in args.real}
        if len(reals) < len(args.real):
            raise ValueError("two --real recordings have the same folder name; a twin names only the folder it "
                             "replayed, so give each name once")
        parts = []
        for out in args.outs:
            twin = read_recording(out / "twin")
            name = str(twin.provenance.get("schedule_from", ""))
            if name not in reals:
                raise ValueError(f"{out}: its twin replayed {name or 'an unnamed recording'}, which is not among --real")
            parts.append(warmup_miss_split(read_recording(reals[name]), twin, from_s=args.from_s))
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
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
