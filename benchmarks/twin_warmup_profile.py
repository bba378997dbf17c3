"""One workload's warm-up error second by second, twin vs real, for several replay folders (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_warmup_profile.py --workload torch_bf16_matmul_8192 \\
        --folder "as calibrated" OUT/h200-raw-pooled-domains-thermal-network \\
        --folder "pooled capped clock" OUT/h200-raw-pooled-domains-thermal-network-cap1.0446 \\
        --plot docs/img/x.png datasets/h200-2026-11-29/raw_recording_*

Each folder is one ``--preset`` label's output of ``twin_unseen_boards.py`` (``FOLDER/<recording>/twin``). The
warm-up row of ``twin-compare`` is the worst of these seconds; this shows all of them: per label the median over
the boards of each second's error (:func:`powermodels.twin.metrics.warmup_energy_per_launch`, real and twin), with
the boards' range. A correction that moves every second by the same amount shows as a shifted band; one that
fixes a transient shows in the first seconds only (docs/twin.md, session 22). Every second counts here from 0;
``twin-compare``'s calibrated rows start after the seconds the calibration read.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from _common import board_label, save_figure

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin import metrics


def second_errors(real, twin, workload: str) -> np.ndarray:
    """Twin over real − 1, in %, for each whole second of ``workload``'s warm-up series."""
    a = metrics.warmup_energy_per_launch(real, workload)[schema.ENERGY_J].to_numpy(float)
    b = metrics.warmup_energy_per_launch(twin, workload)[schema.ENERGY_J].to_numpy(float)
    n = min(len(a), len(b))
    return 100.0 * (b[:n] / a[:n] - 1.0)


def profiles(folders: list[tuple[str, Path]], recordings: list[Path], workload: str) -> pd.DataFrame:
    """One row per label, recording and second: ``error_pct``, with the recording's board (two recordings of one
    board stay two rows per second: each recording is one warm-up)."""
    rows = []
    for path in recordings:
        real = read_recording(path)
        for label, folder in folders:
            twin = read_recording(folder / path.name / "twin")
            rows += [{"label": label, "board": board_label(real.provenance.get("uuid", path.name)),
                      "recording": path.name, "second": k, "error_pct": e}
                     for k, e in enumerate(second_errors(real, twin, workload))]
    return pd.DataFrame(rows)


def summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per label: boards and recordings, the median of every second's error, and the median over recordings of each
    one's worst |error| (the warm-up row's worst second, counted from second 0)."""
    worst = table.assign(abs_pct=table["error_pct"].abs()).groupby(["label", "recording"], sort=False)["abs_pct"].max()
    out = table.groupby("label", sort=False).agg(boards=("board", "nunique"), recordings=("recording", "nunique"),
                                                 every_second_median_pct=("error_pct", "median"))
    out["worst_second_median_abs_pct"] = worst.groupby("label", sort=False).median()
    return out.reset_index()


def plot(table: pd.DataFrame, workload: str, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.0, 4.2))
    for label, g in table.groupby("label", sort=False):
        by = g.groupby("second")["error_pct"]
        line, = ax.plot(by.median().index, by.median().to_numpy(), marker="o", ms=3, label=label)
        ax.fill_between(by.min().index, by.min().to_numpy(), by.max().to_numpy(), color=line.get_color(), alpha=0.12)
    ax.axhspan(-1.0, 1.0, color="0.85", zorder=0, label="±1 % (issue 27)")
    ax.axhline(0.0, color="0.3", lw=0.8)
    ax.set_xlabel("second of the warm-up series")
    ax.set_ylabel("twin / real − 1, energy per launch (%)")
    boards, recordings = table["board"].nunique(), table["recording"].nunique()
    over = f"{boards} boards" if boards == recordings else f"{recordings} recordings of {boards} boards"
    ax.set_title(f"{workload}: median over {over}, range shaded (twin vs real)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=8, frameon=False)
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--folder", nargs=2, action="append", required=True, metavar=("LABEL", "FOLDER"),
                    help="a label and a twin_unseen_boards.py output folder of one preset label")
    ap.add_argument("--workload", default="torch_bf16_matmul_8192")
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args(argv)
    table = profiles([(label, Path(folder)) for label, folder in args.folder], args.recordings, args.workload)
    print(markdown_table(summary(table).round(2)))
    if args.plot is not None:
        plot(table, args.workload, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
