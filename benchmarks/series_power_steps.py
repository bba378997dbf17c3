"""Uncapped series whose power falls a few seconds in while the die still warms (real recordings, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/series_power_steps.py [--drop-pct 0.5] [--min-warming-c 1] [--out steps.csv] \\
        datasets/h200-2026-11-2*/raw_recording_*

At a fixed clock a warming die draws more, not less (leakage rises with temperature), so a series' mean power
from 3 to 6 s should not fall below its mean from 0.7 to 2 s. On a few real boards it does, at an unchanged
clock (NVML and the clock probes): GPU-670faebe's fp32 GEMM drew 643 W from 0.7 to 2 s and 633 W from 3 to 6 s
while its die warmed 3.3 °C (docs/twin-sessions.md, session 26).

For every series that ran at the top clock (NVML's median clock within 1 MHz of the highest the board ran at,
the trace's 99th percentile) this prints the counter's mean power in the two windows, their change and the
die's, and flags the series whose power fell by more than ``--drop-pct`` while the die warmed by at least
``--min-warming-c`` (the die reads whole degrees). It also prints the power over 0.2–1.2 s, the second
``calibrate_board`` reads: a twin calibrated there carries that level into the rest of the series
(``calibration_change_pct``: the later window against it). Windows are seconds since the series' start.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.energy_counter import mean_power_between_updates
from powermodels.files import atomic_open
from powermodels.recording import Recording, RecordingError, read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.metrics import counter_updates

#: seconds since the series' start: after the die's fast pole (0.7 s), and once a step has happened (3-6 s)
EARLY_S = (0.7, 2.0)
LATER_S = (3.0, 6.0)
#: the seconds calibrate_board reads of each uncapped series (its skip_s, skip_s + first_s)
CALIBRATION_S = (0.2, 1.2)


def series_power_steps(rec: Recording, *, drop_pct: float = 0.5, min_warming_c: float = 1.0) -> pd.DataFrame:
    """One row per top-clock series of ``rec``: power and die in the two windows, and whether the power fell.

    Parameters
    ----------
    rec : Recording
        A raw recording with a trace and an energy counter.
    drop_pct : float, default=0.5
        A fall of the later window's power below the early one's by more than this (%) ...
    min_warming_c : float, default=1
        ... while the die warmed by at least this much (°C) is flagged as a step.

    Returns
    -------
    pandas.DataFrame
        ``device_uuid``, ``workload``, ``calibration_w`` (0.2–1.2 s), the two windows' power (W) and die (°C),
        ``power_change_pct``, ``calibration_change_pct``, ``die_change_c`` and ``step`` (bool). Series that ran
        below the top clock (power-capped) are left out: their power follows the cap controller, not the die;
        so are series whose counter has no two updates in a window.
    """
    if drop_pct < 0 or min_warming_c < 0:
        raise ValueError(f"series_power_steps: drop_pct and min_warming_c must not be negative, got {drop_pct!r} "
                         f"and {min_warming_c!r}")
    if not rec.has_trace:
        raise ValueError(f"series_power_steps: {rec.name} has no trace (the die temperature and clock are read there)")
    tr = rec.trace
    t = tr[schema.T_S].to_numpy(float)
    # the top clock the board ran at: a percentile, so that a stray high sample does not make every series look
    # capped, nor a provenance maximum the board never reaches
    top = float(np.percentile(tr[schema.SM_CLOCK_MHZ].to_numpy(float), 99))
    updates = counter_updates(rec)  # once per recording; each window's power is read between them
    rows = []
    for s in rec.phase_rows(kind="series").itertuples(index=False):
        t0, t1 = float(getattr(s, schema.T0_S)), float(getattr(s, schema.T1_S))
        if t1 - t0 < LATER_S[1]:
            continue
        inside = (t >= t0 + EARLY_S[0]) & (t < t0 + LATER_S[1])
        if float(tr.loc[inside, schema.SM_CLOCK_MHZ].median()) < top - 1.0:
            continue
        row = {schema.DEVICE_UUID: rec.board, schema.WORKLOAD: getattr(s, schema.WORKLOAD),
               "calibration_w": mean_power_between_updates(*updates, t0 + CALIBRATION_S[0], t0 + CALIBRATION_S[1])}
        for name, (a, b) in (("early", EARLY_S), ("later", LATER_S)):
            window = (t >= t0 + a) & (t < t0 + b)
            row[f"{name}_w"] = mean_power_between_updates(*updates, t0 + a, t0 + b)
            row[f"{name}_die_c"] = float(tr.loc[window, schema.TEMPERATURE_C].mean())
        if not (np.isfinite(row["early_w"]) and np.isfinite(row["later_w"])):
            continue
        row["power_change_pct"] = 100.0 * (row["later_w"] / row["early_w"] - 1.0)
        row["calibration_change_pct"] = 100.0 * (row["later_w"] / row["calibration_w"] - 1.0)
        row["die_change_c"] = row["later_die_c"] - row["early_die_c"]
        row["step"] = bool(row["power_change_pct"] < -drop_pct and row["die_change_c"] >= min_warming_c)
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--drop-pct", type=float, default=0.5, help="a fall larger than this (%%) while the die warms is a step")
    ap.add_argument("--min-warming-c", type=float, default=1.0, help="how much the die must warm meanwhile (°C)")
    ap.add_argument("--out", type=Path, help="write every series' row here (CSV)")
    args = ap.parse_args(argv)
    try:
        steps = pd.concat([series_power_steps(read_recording(p), drop_pct=args.drop_pct,
                                              min_warming_c=args.min_warming_c) for p in args.recordings],
                          ignore_index=True)
    except (RecordingError, ValueError) as err:
        print(f"series_power_steps: {err}", file=sys.stderr)
        return 2
    if steps.empty:
        print(f"series_power_steps: no top-clock series of {LATER_S[1]:g} s or more in the recordings given",
              file=sys.stderr)
        return 2
    by = steps.groupby(schema.WORKLOAD)
    summary = by["power_change_pct"].agg(["count", "min", "median", "max"]).round(2)
    summary.insert(1, "boards", by[schema.DEVICE_UUID].nunique())
    summary["steps"] = by["step"].sum().astype(int)
    print(f"{len(steps)} top-clock series on {steps[schema.DEVICE_UUID].nunique()} boards (real unless the recordings "
          f"are twins'); power change = counter power from {LATER_S[0]:g} to {LATER_S[1]:g} s against "
          f"{EARLY_S[0]:g} to {EARLY_S[1]:g} s (%)\n")
    print(markdown_table(summary.rename(columns={"count": "series"}).reset_index()))
    flagged = steps.loc[steps["step"]]
    if len(flagged):
        print(f"\nsteps (power down more than {args.drop_pct:g} % while the die warmed {args.min_warming_c:g} °C or more;"
              f" calibration_change_pct: {LATER_S[0]:g}-{LATER_S[1]:g} s against {CALIBRATION_S[0]:g}-{CALIBRATION_S[1]:g} s):\n")
        print(markdown_table(flagged.drop(columns="step").round(2)))
    if args.out:
        with atomic_open(args.out, "w") as fh:  # the folder made, the file replaced whole or not at all
            steps.to_csv(fh, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
