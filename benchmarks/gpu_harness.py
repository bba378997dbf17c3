"""Harness benchmark and first real datasets on the lent GPU (issue 3).

Read-only on the GPU: every NVML setter is replaced by a function that raises
before the device is opened; clocks and power limits stay whatever the GPU
chooses, and are recorded.

Sections (``--sections``, comma-separated):

bench      kernel correctness (NumPy/CuPy references), sampler rate (idle, under
           load, with and without the energy-counter thread), kernel-time
           slowdown with the sampler on vs off, CUDA-event ↔ host-clock sync
           offset uncertainty, spread and drift (FinGraV §IV-A)
square     square-wave traces at periods {1/2, 2/3, 3/4, 4/5, 6/5, 5/4, 4/3} × 100 ms
           (50 % duty, full amplitude) and a single 3 s step, with the load's
           on/off times (Yang §IV)
steady     FP32 steady-state run (Wattchmen §3.3), long enough to show the
           temperature drift at the GPU's own clock
protocols  the same kernels under naive, continuous, good-practice and steady-state
sgemm      the SGEMM search space (≥ 100 configs × 3 repeats) at the GPU's own clocks

Outputs go to ``--out`` (parquet when pyarrow is importable, else csv.gz):
``bench.json``, ``square_wave_traces``, ``square_wave_loads``, ``fp32_steady_trace``,
``protocol_runs``, ``protocol_traces``, ``sgemm_runs``.

Usage (on the GPU machine)::

    PYTHONPATH=src python3 benchmarks/gpu_harness.py --sections bench,square --out $OUT
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np
from _readonly_nvml import forbid_nvml_setters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))


def _import_powermodels():
    try:
        import powermodels  # noqa: F401
    except ImportError as err:  # e.g. no sklearn on the GPU image: load the parts we use
        import types

        print(f"note: importing powermodels failed ({err}); loading its modules alone", flush=True)
        for name in [m for m in sys.modules if m == "powermodels" or m.startswith("powermodels.")]:
            del sys.modules[name]
        package = types.ModuleType("powermodels")
        package.__path__ = [str(REPO / "src" / "powermodels")]
        package.__version__ = "0.1.0+src"
        sys.modules["powermodels"] = package


def save(df, out: Path, name: str) -> str:
    try:
        import pyarrow  # noqa: F401

        path = out / f"{name}.parquet"
        df.to_parquet(path, index=False)
    except ImportError:
        path = out / f"{name}.csv.gz"
        df.to_csv(path, index=False)
    print(f"wrote {path.name}: {len(df)} rows, {path.stat().st_size / 1e6:.2f} MB", flush=True)
    return path.name


def smi() -> str:
    query = "name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw,power.limit,pstate"
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as err:
        return f"nvidia-smi failed: {err!r}"


# --------------------------------------------------------------------------


def time_launches(pk, n, in_flight=32):
    """Per-launch times (s) of ``n`` back-to-back launches, from CUDA events."""
    import cupy as cp

    from powermodels.measuring.runner import back_to_back

    events = back_to_back(pk, n, in_flight, cp.cuda.get_current_stream())
    return np.array([cp.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in itertools.pairwise(events)])


def section_bench(runner, res, out):
    import cupy as cp

    from powermodels import schema, workloads
    from powermodels.devices.event_clock import EventClock
    from powermodels.measuring.sampler import Sampler

    dev = runner.device
    # correctness
    checks = {}
    t0 = time.perf_counter()
    for name, cfg in [("fp32", {}), ("fp32", {"block_size_x": 128, "nr_outer": 8, "nr_inner": 256}),
                      ("stream_copy", {"vector_width": 1}), ("stream_copy", {"vector_width": 4}),
                      ("stream_triad", {"vector_width": 2}), ("stream_triad", {"vector_width": 4}),
                      ("sgemm", {})]:
        checks[f"{name}[{workloads.config_id(name, cfg)}]"] = runner.prepared(name, cfg).check()
    import random

    for cfg in random.Random(1).sample(workloads.search_space("sgemm"), 20):
        checks[f"sgemm[{workloads.config_id('sgemm', cfg)}]"] = workloads.prepare("sgemm", cfg).check()
    checks["square_wave[amp=0.5]"] = workloads.square_wave_kernel(0.5, 5000).check()
    res["correctness_max_rel_error"] = checks
    res["correctness_all_ok"] = bool(all(v < 1e-4 for v in checks.values()))
    res["correctness_wall_s"] = time.perf_counter() - t0
    print(f"correctness: {len(checks)} checks, worst {max(checks.values()):.2e}", flush=True)

    # per-read latency
    lat = []
    for _ in range(2000):
        a = time.perf_counter()
        dev.read()
        lat.append(time.perf_counter() - a)
    res["read_latency_us"] = {"median": float(np.median(lat) * 1e6), "p99": float(np.percentile(lat, 99) * 1e6)}

    # sampler rate: idle, with/without the energy thread
    rates = {}
    runner.sampler.stop()
    for label, energy_period in [("idle_fast_only", None), ("idle_with_energy_20ms", 0.02)]:
        s = Sampler(dev, period_s=5e-4, energy_period_s=energy_period).start()
        a = dev.now()
        time.sleep(2.0)
        b = dev.now()
        tr = s.table(a, b)
        s.stop()
        t = tr[schema.T_S].to_numpy()
        gaps = np.diff(t)
        rates[label] = {"rate_hz": float((len(tr) - 1) / (t[-1] - t[0])),
                        "gap_p50_ms": float(np.median(gaps) * 1e3), "gap_p99_ms": float(np.percentile(gaps, 99) * 1e3),
                        "gap_max_ms": float(gaps.max() * 1e3),
                        "energy_readings": int(tr[schema.ENERGY_COUNTER_J].notna().sum())}
    runner.sampler.start()

    # slowdown: sampler off vs on, alternating
    slow = {}
    for label, cfg, n in [("fp32_long", {}, 300), ("fp32_short", {"block_size_x": 1024, "nr_outer": 8, "nr_inner": 256}, 3000)]:
        pk = runner.prepared("fp32", cfg)
        time_launches(pk, 50)
        off, on = [], []
        for _ in range(4):
            runner.sampler.stop()
            off.append(float(np.median(time_launches(pk, n))))
            runner.sampler.start()
            a = dev.now()
            on.append(float(np.median(time_launches(pk, n))))
            b = dev.now()
            rates[f"under_load_{label}"] = {"rate_hz": runner.sampler.rate_hz(a, b)}
        # also the wall time of the whole launch loop (host-side effect of the GIL)
        slow[label] = {"kernel_s_off": float(np.median(off)), "kernel_s_on": float(np.median(on)),
                       "slowdown_pct": float((np.median(on) / np.median(off) - 1) * 100),
                       "off_runs": off, "on_runs": on, "launches": n}
        print(f"slowdown {label}: {slow[label]['slowdown_pct']:+.3f}% ({np.median(off)*1e6:.1f} us/launch)", flush=True)
    res["sampler_rates"] = rates
    res["slowdown"] = slow

    # sync: many calibrations
    clock = EventClock(now=dev.now)
    est = [clock.calibrate(20) for _ in range(50)]
    unc = np.array([e.uncertainty_s for e in est])
    spread = np.array([e.spread_s for e in est])
    # drift: two references 3 s apart, GPU elapsed vs host difference
    c1 = EventClock(now=dev.now)
    e1 = c1.calibrate(20)
    time.sleep(3.0)
    c2 = EventClock(now=dev.now)
    e2 = c2.calibrate(20)
    gpu_dt = cp.cuda.get_elapsed_time(c1.reference, c2.reference) * 1e-3
    host_dt = e2.offset_s - e1.offset_s
    res["sync"] = {"uncertainty_us_median": float(np.median(unc) * 1e6), "uncertainty_us_max": float(unc.max() * 1e6),
                   "single_bracket_spread_us_median": float(np.median(spread) * 1e6),
                   "drift_ppm": float((host_dt - gpu_dt) / gpu_dt * 1e6), "drift_interval_s": float(gpu_dt),
                   "drift_us": float((host_dt - gpu_dt) * 1e6)}
    print(f"sync: {res['sync']}", flush=True)


def section_square(runner, res, out):
    import pandas as pd

    from powermodels import schema

    fractions = [(1, 2), (2, 3), (3, 4), (4, 5), (6, 5), (5, 4), (4, 3)]
    traces, loads, cal = [], [], {}
    c0, c1 = runner.calibrate_square_wave(1.0, target_s=0.05)
    cal["amplitude_1.0"] = {"c0_s": c0, "c1_s_per_iteration": c1}
    for num, den in fractions:
        period = 0.1 * num / den
        on = off = period / 2
        periods = round(4.0 / period)
        run_id = f"square_{num}_{den}"
        runner.idle(1.0)
        iv = runner.square_wave(on, off, periods, amplitude=1.0)
        runner.idle(1.0)
        tr = runner.trace(float(iv[0, 0]) - 1.0, float(iv[-1, 1]) + 1.0, run_id=run_id)
        traces.append(tr)
        d = iv[:, 1] - iv[:, 0]
        loads.append(pd.DataFrame({schema.RUN_ID: run_id, "period": np.arange(len(iv)),
                                   schema.START_S: iv[:, 0], schema.END_S: iv[:, 1],
                                   schema.LOAD_ACTIVITY: 1.0, "period_s": period, "on_s_requested": on}))
        print(f"{run_id}: period {period*1e3:.1f} ms, on {np.median(d)*1e3:.2f}±{np.std(d)*1e3:.2f} ms, "
              f"actual period {np.median(np.diff(iv[:, 0]))*1e3:.2f} ms, {len(tr)} readings", flush=True)
        cal[run_id] = {"on_ms_median": float(np.median(d) * 1e3), "on_ms_std": float(np.std(d) * 1e3),
                       "period_ms_median": float(np.median(np.diff(iv[:, 0])) * 1e3)}
    runner.idle(2.0)
    s, e = runner.step(3.0, amplitude=1.0)
    runner.idle(3.0)
    tr = runner.trace(s - 2.0, e + 3.0, run_id="step_3s")
    traces.append(tr)
    loads.append(pd.DataFrame({schema.RUN_ID: "step_3s", "period": [0], schema.START_S: [s], schema.END_S: [e],
                               schema.LOAD_ACTIVITY: [1.0], "period_s": [np.nan], "on_s_requested": [3.0]}))
    res["square_wave"] = cal
    res["files"] = [*res.get("files", []), save(pd.concat(traces, ignore_index=True), out, "square_wave_traces"), save(pd.concat(loads, ignore_index=True), out, "square_wave_loads")]


def section_steady(runner, res, out):
    import pandas as pd

    from powermodels import schema
    from powermodels.measuring.protocols import SteadyState

    p = SteadyState(idle_s=5.0, chunk_s=1.0, settle_power_rel=0.002, settle_temp_c=0.1, settle_chunks=3,
                    max_duration_s=60.0, measure_s=3.0)
    m = p.measure(runner, "fp32", {}, run_id="fp32_steady")
    tr = m.trace
    keep = (np.arange(len(tr)) % 10 == 0) | tr[schema.ENERGY_COUNTER_J].notna().to_numpy()
    res["fp32_steady_row"] = {k: (v if not isinstance(v, float) or math.isfinite(v) else None) for k, v in m.row.items()}
    t = tr[schema.T_S].to_numpy()
    load = tr.loc[t >= m.launches[0, 0] - 60]
    res["fp32_steady_temperature_c"] = {"min": float(load[schema.TEMPERATURE_C].min()),
                                        "max": float(load[schema.TEMPERATURE_C].max())}
    res["fp32_steady_sm_clock_mhz"] = {"min": float(load[schema.SM_CLOCK_MHZ].min()),
                                       "max": float(load[schema.SM_CLOCK_MHZ].max())}
    res["files"] = [*res.get("files", []), save(tr.loc[keep].reset_index(drop=True), out, "fp32_steady_trace"), save(pd.DataFrame([m.row]), out, "fp32_steady_run")]
    print(f"steady: {m.row}", flush=True)


def section_protocols(runner, res, out, repeats=2):
    import pandas as pd

    from powermodels import schema
    from powermodels.measuring.protocols import Continuous, GoodPractice, Naive, SteadyState

    kernels = [("fp32", {}), ("fp32", {"block_size_x": 1024, "nr_outer": 8, "nr_inner": 256}),
               ("sgemm", {}), ("stream_triad", {}), ("stream_copy", {})]
    protocols = [Naive(), Continuous(duration_s=1.0), GoodPractice(min_duration_s=1.0, trials=3, random_state=0),
                 SteadyState(idle_s=1.0, chunk_s=0.5, max_duration_s=10.0, measure_s=2.0)]
    rows, traces = [], []
    for repeat in range(repeats):
        for kernel, cfg in kernels:
            for p in protocols:
                m = p.measure(runner, kernel, cfg, repeat=repeat)
                rows.append(m.row)
                if p.name != "steady_state":
                    traces.append(m.trace)
                r = m.row
                print(f"{kernel:12s} {p.name:13s} r{repeat} t={r[schema.TIME_S]*1e3:.3f} ms "
                      f"P={r[schema.POWER_W]:.1f} W E={r[schema.ENERGY_J]*1e3:.3f} mJ n={r[schema.LAUNCHES]}",
                      flush=True)
    res["files"] = [*res.get("files", []), save(pd.DataFrame(rows), out, "protocol_runs"), save(pd.concat(traces, ignore_index=True), out, "protocol_traces")]


def section_sgemm(runner, res, out, n_configs=120, repeats=3):
    import random

    from powermodels import schema, workloads
    from powermodels.campaigns import run_campaign

    configs = random.Random(0).sample(workloads.search_space("sgemm"), n_configs)
    errors = {}
    t0 = time.perf_counter()
    for c in configs:
        errors[workloads.config_id("sgemm", c)] = runner.prepared("sgemm", c).check()
    res["sgemm_compile_check_wall_s"] = time.perf_counter() - t0
    res["sgemm_worst_rel_error"] = max(errors.values())
    spec = {"kernels": {"sgemm": [workloads.config_id("sgemm", c) for c in configs]},
            "protocol": "continuous", "protocol_params": {"duration_s": 0.3, "power_column": schema.POWER_INSTANT_W},
            "repeats": repeats, "device": "nvml"}
    runs = run_campaign(spec, "/tmp/sgemm_campaign", runner=runner, progress=False)
    runs["max_rel_error"] = runs[schema.CONFIG].map(errors)
    res["files"] = [*res.get("files", []), save(runs, out, "sgemm_runs")]
    print(f"sgemm: {len(runs)} runs, time {runs[schema.TIME_S].min()*1e3:.3f}-{runs[schema.TIME_S].max()*1e3:.3f} ms", flush=True)


SECTIONS = {"bench": section_bench, "square": section_square, "steady": section_steady,
            "protocols": section_protocols, "sgemm": section_sgemm}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sections", default="bench,square")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    blocked = forbid_nvml_setters()
    _import_powermodels()
    import cupy as cp
    import pandas as pd

    from powermodels.devices.nvml import NVMLDevice
    from powermodels.measuring.runner import CupyRunner

    device = NVMLDevice(0)
    info = device.info
    res = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "command": " ".join(sys.argv),
           "device": {"name": info.name, "driver": info.driver, "uuid": info.uuid},
           "setters_blocked": len(blocked), "python": platform.python_version(), "cupy": cp.__version__,
           "pandas": pd.__version__, "nvidia_smi_before": smi(),
           "settings": str(device.current_settings()), "power_limits_w": device.power_limits_w()}
    print(json.dumps(res, indent=1), flush=True)
    runner = CupyRunner(device, sample_period_s=5e-4, energy_period_s=0.02)
    try:
        for name in args.sections.split(","):
            t0 = time.perf_counter()
            try:
                SECTIONS[name](runner, res, out)
            except Exception:
                res[f"error_{name}"] = traceback.format_exc()
                print(res[f"error_{name}"], flush=True)
            res[f"wall_s_{name}"] = time.perf_counter() - t0
            print(f"== {name} done in {res[f'wall_s_{name}']:.1f} s", flush=True)
            (out / f"bench_{args.sections.replace(',', '_')}.json").write_text(json.dumps(res, indent=1, default=str))
    finally:
        runner.close()
        res["nvidia_smi_after"] = smi()
        (out / f"bench_{args.sections.replace(',', '_')}.json").write_text(json.dumps(res, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
