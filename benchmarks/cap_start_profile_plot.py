"""The capped start's mean shape on real boards, beside the twin's (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/cap_start_profile_plot.py --out docs/img/twin_cap_start_profile.png \\
        --real "H100 GPU-5db815fe" datasets/h100-2026-11-28/capstarts_5db815fe_1 ... \\
        --twin "h100-sxm (shipped)" h100-sxm datasets/h100-2026-11-28/capstarts_d14bdb3b ...

``--real LABEL RECORDING``: the mean over the recording's capped starts of the NVML instant power
above each start's settled power (:func:`powermodels.cap_start_shape.cap_start_profile`). ``--twin LABEL
PRESET RECORDING``: the same curve from the preset's replays of every start of RECORDING
(:func:`powermodels.twin.cap_seeds.replay_capped_start`, sensor seed 0; simulated). Prints each curve's
RMS difference from the first ``--real`` curve of the same recording, or from the pooled real curve.
"""

from __future__ import annotations

import argparse

import numpy as np

from powermodels import cap_start_shape, schema
from powermodels.recording import read_recording
from powermodels.twin import metrics
from powermodels.twin.cap_seeds import replay_capped_start
from powermodels.twin.compare import replay_setup


def real_curve(path: str):
    rec = read_recording(path)
    (workload,) = metrics.capped_series(rec)[:1] or ["torch_bf16_matmul_8192"]
    prof = cap_start_shape.cap_start_profile(rec, workload)
    return prof[schema.T_S].to_numpy(float), prof[schema.POWER_W].to_numpy(float), len(metrics.cap_starts(rec, workload))


def twin_curve(preset_name: str, path: str):
    rec = read_recording(path)
    workload = metrics.capped_series(rec)[0]
    preset, ambient = replay_setup(rec, preset_name)
    curves = []
    for entry in range(len(metrics.series_entries(rec, workload))):
        tw = replay_capped_start(rec, rec, preset, workload, entry, seed=0, ambient=ambient)
        curves.append(cap_start_shape.cap_start_profile(tw, workload)[schema.POWER_W].to_numpy(float))
    prof = cap_start_shape.cap_start_profile(rec, workload)
    return prof[schema.T_S].to_numpy(float), np.nanmean(np.vstack(curves), axis=0)


def rms(a, b, t, from_s=0.1):
    keep = (t >= from_s) & np.isfinite(a) & np.isfinite(b)
    return float(np.sqrt(np.mean((a[keep] - b[keep]) ** 2)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--real", nargs=2, action="append", required=True, metavar=("LABEL", "RECORDING"))
    ap.add_argument("--twin", nargs=3, action="append", default=[], metavar=("LABEL", "PRESET", "RECORDING"))
    ap.add_argument("--out", default=None, help="PNG to write")
    args = ap.parse_args(argv)
    real = {path: (label, *real_curve(path)) for label, path in args.real}
    weights = np.array([v[3] for v in real.values()], float)
    pooled = np.average(np.vstack([v[2] for v in real.values()]), axis=0, weights=weights)
    t = next(iter(real.values()))[1]
    for label, _, curve, n in real.values():
        print(f"real {label} ({n} starts): RMS from the pooled real curve {rms(curve, pooled, t):.1f} W")
    twins = []
    for label, preset, path in args.twin:
        _, curve = twin_curve(preset, path)
        ref = real[path][2] if path in real else pooled
        print(f"twin {label} on {path}: RMS from that recording's real curve {rms(curve, ref, t):.1f} W")
        twins.append((label, curve))
    if args.out:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
        for label, tt, curve, n in real.values():
            axes[0].plot(tt, curve, lw=1.2, label=f"{label} ({n} starts)")
        axes[0].set_title("real: mean over each board's starts", fontsize=10)
        axes[1].plot(t, pooled, color="k", lw=2, label="real, all boards pooled")
        for i, (label, curve) in enumerate(twins):
            axes[1].plot(t, curve, lw=1.2, ls="--", color=f"C{i + 3}", label=f"twin: {label}")
        axes[1].set_title("twin (simulated) beside the pooled real curve", fontsize=10)
        for ax in axes:
            ax.axhline(0.0, color="0.5", lw=0.6)
            ax.set_xlabel("s after the capped load starts (bf16 GEMM from idle)")
            ax.set_ylim(-160, 160)
            ax.legend(fontsize=7, loc="lower right")
        axes[0].set_ylabel("NVML instant power above settled (W), 50 ms bins")
        fig.tight_layout()
        fig.savefig(args.out, dpi=110)
        plt.close(fig)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
