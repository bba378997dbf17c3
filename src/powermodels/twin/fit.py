"""Fit a twin preset to raw recordings: the board's physics, its sensors and each workload.

:func:`fit_twin` identifies, from what a raw recording
(:mod:`powermodels.recording`) holds:

* **sensors** — update period of the power, clock and temperature readings,
  the energy counter's period and jitter, the clock reading's delay (from
  the clock-reference workload's launch times, the real clock); instant
  window and delay from a ``characterize`` result where given;
* **thermal network** — Foster poles and ambient from power (energy
  counter) and temperature (:mod:`~powermodels.twin.fit_thermal`);
* **idle power and leakage** — at the top clock, power = per-load intercept
  + α·T pooled over idle and every load (thesis eq. 4.6: α is the board's
  at a clock, not the workload's), split into P0 and κ·V(f)·(1 + λ(T − T_ref));
* **dynamic power** — the core coefficient from a power-capped load's
  equilibrium clock (activity 1), each workload's activity from its power;
* **per workload** — time vs clock (a clock-bound share ``s``:
  ``t = t_fast·(s·f_max/f + 1 − s)``), host gap between batches;
* **power-cap controller** — clock step period and recovery rate from the
  clock-reference workload's launches after each capped load, the budget
  headroom from the power a capped load reaches at its start, the window of
  the regulated mean (Hopper's 1 s average).

Fit on one part of a recording and validate on another
(:mod:`~powermodels.twin.compare`); never tune to one file.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..devices.physics import GPUPhysics
from ..devices.sensor_emulation import PRESETS
from ..devices.simulated_workload import SimulatedWorkload
from ..recording import Recording
from . import metrics
from .fit_bursts import burst_power_at_top_clock, since_burst
from .fit_cap_choice import CAP_CONTROLLER_FITS, fit_cap_controller
from .fit_controller import fit_recovery
from .fit_thermal import fit_with_memory_share, foster_temperature
from .preset import TwinPreset, TwinWorkload

__all__ = ["fit_twin", "power_intervals", "series_holdout"]

#: NVML clock-event reason bit: software power cap
SW_POWER_CAP = 0x4
#: memory activity given to a power-capped load that set the core coefficient (the capped
#: equilibrium cannot split core from memory power; the fit and the workload must agree on it)
CAPPED_MEM_ACTIVITY = 0.5


def power_intervals(rec: Recording) -> pd.DataFrame:
    """The energy counter's mean power between consecutive updates, with the readings at each end.

    Columns: ``t_s`` (interval end), ``dt_s``, ``power_w``, ``temperature_c``
    and ``sm_clock_mhz`` readings at the end, the schedule entry running
    (``workload``, ``kind``) and ``since_s`` (time since that entry began).
    An update published late (the next one follows within 0.6 of the counter's
    period: ~0.19 s then ~0.01 s on the H200 of 2026-11-27) makes one interval
    of the two, the exact energy over their span (the short one alone would
    read thousands of watts and weigh in every fit).
    """
    t, e = metrics.counter_updates(rec)
    t, e = metrics.merge_late_updates(t, e)
    end = t[1:]
    out = pd.DataFrame({schema.T_S: end, schema.DT_S: np.diff(t), schema.POWER_W: np.diff(e) / np.diff(t)})
    tr_t = rec.trace[schema.T_S].to_numpy(float)
    i = np.clip(np.searchsorted(tr_t, end, side="right") - 1, 0, len(tr_t) - 1)
    for col in (schema.TEMPERATURE_C, schema.SM_CLOCK_MHZ):
        out[col] = rec.trace[col].to_numpy(float)[i]
    ph = rec.phases
    j = np.clip(np.searchsorted(ph[schema.T0_S].to_numpy(float), t[:-1], side="right") - 1, 0, len(ph) - 1)
    inside = t[:-1] >= ph[schema.T0_S].to_numpy(float)[j]
    inside &= end <= ph[schema.T1_S].to_numpy(float)[j]
    out[schema.WORKLOAD] = np.where(inside, ph[schema.WORKLOAD].to_numpy()[j], "")
    kinds = ph[schema.PHASE_KIND].to_numpy()[j]
    out[schema.PHASE_KIND] = np.where(inside, kinds, "")
    out.loc[out[schema.PHASE_KIND] == "idle", schema.WORKLOAD] = "idle"
    out[schema.SINCE_S] = t[:-1] - ph[schema.T0_S].to_numpy(float)[j]
    return out[out[schema.DT_S] < 0.25].reset_index(drop=True)


def fit_twin(recordings, *, name: str = "fitted", clock_workload: str | None = None,
             sensor_window: dict | None = None, knee_mhz: float = 1100.0, workload_times: dict | None = None,
             n_poles: int = 2, holdout=(), provenance: dict | None = None,
             search_cap_gains: bool = True, burst_clock: str = "model", cap_controller: str = "auto") -> TwinPreset:
    """Identify a twin preset from raw recordings (all of each; cut them first to hold data out).

    Parameters
    ----------
    recordings : Recording or list of Recording
        Recordings of one board (their tables are pooled).
    name : str
        Name of the preset.
    clock_workload : str, optional
        A workload whose time is ∝ 1/clock (dependent FMA chain): the real
        clock comes from its launch times. Default: the workload whose name
        contains ``fma``.
    sensor_window : dict, optional
        ``{"window_s": ..., "delay_s": ...}`` of the instant reading from a
        ``powermodels characterize`` fit (the raw trace cannot separate them).
    knee_mhz : float, default=1100
        V(f) knee (thesis eq. 4.1), from a DVFS calibration of the same GPU model.
    workload_times : dict, optional
        ``{workload: {"t_fast_s": ..., "clock_share": ...}}`` for workloads
        without timed launches in the recordings (e.g. a pressure load).
    n_poles : int, default=2
        Foster poles of the thermal network.
    holdout : sequence of (t0_s, t1_s), optional
        Spans of the (first) recording left out of the fit: their readings,
        counter and launches fit nothing (the thermal network is driven
        through them by their power, as the board was).
    provenance : dict, optional
        Added to the preset's provenance.
    search_cap_gains : bool, default=True
        Fit the cap controller by replaying the first recording (see
        ``cap_controller``); False keeps the step controller with integral
        gain 4/s, no proportional term and the analytic recovery rate.
    burst_clock : {"model", "data", "none"}, default="model"
        How bursts after a cap load, which run a bin below the top clock while
        NVML reads the top clock, enter the fit: brought to the top clock with
        the first fit's V(f) (``"model"``), with that correction scaled by what
        the fitted workloads' own bursts and series show (``"data"``,
        :func:`~powermodels.twin.fit_bursts.burst_power_at_top_clock`), or as
        read (``"none"``).
    cap_controller : {"auto", "step", "period"}, default="auto"
        The controller whose gains, core coefficient at the capped clock and
        recovery rate are fitted: on each 1 ms step's power, once per clock
        period on its mean, or both and the better on the fitting data kept
        (:func:`~powermodels.twin.fit_cap_choice.fit_cap_controller`).

    Returns
    -------
    TwinPreset
        The fitted preset; ``preset.fit`` holds the fit's diagnostics.
    """
    if cap_controller not in CAP_CONTROLLER_FITS:
        raise ValueError(f"fit_twin: cap_controller must be one of {', '.join(CAP_CONTROLLER_FITS)}, "
                         f"got {cap_controller!r}")
    if burst_clock not in ("model", "data", "none"):
        raise ValueError(f"fit_twin: burst_clock must be 'model', 'data' or 'none', got {burst_clock!r}")
    recs = [recordings] if isinstance(recordings, Recording) else list(recordings)
    if not recs:
        raise ValueError("fit_twin: no recordings")
    prov0 = recs[0].provenance
    f_max = float(prov0["max_sm_clock_mhz"])
    limit = float(prov0["power_limit_w"])
    holdout = [(float(a), float(b)) for a, b in holdout]
    intervals = pd.concat([power_intervals(r) for r in recs], ignore_index=True)
    kept = _outside(intervals[schema.T_S].to_numpy(float) - intervals[schema.DT_S].to_numpy(float),
                    intervals[schema.T_S].to_numpy(float), holdout)
    recs = [_without_launches(r, holdout) for r in recs]
    clock_workload = clock_workload or next((w for r in recs for w in r.workloads if "fma" in w), None)
    report: dict = {}

    sensor = _fit_sensor(recs, clock_workload, sensor_window, report)
    times = _fit_times(recs, clock_workload, f_max, workload_times or {}, report)
    capped = {w for r in recs for w in r.phase_rows(kind="pressure")[schema.WORKLOAD]}
    first = power_intervals(recs[0])
    mem_w = _memory_power(first, times, capped, f_max)
    thermal = _fit_thermal(recs, n_poles, holdout, mem_w, report)
    # leakage follows the die temperature the twin will have (its thermal network driven by the power),
    # not the 100 ms reading, which lags the die by ~0.1-0.2 s when a burst follows a cap load
    heat = first[schema.POWER_W].to_numpy(float) - (1.0 - thermal["mem_heat_share"]) * mem_w
    model_t = foster_temperature(first[schema.T_S].to_numpy(float), heat, thermal)
    intervals["die_c"] = intervals[schema.TEMPERATURE_C].to_numpy(float)
    intervals.loc[: len(first) - 1, "die_c"] = model_t
    intervals = intervals.loc[kept].reset_index(drop=True)
    controller = _fit_controller(recs, intervals, clock_workload, limit, f_max, report)

    def physics_and_workloads(iv):
        alpha, idle_fit, loads = _fit_leakage(iv, f_max, report)
        t_ref = 25.0
        base = GPUPhysics()
        v_max = float(replace(base, voltage_knee_mhz=knee_mhz).relative_voltage(f_max))
        p_idle_ref = idle_fit + alpha * t_ref  # idle power at the top clock at T_ref
        leak_ref = min(alpha / 0.01, 0.5 * p_idle_ref)  # leakage at T_ref; λ ≥ 1 %/°C
        physics = replace(
            base, sm_clock_max_mhz=f_max, power_limit_w=limit,
            power_limit_max_w=max(limit, base.power_limit_max_w), voltage_knee_mhz=knee_mhz, t_ref_c=t_ref,
            leakage_w=leak_ref / v_max, leakage_per_c=alpha / leak_ref,
            thermal_poles=tuple(tuple(p) for p in thermal["poles"]), mem_heat_share=thermal["mem_heat_share"],
            **controller)
        physics = _fit_core(physics, iv, p_idle_ref, limit, report)
        return physics, _fit_activities(physics, loads, times, alpha, report)

    physics, workloads = physics_and_workloads(intervals)
    # after a cap load the real clock stays a bin or two below the top for a while although NVML reads the
    # top clock (the clock workload's launch times show it): the bursts' power is brought to the top clock
    # with the first fit's physics, and everything is fitted again
    corrected = None if burst_clock == "none" else burst_power_at_top_clock(
        recs, clock_workload, intervals, physics, workloads, report, scale_from_data=burst_clock == "data")
    if corrected is not None:
        physics, workloads = physics_and_workloads(corrected)
    provenance = {
        "fitted_from": [{"recording": r.name, "gpu": r.provenance.get("gpu"), "uuid": r.provenance.get("uuid"),
                         "from_s": float(r.phases[schema.T0_S].min()), "to_s": r.duration_s,
                         "held_out_s": holdout} for r in recs],
        "fitted_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "method": "powermodels.twin.fit.fit_twin", "clock_workload": clock_workload, "knee_mhz": knee_mhz,
        **(provenance or {})}
    preset = TwinPreset(name, physics, sensor, thermal["ambient_c"], workloads, provenance, report)
    if search_cap_gains:
        preset = fit_cap_controller(preset, recs[0], holdout, controller=cap_controller,
                                    clock_workload=clock_workload, report=report)
        report["controller"].update({k: getattr(preset.physics, k)
                                      for k in ("cap_proportional", "cap_gain_per_s", "cap_repeat", "cap_offset_w",
                                                "clock_recovery_mhz_per_s", "cap_on_period")})
        preset.provenance["cap_controller"] = (
            f"{'period' if preset.physics.cap_on_period else 'step'} (fit_cap_controller, asked {cap_controller!r}: "
            + report["cap_controller"]["criterion"] + ")")
    return preset


def series_holdout(rec: Recording, workload: str) -> list[tuple[float, float]]:
    """The span of ``workload``'s ``series`` entry and the ``idle`` entry after it (its cooling)."""
    ph = rec.phases.reset_index(drop=True)
    idx = ph.index[(ph[schema.WORKLOAD] == workload) & (ph[schema.PHASE_KIND] == "series")]
    if not len(idx):
        raise ValueError(f"recording {rec.name}: no series entry of workload {workload!r} to hold out")
    i = int(idx[0])
    end = float(ph[schema.T1_S].iloc[i + 1] if i + 1 < len(ph) and ph[schema.PHASE_KIND].iloc[i + 1] == "idle"
                else ph[schema.T1_S].iloc[i])
    return [(float(ph[schema.T0_S].iloc[i]), end)]


def _fit_sensor(recs, clock_workload, window, report) -> object:
    rec = recs[0]
    power_period = metrics.update_period(rec, schema.POWER_INSTANT_W)
    clock_period = metrics.update_period(rec, schema.SM_CLOCK_MHZ)
    t, _ = metrics.counter_updates(rec)
    d = np.diff(t)
    energy_period = float(np.median(d[(d > 0.05) & (d < 0.15)]))
    # jitter from consecutive updates (a fixed grid's residual would grow with any drift of the period)
    steady = d[(d > 0.05) & (d < 0.15)]
    jitter = float(min(1.4826 * np.median(np.abs(steady - energy_period)) / np.sqrt(2.0), 0.45 * energy_period))
    delay = 0.0
    if clock_workload is not None:
        rec_rows = pd.concat([metrics.clock_recovery(r, clock_workload) for r in recs])
        lag = rec_rows["lag_s"].to_numpy(float)
        lag = lag[np.isfinite(lag) & (lag > -clock_period / 2)]
        if lag.size:
            delay = float(max(np.median(lag) - clock_period / 2, 0.0))
    idle = rec.trace.loc[rec.trace[schema.T_S] < float(rec.phases[schema.T1_S].iloc[0])]
    steps = np.diff(idle[schema.POWER_INSTANT_W].to_numpy(float))
    noise = float(np.std(steps[steps != 0]) / np.sqrt(2)) if (steps != 0).sum() > 3 else 0.3
    window = window or {}
    sensor = replace(PRESETS["hopper"], name="fitted", update_period_s=power_period,
                     instant_window_s=float(window.get("window_s", PRESETS["hopper"].instant_window_s)),
                     delay_s=float(window.get("delay_s", 0.0)), gain=1.0, offset_w=0.0, noise_w=noise,
                     energy_period_s=energy_period, energy_jitter_s=jitter,
                     energy_read_s=float(np.median(rec.energy[schema.READ_S])) if schema.READ_S in rec.energy
                     else 4e-3, clock_period_s=clock_period, clock_delay_s=delay)
    report["sensor"] = {"power_period_s": power_period, "clock_period_s": clock_period,
                        "energy_period_s": energy_period, "energy_jitter_s": jitter, "clock_delay_s": delay,
                        "noise_w": noise, "instant_window_from": window.get("source", "hopper default")}
    return sensor


def _outside(a: np.ndarray, b: np.ndarray, holdout) -> np.ndarray:
    """Rows whose span ``[a, b]`` touches no held-out span."""
    keep = np.ones(a.size, bool)
    for lo, hi in holdout:
        keep &= (b <= lo) | (a >= hi)
    return keep


def _without_launches(rec: Recording, holdout) -> Recording:
    la = rec.launches
    keep = _outside(la[schema.START_S].to_numpy(float), la[schema.END_S].to_numpy(float), holdout)
    return replace(rec, launches=la.loc[keep].reset_index(drop=True))


def _memory_power(iv: pd.DataFrame, times: dict, capped: set, f_max: float) -> np.ndarray:
    """Each interval's memory dynamic power (W) from its workload's memory activity (1 − clock share)."""
    ph = replace(GPUPhysics(), sm_clock_max_mhz=f_max)
    bm = float(ph.power_terms(f_max, ph.mem_clocks_mhz[0], ph.t_ref_c)[2])
    mem = {w: CAPPED_MEM_ACTIVITY if w in capped else 1.0 - float(spec.get("clock_share", 1.0))
           for w, spec in times.items()}
    return iv[schema.WORKLOAD].map(mem).fillna(0.0).to_numpy(float) * bm


def _fit_thermal(recs, n_poles, holdout, mem_w, report) -> dict:
    """Foster poles, ambient and the memory's heat share (the share with the lowest residual)."""
    iv = power_intervals(recs[0])  # one continuous recording drives the network (a gap would break its state)
    t = iv[schema.T_S].to_numpy(float)
    fit = fit_with_memory_share(t, iv[schema.POWER_W], iv[schema.TEMPERATURE_C], mem_w, n_poles=n_poles,
                                weight=_outside(t - iv[schema.DT_S].to_numpy(float), t, holdout))
    report["thermal"] = fit
    return fit


def _fit_leakage(iv: pd.DataFrame, f_max: float, report) -> tuple[float, float, dict]:
    """α (W/°C) at the top clock pooled over loads; idle intercept; each load's intercept."""
    ok = (iv[schema.SM_CLOCK_MHZ] >= f_max) & (iv[schema.WORKLOAD] != "") \
        & (iv[schema.PHASE_KIND].isin(["idle", "burst", "series"])) & (iv[schema.SINCE_S] > 0.3)
    d = iv.loc[ok]
    groups = sorted(d[schema.WORKLOAD].unique())
    if "idle" not in groups:
        raise ValueError("fit_twin: the recordings have no idle time at the top clock (idle power unknown)")
    X = np.column_stack([d["die_c"].to_numpy(float)]
                        + [(d[schema.WORKLOAD] == g).to_numpy(float) for g in groups])
    coef, *_ = np.linalg.lstsq(X, d[schema.POWER_W].to_numpy(float), rcond=None)
    alpha = float(coef[0])
    loads = {g: float(c) for g, c in zip(groups, coef[1:])}
    rmse = float(np.sqrt(np.mean((X @ coef - d[schema.POWER_W]) ** 2)))
    report["leakage"] = {"alpha_w_per_c": alpha, "intercepts_w": loads, "rows": int(len(d)), "rmse_w": rmse,
                         "temperature_range_c": [float(d["die_c"].min()), float(d["die_c"].max())],
                         "temperature": "the fitted thermal network's die temperature"}
    if not alpha > 0:
        raise ValueError(f"fit_twin: leakage slope α = {alpha:.3g} W/°C is not positive; the recordings do "
                         "not span enough temperature at the top clock")
    return alpha, loads.pop("idle"), loads


def _fit_times(recs, clock_workload, f_max, given, report) -> dict:
    """Per workload: fastest time, clock-bound share, host gap, launches per batch."""
    out: dict = {}
    traj = None
    if clock_workload is not None:
        c = pd.concat([since_burst(r, metrics.implied_clock(r, clock_workload)) for r in recs])
        bins = np.arange(0.0, 0.3, 0.01)
        k = np.digitize(c[schema.SINCE_S], bins)
        traj = pd.Series(c[schema.SM_CLOCK_MHZ].to_numpy()).groupby(k).median()
    for w in sorted({w for r in recs for w in r.workloads}):
        la = pd.concat([r.launches.loc[r.launches[schema.WORKLOAD] == w] for r in recs])
        t = la[schema.TIME_S].to_numpy(float)
        t_fast = float(np.percentile(t, 5))
        share = 1.0
        f_read = float(np.median(np.concatenate([metrics.reading_series(
            r, schema.SM_CLOCK_MHZ, r.launches.loc[r.launches[schema.WORKLOAD] == w, schema.START_S])
            for r in recs])))
        if f_read < f_max - 20.0:
            # a power-capped workload never ran at the top clock: scale its median time from the
            # clock NVML read while it ran, as if clock-bound (the recordings cannot tell its share)
            t_fast = float(np.median(t)) * f_read / f_max
        elif w != clock_workload and traj is not None:
            la2 = pd.concat([since_burst(r, r.launches.loc[r.launches[schema.WORKLOAD] == w]) for r in recs])
            early = la2.loc[la2[schema.SINCE_S] < 0.29]
            f_est = traj.reindex(np.digitize(early[schema.SINCE_S], bins)).to_numpy(float)
            x = f_max / f_est - 1.0
            y = early[schema.TIME_S].to_numpy(float) / t_fast - 1.0
            good = np.isfinite(x) & (x > 0.02)
            share = float(np.clip(np.sum(x[good] * y[good]) / np.sum(x[good] ** 2), 0.0, 1.0)) if good.sum() > 5 \
                else 1.0
        s, e = la[schema.START_S].to_numpy(float), la[schema.END_S].to_numpy(float)
        gaps = s[1:] - e[:-1]
        same = (la[schema.REPEAT].to_numpy()[1:] == la[schema.REPEAT].to_numpy()[:-1]) & (gaps >= 0)
        gap = float(np.median(gaps[same])) if same.any() else 0.0
        n = int(np.median(la[schema.LAUNCHES]))
        out[w] = {"t_fast_s": t_fast, "clock_share": share, "gap_s": gap, "launches_per_batch": n}
    for w, spec in given.items():
        if w not in out:
            out[w] = {"gap_s": 0.0, "launches_per_batch": 1, **spec}
    report["workload_times"] = out
    return out


def _fit_controller(recs, iv, clock_workload, limit, f_max, report) -> dict:
    """Power-cap controller: clock period, recovery onset and rate, budget headroom, window."""
    rec = recs[0]
    period, rate, delay = 0.015, 5000.0, 0.0
    if clock_workload is not None:
        c = since_burst(rec, metrics.implied_clock(rec, clock_workload))
        c = c.loc[c[schema.SINCE_S] < 0.3]
        f = c[schema.SM_CLOCK_MHZ].to_numpy(float)
        t = c[schema.START_S].to_numpy(float)
        jumps = t[1:][(np.diff(f) > 7.0) & (np.diff(t) < 0.05)]
        d = np.diff(jumps)
        d = d[(d > 0.004) & (d < 0.05)]
        if d.size:
            period = float(np.median(d))
        timed = pd.concat([metrics.clock_recovery(r, clock_workload) for r in recs], ignore_index=True)
        delay, fitted_rate = fit_recovery(c, f_max, period_s=period, recoveries=timed, report=report)
        if np.isfinite(fitted_rate):
            rate = fitted_rate
    press = iv.loc[(iv[schema.PHASE_KIND] == "pressure") & (iv[schema.SINCE_S] < 0.6) & (iv[schema.SINCE_S] > 0.05)]
    peak = press.groupby(press[schema.T_S].round(0))[schema.POWER_W].max() if len(press) else pd.Series([limit])
    headroom = float(max(np.median(peak) - limit, 0.0))
    out = {"clock_period_s": period, "clock_recovery_mhz_per_s": rate, "clock_recovery_delay_s": delay,
           "cap_window_s": 1.0, "cap_headroom_w": headroom, "cap_gain_per_s": 4.0, "cap_proportional": 0.0}
    report["controller"] = dict(out)
    return out


def _fit_core(physics: GPUPhysics, iv: pd.DataFrame, p_idle_ref: float, limit: float, report) -> GPUPhysics:
    """Core coefficient c from a capped load's settled clock (activity 1) and the idle power's split."""
    ph = physics
    fm = ph.mem_clocks_mhz[0]
    # P0 so that the idle power at the top clock and T_ref is p_idle_ref
    rest = float(ph.power_w(ph.sm_clock_max_mhz, fm, ph.t_ref_c)) - ph.p0_w
    ph = replace(ph, p0_w=max(p_idle_ref - rest, 0.0))
    capped = iv.loc[(iv[schema.PHASE_KIND] == "pressure") & (iv[schema.SINCE_S] > 1.0)]
    if len(capped) < 5:
        report["core"] = {"core_w_per_ghz": ph.core_w_per_ghz, "source": "default (no settled capped load)"}
        return ph
    f_eq = float(np.median(capped[schema.SM_CLOCK_MHZ]))
    t_eq = float(np.median(capped["die_c"]))
    p_eq = float(np.mean(capped[schema.POWER_W]))
    # P = A + Bc·1 + Bm·m at f_eq (m = CAPPED_MEM_ACTIVITY, as the workload gets); Bc ∝ core_w_per_ghz
    a0, bc, bm = (float(x) for x in ph.power_terms(f_eq, fm, t_eq))
    idle_core = ph.core_w_per_ghz * f_eq / 1000.0 * float(ph.relative_voltage(f_eq)) ** 2 * ph.idle_activity
    scale = (p_eq - (a0 - idle_core) - bm * CAPPED_MEM_ACTIVITY) / (bc + idle_core)
    core = float(ph.core_w_per_ghz * max(scale, 0.1))
    ph = replace(ph, core_w_per_ghz=core)
    rest = float(ph.power_w(ph.sm_clock_max_mhz, fm, ph.t_ref_c)) - ph.p0_w
    ph = replace(ph, p0_w=max(p_idle_ref - rest, 0.0))
    report["core"] = {"core_w_per_ghz": core, "capped_clock_mhz": f_eq, "capped_power_w": p_eq,
                      "capped_temperature_c": t_eq}
    return ph


def _fit_activities(ph: GPUPhysics, loads: dict, times: dict, alpha: float, report) -> dict:
    """Each workload's core and memory activity from its power at the top clock."""
    fm = ph.mem_clocks_mhz[0]
    f = ph.sm_clock_max_mhz
    a0, bc, bm = (float(x) for x in ph.power_terms(f, fm, 0.0))
    idle_at0 = a0  # the idle power at 0 °C (the intercepts are at 0 °C too)
    out = {}
    acts = {}
    for w, spec in times.items():
        share = float(spec.get("clock_share", 1.0))
        mem = 1.0 - share
        if w in loads:
            dyn = loads[w] - idle_at0
            act = float(np.clip((dyn - bm * mem) / bc, 0.0, 1.0))
        else:  # a capped pressure load: full activity (it set the core coefficient)
            act, mem = 1.0, CAPPED_MEM_ACTIVITY
        t_fast = float(spec["t_fast_s"])
        wl = SimulatedWorkload(w, core_work=share * t_fast * f, t0_s=(1.0 - share) * t_fast,
                               activity=act, mem_activity=float(np.clip(mem, 0.0, 1.0)))
        out[w] = TwinWorkload(wl, float(spec.get("gap_s", 0.0)), int(spec.get("launches_per_batch", 1)))
        acts[w] = {"activity": act, "mem_activity": float(mem)}
    report["activities"] = acts
    return out
