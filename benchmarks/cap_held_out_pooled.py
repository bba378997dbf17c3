"""Capped-start presets over every board they were held out on, pooled across sessions (no GPU, no replay).

Usage::

    PYTHONPATH=src python benchmarks/cap_held_out_pooled.py benchmarks/results/cap_held_out_twin_starts_h200.csv \\
        --real datasets/h200-*/capstarts_*

The twin's starts are replays already run and kept, one row per start with ``preset`` and ``board`` (the UUID's
first eight hex digits): ``twin_cap_board_scores.py --out``'s ``twin_starts.csv`` as it is. The kept table
``benchmarks/results/cap_held_out_twin_starts_h200.csv`` holds session 21's nine held-out boards (from
``twin_cap_profile_fit.py --held-out-only``'s ``twin_starts.csv``: its ``controller`` "fit" is
``h200-raw-cap-pooled``, "as given" ``h200-raw-cap-profile``, and ``board`` the last eight characters of its
``recording``) and sessions 22's, 23's and 24's two each (``twin_cap_board_scores.py --out``), each start × sensor seeds 0 and 1, with
a ``session`` column added. The real starts are read from the
capstarts recordings of those boards (:func:`powermodels.cap_start_spread.board_starts`); recordings of other
boards are left out. Per preset: the pooled medians' errors, the boards within 25 % on both rows, and what a
perfect twin is expected to meet (:func:`powermodels.cap_start_spread.joint_ceiling`; docs/twin.md, session 22).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from _common import board_label
from twin_cap_board_scores import board_row, pooled_row

from powermodels import cap_start_spread, schema
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table

#: the columns a twin-starts table must have
TWIN_COLUMNS = ("preset", "board", schema.OVERSHOOT_W, schema.SETTLING_S)


def per_board(preset: str, twin: pd.DataFrame, real_by_board: dict) -> pd.DataFrame:
    """One row per board (``twin_cap_board_scores.board_row``), with the twin's number of starts."""
    return pd.DataFrame([{**board_row(preset, board, real, twin.loc[twin["board"] == board]),
                          "twin_starts": int((twin["board"] == board).sum())} for board, real in real_by_board.items()])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("twin", nargs="+", type=Path, help="twin-starts tables (preset, board, overshoot_w, settling_s)")
    ap.add_argument("--real", nargs="+", type=Path, required=True, help="capstarts recordings (other boards left out)")
    args = ap.parse_args(argv)
    # board labels are hex digits: read as text, or "00123456" loses its zeros and "1234e567" becomes a float
    twin = pd.concat([pd.read_csv(p, dtype={"board": str}) for p in args.twin], ignore_index=True)
    missing = set(TWIN_COLUMNS) - set(twin.columns)
    if missing:
        ap.error(f"the twin-starts tables lack {sorted(missing)}")
    boards = set(twin["board"])
    unreplayed = [f"{p} on {b}" for p, mine in twin.groupby("preset") for b in sorted(boards - set(mine["board"]))]
    if unreplayed:
        ap.error(f"no twin starts of {', '.join(unreplayed)}: every preset must be replayed on every board")
    real = cap_start_spread.board_starts(read_recording(p) for p in args.real)
    real["board"] = real[schema.DEVICE_UUID].map(board_label)
    real = real.loc[real["board"].isin(boards)]
    absent = sorted(boards - set(real["board"]))
    if absent:
        ap.error(f"no capstarts recording given for the board(s) {', '.join(absent)}")
    real_by_board = {b: g for b, g in real.groupby("board")}
    pooled, boards_rows = [], []
    for preset, mine in twin.groupby("preset", sort=False):
        table = per_board(preset, mine, real_by_board)
        boards_rows.append(table)
        pooled.append(pooled_row(preset, mine, real_by_board, table))
    expected = cap_start_spread.joint_ceiling(real.assign(**{schema.DEVICE_UUID: real["board"]}))[
        schema.PERFECT_TWIN_CHANCE].sum()
    print(markdown_table(pd.concat(boards_rows, ignore_index=True).round(3)))
    print(f"\n{len(real_by_board)} held-out boards, {len(real)} real starts; a perfect twin is expected to meet both "
          f"rows on {expected:.1f} of them (real starts; twin replays):\n")
    print(markdown_table(pd.DataFrame(pooled).round(3)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
