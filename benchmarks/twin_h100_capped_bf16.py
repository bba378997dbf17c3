"""The H100's capped bf16 GEMM on ``h100-sxm``: its cycles from the clock probes and its capped clock, leave one board out.

Usage::

    PYTHONPATH=src python benchmarks/twin_h100_capped_bf16.py --out DIR [--workers 2] [--recovery]

``h100-sxm`` was fitted to a recording without clock probes. On five later H100 raw recordings, which
probe every batch, its capped bf16 GEMM needs ×1.09–1.10 the preset's time at the probed clock, and the
twin runs it ~5 % below the real capped clock (docs/twin.md, session 19). For each board held out, this
script builds the preset from the *other* four: the bf16 workload's work × their median probed ratio
(:func:`powermodels.twin.adapt.probed_time_ratio` through ``adapt_workloads``) and the core coefficient ×
their median settled capped-clock factor (:func:`powermodels.twin.fit_controller.fit_capped_clock`,
``window="settled"``; :func:`~powermodels.twin.fit_controller.scaled_core` keeps the uncapped workloads'
power). With ``--recovery`` the clock's recovery rate is pooled too: the median over the other four boards of
the rate that gives each its real time to 1 950 MHz on that preset
(:func:`powermodels.twin.fit_cap_choice.fit_recovery_by_replay`): the preset's rate was fitted at its own,
lower capped clock. It then replays the held-out recording (:func:`powermodels.twin.compare.twin_compare`) into
``DIR/BOARD/`` and writes ``DIR/levels.csv`` (each board's ratio and factor) and ``DIR/rows.csv`` (every
scored row). Real recordings, simulated replays; ~6 min on two cores.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels.recording import read_recording
from powermodels.twin.adapt import adapt_workloads
from powermodels.twin.compare import twin_compare
from powermodels.twin.fit_cap_choice import fit_recovery_by_replay
from powermodels.twin.fit_controller import fit_capped_clock, scaled_core
from powermodels.twin.preset import load_preset

PRESET = "h100-sxm"
WORKLOAD = "torch_bf16_matmul_8192"
DATASETS = Path(__file__).resolve().parents[1] / "datasets"
#: the H100 raw recordings with a clock probe beside every batch, none fitted by h100-sxm
RECORDINGS = {"549d5430": "h100-2026-11-28/raw_recording_549d5430",
              "5bad9bd9": "h100-2026-11-28/raw_recording_ladder_5bad9bd9",
              "84fc649a": "h100-2026-11-27/raw_recording_ladder_84fc649a",
              "f73aad1d": "h100-2026-11-27/raw_recording_ladder_f73aad1d",
              "620707cb": "h100-2026-11-25-session5/raw_recording_620707cb"}


def board_level(board: str) -> dict:
    """One board's probed time ratio of the capped workload and its settled capped-clock core factor."""
    rec = read_recording(DATASETS / RECORDINGS[board])
    _, adapted = adapt_workloads(PRESET, rec)
    report = {}
    fit_capped_clock(load_preset(PRESET), rec, window="settled", report=report)
    return {"board": board, "probed_ratio": adapted[WORKLOAD]["probed_ratio"],
            "cap_core_scale": report["capped_clock"]["core_scale"], "window": report["capped_clock"].get("window")}


def pooled_preset(ratio: float, core_scale: float):
    """``h100-sxm`` with the capped workload's work × ``ratio`` and the core coefficient × ``core_scale``."""
    base = load_preset(PRESET)
    tw = base.workloads[WORKLOAD]
    w = replace(tw.workload, core_work=tw.workload.core_work * ratio, mem_work=tw.workload.mem_work * ratio,
                t0_s=tw.workload.t0_s * ratio)
    return scaled_core(replace(base, workloads={**base.workloads, WORKLOAD: replace(tw, workload=w)}), core_scale)


def recovery_rate(board: str, ratio: float, core_scale: float) -> float:
    """The recovery rate (MHz/s) that gives ``board``'s real time to 1 950 MHz on :func:`pooled_preset`."""
    preset = pooled_preset(ratio, core_scale)
    fitted = fit_recovery_by_replay(preset, read_recording(DATASETS / RECORDINGS[board]),
                                    preset.provenance.get("clock_workload"))
    return float(fitted.physics.clock_recovery_mhz_per_s)


def held_out(board: str, ratio: float, core_scale: float, rate: float, out: str) -> pd.DataFrame:
    """Replay ``board``'s recording on the preset pooled from the other boards (``rate``: NaN keeps the preset's)."""
    preset = pooled_preset(ratio, core_scale)
    if np.isfinite(rate):
        preset = replace(preset, physics=replace(preset.physics, clock_recovery_mhz_per_s=rate))
    table = twin_compare(read_recording(DATASETS / RECORDINGS[board]), preset, Path(out) / board)
    return table.assign(board=board, probed_ratio=ratio, cap_core_scale=core_scale, recovery_mhz_per_s=rate)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--recovery", action="store_true", help="pool the clock's recovery rate too")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        levels = pd.DataFrame(list(pool.map(board_level, RECORDINGS)))
        levels.to_csv(args.out / "levels.csv", index=False)
        print(levels.round(4).to_string(index=False), flush=True)
        pooled = {b: (float(np.median(levels.loc[levels.board != b, "probed_ratio"])),
                      float(np.median(levels.loc[levels.board != b, "cap_core_scale"]))) for b in RECORDINGS}
        rates = dict.fromkeys(RECORDINGS, float("nan"))
        if args.recovery:  # each held-out board's rate: the median of the others', fitted on its own fold's preset
            pairs = [(other, *pooled[b]) for b in RECORDINGS for other in RECORDINGS if other != b]
            fitted = list(pool.map(recovery_rate, *zip(*pairs, strict=True)))
            per_fold = np.reshape(fitted, (len(RECORDINGS), len(RECORDINGS) - 1))
            rates = {b: float(np.median(per_fold[i])) for i, b in enumerate(RECORDINGS)}
            print("pooled recovery rates (MHz/s):", {b: round(r) for b, r in rates.items()}, flush=True)
        folds = [(b, *pooled[b], rates[b], str(args.out)) for b in RECORDINGS]
        rows = pd.concat(pool.map(held_out, *zip(*folds, strict=True)), ignore_index=True)
    rows.to_csv(args.out / "rows.csv", index=False)
    print(rows.groupby("metric")["within"].sum().to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
