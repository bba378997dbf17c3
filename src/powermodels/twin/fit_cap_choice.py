"""Fit the twin's power-cap controller under a chosen controller, and choose it on the fitting data.

The simulated GPU has two ways to set the clock under the cap
(``GPUPhysics.cap_on_period``, :mod:`powermodels.devices.cap_controller`):
on each 1 ms step's predicted power (``"step"``, the original) or once per
clock period on the mean over the period just ended (``"period"``, which
regulates a ladder's mix of loads as the real H100 and H200 do). The
controller's parameters interact with that choice — the period controller's
first decision after a cap load sees a period still partly loaded, so the
same recovery rate reaches 1950 MHz later, and a capped start runs one
period at the old clock — so each controller gets its own fit:

1. the cap gains (:func:`~powermodels.twin.fit_controller.fit_cap_gains`,
   replaying the capped spans),
2. the core coefficient from the capped clock
   (:func:`~powermodels.twin.fit_controller.fit_capped_clock`),
3. the recovery rate by replay (:func:`fit_recovery_by_replay`): the twin
   replays the bursts after cap loads and the rate is scaled until its
   median time to 1950 MHz is the real one's (the analytic
   :func:`~powermodels.twin.fit_controller.fit_recovery` assumes the climb
   starts on the first period; the twin's does not always).

:func:`fit_cap_controller` with ``controller="auto"`` fits both and keeps
the one with the lower mean |relative error| of the issue's cap rows on the
fitting recording (:func:`recovery_error`; the capped series' overshoot and
settling, :func:`capped_series_rows`), in units of the issue's 25 %
(:data:`ISSUE_TOLERANCE`); a recording without a capped series outside the
held-out spans is scored by the gain search's objective on its capped spans
(RMS error of the 1 s mean power plus the error of the 100 ms power's
spread), re-evaluated after steps 2–3. ``keep_given`` scores the incoming
preset's controller beside them. Only the fitting recording outside
``holdout`` is read: a held-out recording or span never takes part in the
choice.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..recording import Recording
from . import metrics
from .fit_controller import CAP_GAIN_GRID, capped_spans, fit_cap_gains, fit_capped_clock, span_score
from .replay import replay

__all__ = ["CAP_CONTROLLER_FITS", "ISSUE_TOLERANCE", "capped_series_rows", "controller_table", "fit_cap_controller",
           "fit_recovery_by_replay", "recovery_error"]

#: controllers :func:`fit_cap_controller` fits: one of them, or ``"auto"`` (both, chosen on the fitting data)
CAP_CONTROLLER_FITS = ("auto", "step", "period")
#: the issue's tolerance on the controller's rows (clock recovery, cap overshoot and settling; relative)
ISSUE_TOLERANCE = 0.25


def _recovery_bursts(rec: Recording, clock_workload: str, holdout) -> list[tuple[float, float]]:
    """``(t0, t1)`` of each burst of the clock workload after a pressure entry, outside ``holdout``."""
    return [(t0, t1) for _, t0, t1 in metrics.bursts_after_pressure(rec, clock_workload)
            if all(t1 <= lo or t0 >= hi for lo, hi in holdout)]


def _median_recovery(rec: Recording, clock_workload: str, bursts, target_mhz: float) -> float:
    """Median over ``bursts`` of the time from the burst's start to the end of its first launch at the target.

    The launch's real clock is :func:`~powermodels.twin.metrics.implied_clock` (as
    :func:`~powermodels.twin.metrics.clock_recovery` reads it); bursts that never reach it are left out.
    """
    c = metrics.implied_clock(rec, clock_workload)
    s, e = c[schema.START_S].to_numpy(float), c[schema.END_S].to_numpy(float)
    up = c[schema.SM_CLOCK_MHZ].to_numpy(float) >= target_mhz
    times = []
    for t0, t1 in bursts:
        hit = up & (s >= t0) & (e <= t1)
        if hit.any():
            times.append(float(e[hit][0] - t0))
    return float(np.median(times)) if times else float("nan")


def recovery_error(preset, rec: Recording, clock_workload: str, holdout=(), *, target_mhz: float = 1950.0
                   ) -> dict:
    """The twin's clock recovery after the cap loads of ``rec``'s fitting part, against the real one.

    Replays ``rec``'s schedule up to the end of its last burst after a cap
    load (outside ``holdout``) on ``preset``; the recovery is the median
    over those bursts of the time to the first launch at ``target_mhz``
    (:func:`~powermodels.twin.metrics.clock_recovery`, launch times: the
    real clock on both).

    Returns
    -------
    dict
        ``real_s``, ``twin_s``, ``error`` (relative), ``bursts``.
    """
    bursts = _recovery_bursts(rec, clock_workload, holdout)
    if not bursts:
        return {"real_s": float("nan"), "twin_s": float("nan"), "error": float("nan"), "bursts": 0}
    end = max(t1 for _, t1 in bursts)
    ph = rec.phases
    sched = ph.loc[ph[schema.T1_S] <= end + 1e-9].reset_index(drop=True)
    start_c = float(rec.trace[schema.TEMPERATURE_C].iloc[0]) if rec.has_trace else None
    twin = replay(sched, preset, start_temperature_c=start_c)
    real_s = _median_recovery(rec, clock_workload, bursts, target_mhz)
    twin_s = _median_recovery(twin, clock_workload, bursts, target_mhz)
    return {"real_s": real_s, "twin_s": twin_s, "error": twin_s / real_s - 1.0, "bursts": len(bursts)}


def fit_recovery_by_replay(preset, rec: Recording, clock_workload: str | None, holdout=(), *,
                           iterations: int = 4, tolerance: float = 0.02, report: dict | None = None):
    """The preset with the recovery rate that gives the real median time to 1950 MHz on replay.

    The twin's time to the target is ``wait + (target − start) / rate``
    (``wait``: the onset delay and up to two clock periods before the first
    rise); the rate is scaled by ``(twin − wait) / (real − wait)`` with
    ``wait = clock_recovery_delay_s + clock_period_s`` until the twin's
    median is within ``tolerance`` of the real one; of the rates replayed,
    the one closest to the real recovery is kept.

    Returns
    -------
    TwinPreset
        ``preset`` unchanged without a clock workload or bursts after cap loads.
    """
    steps = []
    twin = preset
    if clock_workload is None or clock_workload not in rec.workloads:
        return preset
    best = None
    for _ in range(iterations):
        got = recovery_error(twin, rec, clock_workload, holdout)
        steps.append({"rate_mhz_per_s": twin.physics.clock_recovery_mhz_per_s, **got})
        if not np.isfinite(got["error"]):
            break
        if best is None or abs(got["error"]) < best[0]:
            best = (abs(got["error"]), twin)
        if abs(got["error"]) <= tolerance:
            break
        ph = twin.physics
        wait = ph.clock_recovery_delay_s + ph.clock_period_s
        scale = float(np.clip(max(got["twin_s"] - wait, 1e-3) / max(got["real_s"] - wait, 1e-3), 0.5, 2.0))
        twin = replace(twin, physics=replace(ph, clock_recovery_mhz_per_s=ph.clock_recovery_mhz_per_s * scale))
    # the recovery times move in steps of the clock period: keep the best rate replayed, not the last guess
    twin = best[1] if best is not None else preset
    if report is not None:
        report["recovery_by_replay"] = {"iterations": steps,
                                        "rate_mhz_per_s": twin.physics.clock_recovery_mhz_per_s}
    return twin


def _span_score(preset, rec: Recording, holdout) -> dict:
    """The gain search's objective for ``preset`` on ``rec``'s capped spans outside ``holdout`` (W)."""
    spans = capped_spans(rec, holdout)
    if not spans:
        return {"score_w": float("nan"), "mean_rmse_w": float("nan"), "spread_error_w": float("nan"), "spans": 0}
    return {**span_score(preset, rec, spans), "spans": len(spans)}


def capped_series_rows(preset, rec: Recording, holdout=()) -> list[dict]:
    """The issue's cap rows on ``rec``'s capped series outside ``holdout``: overshoot and settling, real vs twin.

    A capped series is a ``series`` of a workload that also runs as a
    ``pressure`` load; the schedule is replayed from its start to the
    series' end (as ``twin-compare`` replays it: a replay started just
    before the series would start the heatsink at another state and move
    the settled power), and the series is measured with
    :func:`~powermodels.twin.metrics.cap_overshoot` on both recordings.
    Held-out spans before it are driven by the schedule only (what ran
    when); nothing measured in them is read.

    Parameters
    ----------
    preset : TwinPreset
    rec : Recording
        The fitting recording.
    holdout : sequence of (t0_s, t1_s)
        A series touching one of these spans is left out.

    Returns
    -------
    list of dict
        Per series and row: ``workload``, ``metric`` (``overshoot_w``,
        ``settling_s``), ``real``, ``twin``, ``error`` (relative).
    """
    ph = rec.phases
    pressure = set(ph.loc[ph[schema.PHASE_KIND] == "pressure", schema.WORKLOAD])
    start_c = float(rec.trace[schema.TEMPERATURE_C].iloc[0]) if rec.has_trace else None
    rows = []
    for w, kind, t0, t1 in zip(ph[schema.WORKLOAD], ph[schema.PHASE_KIND], ph[schema.T0_S], ph[schema.T1_S]):
        if kind != "series" or w not in pressure or not all(t1 <= lo or t0 - 1.0 >= hi for lo, hi in holdout):
            continue
        twin = replay(ph.loc[ph[schema.T1_S] <= t1 + 1e-9].reset_index(drop=True), preset,
                      start_temperature_c=start_c)
        real_c, twin_c = metrics.cap_overshoot(rec, w), metrics.cap_overshoot(twin, w)
        for key in (schema.OVERSHOOT_W, schema.SETTLING_S):
            r, q = real_c[key], twin_c[key]
            rows.append({schema.WORKLOAD: w, schema.CHECK_METRIC: key, schema.CHECK_REAL: r, schema.CHECK_TWIN: q,
                         schema.CHECK_ERROR: (q - r) / abs(r) if r else float("nan")})
    return rows


def _fit_one(preset, rec: Recording, clock_workload, holdout, on_period: bool | None, grid, report: dict,
             capped_clock: str = "spans"):
    """Fit one controller (``on_period``), or score ``preset`` as given (``None``); the score goes in ``report``."""
    twin = preset
    if on_period is not None:
        twin = replace(preset, physics=replace(preset.physics, cap_on_period=on_period))
        twin = fit_cap_gains(twin, rec, holdout, grid=grid, report=report)
        twin = fit_capped_clock(twin, rec, holdout, window=capped_clock, report=report)
        twin = fit_recovery_by_replay(twin, rec, clock_workload, holdout, report=report)
    score = _span_score(twin, rec, holdout)
    rec_err = recovery_error(twin, rec, clock_workload, holdout) if clock_workload in rec.workloads \
        else {"error": float("nan")}
    series = capped_series_rows(twin, rec, holdout)
    errors = [abs(r[schema.CHECK_ERROR]) for r in series if np.isfinite(r[schema.CHECK_ERROR])]
    if np.isfinite(rec_err["error"]):
        errors.append(abs(rec_err["error"]))
    # in units of the issue's 25 %: the mean relative error of its cap rows on the fitting data
    issue = float(np.mean(errors)) / ISSUE_TOLERANCE if series and errors else float("nan")
    report["score"] = {**score, "recovery": rec_err, "capped_series": series, "issue_rows": issue}
    return twin


def fit_cap_controller(preset, rec: Recording, holdout=(), *, controller: str = "auto",
                       clock_workload: str | None = None, grid=CAP_GAIN_GRID, keep_given: bool = False,
                       capped_clock: str = "spans", report: dict | None = None):
    """Fit the power-cap controller's parameters under ``controller`` (or both, and choose).

    Parameters
    ----------
    preset : TwinPreset
        Everything but the controller fitted (its ``cap_window_s`` > 0, headroom and
        clock period set by :func:`~powermodels.twin.fit.fit_twin`).
    rec : Recording
        The fitting recording.
    holdout : sequence of (t0_s, t1_s)
        Spans of ``rec`` that neither fit nor choose.
    controller : {"auto", "step", "period"}, default="auto"
        ``"step"``/``"period"``: fit that controller; ``"auto"``: fit both
        and keep the one whose issue rows on ``rec`` are closer (module
        docstring).
    clock_workload : str, optional
        The clock-reference workload (time ∝ 1/clock) for the recovery.
    grid : sequence of (cap_proportional, cap_gain_per_s, cap_repeat)
        The gain candidates (:data:`~powermodels.twin.fit_controller.CAP_GAIN_GRID`).
    keep_given : bool, default=False
        Score ``preset``'s own controller as it is (``"given"``) beside the
        fitted ones, and keep it if it scores best (a refit of a shipped
        preset then never makes its fitting data's cap rows worse).
    capped_clock : {"spans", "settled"}, default="spans"
        Which capped clock the core coefficient is fitted to
        (:func:`~powermodels.twin.fit_controller.fit_capped_clock`'s ``window``).
    report : dict, optional
        Gets ``cap_controller``: each fitted controller's gains, rate, core
        coefficient, score and recovery, and the choice.

    Returns
    -------
    TwinPreset
        The preset with the chosen controller (``physics.cap_on_period``) and its parameters.
    """
    if controller not in CAP_CONTROLLER_FITS:
        raise ValueError(f"fit_cap_controller: controller must be one of {', '.join(CAP_CONTROLLER_FITS)}, "
                         f"got {controller!r}")
    names = (("step", "period") if controller == "auto" else (controller,)) + (("given",) if keep_given else ())
    fitted, parts = {}, {}
    for name in names:
        part: dict = {}
        fitted[name] = _fit_one(preset, rec, clock_workload, holdout, None if name == "given" else name == "period",
                                grid, part, capped_clock)
        ph = fitted[name].physics
        part["physics"] = {k: getattr(ph, k) for k in ("cap_proportional", "cap_gain_per_s", "cap_repeat",
                                                       "cap_offset_w", "core_w_per_ghz", "clock_recovery_mhz_per_s",
                                                       "cap_on_period")}
        parts[name] = part
    # the issue's own cap rows where the fitting data have a capped series outside the held-out spans,
    # else the gain search's objective (the capped spans)
    key = "issue_rows" if all(np.isfinite(parts[n]["score"]["issue_rows"]) for n in names) else "score_w"
    scores = {n: parts[n]["score"][key] for n in names}
    chosen = min(names, key=lambda n: scores[n] if np.isfinite(scores[n]) else np.inf)
    if report is not None:
        report["cap_controller"] = {
            "asked": controller, "chosen": chosen, "fits": parts, "scored_by": key,
            "criterion": ("lowest mean |relative error| of the issue's cap rows (clock recovery, and the capped "
                          "series' overshoot and settling) on the fitting recording outside the held-out spans"
                          if key == "issue_rows" else
                          "lowest capped-span score (1 s mean RMS + 100 ms spread error, W) on the fitting "
                          "recording outside the held-out spans (no capped series outside them)")}
        chosen_part = parts[chosen]
        for key in ("cap_gains", "capped_clock", "recovery_by_replay"):
            if key in chosen_part:
                report[key] = chosen_part[key]
    return fitted[chosen]


def controller_table(report: dict) -> pd.DataFrame:
    """One row per fitted controller of a :func:`fit_cap_controller` report.

    Parameters
    ----------
    report : dict
        The ``report`` that :func:`fit_cap_controller` filled.

    Returns
    -------
    DataFrame
        ``controller``, ``chosen``, the capped-span score and its parts,
        the recovery real / twin / error and the fitted parameters.
    """
    rows = []
    for name, part in report["cap_controller"]["fits"].items():
        s = part["score"]
        rows.append({"controller": name, "chosen": name == report["cap_controller"]["chosen"],
                     "span_score_w": s["score_w"], "mean_rmse_w": s["mean_rmse_w"],
                     "spread_error_w": s["spread_error_w"], "recovery_real_s": s["recovery"].get("real_s"),
                     "recovery_twin_s": s["recovery"].get("twin_s"), "recovery_error": s["recovery"]["error"],
                     **part["physics"]})
    return pd.DataFrame(rows)
