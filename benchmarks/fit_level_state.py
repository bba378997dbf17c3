"""Fit the simulated GPU's level state to real recordings' burst levels against their twins' (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/fit_level_state.py --twin OUT/PRESET/raw_recording_*/twin \\
        [--method own] [--workload cupy_fp32_matmul_4096] [--alpha-w-per-c 1.409] \\
        [--base h200-raw-pooled-per-workload --preset-out levels.json] datasets/h200-2026-11-29/raw_recording_*

Each ``--twin`` is a ``twin-compare`` output's ``twin/`` folder (without a level state), its ``preset.json`` beside
it: the twin's core-dynamic share of a workload's burst power is read there, at the twin's median burst die.

``--method own`` (session 30, candidates (l') and (l''), which failed their clean test in session 31): every workload with bursts gets its own level,
:func:`powermodels.level_state.fit_workload_level` matching simulated sample statistics; ``--preset-out`` writes
``--base`` with each workload's ``level_sd`` and ``level_keep`` (``-levels`` added to its name).
``--method board`` (session 29, candidate (l), which failed its rule): one board-wide level from ``--workload``
by the method of moments (:func:`powermodels.level_state.fit_level_state`), written to the physics'
``core_level_sd`` and ``core_level_keep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from burst_levels import DEFAULT_ALPHA_W_PER_C

from powermodels import schema
from powermodels.files import atomic_open
from powermodels.level_state import core_dynamic_share, fit_level_state, fit_workload_level
from powermodels.recording import RecordingError, read_recording
from powermodels.series_vs_bursts import burst_levels, level_persistence
from powermodels.twin.preset import load_preset, save_preset

DEFAULT_WORKLOAD = "cupy_fp32_matmul_4096"


def _levels(folders, workload: str, alpha: float) -> pd.DataFrame:
    """Burst levels of ``workload`` in each recording folder, one table (each row named by its folder)."""
    return pd.concat([burst_levels(read_recording(p), workload, alpha_w_per_c=alpha)
                      .assign(**{schema.RECORDING_NAME: str(p)}) for p in folders], ignore_index=True)


def _shares(twins: pd.DataFrame, workload: str) -> list[float]:
    """The workload's core-dynamic share on each twin, at its median burst die (its preset.json beside it)."""
    return [core_dynamic_share(load_preset(Path(folder).parent / "preset.json"), workload,
                               float(one[schema.TEMPERATURE_C].median()))
            for folder, one in twins.groupby(schema.RECORDING_NAME, sort=False)]


def _fit_board(args) -> tuple[dict, object]:
    """Session 29's board-wide level from one workload; the physics with it."""
    twins = _levels(args.twin, args.workload, args.alpha_w_per_c)
    fit = fit_level_state(level_persistence(_levels(args.recordings, args.workload, args.alpha_w_per_c)),
                          level_persistence(twins), _shares(twins, args.workload))

    def apply(base):
        return dataclasses.replace(base, physics=dataclasses.replace(
            base.physics, core_level_sd=fit["core_level_sd"], core_level_keep=fit["core_level_keep"]))
    return fit, apply


def _fit_own(args) -> tuple[dict, object]:
    """Session 30's own level of every workload with bursts in the first real recording; the workloads with it."""
    phases = read_recording(args.recordings[0]).phases
    workloads = list(dict.fromkeys(phases.loc[phases[schema.PHASE_KIND] == "burst", schema.WORKLOAD]))
    fits = {}
    for workload in workloads:
        twins = _levels(args.twin, workload, args.alpha_w_per_c)
        one = fit_workload_level(level_persistence(_levels(args.recordings, workload, args.alpha_w_per_c)), twins,
                                 draws=args.draws)
        share = float(np.median(_shares(twins, workload)))
        fits[workload] = {**one, "core_share": share, "level_sd": one["level_sd_pct"] / 100.0 / share}
        print(f"{workload}: level sd {one['level_sd_pct']:.3f} % of the burst power "
              f"({fits[workload]['level_sd']:.4f} of its core dynamic power), keep {one['level_keep']:.2f}; "
              f"median sd {one['fitted_sd_pct']:.3f} against real {one['real_sd_pct']:.3f} % "
              f"(twins {one['twin_sd_pct']:.3f}), lag-1 {one['fitted_lag1']:+.3f} against {one['real_lag1']:+.3f} "
              f"(twins {one['twin_lag1']:+.3f})", file=sys.stderr)

    def apply(base):
        workloads = dict(base.workloads)
        for name, fit in fits.items():
            if name in workloads:
                spec = workloads[name]
                workloads[name] = dataclasses.replace(spec, workload=dataclasses.replace(
                    spec.workload, level_sd=fit["level_sd"], level_keep=fit["level_keep"]))
        return dataclasses.replace(base, workloads=workloads)
    return {"workloads": fits}, apply


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path, help="real raw recordings")
    ap.add_argument("--twin", nargs="+", type=Path, required=True,
                    help="twins' recordings without a level state (twin-compare's twin/, preset.json beside it)")
    ap.add_argument("--method", choices=("own", "board"), default="own",
                    help="own: each workload's own level (session 30); board: one board-wide level (session 29)")
    ap.add_argument("--workload", default=DEFAULT_WORKLOAD, help="the workload --method board fits")
    ap.add_argument("--draws", type=int, default=400, help="Monte Carlo paths per grid point (--method own)")
    ap.add_argument("--alpha-w-per-c", type=float, default=DEFAULT_ALPHA_W_PER_C)
    ap.add_argument("--base", help="a preset (name or file) to write with the fitted state (--preset-out)")
    ap.add_argument("--preset-out", type=Path, help="write --base with the fitted level state here (JSON)")
    ap.add_argument("--out", type=Path, help="write the fit here (JSON)")
    args = ap.parse_args(argv)
    if (args.base is None) != (args.preset_out is None):
        print("fit_level_state: --base and --preset-out go together", file=sys.stderr)
        return 2
    if args.draws < 1:
        print("fit_level_state: --draws must be at least 1", file=sys.stderr)
        return 2
    try:
        fit, apply = (_fit_own if args.method == "own" else _fit_board)(args)
    except (RecordingError, ValueError, FileNotFoundError) as err:
        print(f"fit_level_state: {err}", file=sys.stderr)
        return 2
    fit = {"method": args.method, **fit}
    print(json.dumps(fit, indent=1))
    if args.out:
        with atomic_open(args.out, "w") as fh:
            json.dump(fit, fh, indent=1)
    if args.preset_out:
        base = load_preset(args.base)
        provenance = {**base.provenance, "level_state": {
            "fitted_by": f"benchmarks/fit_level_state.py --method {args.method} (powermodels.level_state)",
            "recordings": [str(p) for p in args.recordings], **fit}}
        save_preset(dataclasses.replace(apply(base), name=f"{base.name}-levels", provenance=provenance),
                    args.preset_out)
        print(f"wrote {args.preset_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
