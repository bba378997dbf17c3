"""Draw ``docs/img/ladder_clock_real.png``: the probed clock in the ladder's steps on real boards.

Real data, 2026-11-27, no setting changed: the H100 GPU-f73aad1d and the H200 GPU-25027b10, each
with the ladder recorded twice: by ``calibrate``'s recorder before ``run_probed_alternating``
(``benchmarks/gpu_natural_dvfs.py --ladder``: one runner call per turn, ~4 ms of idle GPU at every
switch) and by ``benchmarks/gpu_raw_recording.py --ladder`` (both loads on one queue, 0.03 ms
switches). Each dot is one on-GPU clock probe inside a ``ladder`` step, the steps laid end to end
(pressure share 0.8, 0.65, 0.5 of each 10 ms cycle, as scheduled), the held-out band shaded; each
panel's title gives the share of the steps' time the two loads' launches cover and the energy
counter's mean power over the steps.

    PYTHONPATH=src python docs/draw_ladder_clock.py      # a few seconds
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.natural_dvfs.clock_power import DEFAULT_BAND_MHZ

REPO = Path(__file__).resolve().parents[1]
H100 = REPO / "datasets" / "h100-2026-11-27"
H200 = REPO / "datasets" / "h200-2026-11-27"
PANELS = [
    ("H100 GPU-f73aad1d, calibrate's recorder (run _a)", H100 / "natural_dvfs_ladder_f73aad1d_a" / "recording"),
    ("H100 GPU-f73aad1d, raw recorder", H100 / "raw_recording_ladder_f73aad1d"),
    ("H200 GPU-25027b10, calibrate's recorder", H200 / "natural_dvfs_ladder_25027b10" / "recording.tar.gz"),
    ("H200 GPU-25027b10, raw recorder", H200 / "raw_recording_ladder_25027b10"),
]


def _tables(path: Path, tmp: Path) -> dict:
    """phases, probes, launches and energy of a recording folder (or of a ``recording.tar.gz``)."""
    if path.suffix == ".gz":
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
        path = tmp / "recording"
    return {name: pd.read_parquet(path / f"{name}.parquet") for name in ("phases", "probes", "launches", "energy")}


def ladder_steps(t: dict) -> pd.DataFrame:
    """One row per ladder step: its probes' times (from the part's start, steps end to end) and clocks,
    the launches' cover of the step and the counter's mean power over it."""
    ph = t["phases"]
    steps = ph.loc[ph[schema.PHASE_KIND] == "ladder"]
    probes, launches, energy = t["probes"], t["launches"], t["energy"]
    rows, offset = [], 0.0
    for _, r in steps.iterrows():
        t0, t1 = r[schema.T0_S], r[schema.T1_S]
        p = probes.loc[(probes[schema.T_S] >= t0) & (probes[schema.T_S] <= t1)]
        ln = launches.loc[(launches[schema.START_S] >= t0) & (launches[schema.END_S] <= t1)]
        e = energy.loc[(energy[schema.T_S] >= t0) & (energy[schema.T_S] <= t1)]
        power = (np.ptp(e[schema.ENERGY_COUNTER_J]) / np.ptp(e[schema.T_S])) if len(e) > 2 else np.nan
        rows.append({"step": int(r[schema.REPEAT]), "t": p[schema.T_S].to_numpy(float) - t0 + offset,
                     "f": p[schema.PROBE_CLOCK_MHZ].to_numpy(float),
                     "busy": float((ln[schema.END_S] - ln[schema.START_S]).sum()) / (t1 - t0), "power_w": power})
        offset += t1 - t0
    return pd.DataFrame(rows)


def main(out: Path = REPO / "docs" / "img" / "ladder_clock_real.png") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 6.5), sharey=True)
    colors = {0: "tab:red", 1: "tab:orange", 2: "tab:blue"}
    for ax, (label, path) in zip(axes.ravel(), PANELS):
        with tempfile.TemporaryDirectory() as tmp:
            steps = ladder_steps(_tables(path, Path(tmp)))
        for _, s in steps.iterrows():
            ax.plot(s["t"], s["f"], ".", ms=1.5, color=colors.get(s["step"], "k"), rasterized=True)
        ax.axhspan(*DEFAULT_BAND_MHZ, color="0.85", zorder=0)
        ax.set_title(f"{label}\nlaunches cover {steps['busy'].min():.0%}–{steps['busy'].max():.0%}; "
                     f"{steps['power_w'].min():.0f}–{steps['power_w'].max():.0f} W", fontsize=9)
        ax.set_xlabel("time in the ladder steps, end to end (s)")
    for ax in axes[:, 0]:
        ax.set_ylabel("probed SM clock (MHz)")
    handles = [plt.Line2D([], [], ls="", marker="o", color=c, label=f"pressure share {s}")
               for c, s in zip(colors.values(), ("0.8", "0.65", "0.5"))]
    handles.append(plt.Rectangle((0, 0), 1, 1, color="0.85", label="held-out band"))
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
