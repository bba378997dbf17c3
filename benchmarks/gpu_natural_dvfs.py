"""Natural-DVFS calibration with the on-GPU clock probe, changing no setting — one device call (≤ 8 min).

Issue 26, items 0–2. The bf16 tensor-core pressure GEMM holds a Hopper GPU at its software
power cap, so the controller moves the SM clock without any clock lock (1110–1980 MHz on the
lent H100). This script runs ``powermodels.workflows.calibrate.calibrate`` in its natural-DVFS
mode on the registry kernels and the pressure GEMM itself, with a clock probe (one warp:
``clock64()`` cycles over ``%globaltimer`` ns) on the workload's stream before and after every
batch, keeps the raw recording, and checks the issue's targets:

1. probed clocks vs the clock implied by the compute-bound ``fp32`` kernel's time
   (``f_max · t_ref / t``, ``t_ref`` its median time where the probes read ``f_max``): median
   relative difference ≤ 1 %;
2. time MAPE ≤ 2 % at a held-out clock band, per workload (eq. 4.5 fitted without the band);
3. power ≤ 3 % MAPE at held-out clocks for every workload: energy-counter windows whose mean
   probed clock lies in 1,500–1,800 MHz, eq. 4.1 fitted without them
   (``powermodels.natural_dvfs.power_target``, the report's target line too); a workload with no
   such window is listed as unscored and the target is then ``null``, never ``true``;
4. α > 0 with a 95 % CI excluding 0 (constant-clock warm-ups, pooled).

``--ladder`` adds the ladder part (``powermodels.natural_dvfs.natural_recording.Ladder``): each
workload alternates, every ``--ladder-cycle-s``, with the pressure GEMM for ``--ladder-hold-s``
per pressure share (``--ladder-shares``), then runs ``0.3`` s alone. Under natural DVFS only a
load at the power cap holds the clock below the top for a whole ~100 ms counter window (the H100
GPU-620707cb's capped bf16 GEMM sat at 1,409–1,455 MHz probed, 5–95 %), so this is the only way
to give the power fit training windows below the held-out 1,500–1,800 MHz band; such a window's
power is modelled as the two loads' shares (``powermodels.natural_dvfs.ladder_windows``) and is
never a held-out window. It adds ~3 × (1.5 + 0.3) s per workload plus host syncs (~20 s for
three workloads). ``--cool-s`` defaults to 40 s: after 20 s idle the H200's uncapped warm-ups
rose too little at one clock to identify α (session 6). ``--hot-s`` (default 0) adds, per
uncapped workload, that long of the pressure GEMM and a second series from the warmer heatsink
(α on the H200s: the die moves only 1–2 °C in a 25 s warm-up; 30 s at the cap warmed it ~6 °C).
Budget on an H200 with ``--hot-s 30 --series-s 15 --cool-s 20 --ladder``: about 3 × 45 s more
than without the hot series and 4 × 30 s less idle and series, ~400 s in all.

Every NVML setter is replaced by a function that raises before the device is opened
(``benchmarks/_readonly_nvml.py``). Nothing is lost on a crash: the raw recording is written to
``OUT/recording/`` after each workload's part, and a run stopped by SIGTERM (``timeout``), Ctrl-C
or an error first writes what it holds there (``complete: false`` and ``stopped`` in its
``provenance.json``); ``powermodels calibrate --from OUT/recording`` refits it. Output (≤ 8 files): ``report.md``, three plots,
``calibration.pmcal``, ``checks.json``, ``provenance.json``, ``recording.tar.gz`` (the raw
recording: ``calibrate --from`` refits it without a GPU).

Usage::

    PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py --out "$OUT/natural_dvfs"    # H100, ~3-4 min
    PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py --ladder --series-s 25 --out "$OUT/nd"  # ~8 min
    PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py --device simulated --out /tmp/nd   # no GPU
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the simulated board of --device simulated: a 400 W limit these kernels reach, and a
#: controller stepping like the H100's (10 ms steps, ~5 GHz/s recovery; h100-2026-11-25-raw)
SIMULATED_PHYSICS = dict(power_limit_w=400.0, control_step_s=0.01, clock_recovery_mhz_per_s=5000.0)


def probe_vs_kernel_time(run, reference: str, f_max: float) -> dict:
    """Check 1: probed clock vs the clock implied by ``reference``'s own time."""
    from powermodels import schema

    rows = run.launches.loc[run.launches[schema.WORKLOAD].str.startswith(reference)]
    f = rows[schema.SM_CLOCK_MHZ].to_numpy(float)
    t = rows[schema.TIME_S].to_numpy(float)
    at_max = np.abs(f - f_max) < 7.5
    if at_max.sum() < 5 or (~at_max).sum() < 5:
        return {"batches": int(len(rows)), "median_pct": None,
                "why": "too few probed batches at and below the highest clock"}
    implied = f_max * np.median(t[at_max]) / t
    diff = 100 * np.abs(implied - f) / f
    below = ~at_max
    return {"batches": int(len(rows)), "below_max_clock": int(below.sum()),
            "median_pct": float(np.median(diff)), "p95_pct": float(np.percentile(diff, 95)),
            "median_below_max_pct": float(np.median(diff[below]))}


def alpha_summary(t) -> dict | None:
    """α, its 95 % CI and its number of groups as ``checks.json`` holds them (None: not identified)."""
    return None if t is None else {"w_per_c": t.alpha_w_per_c_, "ci": list(t.alpha_ci_w_per_c_),
                                   "groups": t.n_groups_}


def checks(run, f_max: float) -> dict:
    from powermodels.natural_dvfs.power_target import power_target, target_verdict

    cal = run.calibration
    out = {"probe_vs_fp32_time": probe_vs_kernel_time(run, "fp32", f_max)}
    val = cal.validation
    out["time_band"] = {r["group"]: {"band_mhz": [r["band_lo_mhz"], r["band_hi_mhz"]], "test_rows": r["test_rows"],
                                     "mape_pct": r["time_mape_selected_pct"], "form_cv": r["time_form_cv"],
                                     "mape_rational_pct": r["time_mape_rational_pct"],
                                     "mape_dso_pct": r["time_mape_dso_pct"]} for r in val.to_dict("records")}
    # the report's target too (power_target): counter windows in the fixed held-out band, per workload
    out["power_band"] = power_target(run.power_clock)
    t = cal.temperature
    out["alpha"] = alpha_summary(t)
    ident = cal.identifiability
    out["not_identified"] = ident.loc[~ident["identified"], ["group", "quantity", "reason"]].to_dict("records")
    p = out["probe_vs_fp32_time"]["median_pct"]
    # a workload with no kept batch inside its band cannot be scored there: listed, not passed
    out["time_band_unscored"] = [g for g, v in out["time_band"].items() if not v["test_rows"]]
    times = [v["mape_pct"] for v in out["time_band"].values() if v["test_rows"]]
    out["targets"] = {
        "probe_within_1pct_median": None if p is None else bool(p <= 1.0),
        # the power target's rule: an unscored workload is never a pass (the H100 run of
        # 2026-11-27 passed with fp32 unscored before)
        "time_mape_le_2pct_every_workload": target_verdict(times, len(out["time_band_unscored"]), 2.0),
        "power_mape_le_3pct": out["power_band"]["passed"],
        "alpha_positive_ci_excludes_0": None if t is None else bool(t.alpha_ci_w_per_c_[0] > 0),
    }
    return out


#: the workloads ``--workloads`` picks from; "pressure" is the bf16 GEMM that holds the power cap
WORKLOADS = ("fp32", "sgemm", "stream_triad", "pressure")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--burst-s", type=float, default=0.5)
    parser.add_argument("--pressure-s", type=float, default=1.0)
    parser.add_argument("--series-s", type=float, default=10.0)
    parser.add_argument("--cool-s", type=float, default=40.0,
                        help="idle before each warm-up (default 40 s: α needs the warm-up to rise several °C)")
    parser.add_argument("--hot-s", type=float, default=0.0,
                        help="pressure load before a second series per workload (0: none; module docstring)")
    parser.add_argument("--ladder", action="store_true", help="add the ladder part (module docstring)")
    parser.add_argument("--ladder-shares", type=float, nargs="+", default=None,
                        help="pressure shares of a cycle, one step each (default 0.8 0.65 0.5)")
    parser.add_argument("--ladder-hold-s", type=float, default=None, help="seconds per step (default 1.5)")
    parser.add_argument("--ladder-cycle-s", type=float, default=None, help="cycle length (default 0.01)")
    parser.add_argument("--full-trace", action="store_true",
                        help="also write the full-rate trace as OUT/trace_full.parquet (zstd; ~10 MB for a "
                             "7-min run): the committed trace keeps only the rows where a reading changes")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS),
                        help="which workloads to calibrate (default all four; one uncapped workload with a "
                             "long --hot-s is the α run an H200 needs: its short warm-ups move 1–2 °C)")
    args = parser.parse_args(argv)

    from powermodels.devices import nvml_available, open_device
    from powermodels.natural_dvfs.natural_recording import Ladder
    from powermodels.natural_dvfs.power_target import power_target_line
    from powermodels.recording import write_recording
    from powermodels.termination import terminate_raises
    from powermodels.workflows.calibrate import calibrate, save
    from powermodels.workflows.calibration_report import write_report
    from powermodels.workloads.pressure import pressure_gemm

    ladder = None
    if args.ladder:
        given = {k: v for k, v in (("shares", args.ladder_shares), ("hold_s", args.ladder_hold_s),
                                   ("cycle_s", args.ladder_cycle_s)) if v is not None}
        ladder = Ladder(**given)  # a bad value stops here, before the GPU is touched

    kind = args.device
    if kind == "auto":
        kind = "nvml" if nvml_available(0) else "simulated"
    if kind == "nvml":
        from _readonly_nvml import forbid_nvml_setters

        forbid_nvml_setters()  # every NVML setter raises from here on
        device = open_device("nvml")
    else:
        from powermodels.devices.physics import GPUPhysics

        device = open_device("simulated", physics=GPUPhysics(**SIMULATED_PHYSICS))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    workloads = [pressure_gemm() if w == "pressure" else w for w in args.workloads]
    # the recording is written to out/recording as it grows (after each workload's part) and,
    # on SIGTERM (`timeout`) or any error, with what it holds: `calibrate --from` reads it
    with terminate_raises():
        try:
            f_max = max(f for fs in device.supported_clocks().values() for f in fs)
            run = calibrate(workloads, device, cycles=args.cycles, burst_s=args.burst_s,
                            pressure_s=args.pressure_s, series_s=args.series_s, cool_s=args.cool_s,
                            hot_s=args.hot_s, progress=lambda line: print(line, flush=True), recording_dir=out / "recording",
                            ladder=ladder)
        except BaseException as err:
            print(f"stopped ({err or type(err).__name__}): the recording so far is in {out / 'recording'} "
                  f"(refit: powermodels calibrate --from {out / 'recording'} --out DIR)", flush=True)
            raise
        finally:
            device.close()
    wall = time.perf_counter() - t0
    save(run, out / "calibration.pmcal")
    write_report(run, out)
    for name in ("launches.parquet", "samples.parquet"):  # in the recording already: keep ≤ 8 files
        (out / name).unlink(missing_ok=True)
    # the trace keeps the rows where a reading changes (readings change on a ~100 ms grid, so no
    # value is lost): ~100x smaller, so the tar comes back within the device tool's file limits
    from dataclasses import replace

    from powermodels.recording import downsample_trace

    rec = run.recording
    if args.full_trace:
        # the α of H100 GPU-a8fc3d71 differed between the full and the thinned trace (2.26 vs 1.62
        # W/°C); only a full trace from a board where they differ can show why (on GPU-84fc649a and
        # GPU-48507455, session 10, they did not differ)
        rec.trace.to_parquet(out / "trace_full.parquet", compression="zstd", index=False)
    rec = replace(rec, trace=downsample_trace(rec.trace), provenance={
        **rec.provenance, "trace": f"downsampled from {len(rec.trace)} polls to the rows where a reading changes"})
    rec_dir = write_recording(rec, out / "recording")
    # the recording must refit to the same calibration without the GPU (`calibrate --from`)
    from powermodels.workflows.recording_calibration import calibrate_from

    again = calibrate_from(rec_dir)
    a, b = run.calibration.validation, again.calibration.validation
    same_time = bool(len(a) == len(b) and np.allclose(a["time_mape_selected_pct"], b["time_mape_selected_pct"],
                                                       equal_nan=True, rtol=1e-6))
    ta, tb = run.calibration.temperature, again.calibration.temperature
    same_alpha = (ta is None and tb is None) or (ta is not None and tb is not None and
                                                  abs(ta.alpha_w_per_c_ - tb.alpha_w_per_c_) <= 0.01 * abs(ta.alpha_w_per_c_))
    with tarfile.open(out / "recording.tar.gz", "w:gz") as tar:
        tar.add(rec_dir, arcname="recording")
    for f in rec_dir.iterdir():
        f.unlink()
    rec_dir.rmdir()
    smi = ""
    if kind == "nvml":
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    (out / "provenance.json").write_text(json.dumps({
        **run.device, "date": started, "nvidia_smi": smi, "wall_s": round(wall, 1),
        "command": "PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py " + " ".join(argv or sys.argv[1:]),
        "settings_changed": False, "clock_probe": bool(run.recording.provenance.get("clock_probe"))}, indent=2))
    result = checks(run, f_max)
    result["from_recording_reproduces"] = {"time_band": same_time, "alpha": bool(same_alpha)}
    # the committed recording keeps only the trace rows where a reading changes: when its α differs
    # from the full-rate trace's (H100 GPU-a8fc3d71: 2.26 vs 1.62 W/°C, cause not found without the
    # full trace), both values must be in the results, not only a false flag
    result["from_recording_alpha"] = alpha_summary(tb)
    (out / "checks.json").write_text(json.dumps(result, indent=2, default=float))
    print(json.dumps(result["targets"], indent=2))
    print(f"probe vs fp32 time: {result['probe_vs_fp32_time']}")
    for g, v in result["time_band"].items():
        print(f"  {g[:40]:<40} time MAPE {v['mape_pct']:.3g} % at {v['band_mhz'][0]:.0f}–{v['band_mhz'][1]:.0f} MHz "
              f"({v['test_rows']} batches)")
    print(power_target_line(result["power_band"]))
    print(f"alpha: {result['alpha']}; calibrate --from reproduces: {result['from_recording_reproduces']}; "
          f"wall {wall:.0f} s; results in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
