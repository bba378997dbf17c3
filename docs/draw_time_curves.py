"""Draw ``docs/img/time_curves_bf16_h100_0b4f1a7f.png``: why a per-launch eq. 4.5 fit missed its band.

Real data: the capped bf16 GEMM's probed batches of the session-5 natural-DVFS recording (H100
board GPU-0b4f1a7f, ``datasets/h100-2026-11-25-session5/natural_dvfs/recording``). Every fit
leaves out the middle 40–60 % of the clock range (the held-out band, shaded), as
``calibrate``'s validation does: eq. 4.5 fitted per launch (as run), and eq. 4.5 and DSO eq. 2
fitted to one median point per clock step (:mod:`powermodels.workflows.time_curves`).

    PYTHONPATH=src python docs/draw_time_curves.py     # ~5 s
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.models import RationalTimeModel
from powermodels.natural_dvfs.launch_clocks import attribute_clocks
from powermodels.recording import read_recording
from powermodels.workflows.time_curves import clock_points, fit_time_form

REPO = Path(__file__).resolve().parents[1]
RECORDING = REPO / "datasets" / "h100-2026-11-25-session5" / "natural_dvfs" / "recording"
WORKLOAD = "pressure_gemm_bf16_8192"


def kept_batches() -> pd.DataFrame:
    """The workload's batches whose probed clock held, with the recording's memory clock."""
    rec = read_recording(RECORDING)
    clocks = attribute_clocks(rec)
    kept = clocks.loc[clocks[schema.CLOCK_KEPT] & (clocks[schema.WORKLOAD] == WORKLOAD)]
    return kept.assign(**{schema.MEM_CLOCK_MHZ: float(rec.trace[schema.MEM_CLOCK_MHZ].median())}).reset_index(drop=True)


def main() -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = kept_batches()
    f = rows[schema.SM_CLOCK_MHZ].to_numpy(float)
    t = rows[schema.TIME_S].to_numpy(float)
    lo, hi = f.min() + 0.4 * np.ptp(f), f.min() + 0.6 * np.ptp(f)
    test = (f >= lo) & (f <= hi)
    points = clock_points(rows.loc[~test], 15.0)
    grid = pd.DataFrame({schema.SM_CLOCK_MHZ: np.linspace(f.min(), f.max(), 300),
                         schema.MEM_CLOCK_MHZ: rows[schema.MEM_CLOCK_MHZ].iloc[0]})
    per_launch = RationalTimeModel().fit(f[~test, None], t[~test])

    def mape(predicted):
        return 100 * float(np.mean(np.abs(predicted - t[test]) / t[test]))

    curves = [("eq. 4.5 per launch (as run)", per_launch.predict_at(grid[schema.SM_CLOCK_MHZ]),
               mape(per_launch.predict_at(f[test])), "C3", "--")]
    for form, label, colour in (("rational", "eq. 4.5, one point per clock", "C1"),
                                ("dso", "DSO eq. 2, one point per clock (CV's choice)", "C0")):
        model = fit_time_form(form, points)
        curves.append((label, model(grid), mape(model(rows.loc[test])), colour, "-"))
    fig, ax = plt.subplots(figsize=(7.2, 4.2), dpi=100)
    ax.axvspan(lo, hi, color="0.92", zorder=0, label=f"held-out band ({int(test.sum())} batches)")
    ax.plot(f, t * 1e3, ".", ms=2, color="0.6", alpha=0.4, label=f"kept batches ({len(f)})")
    ax.plot(points[schema.SM_CLOCK_MHZ], points[schema.TIME_S] * 1e3, "ko", ms=4,
            label="training clock points (median per 15 MHz)")
    for label, y, err, colour, style in curves:
        ax.plot(grid[schema.SM_CLOCK_MHZ], y * 1e3, style, color=colour, label=f"{label}: {err:.2f} % in the band")
    ax.set_xlabel("probed SM clock (MHz)")
    ax.set_ylabel("time per launch (ms)")
    ax.set_title("Real H100 GPU-0b4f1a7f, capped bf16 GEMM 8192, natural DVFS (session 5)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = REPO / "docs" / "img" / "time_curves_bf16_h100_0b4f1a7f.png"
    fig.savefig(path)
    plt.close(fig)
    for label, _, err, _, _ in curves:
        print(f"{label}: held-out band MAPE {err:.2f} %")
    return path


if __name__ == "__main__":
    print(main())
