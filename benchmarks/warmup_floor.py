"""How close a smooth twin can come to each real warm-up series (real recordings, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/warmup_floor.py [--from-s 2] [--degree 2] [--out floors.csv] \\
        [--plot docs/img/warmup_floor_h200.png] datasets/h200-2026-11-2*/raw_recording_*

For each workload's series in every recording, :func:`powermodels.warmup_floor.warmup_floor`: the smallest worst
second, from ``--from-s`` on, that a twin whose energy per launch lies on a polynomial in time (``--degree``, a
parabola by default) can reach against the real series. Below it, a twin's warm-up row (target 1 %) misses by
the real seconds' own scatter. Prints each workload's spread over the
recordings (and how many rows any twin on such a polynomial would miss at 1 %), with ``--out`` writes
every row as CSV and with ``--plot`` draws each workload's floors beside the 1 % target.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _common import save_figure

from powermodels import schema
from powermodels.files import atomic_open
from powermodels.recording import RecordingError, read_recording
from powermodels.reporting import markdown_table
from powermodels.warmup_floor import DEFAULT_DEGREE, warmup_floors

#: the warm-up row's target (powermodels.twin.compare), % at the worst second
TARGET_PCT = 1.0


def summary(floors):
    """Per workload: recordings, boards, the floor's min / median / max and rows whose floor is over the target."""
    by = floors.groupby(schema.WORKLOAD)
    table = by[schema.WARMUP_FLOOR_PCT].agg(["count", "min", "median", "max"]).round(2)
    table.insert(1, "boards", by[schema.DEVICE_UUID].nunique())
    table[f"over {TARGET_PCT:g} %"] = by[schema.WARMUP_FLOOR_PCT].apply(lambda x: int((x > TARGET_PCT).sum()))
    return table.rename(columns={"count": "series"}).reset_index()


def plot(floors, path: Path, degree: int = DEFAULT_DEGREE) -> None:
    """Each workload's floors, one dot per series, beside the warm-up row's target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    workloads = sorted(floors[schema.WORKLOAD].unique())
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.7 * len(workloads)))
    jitter = np.random.default_rng(0)
    for i, workload in enumerate(workloads):
        x = floors.loc[floors[schema.WORKLOAD] == workload, schema.WARMUP_FLOOR_PCT].to_numpy(float)
        ax.plot(x, i + jitter.uniform(-0.15, 0.15, x.size), "o", ms=4, alpha=0.7, color=f"C{i}")
        ax.plot([np.median(x)] * 2, [i - 0.3, i + 0.3], "k-", lw=1.5)
    ax.axvline(TARGET_PCT, color="red", ls="--", lw=1, label=f"warm-up row's target ({TARGET_PCT:g} %)")
    ax.set_yticks(range(len(workloads)), workloads)
    ax.set_xscale("log")
    shape = {0: "a constant", 1: "a line", 2: "a parabola"}.get(degree, f"a degree-{degree} polynomial")
    ax.set_xlabel(f"least worst second of a twin on {shape}, % (real series; black: median)")
    ax.legend(loc="lower right", fontsize=8)
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--from-s", type=float, default=2.0, help="first second scored (the warm-up row's)")
    ap.add_argument("--degree", type=int, default=DEFAULT_DEGREE,
                    help="degree of the polynomial the twin's seconds lie on (0: a constant, 1: a line)")
    ap.add_argument("--out", type=Path, help="write every series' floor here (CSV)")
    ap.add_argument("--plot", type=Path, help="draw the floors per workload here (PNG)")
    args = ap.parse_args(argv)
    try:
        floors = warmup_floors((read_recording(p) for p in args.recordings), from_s=args.from_s, degree=args.degree)
    except (RecordingError, ValueError) as err:
        print(f"warmup_floor: {err}", file=sys.stderr)
        return 2
    if floors.empty:
        print(f"warmup_floor: no series with {args.degree + 2} whole seconds or more from second {args.from_s:g} on "
              "in the recordings given", file=sys.stderr)
        return 2
    print(f"{len(floors)} series on {floors[schema.DEVICE_UUID].nunique()} boards (real unless the recordings "
          f"are twins'); floor = the least worst second from second {args.from_s:g} on of a twin on a degree-{args.degree} "
          "polynomial\n")
    print(markdown_table(summary(floors)))
    if args.out:
        with atomic_open(args.out, "w") as fh:  # the folder made, the file replaced whole or not at all
            floors.to_csv(fh, index=False)
    if args.plot:
        plot(floors, args.plot, args.degree)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
