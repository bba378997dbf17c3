"""Fit a twin preset to raw recordings: the board's physics, its sensors and each workload.

:func:`fit_twin` identifies, from what a raw recording
(:mod:`powermodels.recording`) holds:

* **sensors** — update period of the power, clock and temperature readings,
  the energy counter's period and jitter, the clock reading's delay (from
  the clock-reference workload's launch times, the real clock); instant
  window and delay from a ``characterize`` result where given;
* **thermal network** — Foster poles and ambient from power (energy
  counter) and temperature (:mod:`~powermodels.thermal.foster`);
* **idle power and leakage** — at the top clock, power = idle power + α·T
  + each load's power above idle × (1 + μ·(T − T_ref)), pooled over idle and
  every load (thesis eq. 4.6: α is the board's at a clock, not the
  workload's; μ the loads' own slope, :mod:`~powermodels.twin.fit_power`),
  split into P0 and κ·V(f)·(1 + λ(T − T_ref));
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
from ..recording import Recording
from ..thermal.foster import fit_with_memory_share, foster_temperature
from . import metrics
from .fit_bursts import burst_power_at_top_clock, since_burst
from .fit_cap_choice import CAP_CONTROLLER_FITS, fit_cap_controller
from .fit_controller import fit_capped_clock, fit_recovery
from .fit_power import CAPPED_MEM_ACTIVITY, power_stage
from .preset import TwinPreset, load_preset

__all__ = ["fit_twin", "power_intervals", "refit_power", "series_holdout"]

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
             search_cap_gains: bool = True, burst_clock: str = "model", cap_controller: str = "auto",
             dynamic_per_c=0.0, capped_clock: str = "spans") -> TwinPreset:
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
    dynamic_per_c : "fit" or float, default=0
        μ, the loads' own temperature slope (relative, per °C, of the power a
        load draws above the idle board): ``"fit"`` fits it with the leakage
        (:func:`~powermodels.twin.fit_power.fit_leakage`; opt-in: on the
        held-out recordings it made the warm-up's shape right on an H100 and
        its worst seconds worse, docs/twin.md session 10), else this value
        (0: one slope loaded and idle, the fit before session 10).

    capped_clock : {"spans", "settled"}, default="spans"
        The capped clock the core coefficient is fitted to: from 1 s into the
        capped spans (their first seconds), or from 2 s into each capped series
        to its end, where a long capped load settles
        (:func:`~powermodels.twin.fit_controller.fit_capped_clock`). On twelve
        held-out H200s ``"settled"``'s clock, pooled over boards, took the
        capped row's median warm-up error from 2.7 to 1.5 %; on H100s, whose capped
        error is the workload's launch time, it made it worse (docs/twin.md,
        session 16). The shipped presets were fitted with ``"spans"``.
    Returns
    -------
    TwinPreset
        The fitted preset; ``preset.fit`` holds the fit's diagnostics.
    """
    if capped_clock not in ("spans", "settled"):
        raise ValueError(f"fit_twin: capped_clock must be 'spans' or 'settled', got {capped_clock!r}")
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
        return power_stage(iv, f_max=f_max, limit=limit, knee_mhz=knee_mhz, thermal=thermal, controller=controller,
                           times=times, report=report, mu=dynamic_per_c)

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
                                    clock_workload=clock_workload, capped_clock=capped_clock, report=report)
        report["controller"].update({k: getattr(preset.physics, k)
                                      for k in ("cap_proportional", "cap_gain_per_s", "cap_repeat", "cap_offset_w",
                                                "clock_recovery_mhz_per_s", "cap_on_period")})
        preset.provenance["cap_controller"] = (
            f"{'period' if preset.physics.cap_on_period else 'step'} (fit_cap_controller, asked {cap_controller!r}: "
            + report["cap_controller"]["criterion"] + ")")
    return preset


def refit_power(preset, rec: Recording, *, name: str, holdout=(), dynamic_per_c=0.0,
                clock_workload: str | None = None, provenance: dict | None = None) -> TwinPreset:
    """``preset`` with only its power stage fitted again on ``rec``: leakage, μ, core coefficient, activities.

    The thermal network, ambient, sensors, controller and the workloads' times
    stay the preset's; the die temperature the power is fitted against is the
    preset's own network driven by the recording's power (what its twin
    will have). The stage is :func:`fit_twin`'s
    (:func:`~powermodels.twin.fit_power.power_stage`, the bursts brought to
    the top clock, then the core coefficient scaled by replay until the
    capped clock reading is the real one,
    :func:`~powermodels.twin.fit_controller.fit_capped_clock`), so a preset
    can take a change of that stage without its other parts moving.

    Parameters
    ----------
    preset : TwinPreset or str
        The preset (its ``fit["workload_times"]`` and ``fit["thermal"]`` are read).
    rec : Recording
        Its fitting recording.
    name : str
        Name of the new preset.
    holdout : sequence of (t0_s, t1_s), optional
        Spans left out (as in :func:`fit_twin`).
    dynamic_per_c : "fit" or float, default=0
        μ (:func:`fit_twin`).
    clock_workload : str, optional
        Default: the preset's provenance ``clock_workload``.
    provenance : dict, optional
        Added to the preset's provenance.

    Returns
    -------
    TwinPreset
    """
    old = load_preset(preset)
    ph0 = old.physics
    f_max, limit = ph0.sm_clock_max_mhz, ph0.power_limit_w
    holdout = [(float(a), float(b)) for a, b in holdout]
    clock_workload = clock_workload or old.provenance.get("clock_workload")
    times = {w: dict(v) for w, v in old.fit["workload_times"].items()}
    thermal = {**old.fit["thermal"], "poles": [list(p) for p in ph0.thermal_poles],
               "ambient_c": old.ambient_c, "mem_heat_share": ph0.mem_heat_share}
    iv = power_intervals(rec)
    capped = set(rec.phase_rows(kind="pressure")[schema.WORKLOAD])
    heat = iv[schema.POWER_W].to_numpy(float) - (1.0 - ph0.mem_heat_share) * _memory_power(iv, times, capped, f_max)
    iv["die_c"] = foster_temperature(iv[schema.T_S].to_numpy(float), heat, thermal)
    t1 = iv[schema.T_S].to_numpy(float)
    iv = iv.loc[_outside(t1 - iv[schema.DT_S].to_numpy(float), t1, holdout)].reset_index(drop=True)
    recs = [_without_launches(rec, holdout)]
    report: dict = {"refit_power_of": old.name}
    kw = dict(f_max=f_max, limit=limit, knee_mhz=ph0.voltage_knee_mhz, thermal=thermal, controller={},
              times=times, report=report, mu=dynamic_per_c, base=ph0)
    physics, workloads = power_stage(iv, **kw)
    corrected = burst_power_at_top_clock(recs, clock_workload, iv, physics, workloads, report)
    if corrected is not None:
        physics, workloads = power_stage(corrected, **kw)
    prov = {**old.provenance, "power_refit": {"of": old.name, "recording": rec.name, "held_out_s": holdout,
                                              "method": "powermodels.twin.fit.refit_power",
                                              "dynamic_per_c": dynamic_per_c, **(provenance or {})}}
    new = TwinPreset(name, physics, old.sensor, old.ambient_c, {**old.workloads, **workloads}, prov,
                     {**old.fit, **report})
    return fit_capped_clock(new, recs[0], holdout, report=new.fit)


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
