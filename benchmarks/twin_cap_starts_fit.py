"""Choose a preset's cap gains on one capstarts recording and score the choice on others (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_cap_starts_fit.py --preset h100-sxm \\
        --train datasets/h100-2026-11-28/capstarts_5db815fe_1 --out DIR [--workers 2]

Fits with :func:`powermodels.twin.fit_cap_starts.fit_cap_gains_on_starts` (every candidate of the
cap-gain grid replays every start of ``--train`` with three sensor seeds; the one whose median overshoot
and settling are closest to the real starts' is kept) and writes ``DIR/<preset>-capstarts.json`` (the
preset with those gains, nothing else changed) and ``DIR/choice.md`` (every candidate). Score the written
preset on held-out recordings with ``powermodels twin-compare REC --preset DIR/<preset>-capstarts.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.fit_cap_starts import fit_cap_gains_on_starts
from powermodels.twin.preset import load_preset, save_preset


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
    prov["cap_starts_refit"] = {"by": "powermodels.twin.fit_cap_starts.fit_cap_gains_on_starts",
                                "command": "python benchmarks/twin_cap_starts_fit.py --preset " + args.preset
                                           + " --train " + args.train,
                                **{k: v for k, v in report["cap_starts_fit"].items() if k != "candidates"}}
    from dataclasses import replace

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
