"""The H200 twin's headline figures over every clean board, from the rows the sessions kept (twin vs real, no replay).

Usage::

    PYTHONPATH=src python benchmarks/twin_clean_set.py [--results benchmarks/results] [--out rows.csv]

Each session scored its new boards with ``twin_unseen_boards.py`` and kept every row in
``benchmarks/results/twin_unseen_rows_h200_session<N>.csv``, one ``set`` per batch of replays. The clean set is
every H200 that no preset was fitted to, run 1 of each board (sessions 21–33: 31 boards). This script gathers the
rows on the default counter timing (the seed's phase, the default again since session 33) from the sets listed in
:data:`SOURCES`, refuses a board scored twice under one label, and prints, for the board-blind part presets, the
recommended calibration without and with ``--calibrate-cap rate`` (the latter on the boards recorded with
``--probe-pressure``; a board without probes keeps the label without it), the warm-up rows' median |worst second|,
rows within 1 % and the cooling rows within 2 °C, over all boards and per workload: the figures of docs/twin.md's
"Which preset to use" and issue 27's status.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.files import atomic_open
from powermodels.reporting import markdown_table

PART = "part:h200-raw-part-000,h200-raw-part-001"
RECOMMENDED = "h200-raw-pooled-per-workload:domains:network"
CAP_RATE = RECOMMENDED + ":cap-rate"

#: the seed-timing sets of each label: (session, the start of the set's name). Sessions 26–28 scored the first 23
#: clean boards at the seed's phase; sessions 30–33 the eight never-seen boards (the counter timing's deciding sets);
#: session 33 replayed :cap-rate at the seed's phase on all 26 probed clean boards.
SEED_SETS = ((26, "14 clean boards, sessions 21-26"),
             (27, "8 new boards of session 27 (22 clean boards"),
             (28, "new board of session 28, run 1 (23 clean boards"),
             (30, "w2 v2 c-prime, run 1, counter timing seed"),
             (31, "w2 v2 c-prime, run 1, counter timing seed"),
             (32, "c-double-prime boards 1-2 (run 1), counter timing seed"),
             (33, "c-double-prime boards 3-4 (run 1), counter timing seed"))
SOURCES = {PART: SEED_SETS, RECOMMENDED: SEED_SETS,
           CAP_RATE: ((33, "recommended with cap-rate, 26 probed clean boards (run 1), counter timing seed"),)}
#: the recommended calibration as a row: :cap-rate where the board was probed, else the label without it
RECOMMENDED_ROW = "recommended calibration (--calibrate-cap rate where probed)"
#: a twin_unseen_boards.py rows table's columns that are its own (not the check table's)
SET, PRESET, BOARD = "set", "preset", "board"


def gather(results: Path) -> pd.DataFrame:
    """Every clean board's rows under each label of :data:`SOURCES`, plus :data:`RECOMMENDED_ROW`."""
    frames, tables = [], {}
    for label, sets in SOURCES.items():
        for session, name in sets:
            if session not in tables:
                path = results / f"twin_unseen_rows_h200_session{session}.csv"
                if not path.exists():
                    raise SystemExit(f"{path}: missing (a clean set's rows are kept there)")
                tables[session] = pd.read_csv(path, dtype={BOARD: str})
            t = tables[session]
            rows = t[t[SET].str.startswith(name) & (t[PRESET] == label)]
            if rows.empty:
                raise SystemExit(f"session {session}: no row of {label!r} in a set named {name!r}…")
            frames.append(rows)
    rows = pd.concat(frames, ignore_index=True)
    twice = rows[rows.duplicated([PRESET, BOARD, schema.CHECK_METRIC, schema.WORKLOAD], keep=False)]
    if len(twice):
        raise SystemExit(f"{twice[BOARD].nunique()} board(s) scored twice under one label "
                         f"({', '.join(sorted(set(twice[BOARD])))}): a board counts once")
    probed = set(rows.loc[rows[PRESET] == CAP_RATE, BOARD])
    recommended = pd.concat([rows[rows[PRESET] == CAP_RATE],
                             rows[(rows[PRESET] == RECOMMENDED) & ~rows[BOARD].isin(probed)]])
    return pd.concat([rows, recommended.assign(**{PRESET: RECOMMENDED_ROW})], ignore_index=True)


def headline(rows: pd.DataFrame) -> pd.DataFrame:
    """Per label: boards, warm-up rows' median |worst second| and rows within 1 %, cooling rows within 2 °C."""
    out = []
    for label, g in rows.groupby(PRESET, sort=False):
        warm = g[g[schema.CHECK_METRIC].str.startswith("warm-up")]
        cool = g[g[schema.CHECK_METRIC].str.startswith("cooling")]
        out.append({"label": label, "boards": warm[BOARD].nunique(), "warm-up rows": len(warm),
                    "median |worst second| (%)": round(float(warm[schema.CHECK_ERROR].abs().median()), 3),
                    "within 1 %": int(warm[schema.CHECK_WITHIN].sum()),
                    "cooling within 2 °C": f"{int(cool[schema.CHECK_WITHIN].sum())} of {len(cool)}"})
    return pd.DataFrame(out)


def per_workload(rows: pd.DataFrame, label: str) -> pd.DataFrame:
    """``label``'s warm-up rows per workload: median |worst second| and rows within 1 %."""
    warm = rows[(rows[PRESET] == label) & rows[schema.CHECK_METRIC].str.startswith("warm-up")]
    return (warm.groupby(schema.WORKLOAD)
            .agg(rows=(schema.CHECK_ERROR, "size"),
                 median=(schema.CHECK_ERROR, lambda e: round(float(e.abs().median()), 3)),
                 within=(schema.CHECK_WITHIN, "sum"))
            .reset_index().rename(columns={"median": "median |worst second| (%)", "within": "within 1 %"}))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "results",
                    help="where the sessions' twin_unseen_rows_h200_session<N>.csv are")
    ap.add_argument("--out", type=Path, help="write the gathered rows here (CSV)")
    args = ap.parse_args(argv)
    rows = gather(args.results)
    print(f"{rows[BOARD].nunique()} clean H200s (real) against their twins, the seed's counter phase\n")
    print(markdown_table(headline(rows)))
    print(f"\n{RECOMMENDED_ROW}, per workload:\n")
    print(markdown_table(per_workload(rows, RECOMMENDED_ROW)))
    if args.out is not None:
        with atomic_open(args.out, "w") as fh:
            rows.to_csv(fh, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
