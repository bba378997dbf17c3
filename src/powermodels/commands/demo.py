"""``powermodels demo``: what the built-in sensor reports vs the truth, in ten seconds.

On the simulated GPU (the default without an NVIDIA GPU) the demo runs a
50 ms-on/48 ms-off square wave — a period close to the sensor's 100 ms update,
the case where Hopper's instant reading aliases (Yang §IV-C) — and a steady
FP32 load, then prints the sensor's readings next to the simulated truth:
mean power from the instant, average and usage readings, energy from naive
integration of the instant reading and from the energy counter.

On a real GPU it runs the same two loads through the harness
(:mod:`powermodels.measuring.runner`: CuPy launches timed with CUDA events, a
background NVML sampler; the square wave is ``kernels/square_wave.cu``) and
compares three ways of getting their energy — naive integration of the instant
reading, the average reading × time, and the energy counter — with the counter
as the reference (the best one a real GPU has). It takes about 15 s and never
changes any GPU setting. Without CuPy it falls back to a second of idle
readings. The same code runs on the simulated runner, where the simulated
truth is shown too (``_run_harness``).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import COMMANDS
from ..cli_options import option_integer

NAME = "demo"
HELP = COMMANDS[NAME].help

# square wave close to the 100 ms update period (DESIGN.md: aliasing on the lent H200)
_ON_S, _OFF_S, _PERIODS = 0.050, 0.048, 60
_STEADY_LAUNCHES = 300          # FP32 launches of 10 ms at 1980 MHz
_SAMPLE_S = 1e-3                # a 1 kHz background sampler


def add_arguments(parser) -> None:
    from ..devices.sensor_emulation import PRESETS

    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"),
                        help="auto: the NVIDIA GPU if present, else the simulated GPU")
    parser.add_argument("--preset", default="hopper", choices=sorted(PRESETS),
                        help="sensor preset of the simulated GPU (Yang Fig. 14)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated GPU")
    parser.add_argument("--index", type=option_integer(minimum=0), default=0, help="GPU index (nvml)")
    parser.add_argument("--harness", action="store_true",
                        help="on the simulated GPU: run the real-GPU demo (the harness runner, the "
                             "energy counter compared with the truth) instead of the sensor-vs-truth table")


def _open(args):
    """The device, and a line saying which one and why."""
    from ..devices import open_device
    from ..devices.simulated import SimulatedGPU

    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    simulated = f"the simulated Hopper-class GPU (sensor preset '{args.preset}', seed {args.seed})"
    if args.device == "simulated":
        return SimulatedGPU(preset=args.preset, seed=args.seed), f"using {simulated}"
    if args.device == "nvml":
        device = open_device("nvml", index=args.index)
        return device, f"using the NVIDIA GPU through NVML: {device.info.name}"
    try:
        device = open_device("auto", index=args.index, quiet=True)
    except Exception as err:  # NVML present but unusable: the demo still runs
        return (SimulatedGPU(preset=args.preset, seed=args.seed),
                f"could not open an NVIDIA GPU ({err}); using {simulated}")
    if isinstance(device, SimulatedGPU):
        return SimulatedGPU(preset=args.preset, seed=args.seed), f"no NVIDIA GPU found: using {simulated}"
    return device, f"using the NVIDIA GPU through NVML: {device.info.name}"


def _mean_skipna(values: np.ndarray) -> float:
    """Mean of the values that are not NaN (NaN when none is), as pandas' ``mean`` does."""
    values = values[~np.isnan(values)]
    return float(values.mean()) if values.size else float("nan")


def _segment(gpu, start: float, end: float) -> dict:
    """Sensor vs truth over one load, as a 1 kHz sampler would have seen it.

    Works on the trace's columns as arrays (``trace_columns``): no pandas, so the
    demo starts fast.
    """
    from .. import schema

    trace = gpu.trace_columns(start, end, sample_period_s=_SAMPLE_S, run_id="demo")
    t = trace[schema.T_S]
    true_e = gpu.true_energy_j(start, end)
    duration = end - start
    read = np.flatnonzero(~np.isnan(trace[schema.ENERGY_COUNTER_J]))  # rows where the counter was read
    counter = trace[schema.ENERGY_COUNTER_J][read]
    changed = np.flatnonzero(np.diff(counter) > 0) + 1
    counted = counter[changed]
    counted_t = t[read[changed]]
    inst = trace[schema.POWER_INSTANT_W]
    clock = trace[schema.SM_CLOCK_MHZ]
    return {
        "duration": duration,
        "true_power": true_e / duration,
        "instant": float(np.mean(inst)),
        "average": _mean_skipna(trace[schema.POWER_AVERAGE_W]),
        "usage": _mean_skipna(trace[schema.POWER_USAGE_W]),
        "true_energy": true_e,
        # naive: integrate the instant reading over the samples (trapezoid rule)
        "naive_energy": float(np.sum(0.5 * (inst[1:] + inst[:-1]) * np.diff(t))),
        # counter read at the load's start and end: off by up to one update at each end
        "counter_energy": float(counter[-1] - counter[0]),
        # counter dated by its own updates (the first read showing a new value)
        "counter_updates_energy": float(counted[-1] - counted[0]),
        "counter_updates_true": gpu.true_energy_j(float(counted_t[0]), float(counted_t[-1])),
        "inst_range": (float(inst.min()), float(inst.max())),
        "temperature": (float(trace[schema.TEMPERATURE_C][0]),
                        float(trace[schema.TEMPERATURE_C][-1])),
        "sm_clock": float(np.median(clock[~np.isnan(clock)])),
        "truth": gpu.truth_columns(start, end),
    }


def _pct(measured: float, truth: float) -> str:
    if not np.isfinite(measured):
        return "n/a"
    return f"{100.0 * (measured - truth) / truth:+.1f} %"


def _num(x: float, digits: int = 1) -> str:
    return "NaN" if not np.isfinite(x) else f"{x:.{digits}f}"


def _table(sq: dict, st: dict) -> list[str]:
    rows = [
        ("mean power, instant (field 186)", "W", "instant", "true_power"),
        ("mean power, average (field 185)", "W", "average", "true_power"),
        ("mean power, usage (GetPowerUsage)", "W", "usage", "true_power"),
        ("energy, naive ∫ instant dt", "J", "naive_energy", "true_energy"),
        ("energy, counter read at start/end", "J", "counter_energy", "true_energy"),
        ("energy, counter at its own updates", "J", "counter_updates_energy", "counter_updates_true"),
    ]
    head = f"{'':37s}{'square wave 50/48 ms':>30s}   {'steady FP32':>28s}"
    sub = f"{'quantity':34s}{'unit':>4s}" + (f"{'sensor':>10s}{'truth':>10s}{'error':>10s}" + "   ") * 2
    lines = [head, sub.rstrip(), "-" * len(sub.rstrip())]
    for label, unit, key, ref in rows:
        cells = ""
        for seg in (sq, st):
            cells += f"{_num(seg[key]):>10s}{_num(seg[ref]):>10s}{_pct(seg[key], seg[ref]):>10s}   "
        lines.append(f"{label:34s}{unit:>4s}{cells}".rstrip())
    return lines


def _run_simulated(gpu, out) -> int:
    from .. import schema
    from ..devices.simulated import EXAMPLE_WORKLOADS

    cpu0 = time.process_time()
    s = gpu.sensor
    avg = "n/a" if s.average_window_s is None else f"{s.average_window_s * 1e3:.0f} ms boxcar"
    print(f"sensor: update every {s.update_period_s * 1e3:.0f} ms; instant = {s.instant_window_s * 1e3:.0f} ms "
          f"boxcar; average = {avg}; usage = the {s.usage} reading; gain {s.gain:.3f}, "
          f"offset {s.offset_w:+.1f} W; energy counter exact (mJ), updated every "
          f"{s.energy_period_s * 1e3:.0f} ms", file=out)
    gpu.idle(2.0)  # fill the 1 s average window with idle
    on = gpu.square_wave(_ON_S, _OFF_S, periods=_PERIODS)
    sq = _segment(gpu, float(on[0, 0]), gpu.now())
    gpu.idle(1.0)
    launches = gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=_STEADY_LAUNCHES)
    st = _segment(gpu, float(launches[0, 0]), float(launches[-1, 1]))
    gpu.idle(0.5)
    print(f"loads: square wave {_ON_S * 1e3:.0f} ms on / {_OFF_S * 1e3:.0f} ms off x {_PERIODS} "
          f"({sq['duration']:.2f} s); steady FP32, {_STEADY_LAUNCHES} launches "
          f"({st['duration']:.2f} s); sampled at {1 / _SAMPLE_S:.0f} Hz", file=out)
    print("", file=out)
    for line in _table(sq, st):
        print(line, file=out)
    print("", file=out)
    p = sq["truth"][schema.REFERENCE_POWER_W]
    lo, hi = np.percentile(p, 2), np.percentile(p, 98)
    print(f"square wave: true power switches between {lo:.0f} W and {hi:.0f} W; the instant reading "
          f"ranged {sq['inst_range'][0]:.0f}–{sq['inst_range'][1]:.0f} W, drifting through low, middle "
          f"and high plateaus (it sees {s.instant_window_s * 1e3:.0f} ms of every "
          f"{s.update_period_s * 1e3:.0f} ms, and the load's period is not the update period)", file=out)
    print(f"steady FP32: SM clock {st['sm_clock']:.0f} MHz; temperature "
          f"{st['temperature'][0]:.0f} → {st['temperature'][1]:.0f} °C", file=out)
    print(f"energy counter: exact, but it moves only every {s.energy_period_s * 1e3:.0f} ms, so reads at "
          f"a load's start and end are off by up to one update at each end; dated by its own updates "
          f"(the row above) it matches the truth", file=out)
    print(f"(simulated {gpu.now():.1f} s in {time.process_time() - cpu0:.2f} s of CPU)", file=out)
    return 0


# harness demo (real GPU): loads of a few seconds each, ~15 s in all with compilation
_H_ON_S, _H_OFF_S, _H_PERIODS = 0.050, 0.048, 40
_H_STEADY_S = 3.0


def _harness_segment(runner, start: float, end: float, run_id: str) -> dict:
    """Energy of one load from the three readings a user has, and the reference where known."""
    from .. import schema
    from ..measuring.protocols import counter_power_w

    trace = runner.trace(start, end, run_id=run_id)
    t = trace[schema.T_S].to_numpy(dtype=float)
    duration = end - start
    inst = trace[schema.POWER_INSTANT_W].to_numpy(dtype=float)
    ok = np.isfinite(inst)
    ti, pi = t[ok], inst[ok]
    # naive: trapezoid rule over the samples, scaled to the load's length (the samples span a
    # little less than it)
    naive_w = (float(np.sum(0.5 * (pi[1:] + pi[:-1]) * np.diff(ti)) / (ti[-1] - ti[0]))
               if ti.size > 1 and ti[-1] > ti[0] else np.nan)
    avg = trace[schema.POWER_AVERAGE_W].to_numpy(dtype=float)
    avg_w = float(np.nanmean(avg)) if np.isfinite(avg).any() else np.nan
    # counter: least-squares slope of joules vs time over the load (robust to its ~100 ms steps)
    counter_w = counter_power_w(trace, start, end)
    reference_j = runner.reference_energy_j(np.array([[start, end]]))
    temp = trace[schema.TEMPERATURE_C].to_numpy(dtype=float)
    clock = trace[schema.SM_CLOCK_MHZ].to_numpy(dtype=float)
    return {
        "duration": duration,
        "naive": naive_w * duration,
        "average": avg_w * duration,
        "counter": counter_w * duration,
        "truth": reference_j,
        "inst_range": (float(np.min(pi)), float(np.max(pi))) if pi.size else (np.nan, np.nan),
        "temperature": (float(temp[np.isfinite(temp)][0]), float(temp[np.isfinite(temp)][-1]))
        if np.isfinite(temp).any() else (np.nan, np.nan),
        "sm_clock": float(np.nanmedian(clock)) if np.isfinite(clock).any() else np.nan,
        "rate_hz": (t.size - 1) / (t[-1] - t[0]) if t.size > 1 and t[-1] > t[0] else np.nan,
    }


def _harness_table(sq: dict, st: dict, reference: str) -> list[str]:
    rows = [("energy, naive ∫ instant dt", "naive"), ("energy, average reading × time", "average"),
            ("energy, energy counter", "counter")]
    if reference == "truth":
        rows.append(("energy, simulated truth", "truth"))
    ref_label = "vs truth" if reference == "truth" else "vs counter"
    head = f"{'':34s}{'square wave 50/48 ms':>30s}   {'steady FP32':>28s}"
    sub = f"{'quantity':34s}" + (f"{'J':>9s}{'W':>9s}{ref_label:>12s}" + "   ") * 2
    lines = [head, sub.rstrip(), "-" * len(sub.rstrip())]
    for label, key in rows:
        cells = ""
        for seg in (sq, st):
            e, ref = seg[key], seg[reference]
            err = "reference" if key == reference else _pct(e, ref) if np.isfinite(ref) else "n/a"
            cells += f"{_num(e):>9s}{_num(e / seg['duration']):>9s}{err:>12s}   "
        lines.append(f"{label:34s}{cells}".rstrip())
    return lines


def _run_harness(runner, out) -> int:
    """Square wave and steady FP32 through a harness runner; energy three ways vs the reference.

    Works on any :class:`~powermodels.measuring.runner.Runner`: on a real GPU
    (:class:`~powermodels.measuring.runner.CupyRunner`) the energy counter is the
    reference; on the simulated runner its truth is, and the counter is one of
    the methods compared. Never changes any GPU setting.
    """
    from .. import workloads

    wall0 = time.perf_counter()
    config = workloads.parse_config("fp32", None)
    t1 = runner.launch_time_s("fp32", config)  # compiles and warms up the FP32 kernel
    launches = max(1, int(np.ceil(_H_STEADY_S / max(t1, 1e-9))))
    runner.idle(1.0)  # the 1 s average window sees idle before the square wave
    iv = runner.square_wave(_H_ON_S, _H_OFF_S, _H_PERIODS)  # calibrates the square-wave kernel first
    sq = _harness_segment(runner, float(iv[0, 0]), float(iv[-1, 1]), "demo-square")
    runner.idle(1.0)
    iv = runner.run("fp32", config, launches)
    st = _harness_segment(runner, float(iv[0, 0]), float(iv[-1, 1]), "demo-steady")
    reference = "truth" if np.isfinite(sq["truth"]) and np.isfinite(st["truth"]) else "counter"
    print(f"loads: square wave {_H_ON_S * 1e3:.0f} ms on / {_H_OFF_S * 1e3:.0f} ms off x {_H_PERIODS} "
          f"({sq['duration']:.2f} s); steady FP32 ({workloads.config_id('fp32', config)}), {launches} "
          f"launches of {t1 * 1e3:.2f} ms ({st['duration']:.2f} s); sampled at {sq['rate_hz']:.0f} Hz",
          file=out)
    if reference == "counter":
        print("reference: the energy counter (slope of its readings over each load), the best one a real "
              "GPU has", file=out)
    else:
        print("reference: the simulated truth", file=out)
    print("", file=out)
    for line in _harness_table(sq, st, reference):
        print(line, file=out)
    print("", file=out)
    print(f"square wave: the instant reading ranged {sq['inst_range'][0]:.0f}–{sq['inst_range'][1]:.0f} W "
          f"(it averages {runner.sensor.instant_window_s * 1e3:.0f} ms of every "
          f"{runner.sensor.update_period_s * 1e3:.0f} ms, so a load near that period aliases)", file=out)
    if runner.sensor.average_window_s:
        print(f"average reading: a {runner.sensor.average_window_s:g} s boxcar, it lags every load's start",
              file=out)
    print(f"steady FP32: SM clock {_num(st['sm_clock'], 0)} MHz; temperature "
          f"{_num(st['temperature'][0], 0)} → {_num(st['temperature'][1], 0)} °C", file=out)
    print(f"({time.perf_counter() - wall0:.1f} s; no GPU setting was changed)", file=out)
    return 0


def _make_runner(device):
    """The harness runner for a real device (a seam for the tests)."""
    from ..measuring.runner import make_runner

    return make_runner(device)


def _run_gpu(device, out) -> int:
    """The harness demo on a real GPU; idle readings when CuPy is missing or the harness fails."""
    try:
        import cupy  # noqa: F401
    except ImportError:
        print("real GPU without CuPy: install the gpu extra (pip install \".[gpu]\") for the square-wave "
              "and FP32 comparison; showing a second of idle readings instead.", file=out)
        return _run_real(device, out)
    try:
        runner = _make_runner(device)
    except Exception as err:  # CUDA/driver trouble: say so and show what the sensor says
        print(f"could not start the harness ({type(err).__name__}: {err}); showing a second of idle "
              "readings instead.", file=out)
        _run_real(device, out)
        return 1
    with runner:
        return _run_harness(runner, out)


def _run_real(device, out) -> int:
    """Reduced demo on a real GPU: a second of idle readings, never a settings change."""
    print("the full comparison runs with the harness (`powermodels measure --protocol ...`), or "
          "see it on the simulated GPU (`powermodels demo --device simulated`).", file=out)
    try:
        e0 = device.read_energy_j()
        t0 = device.now()
        readings = []
        for _ in range(10):
            readings.append(device.read())
            time.sleep(0.1)
        e1 = device.read_energy_j()
        t1 = device.now()
    except Exception as err:  # a demo never crashes on a sensor that says no
        print(f"could not read the sensor: {err}", file=out)
        return 0
    inst = np.array([r.power_instant_w for r in readings])
    avg = np.array([r.power_average_w for r in readings])
    usage = np.array([r.power_usage_w for r in readings])
    print("idle for 1 s:", file=out)
    print(f"  mean power, instant (field 186)   {_num(float(np.nanmean(inst)) if np.isfinite(inst).any() else np.nan)} W",
          file=out)
    print(f"  mean power, average (field 185)   {_num(float(np.nanmean(avg)) if np.isfinite(avg).any() else np.nan)} W",
          file=out)
    print(f"  mean power, usage                 {_num(float(np.nanmean(usage)) if np.isfinite(usage).any() else np.nan)} W",
          file=out)
    if np.isfinite(e0) and np.isfinite(e1) and t1 > t0:
        print(f"  energy counter                    {e1 - e0:.3f} J over {t1 - t0:.2f} s "
              f"({(e1 - e0) / (t1 - t0):.1f} W)", file=out)
    last = readings[-1]
    print(f"  temperature {_num(last.temperature_c, 0)} °C, SM clock {_num(last.sm_clock_mhz, 0)} MHz, "
          f"memory clock {_num(last.mem_clock_mhz, 0)} MHz", file=out)
    return 0


def run(args) -> int:
    from ..devices.simulated import SimulatedGPU

    out = sys.stdout
    device, how = _open(args)
    print(f"powermodels demo: {how}", file=out)
    try:
        if isinstance(device, SimulatedGPU):
            if args.harness:
                from ..measuring.runner import SimulatedRunner

                with SimulatedRunner(device) as runner:
                    return _run_harness(runner, out)
            return _run_simulated(device, out)
        return _run_gpu(device, out)
    finally:
        device.close()
