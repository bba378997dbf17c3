"""Choose a preset's cap gains on one capstarts recording and score the choice on others (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_cap_starts_fit.py --preset h100-sxm \\
        --train datasets/h100-2026-11-28/capstarts_5db815fe_1 --out DIR [--workers 2]

Fits with :func:`fit_cap_gains_on_starts` below (every candidate of the
cap-gain grid replays every start of ``--train`` with three sensor seeds; the one whose median overshoot
and settling are closest to the real starts' is kept) and writes ``DIR/<preset>-capstarts.json`` (the
preset with those gains, nothing else changed) and ``DIR/choice.md`` (every candidate). Score the written
preset on held-out recordings with ``powermodels twin-compare REC --preset DIR/<preset>-capstarts.json``.

The method is an experiment: its choice did worse held out (docs/twin.md, session 12), so no
library path uses it.

:func:`~powermodels.twin.fit_controller.fit_cap_gains` scores each candidate
of :data:`~powermodels.twin.fit_controller.CAP_GAIN_GRID` on the fitting
recording's capped *spans*, most of them pressure loads that follow a burst,
by the RMS error of the 1 s mean power. The issue's rows are about a capped
start from idle — its overshoot and settling time — and one start is one
draw of a wide spread: ten starts on one H100 read 0.2–24.0 W and 0.0–5.6 s
(docs/twin.md, session 12). Session 6 found that a dead-beat budget
reproduced the start in sample but lost on the spans, and left the choice to
"a recording with more capped starts from idle". This is that choice:
every candidate replays every start of a ``capstarts`` recording
(``gpu_raw_recording.py --parts capstarts``) with several sensor seeds
(:func:`~powermodels.twin.cap_seeds.capped_series_seeds`), and the one
whose median overshoot and median settling time are closest to the real
starts' medians — the mean of the two relative errors, in units of the
issue's 25 % (:data:`~powermodels.twin.fit_cap_choice.ISSUE_TOLERANCE`, as
:func:`~powermodels.twin.fit_cap_choice.fit_cap_controller` scores) — is
kept. The preset's own gains are scored beside the grid. Only the gains
change; the headroom, offset, recovery rate and everything else stay.

The segments start from the real recording's temperature reading (a fit
reads its own recording) and the ambient is ``recorded-causal``, as
``twin-compare`` replays.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.recording import Recording, read_recording
from powermodels.reporting import markdown_table
from powermodels.twin import metrics
from powermodels.twin.cap_seeds import capped_series_seeds
from powermodels.twin.compare import replay_setup
from powermodels.twin.fit_cap_choice import ISSUE_TOLERANCE
from powermodels.twin.fit_controller import CAP_GAIN_GRID, GAIN_FIELDS
from powermodels.twin.preset import load_preset, save_preset

#: sensor seeds each start is replayed with while choosing (five in ``twin-compare``; three keep the
#: search at ~4 s × starts × 3 per candidate)
STARTS_SEEDS = (0, 1, 2)


def starts_score(preset, rec: Recording, workload: str, *, seeds=STARTS_SEEDS, ambient=None) -> dict:
    """How ``preset`` replays every capped start of ``workload`` in ``rec``: medians and their errors.

    Returns
    -------
    dict
        ``overshoot_w`` and ``settling_s`` (the twin's medians over starts × seeds),
        ``overshoot_err`` and ``settling_err`` (relative to the real starts' medians;
        the settling's against at least 0.1 s) and ``score`` (their mean |error| in units
        of the issue's 25 %: below 1 means both rows within target on average).
    """
    real = metrics.cap_starts(rec, workload)
    twin = capped_series_seeds(rec, rec, preset, workload, seeds=seeds, ambient=ambient)
    o_real, s_real = float(real[schema.OVERSHOOT_W].median()), float(real[schema.SETTLING_S].median())
    o_twin, s_twin = float(twin[schema.OVERSHOOT_W].median()), float(twin[schema.SETTLING_S].median())
    o_err = o_twin / o_real - 1.0 if o_real != 0 else np.inf
    s_err = s_twin / max(s_real, 0.1) - 1.0
    return {schema.OVERSHOOT_W: o_twin, schema.SETTLING_S: s_twin, "overshoot_err": o_err, "settling_err": s_err,
            "score": (abs(o_err) + abs(s_err)) / 2.0 / ISSUE_TOLERANCE}


def _candidate(args) -> dict:
    preset, rec, workload, gains, seeds, ambient = args
    cand = replace(preset, physics=replace(preset.physics, **dict(zip(GAIN_FIELDS, map(float, gains), strict=True))))
    return {**dict(zip(GAIN_FIELDS, gains, strict=True)), **starts_score(cand, rec, workload, seeds=seeds, ambient=ambient)}


def fit_cap_gains_on_starts(preset, rec: Recording, *, grid=CAP_GAIN_GRID, seeds=STARTS_SEEDS, workers: int = 1,
                            report: dict | None = None):
    """``preset`` with the cap gains whose replayed capped starts best match ``rec``'s.

    Parameters
    ----------
    preset : TwinPreset
        The preset to refit (its own gains are a candidate too).
    rec : Recording
        A recording with several capped ``series`` of one workload (each a start from idle).
    grid : sequence of (cap_proportional, cap_gain_per_s, cap_repeat)
        The candidates (default the same grid :func:`~powermodels.twin.fit_controller.fit_cap_gains` searches).
    seeds : sequence of int
        Sensor seeds per start.
    workers : int, default=1
        Processes scoring candidates at once.
    report : dict, optional
        Gets ``cap_starts_fit``: every candidate's medians, errors and score, the real medians, the choice.

    Returns
    -------
    TwinPreset

    Raises
    ------
    ValueError
        When ``rec`` has no capped series, or fewer than three starts of it (one start is one draw).
    """
    capped = metrics.capped_series(rec)
    if not capped:
        raise ValueError(f"recording {rec.name}: no series ran power-capped; nothing to fit the cap gains on")
    workload = capped[0]
    n = len(metrics.series_entries(rec, workload))
    if n < 3:
        raise ValueError(f"recording {rec.name}: {n} capped start(s) of {workload!r}; the gains are chosen on "
                         "at least 3 (gpu_raw_recording.py --parts capstarts)")
    if preset.physics.cap_window_s <= 0:
        raise ValueError(f"preset {preset.name}: its cap acts on each step's power (cap_window_s 0): no gains to fit")
    scored, ambient = replay_setup(rec, preset)  # the recording's kernel times, for scoring only
    own = tuple(getattr(preset.physics, f) for f in GAIN_FIELDS)
    cands = [own] + [tuple(g) for g in grid if tuple(map(float, g)) != tuple(map(float, own))]
    jobs = [(scored, rec, workload, g, tuple(seeds), ambient) for g in cands]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            rows = list(pool.map(_candidate, jobs))
    else:
        rows = [_candidate(j) for j in jobs]
    table = pd.DataFrame(rows)
    table.insert(0, "candidate", ["as given"] + ["grid"] * (len(cands) - 1))
    best = int(np.argmin(table["score"].to_numpy(float)))
    if report is not None:
        real = metrics.cap_starts(rec, workload)
        report["cap_starts_fit"] = {
            "recording": rec.name, "workload": workload, "starts": n, "seeds": list(seeds),
            "real_overshoot_w": float(real[schema.OVERSHOOT_W].median()), "real_settling_s": float(real[schema.SETTLING_S].median()),
            "candidates": table.to_dict(orient="records"),
            "chosen": {k: float(table[k].iloc[best]) for k in GAIN_FIELDS}}
    return replace(preset, physics=replace(preset.physics, **{k: float(table[k].iloc[best]) for k in GAIN_FIELDS}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", required=True, help="a shipped preset name or a preset file")
    ap.add_argument("--train", required=True, help="a capstarts recording (gpu_raw_recording.py --parts capstarts)")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.time()
    preset = load_preset(args.preset)
    rec = read_recording(args.train)
    report: dict = {}
    fitted = fit_cap_gains_on_starts(preset, rec, workers=args.workers, report=report)
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"{preset.name}-capstarts"
    prov = dict(fitted.provenance)
    prov["cap_starts_refit"] = {"by": "benchmarks/twin_cap_starts_fit.py (fit_cap_gains_on_starts)",
                                "command": "python benchmarks/twin_cap_starts_fit.py --preset " + args.preset
                                           + " --train " + args.train,
                                **{k: v for k, v in report["cap_starts_fit"].items() if k != "candidates"}}
    fitted = replace(fitted, name=name, provenance=prov)
    save_preset(fitted, args.out / f"{name}.json")
    fit = report["cap_starts_fit"]
    table = pd.DataFrame(fit["candidates"])
    text = (f"# Cap gains chosen on {fit['starts']} capped starts of {fit['workload']} ({args.train})\n\n"
            f"Real medians: overshoot {fit['real_overshoot_w']:.2f} W, settling {fit['real_settling_s']:.2f} s. "
            f"Twin: median over starts × seeds {fit['seeds']}; score = mean |relative error| / 0.25.\n\n"
            + markdown_table(table.round(4)) + f"\n\nChosen: {json.dumps(fit['chosen'])}. Wall {time.time() - t0:.0f} s.\n")
    (args.out / "choice.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
