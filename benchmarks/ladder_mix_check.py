"""Does a mixed ladder window draw the sum of its loads' power? (real recordings, no GPU needed)

For a raw recording with a gap-free ladder (``gpu_raw_recording.py --ladder``), each load is fitted
on all its own pure windows and the mixed windows are predicted as each load's eq. 4.1 power over
its own time (:func:`~powermodels.natural_dvfs.mixed_heldout.mix_check`): an in-sample check of the
model the held-out test rests on, set beside the pure windows' scatter. Not a held-out figure.

Usage::

    PYTHONPATH=src python benchmarks/ladder_mix_check.py datasets/h100-2026-11-27/raw_recording_ladder_f73aad1d
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
from _common import save_figure

from powermodels import schema
from powermodels.natural_dvfs.clock_windows import clock_windows, idle_power
from powermodels.natural_dvfs.ladder_windows import companions
from powermodels.natural_dvfs.launch_clocks import attribute_clocks
from powermodels.natural_dvfs.mixed_heldout import mix_check
from powermodels.recording import read_recording


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording", help="a raw recording folder")
    ap.add_argument("--alpha", type=float, default=None,
                    help="α at constant clock (W/°C, e.g. from calibrate --from's report): the fits may then "
                         "take its temperature term (needs --t-ref)")
    ap.add_argument("--t-ref", type=float, default=None, help="α's reference temperature (°C)")
    ap.add_argument("--plot", default=None, help="PNG: every window's error against the pressure share")
    ap.add_argument("--label", default=None, help="the plot's title (default: the recording's folder)")
    args = ap.parse_args(argv)
    if (args.alpha is None) != (args.t_ref is None):
        ap.error("--alpha and --t-ref go together")
    t0 = time.time()
    rec = read_recording(args.recording)
    clocks = attribute_clocks(rec)
    cw = clock_windows(rec, clocks)
    names = pd.unique(clocks[schema.WORKLOAD])
    companion_of = {w: c[2][0] for w, c in companions(rec, names).items() if len(c[2]) == 1}
    idle_w, idle_t = idle_power(rec)
    table = mix_check(cw, companion_of, idle_w=idle_w, idle_temperature_c=idle_t,
                      alpha_w_per_c=args.alpha, reference_temperature_c=args.t_ref)
    pd.set_option("display.width", 250)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    if args.plot:
        plot_errors(table.attrs["windows"], args.plot, args.label or args.recording)
        print(f"wrote {args.plot}")
    print(f"wall {time.time() - t0:.0f} s")
    return 0


def plot_errors(windows: pd.DataFrame, path: str, title: str) -> None:
    """Each window's signed error against its pressure share (0: pure), per workload, with the pure scatter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    names = list(dict.fromkeys(windows[schema.WORKLOAD]))
    for k, w in enumerate(names):
        g = windows.loc[windows[schema.WORKLOAD] == w]
        x = g[schema.COMPANION_SHARE].to_numpy(float) + (k - (len(names) - 1) / 2) * 0.012  # side by side
        ax.scatter(x, g[schema.WINDOW_ERR_PCT], s=8, alpha=0.5, label=w.split("[")[0])
    pure = windows.loc[windows[schema.COMPANION_SHARE] <= 0, schema.WINDOW_ERR_PCT].to_numpy(float)
    sd = float(np.std(pure)) if pure.size else 0.0
    ax.axhspan(-3, 3, color="0.9", zorder=0, label="±3 % (the target)")
    ax.axhspan(-sd, sd, color="0.75", zorder=0, label=f"pure windows' sd ±{sd:.1f} %")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("pressure GEMM's share of the window (0: the workload alone)")
    ax.set_ylabel("error % (each load fitted on its pure windows)")
    ax.set_title(title, fontsize=10)
    ax.set_ylim(-20, 20)
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    save_figure(fig, path)


if __name__ == "__main__":
    raise SystemExit(main())
