"""Draw ``docs/img/power_clock_heldout.png``: power vs clock from windows whose clock moved.

Real data: the raw recordings of an H100 (GPU-620707cb,
``datasets/h100-2026-11-25-session5/raw_recording_620707cb``) and an H200 (GPU-168e6658,
recorded 2026-11-27 by ``benchmarks/gpu_raw_recording.py``; pass its folder). For each workload:
the energy-counter windows (large dots) and instant readings (small dots) at their mean probed
clock, at ``T_ref`` where the CV chose the temperature term; the windows in the held-out band
(shaded, red) were not fitted; the line is eq. 4.1 as fitted without them, with the setting
the CV chose (:mod:`powermodels.natural_dvfs.clock_power`), drawn at a steady clock.

    PYTHONPATH=src python docs/draw_power_clock.py [H200_RECORDING]     # ~3 min per recording
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from powermodels import schema
from powermodels.models.voltage import relative_voltage
from powermodels.natural_dvfs.clock_windows import clock_windows
from powermodels.recording import read_recording
from powermodels.workflows.recording_calibration import calibrate_recording

REPO = Path(__file__).resolve().parents[1]
H100 = REPO / "datasets" / "h100-2026-11-25-session5" / "raw_recording_620707cb"


def panels(folder: Path):
    """``(label, run, windows)`` of one recording, refitted as ``calibrate --from`` does."""
    rec = read_recording(folder)
    run = calibrate_recording(rec)
    from powermodels.natural_dvfs.launch_clocks import attribute_clocks

    cw = clock_windows(rec, attribute_clocks(rec))
    label = f"{rec.provenance.get('gpu')} {str(rec.provenance.get('uuid'))[:12]}"
    return label, run, cw


def main(folders) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [panels(Path(f)) for f in folders]
    n = max(len(run.power_clock) for _, run, _ in rows)
    fig, axes = plt.subplots(len(rows), n, figsize=(3.6 * n, 3.2 * len(rows)), dpi=100, squeeze=False)
    for r, (label, run, cw) in enumerate(rows):
        cal = run.calibration
        t_ref = cal.reference_temperature_c
        alpha = cal.temperature.alpha_w_per_c_ if cal.temperature is not None else 0.0
        table = cw.table.loc[cw.table[schema.WINDOW_KEPT]]
        for c, (_, res) in enumerate(run.power_clock.iterrows()):
            ax = axes[r, c]
            g = table.loc[table[schema.WORKLOAD] == res[schema.WORKLOAD]]
            use_alpha = alpha if res["temperature_cv"] == "alpha" else 0.0
            p = g[schema.POWER_W] - use_alpha * (g[schema.TEMPERATURE_C] - t_ref)
            f = g[schema.SM_CLOCK_MHZ]
            band = (f >= res["band_lo_mhz"]) & (f <= res["band_hi_mhz"])
            counter = g[schema.WINDOW_SOURCE] == "counter"
            ax.axvspan(res["band_lo_mhz"], res["band_hi_mhz"], color="0.9")
            ax.plot(f[~counter], p[~counter], ".", ms=2, color="0.6", label="instant readings")
            ax.plot(f[counter & ~band], p[counter & ~band], "o", ms=3, color="C0", label="counter, fitted")
            ax.plot(f[counter & band], p[counter & band], "o", ms=4, color="C3", label="counter, held out")
            if np.isfinite(res.get("p_static_w", np.nan)):
                ff = np.linspace(f.min(), f.max(), 200)
                v = relative_voltage(ff, res["knee_mhz"] if np.isfinite(res["knee_mhz"]) else ff.max(),
                                     res["slope_per_ghz"])
                ax.plot(ff, res["p_static_w"] + res["a_w_per_mhz"] * ff * v ** 2, "-", color="k", lw=1,
                        label=f"eq. 4.1 ({res['form_cv']})")
            mape = res["power_mape_pct"]
            ax.set_title(f"{res[schema.WORKLOAD][:22]}\nheld-out {mape:.1f} % ({res['test_windows']} windows)"
                         if np.isfinite(mape) else f"{res[schema.WORKLOAD][:22]}\nnot scored: {res['note'][:40]}",
                         fontsize=8)
            ax.set_xlabel("mean probed SM clock (MHz)", fontsize=7)
            if c == 0:
                ax.set_ylabel(f"{label}\npower (W)", fontsize=7)
            ax.tick_params(labelsize=6)
        axes[r, 0].legend(fontsize=5)
        for c in range(len(run.power_clock), n):
            axes[r, c].axis("off")
    fig.tight_layout()
    out = REPO / "docs" / "img" / "power_clock_heldout.png"
    fig.savefig(out)
    plt.close(fig)
    for label, run, _ in rows:
        print(label)
        print(run.power_clock[[schema.WORKLOAD, "power_mape_pct", "test_windows", "train_windows", "form_cv",
                               "temperature_cv", "sources_cv", "p_static_cv", "cv_mape_pct"]].to_string())
    return out


if __name__ == "__main__":
    print(main([H100, *sys.argv[1:]]))
