"""The first raw H200 recording against the twin: replay on ``h200``, and a preset fitted to it, held out.

Usage: ``python benchmarks/twin_h200_validation.py --out DIR [--recording PATH] [--replay-only] [--folds-only]
[--calibrated]``
(no GPU; ~5 min for the replay, ~25 min for the fit and its four folds on one busy core).

The recording is ``datasets/h200-2026-11-27/raw_recording_168e6658`` (real NVIDIA H200 GPU-168e6658, 2026-11-27,
``benchmarks/gpu_raw_recording.py``: the natural and thermal protocols of the H100 raw recordings,
a full-rate NVML trace, a clock probe per batch). Two questions:

1. **The shipped ``h200`` preset** (built by ``twin_h200_preset.py`` from ``datasets/h200/`` files of
   another H200 run and, for its thermal network, another H200 board's thermal run, never from this recording) replays the recording's schedule
   (``twin-compare``), each recording workload played by the preset's workload of the same kind
   (:data:`ALIASES`: the shipped preset has none of these names): ``DIR/replay_h200/`` gets the twin's recording, ``comparison.md``, the overlay
   plots, ``warmup_seconds.csv`` and ``held_out.png``. Every row is held out.
2. **A preset fitted to this recording** (``fit_twin``, the H200's own instant window from
   ``datasets/h200/characterize_cli_9s_result.csv``): leave-one-series-out folds as for ``h100-sxm``
   (each fold fits on the natural phase and the other three series, and is replayed on the whole
   schedule; the held-out series' rows are the validation). ``DIR/fit/``: ``in_sample.md``,
   ``folds.md``, ``folds_seconds.csv``, each fold's preset and plots, ``preset.json`` (the whole-
   recording fit, with provenance; ``--write-preset`` would not be honest here: see docs/twin.md).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin_fold_variants import fold_seconds  # noqa: E402
from twin_validation import fit_and_folds, held_out  # noqa: E402

from powermodels import schema  # noqa: E402
from powermodels.recording import read_recording  # noqa: E402
from powermodels.twin.preset import load_preset, save_preset  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets" / "h200-2026-11-27" / "raw_recording_168e6658"
SENSOR = ROOT / "datasets" / "h200" / "characterize_cli_9s_result.csv"


#: the shipped h200 preset has no workload of the recording's names (it was built from other runs): each
#: recording workload is replayed with the preset's workload of the same kind (its activity; the time per
#: launch and host gap are then taken from the recording by ``adapt_workloads``, as for any recording)
ALIASES = {"cupy_fp32_matmul_4096": "sgemm",            # fp32 GEMM (CLBlast-style SGEMM tuned config)
           "cupy_triad_256MiB": "stream_triad",         # memory-bound triad
           "cupy_fma_loop": "fp32_long",                # dependent fp32 FMA loop of the harness
           "torch_bf16_matmul_8192": "cublas_hgemm_8192"}  # half-precision GEMM 8192 held at the cap


def with_aliases(preset, aliases: dict = ALIASES):
    """``preset`` with each recording workload as a copy of the preset workload it stands for."""
    workloads = dict(preset.workloads)
    for name, source in aliases.items():
        tw = preset.workload(source)
        workloads[name] = replace(tw, workload=replace(tw.workload, name=name))
    prov = {**preset.provenance, "aliases": {k: f"copy of {v}" for k, v in aliases.items()}}
    return replace(preset, workloads=workloads, provenance=prov)


#: session 9: the median of 5 `characterize --design mixed` runs on H200 GPU-c314a989 (as h200's, twin_h200_preset.py)
SENSOR_RUNS = ROOT / "datasets" / "h200-2026-11-27" / "sensor_window_c314a989" \
    / "sensor_window_nvml.csv"


def h200_window() -> dict:
    """The H200's instant window and delay: the median of its ``characterize --design mixed`` runs.

    Until session 9 the one 9 s ``characterize`` run of ``datasets/h200`` (:data:`SENSOR`: 29.4 / 6.9 ms).
    """
    runs = pd.read_csv(SENSOR_RUNS)
    return {"window_s": float(runs["window_ms"].median()) / 1e3, "delay_s": float(runs["delay_ms"].median()) / 1e3,
            "source": "median of the 5 characterize --design mixed runs in "
                      "datasets/h200-2026-11-27/sensor_window_c314a989 (H200 GPU-c314a989)"}


def quick_folds(rec, out: Path, provenance: dict, search: bool = True):
    """Whole-recording fit (in-sample table) and the quick leave-one-series-out folds (``folds_seconds.csv``)."""
    from powermodels.reporting import markdown_table
    from powermodels.twin.compare import compare_recordings, plot_overlays
    from powermodels.twin.fit import fit_twin
    from powermodels.twin.replay import replay
    from twin_validation import BF16_TIME

    out.mkdir(parents=True, exist_ok=True)
    preset = fit_twin(rec, name="h200-raw-168e6658", sensor_window=h200_window(), provenance=provenance,
                      workload_times=BF16_TIME, search_cap_gains=search)
    save_preset(preset, out / "preset.json")
    twin = replay(rec, preset)
    table = compare_recordings(rec, twin)
    (out / "in_sample.md").write_text(markdown_table(table) + "\n")
    plot_overlays(rec, twin, out / "in_sample")
    print(table.to_string(), flush=True)
    capped = set(rec.phase_rows(kind="pressure")[schema.WORKLOAD])
    rows = []
    for w in rec.phase_rows(kind="series")[schema.WORKLOAD]:
        d = fold_seconds(rec, w, window=h200_window(), search_cap_gains=search and w in capped)
        save_preset(d.attrs["preset"], out / f"fold_{w}.json")
        rows.append(d)
        e = d["error_pct"].to_numpy()
        print(f"fold {w}: worst {e[abs(e).argmax()]:+.2f} mean {e.mean():+.2f} | "
              + " ".join(f"{x:+.1f}" for x in e), flush=True)
    pd.concat(rows, ignore_index=True).to_csv(out / "folds_seconds.csv", index=False)
    folds_figure(out / "folds_seconds.csv", out / "folds.png")
    return preset


def folds_figure(csv: Path, path: Path) -> None:
    """Warm-up energy per launch of each held-out series, real vs its fold's twin (one panel each)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = pd.read_csv(csv)
    groups = list(d.groupby("held_out", sort=False))
    fig, axes = plt.subplots(1, len(groups), figsize=(3.3 * len(groups), 3.2), squeeze=False)
    for ax, (w, g) in zip(axes[0], groups):
        ax.plot(g["second"] + 0.5, g["real_j"] * 1e3, "o-", ms=3, label="real")
        ax.plot(g["second"] + 0.5, g["twin_j"] * 1e3, "s--", ms=3, label="twin, fold without it")
        ax.set_title(f"{w} held out", fontsize=8)
        ax.set_xlabel("s since the series started", fontsize=8)
    axes[0][0].set_ylabel("energy per launch, mJ")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("real H200 GPU-168e6658 vs leave-one-series-out twins (simulated)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--replay-only", action="store_true", help="only replay the recording on the shipped h200")
    ap.add_argument("--folds-only", action="store_true", help="only fit the recording and run its folds")
    ap.add_argument("--quick", action="store_true",
                    help="with --folds-only: the whole-recording fit and its in-sample replay as usual, but each fold "
                         "replays only up to its held-out series with a 5 ms poll and searches the cap gains only "
                         "for the capped workload (twin_fold_variants.fold_seconds; ~4x faster)")
    ap.add_argument("--no-cap-search", action="store_true",
                    help="with --quick: keep the fit's default cap controller (no gain search, no capped-clock "
                         "scaling) in the whole fit and every fold (~3x faster again; the cap rows then test defaults)")
    ap.add_argument("--recording", type=Path, default=DATA,
                    help="the raw H200 recording to replay (default the first one, GPU-168e6658); e.g. "
                         "datasets/h200-2026-11-27/raw_recording_ladder_25027b10 (GPU-25027b10, session 8)")
    ap.add_argument("--calibrated", action="store_true",
                    help="also replay on h200 with the recorded ambient, and calibrated per workload from the first "
                         "idle and each series' first second (in-sample seconds; DIR/replay_h200/…/recorded*)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if not args.folds_only:
        held_out(args.recording, with_aliases(load_preset("h200")), out / "replay_h200", ambient="preset")
        if args.calibrated:
            held_out(args.recording, with_aliases(load_preset("h200")), out / "replay_h200", ambient="recorded")
            held_out(args.recording, with_aliases(load_preset("h200")), out / "replay_h200", ambient="recorded",
                     calibrate="workload")
    if not args.replay_only:
        rec = read_recording(args.recording, probes=False)
        prov = {"command": "python benchmarks/twin_h200_validation.py --out DIR --folds-only",
                "validation": "docs/twin.md: leave-one-series-out folds on the same recording (one board)",
                "instant_window": h200_window()}
        if args.quick:
            preset = quick_folds(rec, out / "fit", prov, search=not args.no_cap_search)
        else:
            preset = fit_and_folds(rec, "h200-raw-168e6658", out / "fit", prov, window=h200_window())
        save_preset(preset, out / "fit" / "preset.json")


if __name__ == "__main__":
    main()
