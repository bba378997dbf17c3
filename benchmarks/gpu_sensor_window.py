"""Is the instant reading's window one number? Re-analysis, load design, five runs (issue 15 item 4).

Three parts:

``reanalyze``
    Every committed real H200 square-wave recording in ``datasets/h200``
    (``characterize_cli_{4s,9s}``, ``sensor_square``, the harness's square
    waves): the instant window fitted jointly over each recording's runs
    (``characterize_traces`` defaults) and over every run alone, each with
    its identifiability interval. Writes ``results/sensor_window_reanalysis_h200.md``.
``compare [--mismatch]``
    On the simulated GPU (Hopper preset; instant window set to 25 or 35 ms),
    the load designs of :mod:`powermodels.sensor.window_design` at equal load
    time over five seeds (sensor phase, noise, pulse gaps), with a per-run
    sync error of ±3 ms and a per-phase timing error of ±2 ms on the recorded
    load: estimate, interval, sharpness of the loss at ±3 ms, spread around
    the median. Writes ``results/sensor_window_designs_simulated.md``.
``measure``
    Five runs of the chosen design on one device (``--device nvml`` on the
    lent GPU, read-only: every NVML setter raises), each with its own
    update-period probe, reporting per-run estimates and intervals and
    whether they fall within ±3 ms of their median. One GPU call:

        PYTHONPATH=src timeout 470 python3 benchmarks/gpu_sensor_window.py measure \\
            --device nvml --out $OUT

    Each run is ``powermodels characterize --design mixed``'s recording (probe
    for the update period, ``--seconds`` of the load, the step) and its instant-
    window fit. Writes ``$OUT/sensor_window_<device>.md``, ``.csv`` (after
    every run) and the traces (``--out``; ``results/`` by default). Budget:
    5 × (2.5 s probe + 20 s of load + 7.5 s step + idles) ≈ 5 × 32 s on the
    GPU, plus the fits.
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    from _readonly_nvml import forbid_nvml_setters

    BLOCKED = forbid_nvml_setters()

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.reporting import markdown_table
from powermodels.sensor.report import attach_loads
from powermodels.sensor.update_period import UpdatePeriod
from powermodels.sensor.window_design import (
    DESIGNS,
    ShapedLoadRunner,
    design_metrics,
    fit_design,
    record_design,
    repeatability,
)

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
CHOSEN = "mixed"


# -- reanalyze ----------------------------------------------------------------------------

def recordings(data: Path) -> dict[str, pd.DataFrame]:
    """``{name: square-wave trace table with load}`` for every committed H200 recording."""
    out = {}
    for s in ("9s", "4s"):
        f = data / f"characterize_cli_{s}_square.parquet"
        if f.exists():
            out[f"characterize_cli_{s}"] = pd.read_parquet(f)
    out["sensor_square"] = pd.read_parquet(data / "sensor_square.parquet")
    traces = pd.read_parquet(data / "harness_square_wave_traces.parquet")
    traces = attach_loads(traces, pd.read_parquet(data / "harness_square_wave_loads.parquet"))
    out["harness_square_wave"] = traces[traces[schema.RUN_ID] != "step_3s"]
    return out


def reanalyze(data: Path) -> str:
    rows = []
    for name, sq in recordings(data).items():
        sq = sq.dropna(subset=[schema.POWER_INSTANT_W])
        up = UpdatePeriod(power_column=schema.POWER_INSTANT_W).fit(sq).update_period_s_
        # the joint fit of `characterize` for a fast reading (the step does not enter it)
        est = fit_design(sq, up)
        rows.append({"recording": name, "run": "all (joint)", **design_metrics(est)})
        for run, g in sq.groupby(schema.RUN_ID, sort=False):
            try:
                e = fit_design(g, up)
            except ValueError as err:
                print(f"{name} {run}: {err}", file=sys.stderr)
                continue
            rows.append({"recording": name, "run": run, **design_metrics(e)})
        print(f"reanalyzed {name}", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    lines = ["# Instant window of every committed H200 square-wave recording, per run", "",
             "`python benchmarks/gpu_sensor_window.py reanalyze` — `BoxcarWindow` with the bounds of "
             "`characterize_traces` for a fast reading (windows ≤ 2 update periods, delays within half "
             "an update period, per-run delay ± a tenth of it). `lo`–`hi`: identifiability interval; "
             "sharpness: relative rise of the profile loss 3 ms either side of the estimate; "
             "wide: `characterize` would warn.", "",
             markdown_table(df.round(3)), ""]
    for name, g in df[df["run"] != "all (joint)"].groupby("recording", sort=False):
        r = repeatability(g["window_ms"])
        lines.append(f"- {name}: single runs {g['window_ms'].min():.1f}–{g['window_ms'].max():.1f} ms, "
                     f"median {r['median_ms']:.1f} ms, largest deviation {r['max_dev_ms']:.1f} ms")
    joint = df[df["run"] == "all (joint)"]
    r = repeatability(joint["window_ms"])
    lines.append(f"- joint fits of the {len(joint)} recordings: {', '.join(f'{w:.1f}' for w in joint['window_ms'])} ms, "
                 f"median {r['median_ms']:.1f}, largest deviation {r['max_dev_ms']:.1f} ms")
    return "\n".join(lines) + "\n"


# -- compare ------------------------------------------------------------------------------

def compare(seconds: float, seeds: int, windows_ms, sync_s: float, timing_s: float,
            mismatch: bool = False) -> str:
    import dataclasses

    from powermodels.devices.simulated import PRESETS, SimulatedGPU
    from powermodels.measuring.runner import SimulatedRunner

    rows = []
    for w in windows_ms:
        preset = dataclasses.replace(PRESETS["hopper"], instant_window_s=w / 1e3)
        for design in DESIGNS:
            t0 = time.perf_counter()
            for seed in range(seeds):
                runner = SimulatedRunner(SimulatedGPU(preset=preset, seed=seed), sample_period_s=1e-3)
                if mismatch:
                    runner = ShapedLoadRunner(runner)
                tr = record_design(runner, design, preset.update_period_s, seconds, seed=seed,
                                   sync_error_s=sync_s, timing_error_s=timing_s)
                m = design_metrics(fit_design(tr, preset.update_period_s))
                rows.append({"true_ms": w, "design": design, "seed": seed, **m})
            print(f"window {w} ms, {design}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    summary = []
    for (w, design), g in df.groupby(["true_ms", "design"], sort=False):
        r = repeatability(g["window_ms"])
        summary.append({"true window [ms]": w, "design": design,
                        "estimates [ms]": ", ".join(f"{x:.1f}" for x in g["window_ms"]),
                        "median [ms]": round(r["median_ms"], 2),
                        "max |est − median| [ms]": round(r["max_dev_ms"], 2),
                        "max |est − true| [ms]": round(float(np.max(np.abs(g["window_ms"] - w))), 2),
                        "mean interval width [ms]": round(float((g["hi_ms"] - g["lo_ms"]).mean()), 1),
                        "median sharpness ±3 ms": round(float(g["sharpness_3ms"].median()), 3),
                        "warns": int(g["wide"].sum()),
                        "within ±3 ms": r["within"]})
    lines = ["# Instant-window load designs on the simulated GPU (simulated, not a real GPU)", "",
             f"`python benchmarks/gpu_sensor_window.py compare --seconds {seconds:g} --seeds {seeds} "
             f"--sync-error {sync_s:g} --timing-error {timing_s:g}{' --mismatch' if mismatch else ''}` — Hopper preset (100 ms updates) with "
             "its instant window set to the true value below; every design gets the same "
             f"{seconds:g} s of load; seeds change the sensor phase and noise and the pulse gaps; the "
             f"recorded load is off by a per-run offset (±{sync_s * 1e3:g} ms) and a per-phase start/end "
             f"error (±{timing_s * 1e3:g} ms). Sharpness: relative rise of the profile loss 3 ms either "
             "side of the estimate (higher = the window is pinned down harder)."
             + (" **Mismatch**: every on-phase ramps up over 3 ms (1 ms each at 1/4, 1/2, 3/4 load) and "
                "leaves 5 ms at 1/10 load after its recorded end; the recorded load says full load "
                "from start to end (`ShapedLoadRunner`)." if mismatch else ""), "",
             markdown_table(pd.DataFrame(summary)), "", "Per seed:", "",
             markdown_table(df.round(3)), ""]
    return "\n".join(lines)


# -- measure ------------------------------------------------------------------------------

def measure(device: str, runs: int, design: str, seconds: float, out: Path, preset: str,
            step_seconds: float = 3.0) -> str:
    from powermodels.devices import open_device
    from powermodels.measuring.runner import make_runner

    if device == "simulated":
        from powermodels.devices.simulated import PRESETS
        dev = open_device("simulated", seed=0, preset=preset)
        runner = make_runner(dev, sample_period_s=min(1e-3, PRESETS[preset].update_period_s / 50))
    else:
        dev = open_device("nvml")
        runner = make_runner(dev)
    rows, t_start = [], time.perf_counter()
    from powermodels.commands.characterize import record
    from powermodels.sensor.report import characterize_traces

    inst = schema.POWER_INSTANT_W
    with runner:
        for i in range(runs):
            t0 = time.perf_counter()
            # exactly what `powermodels characterize --design <design>` records and fits
            square, step, probe = record(runner, seconds=seconds, step_seconds=step_seconds,
                                         design=design, log=lambda m: print(m, file=sys.stderr))
            for name, df in (("square", square), ("step", step), ("probe", probe)):
                df.assign(**{schema.RUN_ID: f"r{i}:" + df[schema.RUN_ID].astype(str)}).to_parquet(
                    out / f"sensor_window_{device}_{name}_{i}.parquet", index=False)
            res = characterize_traces(square, step, fields=(inst,))
            est = res.estimators[inst]["window"]
            rows.append({"run": i, "update_period_ms": res.row(inst)[schema.UPDATE_PERIOD_S] * 1e3,
                         **design_metrics(est), "wall_s": time.perf_counter() - t0})
            pd.DataFrame(rows).to_csv(out / f"sensor_window_{device}.csv", index=False)  # nothing lost
            print(f"run {i}: window {est.window_s_ * 1e3:.2f} ms "
                  f"[{est.window_interval_s_[0] * 1e3:.1f}, {est.window_interval_s_[1] * 1e3:.1f}], "
                  f"{rows[-1]['wall_s']:.0f} s", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    df.to_csv(out / f"sensor_window_{device}.csv", index=False)
    r = repeatability(df["window_ms"])
    info = dev.info
    lines = [f"# Instant window, {runs} runs of the `{design}` design: {info.name}"
             + (" (simulated)" if device == "simulated" else ""), "",
             f"Device: {info.name} ({info.kind}, driver {getattr(info, 'driver', '')}). "
             f"Command: `python benchmarks/gpu_sensor_window.py measure --device {device} --runs {runs} "
             f"--design {design} --seconds {seconds:g} --step-seconds {step_seconds:g}` (each run: "
             f"`powermodels characterize`'s `record` and its instant-window fit); wall {time.perf_counter() - t_start:.0f} s."
             + (f" NVML setters blocked: {len(BLOCKED)}." if device == "nvml" else ""), "",
             markdown_table(df.round(3)), "",
             f"Median {r['median_ms']:.2f} ms; largest deviation {r['max_dev_ms']:.2f} ms: "
             f"{'all within' if r['within'] else 'NOT all within'} ±3 ms of the median.", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("reanalyze")
    a.add_argument("--data", type=Path, default=REPO / "datasets" / "h200")
    a.add_argument("--out", type=Path, default=RESULTS)
    c = sub.add_parser("compare")
    c.add_argument("--seconds", type=float, default=12.0)
    c.add_argument("--seeds", type=int, default=5)
    c.add_argument("--windows", default="25,35", help="true instant windows [ms]")
    c.add_argument("--sync-error", type=float, default=0.003)
    c.add_argument("--timing-error", type=float, default=0.002)
    c.add_argument("--mismatch", action="store_true",
                   help="on-phases ramp up over 3 ms and leave a 5 ms tail the recorded load does not show")
    c.add_argument("--out", type=Path, default=RESULTS)
    m = sub.add_parser("measure")
    m.add_argument("--device", choices=("nvml", "simulated"), default="nvml")
    m.add_argument("--preset", default="hopper", help="simulated preset")
    m.add_argument("--runs", type=int, default=5)
    m.add_argument("--design", choices=DESIGNS, default=CHOSEN)
    m.add_argument("--seconds", type=float, default=20.0, help="load time of each run")
    m.add_argument("--step-seconds", type=float, default=3.0)
    m.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.cmd == "reanalyze":
        text, path = reanalyze(args.data), args.out / "sensor_window_reanalysis_h200.md"
    elif args.cmd == "compare":
        text = compare(args.seconds, args.seeds, [float(w) for w in args.windows.split(",")],
                       args.sync_error, args.timing_error, args.mismatch)
        path = args.out / f"sensor_window_designs_simulated{'_mismatch' if args.mismatch else ''}.md"
    else:
        text = measure(args.device, args.runs, args.design, args.seconds, args.out, args.preset,
                       args.step_seconds)
        path = args.out / f"sensor_window_{args.device}.md"
    path.write_text(text)
    print(text)
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
