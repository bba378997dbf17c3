"""The capped-start rows per board: every start of a board's recordings pooled, on each preset (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_cap_board_scores.py --preset h200-raw --preset h200-raw-cap-h200 \\
        --board A datasets/h200-2026-11-28/capstarts_rests15_60_ef3dd380 datasets/h200-2026-11-28/capstarts_rests5_120_ef3dd380 \\
        --board B datasets/h200-2026-11-28/capstarts_rests15_60_1717480a datasets/h200-2026-11-28/capstarts_rests5_120_1717480a

``twin_cap_profile_fit.py`` scores each recording on its own; a board recorded in several sets (session 14:
8 + 4 starts) is better judged on all its starts at once. For each preset and board: the real median
overshoot and settling over the board's starts, and the twin's over every start × sensor seeds 0 and 1
(replays as in ``twin_cap_profile_fit.twin_runs``; simulated). ~3–4 min per preset and board of 12 starts
on one core. With several boards it also pools every board's starts per preset (the real and the twin's median)
and prints how many boards a perfect twin is expected to meet on both rows
(:func:`powermodels.cap_start_spread.joint_ceiling`): at 5–14 starts a board, not all of them (docs/twin.md,
session 21). ``--out DIR`` keeps every start: ``twin_starts.csv`` (each preset's replays, with the board) and
``real_starts.csv``, so that boards scored in several sessions can be pooled later.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from twin_cap_profile_fit import FIELDS, Recordings, twin_runs

from powermodels import cap_start_spread, schema
from powermodels.reporting import markdown_table
from powermodels.twin.preset import load_preset


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", action="append", required=True)
    ap.add_argument("--board", nargs="+", action="append", required=True, metavar=("LABEL", "RECORDING"),
                    help="a label and that board's capstarts recordings")
    ap.add_argument("--out", type=Path, help="write twin_starts.csv and real_starts.csv here")
    args = ap.parse_args(argv)
    if any(len(b) < 2 for b in args.board):
        ap.error("--board needs a label and at least one recording")
    rows, pooled, kept = [], [], []
    real_by_board = {}
    for name in args.preset:
        preset = load_preset(name)
        values = {k: getattr(preset.physics, k) for k in FIELDS}
        twin_all = []
        for label, *paths in args.board:
            recs = Recordings(paths, preset)
            per = twin_runs(recs, values, None, seeds=(0, 1))
            twin = pd.concat([p["rows"] for p in per])
            real = pd.concat([it["starts"] for it in recs.items])
            real_by_board[label] = real
            twin_all.append(twin)
            kept.append(twin.assign(preset=name, board=label))
            rows.append(board_row(name, label, real, twin))
            print(rows[-1], flush=True)
        if len(args.board) > 1:
            pooled.append(pooled_row(name, pd.concat(twin_all), real_by_board, pd.DataFrame(rows[-len(args.board):])))
    print(markdown_table(pd.DataFrame(rows).round(3)))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        pd.concat(kept, ignore_index=True).to_csv(args.out / "twin_starts.csv", index=False)
        pd.concat([r.assign(board=label) for label, r in real_by_board.items()],
                  ignore_index=True).to_csv(args.out / "real_starts.csv", index=False)
    if pooled:
        starts = pd.concat([r.assign(**{schema.DEVICE_UUID: label}) for label, r in real_by_board.items()])
        expected = cap_start_spread.joint_ceiling(starts)[schema.PERFECT_TWIN_CHANCE].sum()
        print(f"\nAll boards' starts pooled (real and twin medians); a perfect twin is expected to meet both rows on "
              f"{expected:.1f} of {len(real_by_board)} boards (powermodels.cap_start_spread.joint_ceiling):\n")
        print(markdown_table(pd.DataFrame(pooled).round(3)))
    return 0


def board_row(name: str, label: str, real: pd.DataFrame, twin: pd.DataFrame) -> dict:
    """One preset on one board: the real and the twin's medians over the board's starts, and their errors
    (:func:`powermodels.cap_start_spread.relative_error`, as issue 27 scores them)."""
    o_r, o_t = float(real[schema.OVERSHOOT_W].median()), float(twin[schema.OVERSHOOT_W].median())
    s_r, s_t = float(real[schema.SETTLING_S].median()), float(twin[schema.SETTLING_S].median())
    return {"preset": name, "board": label, "starts": len(real), "overshoot_real_w": o_r, "overshoot_twin_w": o_t,
            "overshoot_err": cap_start_spread.relative_error(schema.OVERSHOOT_W, o_r, o_t), "settling_real_s": s_r,
            "settling_twin_s": s_t, "settling_err": cap_start_spread.relative_error(schema.SETTLING_S, s_r, s_t)}


def pooled_row(name: str, twin: pd.DataFrame, real_by_board: dict, per_board: pd.DataFrame) -> dict:
    """One preset over every board: :func:`board_row` of all starts pooled, and the boards within 25 % on both rows."""
    pooled = board_row(name, "", pd.concat(real_by_board.values()), twin)
    both = (per_board["overshoot_err"].abs() <= 0.25) & (per_board["settling_err"].abs() <= 0.25)
    return {"preset": name, "boards": len(real_by_board),
            **{k: v for k, v in pooled.items() if k not in ("preset", "board")}, "boards_within_both": int(both.sum())}


if __name__ == "__main__":
    raise SystemExit(main())
