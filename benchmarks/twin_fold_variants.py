"""Quick leave-one-series-out folds of the fitting H100 recording under variants of the fit.

Usage: ``python benchmarks/twin_fold_variants.py [--burst-clock model|data|none]... [--load-slope 0|fit]...
[--out CSV]``
(~1 min per variant and fold on one core; no GPU).

For each uncapped workload W of ``datasets/h100/raw-2026-11-25`` (real H100 GPU-14ab84a0):
``fit_twin(..., holdout=series_holdout(rec, W), burst_clock=…)`` without the cap-gain search (the
uncapped series do not depend on it), then the schedule up to W's series and the idle after it is
replayed with a 5 ms poll (``twin_validation.py`` replays the whole recording with a 1 ms poll and the
searched gains: its worst seconds differ from these by ≤ 0.2 points). Prints, per variant and held-out
workload, the warm-up energy per launch error per second (twin vs real, %), its worst and mean, and the
temperature difference; ``--load-slope fit`` also fits μ, the loads' own temperature slope
(``fit_twin(..., dynamic_per_c="fit")``; default ``0``, the shipped fit); ``--out`` writes them as a CSV. docs/twin.md ("What the folds' misses are
made of") quotes the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from twin_validation import BF16_TIME, DATA, WINDOW  # noqa: E402

from powermodels import schema  # noqa: E402
from powermodels.recording import read_recording  # noqa: E402
from powermodels.twin import metrics  # noqa: E402
from powermodels.twin.fit import fit_twin, series_holdout  # noqa: E402
from powermodels.twin.replay import replay  # noqa: E402

UNCAPPED = ("cupy_fp32_matmul_4096", "cupy_triad_256MiB", "cupy_fma_loop")


def fold_seconds(rec, workload: str, burst_clock: str = "model", *, window: dict | None = None,
                 search_cap_gains: bool = False, dynamic_per_c=0.0) -> pd.DataFrame:
    """Per second of ``workload``'s held-out series: real and twin energy per launch and temperature.

    The fold's preset is in ``attrs["preset"]``; ``window``: the instant reading's (default the H100's).
    """
    fold = fit_twin(rec, name=f"fold-without-{workload}", sensor_window=window or WINDOW,
                    holdout=series_holdout(rec, workload), workload_times=BF16_TIME,
                    search_cap_gains=search_cap_gains, burst_clock=burst_clock, dynamic_per_c=dynamic_per_c)
    ph = rec.phases.reset_index(drop=True)
    i = int(ph.index[(ph[schema.WORKLOAD] == workload) & (ph[schema.PHASE_KIND] == "series")][0])
    twin = replay(ph.iloc[:i + 2], fold, poll_s=5e-3,
                  start_temperature_c=float(rec.trace[schema.TEMPERATURE_C].iloc[0]))
    a, b = metrics.warmup_energy_per_launch(rec, workload), metrics.warmup_energy_per_launch(twin, workload)
    out = pd.DataFrame({"burst_clock": burst_clock, "load_slope": str(dynamic_per_c),
                        "mu_per_c": fold.physics.dynamic_per_c, "held_out": workload, "second": a["second"],
                        "real_j": a[schema.ENERGY_J], "twin_j": b[schema.ENERGY_J],
                        "error_pct": (b[schema.ENERGY_J] / a[schema.ENERGY_J] - 1.0) * 100.0,
                        "real_temperature_c": a[schema.TEMPERATURE_C], "twin_temperature_c": b[schema.TEMPERATURE_C],
                        "temperature_diff_c": b[schema.TEMPERATURE_C] - a[schema.TEMPERATURE_C],
                        "burst_scale": fold.fit.get("burst_clock", {}).get("scale", 0.0)})
    out.attrs["preset"] = fold
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--burst-clock", action="append", choices=("model", "data", "none"), default=[])
    ap.add_argument("--load-slope", action="append", choices=("0", "fit"), default=[],
                    help="μ, the loads' own temperature slope: 0 (the shipped fit) or fitted")
    ap.add_argument("--out", default=None, help="CSV of every second")
    args = ap.parse_args()
    rec = read_recording(DATA, probes=False)
    rows = []
    for variant in args.burst_clock or ["model", "data", "none"]:
        for slope in args.load_slope or ["0"]:
            for w in UNCAPPED:
                d = fold_seconds(rec, w, variant, dynamic_per_c="fit" if slope == "fit" else 0.0)
                rows.append(d)
                e = d["error_pct"].to_numpy()
                print(f"{variant:5s} mu {d['mu_per_c'].iloc[0]:.4f} {w:24s} scale {d['burst_scale'].iloc[0]:.2f} "
                      f"worst {e[np.abs(e).argmax()]:+.2f} "
                      f"mean {e.mean():+.2f} | " + " ".join(f"{x:+.1f}" for x in e), flush=True)
    if args.out:
        pd.concat(rows, ignore_index=True).to_csv(args.out, index=False)


if __name__ == "__main__":
    main()
