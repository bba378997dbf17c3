"""The H200 pooled presets with each workload moved to the median pool board's residual (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_workload_residuals.py [--save src/powermodels/twin/presets]

Reads the recordings the part presets and ``h200-raw-pooled`` were pooled from (the same nine,
``provenance["pooled_from"]``) and nothing else, prints each workload's residual per board and the median board's
(:func:`powermodels.board_calibration.workload_residuals.workload_residuals`), and with ``--save DIR`` writes
``h200-raw-part-000-per-workload.json``, ``h200-raw-part-001-per-workload.json`` (residuals against each board's
part preset) and ``h200-raw-pooled-per-workload.json`` (against ``h200-raw-pooled``, the preset
``--calibrate-board domains`` starts from). Their test is the replay of boards outside the pool: ``python
benchmarks/twin_unseen_boards.py --preset part:h200-raw-part-000-per-workload,h200-raw-part-001-per-workload
--preset h200-raw-pooled-per-workload:domains:network …`` (docs/twin.md, session 20).
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
POOLED = "h200-raw-pooled"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path, help="folder to write the three presets to")
    args = ap.parse_args(argv)
    pool = load_preset(PARTS[0]).provenance["pooled_from"]
    if any(load_preset(name).provenance["pooled_from"] != pool for name in (*PARTS, POOLED)):
        sys.exit(f"{', '.join(PARTS)} and {POOLED} were pooled from different recordings")
    recordings = [read_recording(path) for path in pool]
    command = "python benchmarks/twin_workload_residuals.py" + (f" --save {args.save}" if args.save else "")
    for against, names in ((list(PARTS), PARTS), (POOLED, (POOLED,))):
        residuals = workload_residuals(against, recordings)
        table = residuals.pivot_table(index=[schema.DEVICE_UUID, schema.RECORDING_NAME], columns=schema.WORKLOAD,
                                      values=schema.WORKLOAD_RESIDUAL)
        print(f"against {against}:\n{table.round(4).to_string()}")
        for name in names:
            save(with_workload_residuals(name, residuals, name=f"{name}-per-workload"), args.save, command)
    return 0


def save(moved, folder, command: str) -> None:
    """Print ``moved``'s ratios and, with a ``folder``, write it there with the command that made it."""
    ratios = {w: round(r["ratio"], 4) for w, r in moved.fit["workload_residuals"]["ratio"].items()}
    print(f"{moved.name}: {ratios}")
    if folder:
        why = ("the part presets' twin read the FMA loop below the fp32 GEMM on 20 of 24 H200s outside the pool, "
               "median -1.1 points (docs/twin.md, session 20); residuals read on the pool's recordings only")
        moved = replace(moved, provenance={**moved.provenance, "workload_residuals_command": command,
                                           "workload_residuals_why": why})
        print(save_preset(moved, folder / f"{moved.name}.json"))


if __name__ == "__main__":
    raise SystemExit(main())
