"""The capped-start rows per board: every start of a board's recordings pooled, on each preset (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_cap_board_scores.py --preset h200-raw --preset h200-raw-cap-h200 \\
        --board A datasets/h200-2026-11-28/capstarts_rests15_60_ef3dd380 datasets/h200-2026-11-28/capstarts_rests5_120_ef3dd380 \\
        --board B datasets/h200-2026-11-28/capstarts_rests15_60_1717480a datasets/h200-2026-11-28/capstarts_rests5_120_1717480a

``twin_cap_profile_fit.py`` scores each recording on its own; a board recorded in several sets (session 14:
8 + 4 starts) is better judged on all its starts at once. For each preset and board: the real median
overshoot and settling over the board's starts, and the twin's over every start × sensor seeds 0 and 1
(replays as in ``twin_cap_profile_fit.twin_runs``; simulated). ~3–4 min per preset and board of 12 starts
on one core.
"""

from __future__ import annotations

import argparse

import pandas as pd
from twin_cap_profile_fit import FIELDS, Recordings, twin_runs

from powermodels import schema
from powermodels.reporting import markdown_table
from powermodels.twin import metrics
from powermodels.twin.preset import load_preset


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", action="append", required=True)
    ap.add_argument("--board", nargs="+", action="append", required=True, metavar=("LABEL", "RECORDING"),
                    help="a label and that board's capstarts recordings")
    args = ap.parse_args(argv)
    if any(len(b) < 2 for b in args.board):
        ap.error("--board needs a label and at least one recording")
    rows = []
    for name in args.preset:
        preset = load_preset(name)
        values = {k: getattr(preset.physics, k) for k in FIELDS}
        for label, *paths in args.board:
            recs = Recordings(paths, preset)
            per = twin_runs(recs, values, None, seeds=(0, 1))
            twin = pd.concat([p["rows"] for p in per])
            real = pd.concat([it["starts"] for it in recs.items])
            o_r, o_t = float(real[schema.OVERSHOOT_W].median()), float(twin[schema.OVERSHOOT_W].median())
            s_r, s_t = float(real[schema.SETTLING_S].median()), float(twin[schema.SETTLING_S].median())
            rows.append({"preset": name, "board": label, "starts": len(real), "overshoot_real_w": o_r,
                         "overshoot_twin_w": o_t, "overshoot_err": o_t / o_r - 1.0, "settling_real_s": s_r,
                         "settling_twin_s": s_t, "settling_err": metrics.settling_error(s_r, s_t)})
            print(rows[-1], flush=True)
    print(markdown_table(pd.DataFrame(rows).round(3)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
