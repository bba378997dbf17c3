"""The capped start repeated on one board: each start's overshoot and settling, real, beside the twin's median.

For recordings made with ``gpu_raw_recording.py --parts capstarts`` (no GPU needed here)::

    PYTHONPATH=src python benchmarks/cap_starts_plot.py --out docs/img/cap_starts.png \\
        --set "H100 GPU-5db815fe, set 1" datasets/h100-2026-11-28/capstarts_5db815fe_1 CMP1 ...

Each ``--set LABEL RECORDING [CMP]``: the real starts (``powermodels.twin.metrics.cap_starts``) as dots
with their median, and, where ``CMP`` is a ``twin-compare`` output folder of that recording, the twin's
median over its starts × sensor seeds (its ``comparison.csv``) with the ±25 % band of the issue's target
around the real median. Prints the per-set table.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from _common import save_figure

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.twin import metrics
from powermodels.twin.metrics import capped_series

METRICS = ((schema.OVERSHOOT_W, "cap overshoot", "overshoot: first-second mean above settled (W)"),
           (schema.SETTLING_S, "cap settling", "settling time: 1 s mean within 1 % (s)"))


def load_set(label: str, recording: str, cmp: str | None = None) -> dict:
    rec = read_recording(recording)
    (workload,) = capped_series(rec) or ["torch_bf16_matmul_8192"]
    starts = metrics.cap_starts(rec, workload)
    twin = {}
    if cmp:
        table = pd.read_csv(Path(cmp) / "comparison.csv")
        for key, prefix, _ in METRICS:
            row = table.loc[table[schema.CHECK_METRIC].str.startswith(prefix) & (table[schema.WORKLOAD] == workload)]
            twin[key] = float(row[schema.CHECK_TWIN].iloc[0]) if len(row) else np.nan
    return {"label": label, "starts": starts, "twin": twin}


def plot(sets: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for ax, (key, _, ylabel) in zip(axes, METRICS, strict=True):
        for i, s in enumerate(sets):
            v = s["starts"][key].to_numpy(float)
            x = i + np.linspace(-0.15, 0.15, v.size)
            ax.scatter(x, v, s=16, color="C0", label="real, each start" if i == 0 else None, zorder=3)
            med = float(np.median(v))
            ax.hlines(med, i - 0.3, i + 0.3, color="C0", lw=2, label="real median" if i == 0 else None)
            ax.fill_between([i - 0.3, i + 0.3], med * 0.75, med * 1.25, color="C0", alpha=0.12,
                            label="real median ±25 % (the target)" if i == 0 else None)
            b = s["twin"].get(key, np.nan)
            if np.isfinite(b):
                ax.scatter([i + 0.36], [b], marker="D", s=40, color="C3", zorder=4,
                           label="twin median (starts × 5 seeds)" if i == 0 else None)
        ax.set_xticks(range(len(sets)), [s["label"] for s in sets], fontsize=8)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_ylim(bottom=0)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("The bf16 GEMM's capped start from idle, repeated (real; twin simulated)", fontsize=10)
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", nargs="+", action="append", required=True, metavar="LABEL RECORDING [CMP]",
                    help="a label, a capstarts recording and optionally its twin-compare folder")
    ap.add_argument("--out", default=None, help="PNG to write")
    args = ap.parse_args(argv)
    for s in args.set:
        if len(s) not in (2, 3):
            ap.error(f"--set takes LABEL RECORDING [CMP], got {s}")
    sets = [load_set(*s) for s in args.set]
    for s in sets:
        st = s["starts"]
        print(f"{s['label']}: {len(st)} starts; overshoot median {st[schema.OVERSHOOT_W].median():.1f} W "
              f"({st[schema.OVERSHOOT_W].min():.1f}–{st[schema.OVERSHOOT_W].max():.1f}), settling median "
              f"{st[schema.SETTLING_S].median():.1f} s ({st[schema.SETTLING_S].min():.1f}–{st[schema.SETTLING_S].max():.1f})"
              + (f"; twin medians {s['twin'][schema.OVERSHOOT_W]:.1f} W, {s['twin'][schema.SETTLING_S]:.1f} s"
                 if s["twin"] else ""))
    if args.out:
        plot(sets, args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
