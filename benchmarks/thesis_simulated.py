"""The thesis experiments (chapter 5) reproduced on the SimulatedGPU.

The simulated GPU knows its true power, so every correction can be scored
against an exact reference — the role PowerSensor3 plays in the thesis.

Part 1 (thesis §5.3–5.6), for a GEMM-like and an FP32-like kernel:

1. *Calibration sweep* at locked clocks (Kernel Tuner continuous observer:
   the kernel runs ~1 s per data point, NVML ``power.draw`` — on the Ada
   preset a 1 s average with +3 % gain error — is averaged over it): fit
   :class:`FrequencyPowerModel` (eq. 4.1) and :class:`RationalTimeModel` (eq. 4.5).
2. *Temperature ramp* at the locked seen reference clock from a cold GPU: fit
   :class:`TemperatureCorrection` (eq. 4.6, within the clock group).
3. *Default-DVFS measurements*: a cold GPU runs the kernel for N back-to-back
   1 s data points at default clocks (boost, power-capped when hot).
4. *Reference*: at the locked reference clock, short bursts from a cold GPU
   (a few launches, like PowerSensor3 in the thesis): true mean power, true
   energy per launch and the launch time.

The default measurements are corrected to a *seen* (1485 MHz, in the sweep)
and an *unseen* (1620 MHz) reference clock with eq. 4.2 (frequency only) and
eq. 4.2 + 4.7 (frequency + temperature, ``T_ref`` = coldest default run);
energies use eq. 4.3 (true time at the reference clock) and eq. 4.4 (time
from the rational model).

Part 2 (thesis §5.7): a search space of kernel configurations (different
work, memory traffic and activity), each with its own calibration sweep.
Energy at the reference clocks is predicted from each configuration's
default-clock measurement with per-configuration models vs one global model
(fitted on one configuration, as in the thesis, or pooled over all).

Usage: ``python benchmarks/thesis_simulated.py [--configs 216] [--repeats 60]``;
writes ``benchmarks/results/thesis_simulated.md``.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import mape, write_report

from powermodels import schema
from powermodels.devices.simulated import EXAMPLE_WORKLOADS, SimulatedGPU, SimulatedWorkload
from powermodels.models.frequency import FrequencyCorrection, FrequencyPowerModel
from powermodels.models.grouped import GroupedEstimator
from powermodels.models.runtime import RationalTimeModel
from powermodels.models.temperature import TemperatureCorrection, WeakTemperatureCorrelationWarning
from powermodels.reporting import markdown_table

OUT = Path(__file__).resolve().parent / "results" / "thesis_simulated.md"
PRESET = "ada"                       # the thesis GPU: RTX 4000 Ada (power.draw = 1 s average)
SEEN_MHZ, UNSEEN_MHZ = 1485.0, 1620.0
SWEEP_MHZ = [*np.arange(645.0, 1906.0, 105.0), 1980.0]   # contains 1485, not 1620
MEM_MHZ = 2619.0


def data_point(gpu, w, seconds, clock_guess, field=schema.POWER_USAGE_W, sample_s=0.01):
    """Run ``w`` back to back for ~``seconds`` and average the NVML readings (one run-table row)."""
    launches = max(2, math.ceil(seconds / w.time_s(clock_guess, MEM_MHZ)))
    se = gpu.run(w, launches=launches)
    tr = gpu.trace(se[0, 0], se[-1, 1], sample_period_s=sample_s)
    dur = se[-1, 1] - se[0, 0]
    return {
        schema.POWER_W: float(tr[field].mean()),
        schema.TEMPERATURE_C: float(tr[schema.TEMPERATURE_C].mean()),
        schema.SM_CLOCK_MHZ: float(tr[schema.SM_CLOCK_MHZ].mean()),
        schema.TIME_S: float(np.mean(se[:, 1] - se[:, 0])),
        schema.REFERENCE_POWER_W: gpu.true_energy_j(se[0, 0], se[-1, 1]) / dur,
        schema.LAUNCHES: launches,
    }


def sweep(gpu, w, clocks, seconds, field=schema.POWER_USAGE_W):
    rows = []
    for f in clocks:
        with gpu.settings_guard(sm_clock_mhz=f, allow_changes=True):
            data_point(gpu, w, seconds, f, field)            # warm-up, discarded (sensor window)
            rows.append(data_point(gpu, w, seconds, f, field))
    return pd.DataFrame(rows)


def default_runs(gpu, w, n, seconds, field=schema.POWER_USAGE_W, cool_s=60.0):
    gpu.idle(cool_s)
    data_point(gpu, w, seconds, 1980.0, field)               # warm-up, discarded
    return pd.DataFrame([data_point(gpu, w, seconds, 1980.0, field) for _ in range(n)])


def reference(gpu, w, f_ref, n_bursts=10, burst_s=0.05, cool_s=20.0):
    """Cold short bursts at the locked reference clock: true power, energy/launch and time."""
    p, e, t, temp = [], [], [], []
    with gpu.settings_guard(sm_clock_mhz=f_ref, allow_changes=True):
        for _ in range(n_bursts):
            gpu.idle(cool_s)
            launches = max(3, math.ceil(burst_s / w.time_s(f_ref, MEM_MHZ)))
            se = gpu.run(w, launches=launches)
            energy = gpu.true_energy_j(se[0, 0], se[-1, 1])
            p.append(energy / (se[-1, 1] - se[0, 0]))
            e.append(energy / launches)
            t.append(np.mean(se[:, 1] - se[:, 0]))
            temp.append(float(gpu.truth(se[0, 0], se[-1, 1])[schema.TEMPERATURE_C].mean()))
    return {schema.POWER_W: float(np.mean(p)), schema.ENERGY_J: float(np.mean(e)),
            schema.TIME_S: float(np.mean(t)), schema.TEMPERATURE_C: float(np.mean(temp))}


# --------------------------------------------------------------------------
# Part 1
# --------------------------------------------------------------------------


def part1(kernel: str, repeats: int, seed: int, power_cap_w: float | None = None):
    w = EXAMPLE_WORKLOADS[kernel]
    gpu = SimulatedGPU(preset=PRESET, seed=seed)
    gpu.idle(30.0)
    cal = sweep(gpu, w, SWEEP_MHZ, 1.0)
    fpm = FrequencyPowerModel().fit(cal[[schema.SM_CLOCK_MHZ]].to_numpy(), cal[schema.POWER_W])
    rtm = RationalTimeModel().fit(cal[[schema.SM_CLOCK_MHZ]].to_numpy(), cal[schema.TIME_S])

    gpu.idle(60.0)
    with gpu.settings_guard(sm_clock_mhz=SEEN_MHZ, allow_changes=True):
        ramp = pd.DataFrame([data_point(gpu, w, 1.0, SEEN_MHZ) for _ in range(25)])[1:]
    if power_cap_w is None:
        default = default_runs(gpu, w, repeats, 1.0)
    else:  # a lower power limit makes default DVFS move the clock as the die heats (thesis §4.2.1)
        with gpu.settings_guard(power_limit_w=power_cap_w, allow_changes=True):
            default = default_runs(gpu, w, repeats, 1.0)
    label_k = kernel if power_cap_w is None else f"{kernel}, {power_cap_w:.0f} W cap"
    t_ref = float(default[schema.TEMPERATURE_C].min())
    tc = TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ, reference_temperature_c=t_ref)
    ramp[schema.SM_CLOCK_MHZ] = SEEN_MHZ  # group = the locked clock
    tc.fit(ramp)
    with warnings.catch_warnings(record=True) as caught:  # pooled over default DVFS (thesis §4.2.1)
        warnings.simplefilter("always", WeakTemperatureCorrelationWarning)
        pooled = TemperatureCorrection().fit(default)
    ph = gpu.physics
    alpha_true = ph.leakage_w * ph.leakage_per_c * float(ph.relative_voltage(SEEN_MHZ))

    rows = []
    for label, f_ref in (("seen", SEEN_MHZ), ("unseen", UNSEEN_MHZ)):
        ref = reference(gpu, w, f_ref)
        fc = FrequencyCorrection(model=fpm, reference_frequency_mhz=f_ref).fit(default)
        p_f = fc.transform(default)
        p_ft = tc.transform(p_f)
        t_model = float(rtm.predict_at(f_ref))
        row = {
            "kernel": label_k, "f_ref": f"{f_ref:.0f} ({label})",
            "P raw": mape(default[schema.POWER_W], ref[schema.POWER_W]),
            "P freq": mape(p_f[schema.POWER_W], ref[schema.POWER_W]),
            "P freq+temp": mape(p_ft[schema.POWER_W], ref[schema.POWER_W]),
            "E freq, true t": mape(p_f[schema.POWER_W] * ref[schema.TIME_S], ref[schema.ENERGY_J]),
            "E freq, model t": mape(p_f[schema.POWER_W] * t_model, ref[schema.ENERGY_J]),
            "E freq+temp, true t": mape(p_ft[schema.POWER_W] * ref[schema.TIME_S], ref[schema.ENERGY_J]),
            "E freq+temp, model t": mape(p_ft[schema.POWER_W] * t_model, ref[schema.ENERGY_J]),
            "t true ms": 1e3 * ref[schema.TIME_S], "t model ms": 1e3 * t_model,
        }
        rows.append(row)
    info = {
        "kernel": label_k,
        "alpha": tc.alpha_w_per_c_, "ci": tc.alpha_ci_w_per_c_, "r": tc.correlation_,
        "alpha_true": alpha_true, "pooled_r": pooled.correlation_, "pooled_alpha": pooled.alpha_w_per_c_,
        "pooled_warned": any(issubclass(c.category, WeakTemperatureCorrelationWarning) for c in caught),
        "default_clock": (default[schema.SM_CLOCK_MHZ].min(), default[schema.SM_CLOCK_MHZ].max()),
        "default_temp": (default[schema.TEMPERATURE_C].min(), default[schema.TEMPERATURE_C].max()),
        "fit": (fpm.p_static_w_, fpm.knee_mhz_, fpm.rmse_w_, rtm.rmse_ / cal[schema.TIME_S].mean()),
    }
    return rows, info


# --------------------------------------------------------------------------
# Part 2
# --------------------------------------------------------------------------


def configs(n: int, seed: int):
    """A GEMM-like search space: work, memory share and activities vary per configuration."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        core = rng.uniform(2.0, 20.0)              # MHz·s → 1–10 ms at 1980 MHz
        mem_share = rng.uniform(0.0, 1.3)          # memory time / core time at 1980 MHz
        out.append(SimulatedWorkload(
            f"cfg{i:03d}", core_work=core, mem_work=mem_share * core / 1980.0 * MEM_MHZ,
            t0_s=rng.uniform(0, 5e-4), activity=rng.uniform(0.4, 1.0), mem_activity=rng.uniform(0.05, 0.9)))
    return out


def part2(n_configs: int, seed: int):
    ws = configs(n_configs, seed)
    gen_clocks = [*SWEEP_MHZ[::2], SWEEP_MHZ[-1]] if n_configs > 64 else SWEEP_MHZ
    cal_rows, obs, refs = [], [], []
    for i, w in enumerate(ws):
        gpu = SimulatedGPU(preset=PRESET, seed=seed + i)
        cal = sweep(gpu, w, gen_clocks, 0.3, field=schema.POWER_INSTANT_W)
        cal[schema.CONFIG] = w.name
        cal_rows.append(cal)
        d = default_runs(gpu, w, 1, 0.5, field=schema.POWER_INSTANT_W, cool_s=10.0).iloc[0].to_dict()
        d[schema.CONFIG] = w.name
        # true energy per launch at the default clock the run got
        d[schema.REFERENCE_ENERGY_J] = d[schema.REFERENCE_POWER_W] * d[schema.TIME_S]
        obs.append(d)
        for f_ref in (SEEN_MHZ, UNSEEN_MHZ):
            r = reference(gpu, w, f_ref, n_bursts=2, cool_s=5.0)
            refs.append({schema.CONFIG: w.name, "f_ref": f_ref, **r})
    cal = pd.concat(cal_rows, ignore_index=True)
    obs = pd.DataFrame(obs).set_index(schema.CONFIG)
    refs = pd.DataFrame(refs)
    X = cal[[schema.SM_CLOCK_MHZ]].to_numpy()
    g = cal[schema.CONFIG].to_numpy()
    per_p = GroupedEstimator(FrequencyPowerModel()).fit(X, cal[schema.POWER_W], groups=g).estimators_
    per_t = GroupedEstimator(RationalTimeModel()).fit(X, cal[schema.TIME_S], groups=g).estimators_
    one = g == ws[0].name    # thesis: the model of one configuration (Table 5.2) applied to all
    glob = {
        "global (1 config)": (FrequencyPowerModel().fit(X[one], cal[schema.POWER_W][one]),
                              RationalTimeModel().fit(X[one], cal[schema.TIME_S][one])),
        "global (pooled)": (FrequencyPowerModel().fit(X, cal[schema.POWER_W]),
                            RationalTimeModel().fit(X, cal[schema.TIME_S])),
    }
    rows = []
    names = obs.index.to_numpy()
    f_k = obs[schema.SM_CLOCK_MHZ].to_numpy()
    p_meas = obs[schema.POWER_W].to_numpy()
    # §5.7.1: energy at the default clock, true vs predicted time
    e_true_default = obs[schema.REFERENCE_ENERGY_J].to_numpy()
    for model, (pm_of, tm_of) in {"per-config": (lambda n: per_p[n], lambda n: per_t[n]),
                                  **{k: (lambda n, v=v: v[0], lambda n, v=v: v[1]) for k, v in glob.items()}}.items():
        t_pred = np.array([tm_of(n).predict_at(f) for n, f in zip(names, f_k, strict=True)])
        rows.append({"model": model, "clock": "default", "E true t": mape(p_meas * obs[schema.TIME_S], e_true_default),
                     "E model t": mape(p_meas * t_pred, e_true_default)})
        for f_ref in (SEEN_MHZ, UNSEEN_MHZ):
            r = refs[refs["f_ref"] == f_ref].set_index(schema.CONFIG).loc[names]
            p_corr = np.array([p - pm_of(n).predict_at(f) + pm_of(n).predict_at(f_ref)
                               for n, p, f in zip(names, p_meas, f_k, strict=True)])
            t_ref_pred = np.array([tm_of(n).predict_at(f_ref) for n in names])
            rows.append({"model": model, "clock": f"{f_ref:.0f}",
                         "P": mape(p_corr, r[schema.POWER_W]),
                         "E true t": mape(p_corr * r[schema.TIME_S], r[schema.ENERGY_J]),
                         "E model t": mape(p_corr * t_ref_pred, r[schema.ENERGY_J])})
    return pd.DataFrame(rows), len(ws), len(gen_clocks)


def fmt_table(df: pd.DataFrame) -> str:
    return markdown_table(df, ".2f", align="auto", na_rep="")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=216)
    ap.add_argument("--repeats", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows, infos = [], []
    for kernel, cap in (("gemm", None), ("fp32", None), ("gemm", 450.0)):
        r, info = part1(kernel, args.repeats, args.seed, cap)
        rows += r
        infos.append(info)
    t1 = time.perf_counter()
    gen, n_cfg, n_clk = part2(args.configs, args.seed)
    t2 = time.perf_counter()

    lines = [
        "# Thesis chapter 5 on the SimulatedGPU",
        "",
        f"Command: `python benchmarks/thesis_simulated.py --configs {args.configs} --repeats {args.repeats} "
        f"--seed {args.seed}` (part 1: {t1 - t0:.0f} s, part 2: {t2 - t1:.0f} s on the CPU). Sensor preset "
        f"`{PRESET}` (NVML power.draw = 1 s average, gain +3 %, offset 0.5 W); H100-like physics "
        "(leakage rises 2 %/°C, V(f) knee 1200 MHz, 700 W cap). Reference = the simulator's true power "
        "at the locked reference clock, cold GPU, short bursts (PowerSensor3's role in the thesis).",
        "",
        "## Part 1 — default-DVFS measurements corrected to a reference clock (thesis §5.3–5.6)",
        "",
        f"{args.repeats} back-to-back 1 s data points from a cold GPU at default clocks; MAPE (%) against the reference.",
        "",
        fmt_table(pd.DataFrame(rows)),
        "",
        "| kernel | default clocks (MHz) | default temp (°C) | α fitted at 1485 MHz (W/°C) [95 % CI] | α true (W/°C) | r | pooled over default DVFS: α, r, warned | P_static (W), knee (MHz), rmse (W), time rmse/mean |",
        "|---|---|---|---|---:|---:|---|---|",
    ]
    for i in infos:
        lines.append(
            f"| {i['kernel']} | {i['default_clock'][0]:.0f}–{i['default_clock'][1]:.0f} | "
            f"{i['default_temp'][0]:.1f}–{i['default_temp'][1]:.1f} | {i['alpha']:.3f} "
            f"[{i['ci'][0]:.3f}, {i['ci'][1]:.3f}] | {i['alpha_true']:.3f} | {i['r']:.3f} | "
            f"{i['pooled_alpha']:.3f}, {i['pooled_r']:.2f}, {i['pooled_warned']} | "
            f"{i['fit'][0]:.1f}, {i['fit'][1]:.0f}, {i['fit'][2]:.2f}, {i['fit'][3]:.2%} |"
        )
    lines += [
        "",
        f"## Part 2 — generalisation over {n_cfg} configurations (thesis §5.7)",
        "",
        f"Each configuration: a locked sweep over {n_clk} clocks (0.3 s data points, NVML instant power), one "
        "default-clock measurement, and reference bursts at 1485 and 1620 MHz. Energy per launch "
        "predicted from the default measurement (eq. 4.2 + 4.3/4.4), MAPE (%) over configurations. "
        "`clock = default`: energy at the default clock with the measured time vs the time model "
        "(thesis §5.7.1); 1485/1620: corrected to that clock (§5.7.2).",
        "",
        fmt_table(gen),
        "",
    ]
    text = "\n".join(lines)
    return write_report(text, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
