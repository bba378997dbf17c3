"""The natural-DVFS ``ladder`` part on the twin presets fitted to real boards (simulated GPU only).

Issue 26: power ≤ 3 % MAPE at held-out clocks 1,500–1,800 MHz, no setting changed. For each
preset (``h100-sxm``, ``h200-raw``) the preset's four recorded workloads (the bf16 GEMM as the
pressure load) are recorded twice with :func:`~powermodels.natural_dvfs.natural_recording.record_natural_dvfs`
— the natural part and a short thermal part alone, then with the ladder part added — and each
recording is fitted as ``calibrate`` does (``calibrate_recording``: clocks, α, then
``clock_power``'s held-out band). The report gives, per workload, the training counter windows
below the band (of them mixed with the pressure), the held-out windows, the held-out MAPE, and
where the pressure alone holds each twin's clock at the cap, beside the real boards' (probed).

Everything here is simulated: the twins' power is a linear sum over the launches of each
1 ms step, so a mixed window's power is the two loads' shares by construction.

Usage::

    PYTHONPATH=src python benchmarks/ladder_simulated.py [--presets h100-sxm h200-raw] [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_report  # noqa: E402

PRESSURE = "torch_bf16_matmul_8192"


def preset_items(preset):
    """The preset's workloads as ``(workload, config, name)`` (their twins run on its GPU)."""
    from powermodels.workloads.callables import CallableWorkload

    out = {}
    for name, tw in preset.workloads.items():
        w = CallableWorkload(lambda: None, name=name, simulated=tw.workload, timing="synchronize")
        out[name] = (w, w.validate_config(w.parse_config(None)), name)
    return out


def record(preset, ladder, *, seed: int, schedule: dict):
    from powermodels.measuring.runner import make_runner
    from powermodels.natural_dvfs.natural_recording import record_natural_dvfs

    items = preset_items(preset)
    runner = make_runner(preset.gpu(seed=seed))
    try:
        work = [v for k, v in items.items() if k != PRESSURE]
        return record_natural_dvfs(runner, work, items[PRESSURE][:2], ladder=ladder, batch_s=0.003, **schedule)
    finally:
        runner.close()


def summarise(run, band) -> pd.DataFrame:
    from powermodels import schema

    t = run.power_clock
    cols = [schema.WORKLOAD, schema.POWER_MAPE_PCT, schema.TEST_WINDOWS, schema.TRAIN_WINDOWS,
            schema.TRAIN_BELOW_BAND, schema.TRAIN_MIXED, schema.FORM_CV, schema.CV_MAPE_PCT, schema.NOTE]
    return t[[c for c in cols if c in t]]


def cap_clock(rec, spans) -> str:
    """Probed clock (5/50/95 %) while the pressure alone or beside the workload runs in ``spans``."""
    from powermodels import schema

    p = rec.probes
    t = p[schema.T_S].to_numpy(float)
    inside = np.zeros(t.size, dtype=bool)
    for a, b in spans:
        inside |= (t >= a + 0.2) & (t <= b)
    f = p[schema.PROBE_CLOCK_MHZ].to_numpy(float)[inside]
    if not f.size:
        return "–"
    lo, mid, hi = np.percentile(f, [5, 50, 95])
    return f"{lo:.0f} / {mid:.0f} / {hi:.0f} MHz ({100 * np.mean(f >= 1500):.0f} % of probes ≥ 1,500)"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["h100-sxm", "h200-raw"])
    parser.add_argument("--out", default="benchmarks/results/ladder_simulated.md")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    from powermodels import schema
    from powermodels.natural_dvfs.clock_power import DEFAULT_BAND_MHZ
    from powermodels.natural_dvfs.natural_recording import Ladder
    from powermodels.reporting import markdown_table
    from powermodels.twin.preset import load_preset
    from powermodels.workflows.recording_calibration import calibrate_recording

    schedule = dict(cycles=8, pressure_s=1.0, burst_s=0.5, series_s=4.0, cool_s=3.0)
    ladder = Ladder()
    lines = ["# The ladder part on the twin presets (simulated GPU)", "",
             f"Command: `PYTHONPATH=src python benchmarks/ladder_simulated.py {' '.join(argv or sys.argv[1:])}`", "",
             f"Schedule: {schedule}, batches of 3 ms; ladder {ladder}. Held-out band "
             f"{DEFAULT_BAND_MHZ[0]:.0f}–{DEFAULT_BAND_MHZ[1]:.0f} MHz; a training window spends no time in it.",
             "All figures simulated (the twin's power of a mixed window is the two loads' shares by construction).",
             ""]
    t_all = time.perf_counter()
    for name in args.presets:
        preset = load_preset(name)
        for label, lad in (("without ladder", None), ("with ladder", ladder)):
            t0 = time.perf_counter()
            rec = record(preset, lad, seed=args.seed, schedule=schedule)
            run = calibrate_recording(rec)
            wall = time.perf_counter() - t0
            ph = rec.phases
            spans = ph.loc[ph[schema.PHASE_KIND].isin(["ladder"] if lad else ["pressure"]),
                           [schema.T0_S, schema.T1_S]].to_numpy(float)
            where = "ladder steps" if lad else "pressure phases"
            lines += [f"## {name}, {label} ({wall:.0f} s wall)", "",
                      f"Probed clock in the {where} (5 / 50 / 95 %): {cap_clock(rec, spans)}", "",
                      markdown_table(summarise(run, DEFAULT_BAND_MHZ), float_format=".3g"), ""]
            print(f"{name} {label}: {wall:.0f} s", flush=True)
    lines.append(f"Total wall time {time.perf_counter() - t_all:.0f} s.")
    return write_report("\n".join(lines) + "\n", Path(args.out))


if __name__ == "__main__":
    raise SystemExit(main())
