"""Fit the simulated GPU's level state to real recordings' burst levels against their twins' (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/fit_level_state.py --twin OUT/PRESET/raw_recording_*/twin \\
        [--workload cupy_fp32_matmul_4096] [--alpha-w-per-c 1.409] [--base h200-raw-pooled-per-workload \\
        --preset-out levels.json] datasets/h200-2026-11-29/raw_recording_*

Each ``--twin`` is a ``twin-compare`` output's ``twin/`` folder (without a level state), its ``preset.json`` beside
it: the twin's core-dynamic share of the workload's burst power is read there, at the twin's median burst die.
:func:`powermodels.level_state.fit_level_state` gives σ and the keep probability; ``--preset-out`` writes ``--base``
with them (a new preset file, ``-levels`` added to its name), whose replays carry the state.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import pandas as pd
from burst_levels import DEFAULT_ALPHA_W_PER_C

from powermodels import schema
from powermodels.files import atomic_open
from powermodels.level_state import core_dynamic_share, fit_level_state
from powermodels.recording import RecordingError, read_recording
from powermodels.series_vs_bursts import burst_levels, level_persistence
from powermodels.twin.preset import load_preset, save_preset

DEFAULT_WORKLOAD = "cupy_fp32_matmul_4096"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path, help="real raw recordings")
    ap.add_argument("--twin", nargs="+", type=Path, required=True,
                    help="twins' recordings without a level state (twin-compare's twin/, preset.json beside it)")
    ap.add_argument("--workload", default=DEFAULT_WORKLOAD)
    ap.add_argument("--alpha-w-per-c", type=float, default=DEFAULT_ALPHA_W_PER_C)
    ap.add_argument("--base", help="a preset (name or file) to write with the fitted state (--preset-out)")
    ap.add_argument("--preset-out", type=Path, help="write --base with the fitted level state here (JSON)")
    ap.add_argument("--out", type=Path, help="write the fit here (JSON)")
    args = ap.parse_args(argv)
    if (args.base is None) != (args.preset_out is None):
        print("fit_level_state: --base and --preset-out go together", file=sys.stderr)
        return 2
    try:
        real_levels = [burst_levels(read_recording(p), args.workload, alpha_w_per_c=args.alpha_w_per_c)
                       for p in args.recordings]
        twin_levels, shares = [], []
        for folder in args.twin:
            levels = burst_levels(read_recording(folder), args.workload, alpha_w_per_c=args.alpha_w_per_c)
            twin_levels.append(levels.assign(**{schema.RECORDING_NAME: str(folder)}))
            preset = load_preset(folder.parent / "preset.json")
            shares.append(core_dynamic_share(preset, args.workload, float(levels[schema.TEMPERATURE_C].median())))
        real = level_persistence(pd.concat(real_levels, ignore_index=True))
        twin = level_persistence(pd.concat(twin_levels, ignore_index=True))
        fit = fit_level_state(real, twin, shares)
    except (RecordingError, ValueError, FileNotFoundError) as err:
        print(f"fit_level_state: {err}", file=sys.stderr)
        return 2
    print(json.dumps(fit, indent=1))
    if args.out:
        with atomic_open(args.out, "w") as fh:
            json.dump(fit, fh, indent=1)
    if args.preset_out:
        base = load_preset(args.base)
        physics = dataclasses.replace(base.physics, core_level_sd=fit["core_level_sd"],
                                      core_level_keep=fit["core_level_keep"])
        provenance = {**base.provenance, "level_state": {
            "fitted_by": "benchmarks/fit_level_state.py (powermodels.level_state.fit_level_state)",
            "recordings": [str(p) for p in args.recordings], **fit}}
        save_preset(dataclasses.replace(base, name=f"{base.name}-levels", physics=physics, provenance=provenance),
                    args.preset_out)
        print(f"wrote {args.preset_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
