"""Where a twin's warm-up row misses: its power, or its launches per second (twin vs real, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/warmup_miss_split.py [--from-s 2] [--out split.csv] OUT… \\
        --real datasets/h200-2026-11-29/raw_recording_*

``OUT`` is a ``twin-compare`` output folder (its ``twin/`` recording names the real recording it replayed in its
provenance's ``schedule_from``; the real one is found among ``--real`` by that name). Energy per launch is energy
per second over launches per second, so over the seconds a warm-up row scores (``--from-s`` to 25 s) the twin's
error splits into two factors that multiply::

    (1 + energy per launch error) = (1 + power error) / (1 + launches-per-second error)

An uncapped series runs at the top clock, so its launch rate is the kernel's and a miss there is the power's
(the dynamic power the calibration gave it, or a die that warms differently); a series at the power cap draws the
cap, so its miss is the rate (the clock and cycles the twin runs at the cap). Printed per workload: the medians of
each factor and of the die's difference (twin minus real), and how many rows miss 1 % at their worst second.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.recording import Recording, RecordingError, read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.compare import TARGETS
from powermodels.twin.metrics import warmup_energy_per_launch

#: the warm-up row's target, % at the worst second
TARGET_PCT = TARGETS["warmup_pct"]
#: the seconds of a series the warm-up row reads (warmup_energy_per_launch's default, as compare reads it)
SECONDS = 25


def miss_split(real: Recording, twin: Recording, *, from_s: float = 2.0) -> pd.DataFrame:
    """One row per workload with a series in both: the twin's error at its worst second and its two factors.

    Parameters
    ----------
    real, twin : Recording
        A real raw recording and a replay of its schedule.
    from_s : float, default=2
        First second read (a calibrated twin's earlier seconds are in-sample).

    Returns
    -------
    pandas.DataFrame
        ``device_uuid`` (the real board), ``workload``, ``worst_pct`` (the energy per launch's worst second, as
        the warm-up row reads it), then over the seconds read the mean errors (%) of ``energy_per_launch_pct``,
        ``power_pct`` and ``launch_rate_pct``, and ``die_difference_c`` (twin minus real, °C).
    """
    if from_s < 0:
        raise ValueError(f"miss_split: from_s must not be negative, got {from_s!r}")
    first = int(np.ceil(from_s - 1e-9))
    rows = []
    for workload in real.phase_rows(kind="series")[schema.WORKLOAD].unique():
        if not len(twin.phase_rows(kind="series", workload=workload)):
            continue
        r, t = warmup_energy_per_launch(real, workload, SECONDS), warmup_energy_per_launch(twin, workload, SECONDS)
        n = min(len(r), len(t))
        if n <= first:
            continue
        r, t = r.iloc[first:n], t.iloc[first:n]
        if (r[schema.LAUNCHES].to_numpy(float) <= 0).any() or (t[schema.LAUNCHES].to_numpy(float) <= 0).any():
            raise ValueError(f"miss_split: {workload}'s series has a second without a launch in {real.name} or its "
                             "replay (energy per launch is undefined there)")
        energy = t[schema.ENERGY_J].to_numpy(float) / r[schema.ENERGY_J].to_numpy(float)
        rate = t[schema.LAUNCHES].to_numpy(float) / r[schema.LAUNCHES].to_numpy(float)
        error = 100.0 * (energy - 1.0)
        rows.append({schema.DEVICE_UUID: real.board, schema.WORKLOAD: workload,
                     "worst_pct": float(error[np.argmax(np.abs(error))]),
                     "energy_per_launch_pct": 100.0 * (float(np.mean(energy)) - 1.0),
                     "power_pct": 100.0 * (float(np.mean(energy * rate)) - 1.0),
                     "launch_rate_pct": 100.0 * (float(np.mean(rate)) - 1.0),
                     "die_difference_c": float(np.mean(t[schema.TEMPERATURE_C].to_numpy(float)
                                                       - r[schema.TEMPERATURE_C].to_numpy(float)))})
    return pd.DataFrame(rows)


def summary(split: pd.DataFrame) -> pd.DataFrame:
    """Per workload: rows, rows missing the target, and the medians of the factors."""
    by = split.groupby(schema.WORKLOAD)
    table = by[["energy_per_launch_pct", "power_pct", "launch_rate_pct", "die_difference_c"]].median().round(2)
    table.insert(0, "rows", by.size())
    table.insert(1, f"over {TARGET_PCT:g} %", by["worst_pct"].apply(lambda x: int((x.abs() > TARGET_PCT).sum())))
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
            parts.append(miss_split(read_recording(reals[name]), twin, from_s=args.from_s))
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
        args.out.parent.mkdir(parents=True, exist_ok=True)
        split.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
