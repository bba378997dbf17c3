"""The same board 15 minutes later, scored as a calibrated twin of its first run: the 1 % target against the board itself (real data, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/repeat_as_twin.py \\
        --pair datasets/h200-2026-11-30/raw_recording_deeee79b datasets/h200-2026-11-30/raw_recording_repeat_deeee79b \\
        --pair ... [--twin-rows benchmarks/results/twin_unseen_rows_h200_session33.csv \\
        --twin-preset h200-raw-pooled-per-workload:domains:network:cap-rate \\
        --twin-set "recommended with cap-rate, 26 probed"] [--out rows.csv] [--plot fig.png]

Each ``--pair`` is one board's run and its repeat of the same raw-recording schedule. Every workload's
series is scored as issue 27's warm-up row scores a calibrated twin (:func:`powermodels.board_pair.repeat_as_twin`):
the repeat's worst second of energy per launch against the run's from second 2 on, as measured and levelled at
second 1, and its worst second of die temperature in the 30 s after each series (issue 27's cooling row, 2 °C).
``--twin-rows`` (``twin_unseen_boards.py`` rows CSVs) adds the twin's warm-up rows scored from second 2 and its
cooling rows under ``--twin-preset`` (and, where a file holds several sets, ``--twin-set``: a part of the set's
name) on the same boards, for the side-by-side count; ``--plot`` draws the share of warm-up rows within each
|worst second|, the repeat's and the twin's, on the boards the twin has.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.board_pair import board_pair, board_pair_summary, cooling_pair, repeat_as_twin
from powermodels.files import atomic_open
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.compare import warmup_metric

#: the issue's warm-up target, per cent at every second
TARGET_PCT = 1.0
#: the issue's cooling target, °C at every second of the 30 s after a load
COOLING_TARGET_C = 2.0
#: the first second a calibrated twin is scored from, and so the repeat
FROM_SECOND = 2
#: a twin_unseen_boards.py rows table's set column (its own name for the replays' batch)
SET = "set"


def score_pairs(pairs: list[tuple[str, str]]) -> pd.DataFrame:
    """One row per board and workload: the repeat's worst seconds as a twin of the run, warm-up and cooling."""
    frames = []
    for run, repeat in pairs:
        a, b = read_recording(run), read_recording(repeat)
        uuid_a, uuid_b = a.provenance.get("uuid"), b.provenance.get("uuid")
        if not uuid_a or not uuid_b:
            raise SystemExit(f"--pair {run} {repeat}: a recording without the board's uuid in its provenance; "
                             "a pair must be one board twice")
        if uuid_a != uuid_b:
            raise SystemExit(f"--pair {run} {repeat}: two boards ({uuid_a}, {uuid_b}); a pair is one board twice")
        pair = board_pair(a, b)
        cooling = board_pair_summary(pair, cooling_pair(a, b))[[schema.WORKLOAD, schema.WORST_COOLING_DIFF_C]]
        frames.append(repeat_as_twin(pair, from_second=FROM_SECOND).merge(cooling, on=schema.WORKLOAD)
                      .assign(board=str(uuid_a).removeprefix("GPU-")[:8], run=a.name, repeat=b.name))
    return pd.concat(frames, ignore_index=True)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per workload and over all: rows, within the targets as measured and levelled, median |worst second|."""
    out = []
    for name, g in [*rows.groupby(schema.WORKLOAD, sort=False), ("all", rows)]:
        measured = g[schema.WORST_SCORED_DIFF_PCT].abs()
        levelled = g[schema.WORST_SCORED_DIFF_LEVELLED_PCT].abs()
        out.append({"workload": name, "rows": len(g),
                    "as measured: within 1 %": int((measured <= TARGET_PCT).sum()),
                    "median |worst| (%)": round(float(measured.median()), 3),
                    "levelled at second 1: within 1 %": int((levelled <= TARGET_PCT).sum()),
                    "levelled median |worst| (%)": round(float(levelled.median()), 3),
                    "cooling within 2 °C": int((g[schema.WORST_COOLING_DIFF_C].abs() <= COOLING_TARGET_C).sum())})
    return pd.DataFrame(out)


def read_twin_rows(paths: list[Path]) -> pd.DataFrame:
    """``twin_unseen_boards.py`` rows CSVs, one table."""
    return pd.concat([pd.read_csv(p, dtype={"board": str}) for p in paths], ignore_index=True)


def twin_rows_on(rows: pd.DataFrame, table: pd.DataFrame, preset: str, metric: str = "warm-up",
                 set_part: str | None = None) -> pd.DataFrame:
    """The twin's rows of ``table`` (:func:`read_twin_rows`) under ``preset`` on the runs of ``rows``, one per run and
    workload.

    ``metric`` ``"warm-up"`` takes the warm-up rows scored from :data:`FROM_SECOND` on (the repeat's seconds; a
    board-blind preset's rows, scored from second 0, are not taken), ``"cooling"`` the cooling rows. ``set_part``
    keeps the rows whose set's name contains it.
    """
    t = table
    if set_part is not None:
        if SET not in t.columns:
            raise SystemExit("--twin-set: the --twin-rows files have no set column")
        t = t[t[SET].str.contains(set_part, regex=False)]
    labels = t[schema.CHECK_METRIC]
    scored = labels == warmup_metric(FROM_SECOND) if metric == "warm-up" else labels.str.startswith(metric)
    t = t[(t["preset"] == preset) & scored & t["recording"].isin(set(rows["run"]))]
    if t.empty:
        raise SystemExit(f"--twin-rows: no {metric} row of {preset!r} on these runs"
                         + (" scored from second 2 (a board-blind preset's rows are scored from second 0)"
                            if metric == "warm-up" else ""))
    twice = t[t.duplicated(["recording", schema.WORKLOAD], keep=False)]
    if len(twice):  # two replays of one row (another set, another timing) would count a board twice
        raise SystemExit(f"--twin-rows: {preset!r} has {len(twice)} rows of one run and workload more than once "
                         f"({', '.join(sorted(set(twice['recording'])))}); choose one set with --twin-set")
    return t


def on_twin_boards(rows: pd.DataFrame, twin: pd.DataFrame) -> pd.DataFrame:
    """The repeat's rows on the runs the twin has rows of."""
    return rows[rows["run"].isin(set(twin["recording"]))]


def twin_side(rows: pd.DataFrame, t: pd.DataFrame, preset: str, cooling: pd.DataFrame | None = None) -> pd.DataFrame:
    """The twin's warm-up rows (:func:`twin_rows_on`), and its ``cooling`` rows, beside the repeat's on its boards."""
    mine = on_twin_boards(rows, t)
    levelled = mine[schema.WORST_SCORED_DIFF_LEVELLED_PCT].abs()
    repeat = {"on the same boards": "the repeat, levelled at second 1", "boards": mine["board"].nunique(),
              "rows": len(mine), "within 1 %": int((levelled <= TARGET_PCT).sum()),
              "median |worst| (%)": round(float(levelled.median()), 3)}
    twin = {"on the same boards": f"the twin, {preset}", "boards": t["board"].nunique(), "rows": len(t),
            "within 1 %": int(t[schema.CHECK_WITHIN].sum()),
            "median |worst| (%)": round(float(t[schema.CHECK_ERROR].abs().median()), 3)}
    if cooling is not None:
        repeat["cooling within 2 °C"] = int((mine[schema.WORST_COOLING_DIFF_C].abs() <= COOLING_TARGET_C).sum())
        twin["cooling within 2 °C"] = int(cooling[schema.CHECK_WITHIN].sum())
    return pd.DataFrame([repeat, twin])


def plot(rows: pd.DataFrame, twin: pd.DataFrame | None, preset: str | None, path: Path) -> None:
    """The share of rows within each |worst second|: the repeat as measured and levelled, and the twin's rows.

    With the twin's rows every curve is drawn on the boards the twin has.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    if twin is not None:
        rows = on_twin_boards(rows, twin)
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    curves = [("the board's repeat, as measured", rows[schema.WORST_SCORED_DIFF_PCT]),
              ("the board's repeat, levelled at second 1", rows[schema.WORST_SCORED_DIFF_LEVELLED_PCT])]
    if twin is not None:
        curves.append((f"the twin of run 1, {preset}", twin[schema.CHECK_ERROR]))
    for label, values in curves:
        x = np.sort(np.abs(values.to_numpy(float)))
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post",
                label=f"{label}: {int((x <= TARGET_PCT).sum())} of {len(x)} within 1 %")
    ax.axvline(TARGET_PCT, color="grey", lw=0.8, ls="--")
    ax.set_xlabel(f"|worst second| of energy per launch from second {FROM_SECOND} (%)")
    ax.set_ylabel("share of warm-up rows")
    ax.set_title(f"{rows['board'].nunique()} real boards run twice, ~15 min apart: run 2 and a twin against run 1",
                 fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_ylim(0, 1.02)
    fig.tight_layout()
    with atomic_open(path) as fh:
        fig.savefig(fh, dpi=120, format="png")
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pair", nargs=2, action="append", required=True, metavar=("RUN", "REPEAT"),
                    help="one board's raw recording and its repeat of the same schedule")
    ap.add_argument("--twin-rows", type=Path, nargs="+",
                    help="twin_unseen_boards.py rows CSVs (one replay per run and workload), for the twin's side")
    ap.add_argument("--twin-preset", help="the label whose rows --twin-rows gives")
    ap.add_argument("--twin-set", help="only the --twin-rows rows whose set's name contains this")
    ap.add_argument("--out", type=Path, help="write every board's rows here (CSV)")
    ap.add_argument("--plot", type=Path, help="draw the repeat's and the twin's rows here (PNG)")
    args = ap.parse_args(argv)
    if (args.twin_rows is None) != (args.twin_preset is None):
        ap.error("--twin-rows and --twin-preset go together")
    if args.twin_set is not None and args.twin_rows is None:
        ap.error("--twin-set needs --twin-rows")
    rows = score_pairs([tuple(p) for p in args.pair])
    print(f"{rows['board'].nunique()} boards, each run again ~15 minutes later (real): the repeat scored as a "
          f"calibrated twin of the run, worst second from second {FROM_SECOND}\n")
    print(markdown_table(summary(rows)))
    twin = None
    if args.twin_rows is not None:
        table = read_twin_rows(args.twin_rows)
        twin = twin_rows_on(rows, table, args.twin_preset, set_part=args.twin_set)
        cooling = twin_rows_on(rows, table, args.twin_preset, metric="cooling", set_part=args.twin_set)
        print()
        print(markdown_table(twin_side(rows, twin, args.twin_preset, cooling)))
    if args.out is not None:
        with atomic_open(args.out, "w") as fh:
            rows.to_csv(fh, index=False)
    if args.plot is not None:
        plot(rows, twin, args.twin_preset, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
