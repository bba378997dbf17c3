"""Each board's thermal-network factors, one per pole, against a preset (real recordings, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_thermal_poles.py --preset h200-raw-part-000 --out DIR \\
        datasets/h200-2026-11-2*/raw_recording_*

For each recording, :func:`powermodels.board_calibration.thermal.pole_factors` fits the die
readings with one factor per pole of the preset's Foster network, twice: over the readings before
the first thermal series (what a causal board calibration may read) and over the whole recording (a
diagnostic of the board). Writes ``DIR/pole_factors.csv`` (one row per recording) and
``DIR/pole_factors.md`` (the rows, and the median over boards of each board's median). Boards come
from each recording's provenance, so repeats of one board count once in the medians. Real
readings, the preset's network: the factors say which pole of the preset a board differs in
(docs/twin.md, session 18: the H200s' slow pole).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_calibration.parts import board_part_number
from powermodels.board_calibration.thermal import pole_factors
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table

#: how much of each recording a fit reads, and the column prefix its figures get
SPANS = {"before series": True, "whole": False}


def factors_row(rec, preset) -> dict:
    """One recording's pole factors (both spans; NaN where a span does not identify them)."""
    row = {schema.RECORDING_NAME: rec.name, schema.DEVICE_UUID: rec.board,
           schema.BOARD_PART_NUMBER: board_part_number(rec)}
    for label, before in SPANS.items():
        try:
            fit = pole_factors(preset, rec, before_first_series=before)
        except ValueError as err:  # e.g. a thermal-only recording has nothing before its first series
            row[f"{label}: refused"] = str(err)
            continue
        for tau, k in zip(fit["time_constants_s"], fit["factors"], strict=True):
            row[f"{label}: k(τ={tau:.3g} s)"] = round(k, 3)
        row[f"{label}: rms °C"] = round(fit["rms_c"], 2)
        row[f"{label}: rms one factor °C"] = round(fit["rms_one_factor_c"], 2)
    return row


def board_medians(table: pd.DataFrame) -> pd.Series:
    """The median over boards of each board's median, for every factor column."""
    factors = [c for c in table.columns if ": k(" in c]
    return table.groupby(schema.DEVICE_UUID)[factors].median().median()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--preset", default="h200-raw-part-000")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    rows = []
    for k, path in enumerate(args.recordings, 1):
        rows.append(factors_row(read_recording(path), args.preset))
        print(f"[{k}/{len(args.recordings)}] {path.name}", flush=True)
    table = pd.DataFrame(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "pole_factors.csv", index=False)
    medians = board_medians(table)
    text = (f"# Pole factors against {args.preset} ({table[schema.DEVICE_UUID].nunique()} boards)\n\n"
            + markdown_table(table.drop(columns=[c for c in table if c.endswith("refused")]))
            + "\n\nMedian over boards:\n\n" + markdown_table(medians.round(3).rename("median").reset_index()) + "\n")
    (args.out / "pole_factors.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
