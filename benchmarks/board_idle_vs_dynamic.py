"""Does a board's idle power tell its dynamic power? Rank correlation per part number (real, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/board_idle_vs_dynamic.py --preset h200-raw-pooled datasets/h200*/raw_recording_*

A thin caller of :func:`powermodels.board_calibration.pooled.board_levels` (``domains=True``, no thermal read):
each board's idle power at the preset's reference temperature against its core and memory factors, the median
over a board's recordings, then Spearman's rank correlation within each board part number. A strong correlation
would let a reading of the idle board stand in for the first seconds of its workloads (docs/twin.md, session 21).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from scipy import stats

from powermodels import schema
from powermodels.board_calibration.pooled import board_levels
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table

FACTORS = (schema.CORE_SCALE, schema.MEMORY_SCALE, schema.DYNAMIC_SCALE)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--preset", default="h200-raw-pooled")
    args = ap.parse_args(argv)
    levels = board_levels(args.preset, (read_recording(p) for p in args.recordings), thermal=False, domains=True)
    per_recording = levels.drop_duplicates([schema.DEVICE_UUID, schema.RECORDING_NAME])
    boards = per_recording.groupby(schema.DEVICE_UUID).agg(
        {schema.IDLE_AT_REF_W: "median", **{f: "median" for f in FACTORS}, schema.BOARD_PART_NUMBER: "first"})
    print(f"{len(boards)} boards, {len(per_recording)} recordings (real); idle at the reference temperature "
          f"{boards[schema.IDLE_AT_REF_W].min():.1f}–{boards[schema.IDLE_AT_REF_W].max():.1f} W\n")
    rows = []
    for part, group in boards.groupby(schema.BOARD_PART_NUMBER):
        for factor in FACTORS:
            if group[factor].notna().sum() < 3:
                continue
            rho = stats.spearmanr(group[schema.IDLE_AT_REF_W], group[factor], nan_policy="omit")
            rows.append({"part": part or "(unknown)", "boards": len(group), "factor": factor,
                         "spearman": float(rho.statistic), "p": float(rho.pvalue)})
    if not rows:
        print("no part number has 3 boards with these factors: no correlation to read")
        return 0
    print(markdown_table(pd.DataFrame(rows).round(3)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
