"""Each board's thermal-series levels, one table (real recordings, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/series_levels.py [--from-s 5] [--out levels.csv] \\
        datasets/h200-2026-11-29/raw_recording_*

For each recording, :func:`powermodels.series_levels.series_levels` reads every thermal series from
``--from-s`` seconds on: mean power, highest die and HBM readings, median NVML clock and median time
per launch. Prints one markdown row per recording with the board (first 8 hex digits of its UUID)
and its part number, the way the dataset READMEs list them (e.g. ``datasets/h200-2026-11-29``), and
with ``--out`` writes every series' row as CSV.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_calibration.parts import board_part_number
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.series_levels import DEFAULT_FROM_S, series_levels

#: the README's columns: (workload, level column, header, format)
COLUMNS = (("cupy_triad_256MiB", schema.POWER_AVERAGE_W, "triad W", "{:.1f}"),
           ("cupy_fp32_matmul_4096", schema.TIME_S, "fp32 GEMM launch µs", "{:,.1f}"),
           ("cupy_fp32_matmul_4096", schema.TEMPERATURE_C, "fp32 die °C", "{:.0f}"),
           ("cupy_fp32_matmul_4096", schema.MEMORY_TEMPERATURE_C, "fp32 HBM °C", "{:.0f}"),
           ("torch_bf16_matmul_8192", schema.SM_CLOCK_MHZ, "capped bf16 NVML clock MHz", "{:.0f}"),
           ("torch_bf16_matmul_8192", schema.TEMPERATURE_C, "capped bf16 die °C", "{:.0f}"))


def board_row(rec, levels: pd.DataFrame) -> dict:
    """One recording's README row: board, part, and each of :data:`COLUMNS` (blank where not recorded)."""
    part = board_part_number(rec)
    row = {"board": str(rec.provenance.get("uuid", "GPU-" + rec.name))[4:12],
           "part": part[-4:]}
    first = levels.drop_duplicates(schema.WORKLOAD).set_index(schema.WORKLOAD)
    for workload, column, header, fmt in COLUMNS:
        value = first[column].get(workload, float("nan")) if column in first else float("nan")
        row[header] = fmt.format(value * 1e6 if column == schema.TIME_S else value) if pd.notna(value) else ""
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--from-s", type=float, default=DEFAULT_FROM_S, help="seconds skipped at each series' start")
    ap.add_argument("--out", type=Path, help="CSV of every series' levels")
    args = ap.parse_args(argv)
    rows, frames = [], []
    for path in args.recordings:
        rec = read_recording(path)
        levels = series_levels(rec, from_s=args.from_s)
        rows.append(board_row(rec, levels))
        frames.append(levels.assign(**{schema.RECORDING_NAME: rec.name}))
    print(markdown_table(pd.DataFrame(rows)))
    if args.out:
        pd.concat(frames, ignore_index=True).to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
