"""The calibrated twin's capped workload taken apart: its clock, settled power and cycles against the real board's.

Usage::

    # real vs twin, from replays already run (twin_unseen_boards.py's folder of one label)
    PYTHONPATH=src python benchmarks/twin_capped_pieces.py readings \\
        --twin-folder OUT/h200-raw-pooled-domains-thermal-network datasets/h200-2026-11-29/raw_recording_*
    # each board's cycles and capped-clock factor against its own calibration (a pool to take medians of)
    PYTHONPATH=src python benchmarks/twin_capped_pieces.py levels --preset h200-raw-pooled \\
        --out levels.csv datasets/h200-2026-11-28/raw_recording_*

``readings``: per recording, NVML's clock over the natural part's capped ``pressure`` entries (the eight
longest of at least 1.5 s that end before the first series, each cut to 5 s:
:func:`powermodels.twin.fit_controller.capped_entries_before_series`; from 1 s in) and
over the capped ``series`` (from 5 s), the die temperature there and the settled power (NVML's 1 s average), real
and twin. On nine H200s the real clock is the same in both while the twin's rises ~1 % (docs/twin.md, session 22).

``levels``: per recording, the preset calibrated to the board (``calibrate_board(..., scale="domains")`` on the
board's own thermal network, as ``--calibrate-board domains --calibrate-thermal network``), then the capped
workload's time per launch over the preset's at its probed clocks (:func:`powermodels.twin.adapt.adapt_workloads`'s
``probed_ratio``, read from its series: in-sample, for a pool of other boards only) and, with that time, the core
factor that gives the board's settled capped clock
(:func:`powermodels.twin.fit_controller.fit_capped_clock`, ``window="settled"``; ``--preset-cycles``: with the
preset's time, fix 2). Their medians over a pool's boards are the board-blind corrections of session 22's fixes
2 and 3. Real recordings, simulated replays.
"""

from __future__ import annotations

import argparse
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
from _common import board_label

from powermodels import schema
from powermodels.board_calibration import calibrated_preset
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.adapt import adapt_workloads, time_scaled
from powermodels.twin.fit_controller import (
    capped_entries_before_series,
    fit_capped_clock,
    settled_capped_series,
)

#: the capped workload of the raw recordings
CAPPED = "torch_bf16_matmul_8192"


def mean_reading(rec, spans, from_s: float, column: str) -> float:
    """Mean of a trace column from ``from_s`` into each span to its end (NaN where none)."""
    t = rec.trace
    parts = [t.loc[(t[schema.T_S] >= a + from_s) & (t[schema.T_S] <= b), column].dropna() for a, b in spans]
    values = pd.concat(parts) if parts else pd.Series(dtype=float)
    return float(values.mean()) if len(values) else float("nan")


def readings(real, twin) -> dict:
    """Real and twin NVML readings over the capped entries before the series and over the settled series."""
    entries, settled = capped_entries_before_series(real), settled_capped_series(real)
    row = {"board": board_label(real.board)}
    for side, rec in (("real", real), ("twin", twin)):  # the twin replays the real schedule at its times
        row[f"{side} entries MHz"] = mean_reading(rec, entries, 1.0, schema.SM_CLOCK_MHZ)
        row[f"{side} series MHz"] = mean_reading(rec, settled, 5.0, schema.SM_CLOCK_MHZ)
        row[f"{side} series °C"] = mean_reading(rec, settled, 5.0, schema.TEMPERATURE_C)
        row[f"{side} series W"] = mean_reading(rec, settled, 5.0, schema.POWER_AVERAGE_W)
        row[f"{side} series/entries %"] = 100.0 * (row[f"{side} series MHz"] / row[f"{side} entries MHz"] - 1.0)
    return row


def levels(path: str, preset: str, with_cycles: bool = True) -> dict:
    """One recording's capped cycles ratio and settled capped-clock factor against its own calibration.

    ``with_cycles=False`` reads the factor on the preset's own cycles (session 22's fix 2).
    """
    rec = read_recording(path)
    with warnings.catch_warnings():  # a network at its band's edge is widened and says so; the row says enough
        warnings.simplefilter("ignore")
        cal = calibrated_preset(preset, rec, scale="domains", thermal="network")
    ratio = adapt_workloads(cal, rec)[1].get(CAPPED, {}).get("probed_ratio", np.nan)
    moved = replace(cal, workloads={**cal.workloads, CAPPED: time_scaled(cal.workloads[CAPPED], ratio)}) \
        if with_cycles and np.isfinite(ratio) else cal
    report = {}
    fit_capped_clock(moved, rec, window="settled", report=report)
    fitted = report.get("capped_clock", {})
    settled = fitted.get("window") == "settled"
    return {schema.DEVICE_UUID: rec.board, schema.RECORDING_NAME: rec.name,
            schema.PROBED_TIME_RATIO: float(ratio),
            schema.CAP_CORE_SCALE: float(fitted["core_scale"]) if settled else np.nan,
            "real_clock_mhz": float(fitted.get("real_reading_mhz", np.nan)),
            "twin_clock_mhz_before": float(fitted["iterations"][0]["twin_clock_mhz"]) if settled else np.nan}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    r = sub.add_parser("readings", help="real vs twin readings from replays already run")
    r.add_argument("recordings", nargs="+", type=Path)
    r.add_argument("--twin-folder", type=Path, required=True, help="FOLDER/<recording>/twin are the replays")
    lv = sub.add_parser("levels", help="each board's cycles and capped-clock factor against its own calibration")
    lv.add_argument("recordings", nargs="+", type=Path)
    lv.add_argument("--preset", default="h200-raw-pooled")
    lv.add_argument("--out", type=Path)
    lv.add_argument("--workers", type=int, default=2)
    lv.add_argument("--preset-cycles", action="store_true",
                    help="read the capped-clock factor on the preset's own cycles, not the probed ones (fix 2)")
    args = ap.parse_args(argv)
    if args.what == "readings":
        table = pd.DataFrame([readings(read_recording(p), read_recording(args.twin_folder / p.name / "twin"))
                              for p in args.recordings])
        print(markdown_table(table.round(2)))
        print("\nmedians: " + ", ".join(f"{k} {v:.2f}" for k, v in table.median(numeric_only=True).items()))
        return 0
    paths = [str(p) for p in args.recordings]
    if args.workers > 1 and len(paths) > 1:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            rows = list(pool.map(levels, paths, [args.preset] * len(paths),
                                 [not args.preset_cycles] * len(paths)))
    else:
        rows = [levels(p, args.preset, not args.preset_cycles) for p in paths]
    table = pd.DataFrame(rows)
    if args.out is not None:
        table.to_csv(args.out, index=False)
    boards = table.groupby(schema.DEVICE_UUID)[[schema.PROBED_TIME_RATIO, schema.CAP_CORE_SCALE]].median()
    print(markdown_table(table.round(4)))
    print(f"\n{len(boards)} boards ({len(table)} recordings); median of the boards' medians: "
          + ", ".join(f"{c} {boards[c].median():.4f} ({boards[c].min():.4f} … {boards[c].max():.4f})"
                      for c in boards.columns))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
