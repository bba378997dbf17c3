"""Build the shipped twin preset ``h200`` from what ``datasets/h200/`` holds (no GPU, a few seconds).

Usage: ``python benchmarks/twin_h200_preset.py [--out FILE]`` (default: the shipped
``src/powermodels/twin/presets/h200.json``).

``datasets/h200`` has no raw recording (no timed launches beside a full-rate trace, no cap
episodes with a clock reference), so :func:`powermodels.twin.fit.fit_twin` cannot run on it.
What its files do identify, and from which file:

* **sensor** — instant reading's update period, the average reading's window, the energy
  counter's period (``characterize_cli_9s_result.csv``: ``powermodels characterize`` on the
  H200, Yang's 9 s runs); the instant reading's averaging window and delay from the median of
  five ``characterize --design mixed`` runs on another H200
  (``datasets/h200-2026-11-27/sensor_window_c314a989``, session 9); read-out noise from the idle
  part of ``harness_fp32_steady_trace.parquet``;
* **thermal network** — two Foster poles shared by two H200 boards, fitted at once
  (:func:`~powermodels.thermal.foster.fit_foster_segments`, each board its own ambient and
  start): this board's ``harness_fp32_steady_trace`` (5 s idle, 63 s of an fp32 kernel at 354 W)
  cannot see a pole slower than its 63 s, so the slow pole comes from
  ``datasets/h200-2026-11-27/thermal_0a8f0427/traces.parquet`` (another H200, GPU-0a8f0427: six
  25 s loads at 360–690 W, each after 28 s of idle, the idles one counter interval each). The
  heatsink band reaches 300 s (the default 60 s bound is where that board's fit sat). The
  preset's ambient is this board's;
* **idle power** at the top clock (the same trace's idle, energy counter);
* **core coefficient** — the cuBLAS HGEMM 8192 held at the 700 W cap at 1320 MHz, 55 °C
  (``wattchmen_workloads.parquet``), activity 1 as for the H100's capped load;
* **workloads** — time per launch and activity (from the steady power at its temperature)
  of the harness's fp32 kernels, SGEMM, STREAM triad and copy
  (``harness_protocol_runs.parquet``, steady-state rows) and the HGEMM.

What they cannot identify is taken from ``h100-sxm`` (the same GH100 die and power
management, H100 80GB HBM3 data) and named in the preset's provenance: the leakage slope
(the fp32 run spans only 42–45 °C at one load), the V(f) knee, the memory coefficient, the
power-cap controller (window, gains, headroom, offset), the clock steps and recovery, the
clock reading's period and delay, and the memory's share of the die heating.
"""

from __future__ import annotations

import argparse
import datetime as dt
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.devices.simulated_workload import SimulatedWorkload
from powermodels.thermal.foster import fit_foster_segments
from powermodels.twin.preset import PRESET_DIR, TwinPreset, TwinWorkload, load_preset, save_preset

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h200"
#: another H200 board's thermal run (gpu_thermal.py, 2026-11-27): loads after 28 s idles, the slow pole's data
SLOW_POLE_DATA = DATA.parent / "h200-2026-11-27" / "thermal_0a8f0427" / "traces.parquet"
#: die and heatsink bands (s): the heatsink's reaches 300 s (a 60 s bound is where GPU-0a8f0427's fit sits)
THERMAL_BANDS = ((0.03, 1.0), (8.0, 300.0))
#: memory activity per workload (the datasets carry no memory counters on these rows): GEMMs and the
#: fp32 kernels mostly on chip, the STREAM kernels memory-bound; the capped HGEMM as the H100's bf16 GEMM
MEM_ACTIVITY = {"fp32": 0.1, "sgemm": 0.2, "stream_triad": 0.9, "stream_copy": 0.9, "cublas_hgemm_8192": 0.5}
BORROWED = ("leakage_w", "leakage_per_c", "t_ref_c", "voltage_knee_mhz", "voltage_slope_per_ghz",
            "voltage_knee_width_mhz", "mem_w_per_ghz", "cap_window_s", "cap_headroom_w", "cap_gain_per_s",
            "cap_proportional", "cap_offset_w", "clock_period_s", "clock_recovery_mhz_per_s",
            "clock_recovery_delay_s", "mem_heat_share")


#: the instant reading's window and delay: median of 5 `characterize --design mixed` runs on H200 GPU-c314a989
#: (session 9; h100-sxm's come from the same method and protocol). Before: one 9 s characterize run of
#: datasets/h200 (29.4 ms / 6.9 ms)
SENSOR_WINDOW_RUNS = DATA.parent / "h200-2026-11-27" / "sensor_window_c314a989" / "sensor_window_nvml.csv"
INSTANT_WINDOW_SOURCE = ("median of the 5 `characterize --design mixed` runs in "
                         "datasets/h200-2026-11-27/sensor_window_c314a989 (H200 GPU-c314a989, 2026-11-27: window "
                         "15.9-22.7 ms, delay 4.9-16.1 ms; no replay of that board is scored); FinGraV on the same "
                         "board: 34.1 ms / 3.92 ms (fingrav_c314a989). Until session 9: "
                         "datasets/h200/characterize_cli_9s_result.csv, 29.4 ms / 6.9 ms")


def instant_window() -> tuple[float, float]:
    """The instant reading's window and delay (s): the median of the H200's characterize runs."""
    runs = pd.read_csv(SENSOR_WINDOW_RUNS)
    return float(runs["window_ms"].median()) / 1e3, float(runs["delay_ms"].median()) / 1e3


def counter_power(trace: pd.DataFrame) -> pd.DataFrame:
    """Energy-counter power between its updates, with the temperature reading at each update."""
    e = trace.dropna(subset=[schema.ENERGY_COUNTER_J])
    t, j = e[schema.T_S].to_numpy(float), e[schema.ENERGY_COUNTER_J].to_numpy(float)
    new = np.r_[True, np.diff(j) != 0]
    t, j = t[new], j[new]
    temp = np.interp(t[1:], trace[schema.T_S], trace[schema.TEMPERATURE_C])
    return pd.DataFrame({schema.T_S: t[1:], schema.POWER_W: np.diff(j) / np.diff(t), schema.TEMPERATURE_C: temp})


def activity(physics, power_w: float, f_mhz: float, temp_c: float, mem: float) -> float:
    """Core activity that gives ``power_w`` at a clock and temperature (memory activity ``mem``)."""
    a0, bc, bm = (float(x) for x in physics.power_terms(f_mhz, physics.mem_clocks_mhz[0], temp_c))
    return float(np.clip((power_w - a0 - bm * mem) / bc, 0.0, 1.0))


def build() -> TwinPreset:
    h100 = load_preset("h100-sxm")
    sensor_fit = pd.read_csv(DATA / "characterize_cli_9s_result.csv").set_index("field")
    instant_window_s, instant_delay_s = instant_window()
    trace = pd.read_parquet(DATA / "harness_fp32_steady_trace.parquet")
    iv = counter_power(trace)
    load_start = float(iv.loc[iv[schema.POWER_W] > 250.0, schema.T_S].iloc[0])
    idle = iv.loc[(iv[schema.T_S] < load_start - 0.2) & (iv[schema.T_S] > iv[schema.T_S].iloc[0] + 1.0)]
    p_idle, t_idle = float(idle[schema.POWER_W].median()), float(idle[schema.TEMPERATURE_C].median())
    other = counter_power(pd.read_parquet(SLOW_POLE_DATA).sort_values(schema.T_S))
    joint = fit_foster_segments([(d[schema.T_S], d[schema.POWER_W], d[schema.TEMPERATURE_C], None) for d in (iv, other)],
                                n_poles=2, grid=13, bands=THERMAL_BANDS)
    thermal = {"poles": joint["poles"], "ambient_c": joint["ambient_c"][0], "start_excess_c": joint["start_excess_c"][0],
               "start_tau_s": joint["start_tau_s"], "rmse_c": joint["rmse_by_segment_c"][0],
               "bands_s": [list(b) for b in THERMAL_BANDS],
               "other_board": {"data": str(SLOW_POLE_DATA.relative_to(DATA.parent.parent)), "uuid": "GPU-0a8f0427",
                               "ambient_c": joint["ambient_c"][1], "start_excess_c": joint["start_excess_c"][1],
                               "rmse_c": joint["rmse_by_segment_c"][1]}}
    idle_trace = trace.loc[trace[schema.T_S] < load_start - 0.2, schema.POWER_INSTANT_W].to_numpy(float)
    steps = np.diff(idle_trace)
    noise = float(np.std(steps[steps != 0]) / np.sqrt(2)) if (steps != 0).sum() > 3 else 0.3
    mem_mhz = float(trace[schema.MEM_CLOCK_MHZ].median())

    physics = replace(h100.physics, mem_clocks_mhz=(mem_mhz,), thermal_poles=tuple(tuple(p) for p in thermal["poles"]))
    hgemm = pd.read_parquet(DATA / "wattchmen_workloads.parquet").set_index("workload").loc["cublas_hgemm_8192"]
    for _ in range(3):  # P0 from the idle power, the core coefficient from the capped HGEMM, until both hold
        rest = float(physics.power_w(physics.sm_clock_max_mhz, mem_mhz, t_idle)) - physics.p0_w
        physics = replace(physics, p0_w=max(p_idle - rest, 0.0))
        f, temp = float(hgemm["sm_clock_mhz"]), float(hgemm["temperature_c"])
        a0, bc, bm = (float(x) for x in physics.power_terms(f, mem_mhz, temp))
        idle_core = physics.core_w_per_ghz * f / 1000.0 * float(physics.relative_voltage(f)) ** 2 \
            * physics.idle_activity
        scale = (float(hgemm["power_w"]) - (a0 - idle_core) - bm * MEM_ACTIVITY["cublas_hgemm_8192"]) \
            / (bc + idle_core)
        physics = replace(physics, core_w_per_ghz=physics.core_w_per_ghz * scale)

    f_max = physics.sm_clock_max_mhz
    runs = pd.read_parquet(DATA / "harness_protocol_runs.parquet")
    steady = runs.loc[runs[schema.PROTOCOL] == "steady_state"]
    workloads, identified = {}, {}
    for (kernel, config), rows in steady.groupby([schema.KERNEL, schema.CONFIG], sort=False):
        name = kernel if kernel != "fp32" else f"fp32_{'long' if rows[schema.TIME_S].median() > 1e-3 else 'short'}"
        t, p = float(rows[schema.TIME_S].median()), float(rows[schema.POWER_W].median())
        temp = float(rows[schema.TEMPERATURE_C].median())
        mem = MEM_ACTIVITY[kernel]
        a = activity(physics, p, f_max, temp, mem)
        workloads[name] = TwinWorkload(SimulatedWorkload(name, core_work=t * f_max, activity=a, mem_activity=mem))
        identified[name] = {"config": config, "time_s": t, "power_w": p, "temperature_c": temp, "activity": a}
    t_hgemm = float(hgemm["time_s"]) * float(hgemm["sm_clock_mhz"]) / f_max  # clock-bound, as the H100's bf16
    workloads["cublas_hgemm_8192"] = TwinWorkload(SimulatedWorkload(
        "cublas_hgemm_8192", core_work=t_hgemm * f_max, activity=1.0, mem_activity=MEM_ACTIVITY["cublas_hgemm_8192"]))

    sensor = replace(h100.sensor, name="h200",
                     update_period_s=float(sensor_fit.loc[schema.POWER_INSTANT_W, "update_period_s"]),
                     instant_window_s=instant_window_s, delay_s=instant_delay_s,
                     average_window_s=float(sensor_fit.loc[schema.POWER_AVERAGE_W, "window_s"]),
                     energy_period_s=float(sensor_fit.loc[schema.ENERGY_COUNTER_J, "update_period_s"]),
                     noise_w=noise)
    provenance = {
        "made_by": "benchmarks/twin_h200_preset.py", "fitted_at": dt.datetime.now(dt.timezone.utc).strftime(
            "%Y-%m-%dT%H:%M:%SZ"),
        "gpu": "NVIDIA H200 (141 GB HBM3e), driver 580.159.04, 700 W limit (datasets/h200/README.md)",
        "identified": {
            "instant_window": INSTANT_WINDOW_SOURCE,
            "sensor": "datasets/h200/characterize_cli_9s_result.csv (powermodels characterize, 9 s runs; the instant "
                      "window and delay from instant_window); "
                      "noise from the idle of harness_fp32_steady_trace.parquet",
            "thermal_poles, ambient": "fitted at once to datasets/h200/harness_fp32_steady_trace.parquet (5 s idle, "
                                      f"63 s fp32 at 354 W; rmse {thermal['rmse_c']:.2f} °C, its ambient) and "
                                      f"{thermal['other_board']['data']} (GPU-0a8f0427, six loads after 28 s idles; "
                                      f"rmse {thermal['other_board']['rmse_c']:.2f} °C): shared poles, heatsink band "
                                      "8-300 s",
            "p0_w (idle power)": f"same trace's idle: {p_idle:.1f} W at {f_max:g} MHz, {t_idle:.0f} °C",
            "core_w_per_ghz": "cuBLAS HGEMM 8192 at the 700 W cap: "
                              f"{float(hgemm['power_w']):.1f} W at {float(hgemm['sm_clock_mhz']):g} MHz, "
                              f"{float(hgemm['temperature_c']):g} °C (wattchmen_workloads.parquet), activity 1",
            "mem_clocks_mhz": f"the trace's memory clock reading ({mem_mhz:g} MHz)",
            "workloads": identified},
        "borrowed_from_h100_sxm": {k: getattr(h100.physics, k) for k in BORROWED}
        | {"clock_period_s (reading)": h100.sensor.clock_period_s, "clock_delay_s (reading)": h100.sensor.clock_delay_s,
           "energy_jitter_s": h100.sensor.energy_jitter_s},
        "not_identified": "leakage slope (42-45 °C at one load), V(f) knee, cap controller dynamics, clock "
                          "recovery, clock reading, memory heat share: no raw H200 recording (datasets/h200 has "
                          "no timed launches beside a full-rate trace and no cap episode with a clock reference)",
        "validation": "held out: the replay of datasets/h200-2026-11-27/raw_recording_168e6658 (GPU-168e6658, "
                      "never used here) in docs/twin.md",
    }
    fit = {"thermal": thermal, "idle_power_w": p_idle, "workloads": identified}
    return TwinPreset("h200", physics, sensor, float(thermal["ambient_c"]), workloads, provenance, fit)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(PRESET_DIR / "h200.json"))
    args = ap.parse_args()
    preset = build()
    path = save_preset(preset, args.out)
    print(f"wrote {path}")
    print(f"  thermal poles {[(round(r, 4), round(t, 2)) for r, t in preset.physics.thermal_poles]} (K/W, s), "
          f"ambient {preset.ambient_c:.1f} °C, rmse {preset.fit['thermal']['rmse_c']:.2f} °C")
    print(f"  idle {preset.fit['idle_power_w']:.1f} W; core coefficient {preset.physics.core_w_per_ghz:.1f} W/GHz; "
          f"instant window {preset.sensor.instant_window_s * 1e3:.1f} ms, delay {preset.sensor.delay_s * 1e3:.1f} ms")
    for name, w in preset.workloads.items():
        print(f"  {name}: {w.workload.time_s(preset.physics.sm_clock_max_mhz, preset.physics.mem_clocks_mhz[0]) * 1e3:.3f}"
              f" ms, activity {w.workload.activity:.3f}, memory {w.workload.mem_activity:.2f}")


if __name__ == "__main__":
    main()
