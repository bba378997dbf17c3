"""The H200 part presets with each workload moved to the median pool board's residual (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_workload_residuals.py [--save src/powermodels/twin/presets]

Reads the recordings the part presets were pooled from (their ``provenance["pooled_from"]``) and nothing
else, prints each workload's residual per board and the median board's
(:func:`powermodels.board_calibration.workload_residuals.workload_residuals`), and with ``--save DIR`` writes
``h200-raw-part-000-per-workload.json`` and ``h200-raw-part-001-per-workload.json``. Their test is the replay of
boards outside the pool: ``python benchmarks/twin_unseen_boards.py --preset
part:h200-raw-part-000-per-workload,h200-raw-part-001-per-workload …`` (docs/twin.md, session 20).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from powermodels import schema
from powermodels.board_calibration.workload_residuals import (
    with_workload_residuals,
    workload_residuals,
)
from powermodels.recording import read_recording
from powermodels.twin.preset import load_preset, save_preset

PARTS = ("h200-raw-part-000", "h200-raw-part-001")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path, help="folder to write the two presets to")
    args = ap.parse_args(argv)
    pool = load_preset(PARTS[0]).provenance["pooled_from"]
    if pool != load_preset(PARTS[1]).provenance["pooled_from"]:
        sys.exit("the two part presets were pooled from different recordings")
    residuals = workload_residuals(list(PARTS), [read_recording(path) for path in pool])
    table = residuals.pivot_table(index=[schema.DEVICE_UUID, schema.RECORDING_NAME], columns=schema.WORKLOAD,
                                  values=schema.WORKLOAD_RESIDUAL)
    print(table.round(4).to_string())
    command = "python benchmarks/twin_workload_residuals.py" + (f" --save {args.save}" if args.save else "")
    for part in PARTS:
        moved = with_workload_residuals(part, residuals, name=f"{part}-per-workload")
        ratios = {w: round(r["ratio"], 4) for w, r in moved.fit["workload_residuals"]["ratio"].items()}
        print(f"{moved.name}: {ratios}")
        if args.save:
            why = ("the FMA loop read 0.2-2.1 % below the fp32 GEMM on every held-out H200 (docs/twin.md, "
                   "session 20); residuals read on the pool's recordings only")
            moved = replace(moved, provenance={**moved.provenance, "workload_residuals_command": command,
                                               "workload_residuals_why": why})
            print(save_preset(moved, args.save / f"{moved.name}.json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
