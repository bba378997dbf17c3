"""Fit the twin's power-cap controller: clock recovery and the gains of the windowed-mean cap.

Two parts of :func:`~powermodels.twin.fit.fit_twin`:

* :func:`fit_recovery` — after a power-capped load stops, the clock climbs
  back. A clock-reference workload (time ∝ 1/clock) gives the real clock of
  every launch in the bursts after cap loads; their median trajectory is an
  onset delay ``d`` and a climb at rate ``r`` up to the top clock.
* :func:`fit_cap_gains` — the capped load's power swings around the limit
  while its 1 s mean holds it (the H100's ±100 W swings with a ~1 s period).
  For each candidate (proportional and integral gain on the 1 s window
  error, and the share of the power leaving the window allowed again),
  the twin replays the recording's capped spans (the longest
  ``pressure`` entries and capped ``series``, with the 1.5 s before each);
  the score is the RMS difference of the 1 s mean power (every 0.1 s) plus
  the difference of the spread of the 100 ms power, real vs twin. The
  candidate with the lowest score wins. What the settled 1 s mean holds
  (``cap_offset_w`` from the limit) is the median of the spans' 1 s means
  from 2 s on. Held-out spans are never scored.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..recording import Recording
from . import metrics
from .replay import replay

__all__ = ["CAP_GAIN_GRID", "capped_clock_reading", "capped_entries_before_series", "capped_spans", "capped_workload", "fit_cap_gains", "fit_capped_clock", "fit_recovery", "replay_spans",
           "scaled_core", "settled_cap_power", "settled_capped_series", "span_score"]

#: candidates of (cap_proportional, cap_gain_per_s, cap_repeat) tried by :func:`fit_cap_gains`
CAP_GAIN_GRID = tuple(itertools.product((10.0, 100.0, 1000.0), (0.0, 4.0), (0.0, 1.0)))
#: the controller fields a candidate sets, in the order of a :data:`CAP_GAIN_GRID` entry
GAIN_FIELDS = ("cap_proportional", "cap_gain_per_s", "cap_repeat")
#: seconds replayed before each capped span (the window fills with what ran before it)
LEAD_S = 1.5
#: seconds of each capped span scored (the start, where the controller acts)
SPAN_S = 5.0
#: seconds into a capped series from which its clock counts as settled (the first swings are over)
SETTLE_S = 2.0


def fit_recovery(clocks: pd.DataFrame, f_max: float, *, period_s: float = 0.0, recoveries=None,
                 target_mhz: float = 1950.0, report: dict | None = None) -> tuple[float, float]:
    """Onset delay (s) and climb rate (MHz/s) of the clock's recovery after cap loads.

    Parameters
    ----------
    clocks : DataFrame
        The clock-reference workload's launches in the bursts right after a
        cap load: ``since_s`` (launch start from the burst's start) and
        ``sm_clock_mhz`` (:func:`~powermodels.twin.metrics.implied_clock`).
    f_max : float
        Top clock (MHz).
    period_s : float, default=0
        The controller's clock period: half of it (the mean wait for the
        first step, which the twin has too) is taken off the onset.
    recoveries : DataFrame, optional
        :func:`~powermodels.twin.metrics.clock_recovery` rows of the same
        bursts: where given, the rate is the median over bursts of
        ``(target − start_mhz) / (real_s − d − period/2)`` (the climb that
        reaches the target when the real one did; the real climb is fast at
        first and slower near the top, which one rate cannot follow).
    target_mhz : float, default=1950
    report : dict, optional
        Gets ``recovery`` (bins used, onset, delay, rate, residual).

    Returns
    -------
    (delay_s, rate_mhz_per_s)
        The median clock in 10 ms bins of ``since_s`` (first 0.3 s) is
        fitted with ``f(t) = min(f_top, f_0 + r·max(t − d, 0))`` (``f_0`` the
        first bin, ``f_top`` the median of the last 0.1 s, ``d`` on a 1 ms
        grid, ``r`` by least squares): ``d`` is the onset. ``(0, nan)`` with
        fewer than 5 bins.
    """
    c = clocks.loc[clocks[schema.SINCE_S] < 0.3]
    k = np.floor(c[schema.SINCE_S].to_numpy(float) / 0.01).astype(int)
    med = pd.Series(c[schema.SM_CLOCK_MHZ].to_numpy(float)).groupby(k).median()
    if len(med) < 5:
        return 0.0, float("nan")
    t = (med.index.to_numpy(float) + 0.5) * 0.01
    f = med.to_numpy(float)
    f0 = float(f[0])
    f_top = float(min(np.median(f[t >= 0.2]) if (t >= 0.2).any() else f_max, f_max))
    best = None
    for d in np.arange(0.0, 0.1, 0.001):
        x = np.clip(t - d, 0.0, None)
        climbing = f0 + 1.0 < f_top
        if not climbing:
            break
        rise = f < f_top - 1.0
        if rise.sum() < 2 or not np.any(x[rise] > 0):
            continue
        r = float(np.sum(x[rise] * (f[rise] - f0)) / np.sum(x[rise] ** 2))
        if r <= 0:
            continue
        resid = np.minimum(f_top, f0 + r * x) - f
        sse = float(np.sum(resid ** 2))
        if best is None or sse < best[0]:
            best = (sse, float(d), r)
    if best is None:
        return 0.0, float("nan")
    sse, d, rate = best
    delay = float(max(d - period_s / 2.0, 0.0))
    trajectory_rate, bursts = rate, 0
    if recoveries is not None:
        ok = recoveries.loc[np.isfinite(recoveries["real_s"]) & (recoveries["start_mhz"] < target_mhz - 30.0)]
        climb = ok["real_s"].to_numpy(float) - delay - period_s / 2.0
        good = climb > 0
        if good.sum() >= 3:
            bursts = int(good.sum())
            rate = float(np.median((target_mhz - ok["start_mhz"].to_numpy(float)[good]) / climb[good]))
    if report is not None:
        report["recovery"] = {"bins": int(t.size), "launches": int(len(c)), "start_mhz": f0, "top_mhz": f_top,
                              "onset_s": d, "delay_s": delay, "trajectory_rate_mhz_per_s": trajectory_rate,
                              "rmse_mhz": float(np.sqrt(sse / t.size)), "bursts_timed": bursts,
                              "rate_mhz_per_s": rate, "target_mhz": target_mhz}
    return delay, rate


def capped_spans(rec: Recording, holdout=(), *, limit: int = 8) -> list[tuple[float, float]]:
    """The recording's capped spans to score: the longest ``pressure`` entries, capped ``series``.

    A span is ``(t0, t0 + min(duration, SPAN_S))``; spans whose replay
    window touches a held-out span are left out.
    """
    ph = rec.phases
    dur = ph[schema.T1_S] - ph[schema.T0_S]
    capped_series = [w for w in ph.loc[ph[schema.PHASE_KIND] == "series", schema.WORKLOAD]
                     if w in set(ph.loc[ph[schema.PHASE_KIND] == "pressure", schema.WORKLOAD])]
    sel = ((ph[schema.PHASE_KIND] == "pressure") & (dur >= 1.5)) \
        | ((ph[schema.PHASE_KIND] == "series") & ph[schema.WORKLOAD].isin(capped_series))
    rows = ph.loc[sel].assign(dur=dur[sel]).sort_values("dur", ascending=False)
    spans = []
    for t0, d in zip(rows[schema.T0_S], rows["dur"]):
        a, b = float(t0) - LEAD_S, float(t0) + min(float(d), SPAN_S)
        if all(b <= lo or a >= hi for lo, hi in holdout):
            spans.append((float(t0), b))
        if len(spans) >= limit:
            break
    return sorted(spans)


def capped_entries_before_series(rec: Recording) -> list[tuple[float, float]]:
    """The capped spans of :func:`capped_spans` that end before the recording's first ``series``.

    Every series is held out, so a calibration read from these spans leaves the warm-up rows scored on the
    series out of sample (a raw recording's natural part: its ``pressure`` entries of 1.5 s or more).
    """
    series = rec.phase_rows(kind="series")
    held_out = list(zip(series[schema.T0_S].astype(float), series[schema.T1_S].astype(float), strict=True))
    first = min((a for a, _ in held_out), default=np.inf)
    return [(a, b) for a, b in capped_spans(rec, held_out) if b <= first]


def capped_workload(rec: Recording, spans) -> str:
    """The workload that ran in most of the capped ``pressure`` entries starting at ``spans``' starts.

    Parameters
    ----------
    rec : Recording
    spans : sequence of (t0_s, t1_s)
        Capped spans (:func:`capped_entries_before_series`), not empty.

    Returns
    -------
    str
    """
    pressure = rec.phase_rows(kind="pressure")
    starts = pressure[schema.T0_S].astype(float).isin([a for a, _ in spans])
    return str(pressure.loc[starts, schema.WORKLOAD].mode().iloc[0])


def _segment(rec: Recording, t0: float, t1: float) -> pd.DataFrame:
    """The schedule in ``[t0 − LEAD_S, t1 + 0.3]``, cut to it and shifted to start at 0.2 s.

    It runs 0.3 s past the scored span so that the span's last counter
    interval is not cut short by the end of the replay.
    """
    ph = rec.phases
    a = t0 - LEAD_S
    t1 = t1 + 0.3
    seg = ph.loc[(ph[schema.T1_S] > a) & (ph[schema.T0_S] < t1)].copy()
    seg[schema.T0_S] = seg[schema.T0_S].clip(lower=a) - a + 0.2
    seg[schema.T1_S] = seg[schema.T1_S].clip(upper=t1) - a + 0.2
    return seg.reset_index(drop=True)


def _span_powers(rec: Recording, t0: float, t1: float) -> tuple[np.ndarray, np.ndarray]:
    """1 s mean power every 0.1 s from ``t0`` (over [t − 1, t]), and the 100 ms powers, to ``t1``."""
    g = t0 + np.arange(0.0, t1 - t0 - 0.1 + 1e-9, 0.1)
    p100 = metrics.energy_between(rec, g, g + 0.1) / 0.1
    gm = g[g >= t0 + 0.3]
    p1s = metrics.energy_between(rec, gm - 1.0, gm)
    return p1s, p100


def fit_cap_gains(preset, rec: Recording, holdout=(), *, grid=CAP_GAIN_GRID, report: dict | None = None):
    """The preset with the cap gains that best reproduce the recording's capped spans.

    Parameters
    ----------
    preset : TwinPreset
        Everything else fitted (workloads, thermal network, headroom).
    rec : Recording
    holdout : sequence of (t0_s, t1_s)
        Spans that are not scored.
    grid : sequence of (cap_proportional, cap_gain_per_s, cap_repeat)
    report : dict, optional
        Gets ``cap_gains`` (each candidate's score, the spans, the choice).

    Returns
    -------
    TwinPreset
        ``preset`` unchanged when the recording has no capped span to score.
    """
    spans = capped_spans(rec, holdout)
    if not spans or preset.physics.cap_window_s <= 0:
        if report is not None:
            report["cap_gains"] = {"spans": 0, "chosen": None, "why": "no capped span outside the held-out data"}
        return preset
    real = [_span_powers(rec, a, b) for a, b in spans]
    settled = settled_cap_power(rec, spans, real)
    offset = float(settled - preset.physics.power_limit_w) if np.isfinite(settled) else 0.0
    preset = replace(preset, physics=replace(preset.physics, cap_offset_w=offset))
    temps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - LEAD_S])[0]) for a, _ in spans]
    scores = []
    for kp, ki, rho in grid:
        twin = replace(preset, physics=replace(preset.physics, cap_proportional=float(kp),
                                               cap_gain_per_s=float(ki), cap_repeat=float(rho)))
        s = span_score(twin, rec, spans, real, temps)
        scores.append({"cap_proportional": kp, "cap_gain_per_s": ki, "cap_repeat": rho, **s})
    best = min(scores, key=lambda s: s["score_w"])
    if report is not None:
        report["cap_gains"] = {"spans": [[round(a, 3), round(b, 3)] for a, b in spans], "candidates": scores,
                               "cap_offset_w": offset,
                               "chosen": {k: best[k] for k in GAIN_FIELDS}}
    return replace(preset, physics=replace(preset.physics, **{k: float(best[k]) for k in GAIN_FIELDS}))


def settled_cap_power(rec: Recording, spans, powers=None) -> float:
    """What the controller holds the energy counter's 1 s mean power at once settled over ``spans`` (W).

    The median, over the spans, of the 1 s mean power every 0.1 s from 1.7 s into each (the window then
    covers 0.7–1.7 s and later: past the start's overshoot), as :func:`fit_cap_gains` sets ``cap_offset_w``.

    Parameters
    ----------
    rec : Recording
    spans : sequence of (t0_s, t1_s)
        Capped spans (:func:`capped_spans`).
    powers : list, optional
        The spans' powers already read (``_span_powers``), to read them once.

    Returns
    -------
    float
        NaN with fewer than five 1 s means.
    """
    powers = [_span_powers(rec, a, b) for a, b in spans] if powers is None else powers
    settled = np.concatenate([p1s[17:] for p1s, _ in powers]) if powers else np.array([])
    return float(np.median(settled)) if settled.size >= 5 else float("nan")


def span_score(preset, rec: Recording, spans, real=None, temps=None) -> dict:
    """How well ``preset`` replays ``rec``'s capped ``spans``: the gain search's objective.

    Parameters
    ----------
    preset : TwinPreset
    rec : Recording
    spans : sequence of (t0_s, t1_s)
        From :func:`capped_spans`.
    real, temps : list, optional
        The real spans' powers (:func:`_span_powers`) and start temperatures (computed when not given).

    Returns
    -------
    dict
        ``score_w`` (RMS error of the 1 s mean power every 0.1 s plus the
        mean error of the 100 ms power's spread, W), ``mean_rmse_w``,
        ``spread_error_w``.
    """
    if real is None:
        real = [_span_powers(rec, a, b) for a, b in spans]
    if temps is None:
        temps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - LEAD_S])[0]) for a, _ in spans]
    m_err, s_err = [], []
    for (a, b), (p1s, p100), temp in zip(spans, real, temps):
        rep = replay(_segment(rec, a, b), preset, start_temperature_c=temp)
        q1s, q100 = _span_powers(rep, 0.2 + LEAD_S, 0.2 + LEAD_S + (b - a))
        n = min(p1s.size, q1s.size)
        m_err.append(q1s[:n] - p1s[:n])
        s_err.append(float(np.std(q100)) - float(np.std(p100)))
    rmse = float(np.sqrt(np.mean(np.concatenate(m_err) ** 2)))
    return {"score_w": rmse + abs(float(np.mean(s_err))), "mean_rmse_w": rmse,
            "spread_error_w": float(np.mean(s_err))}


def replay_spans(preset, rec: Recording, spans, temps):
    """The twin's replay of each span (with its lead), shifted so that the span starts at 0.2 s + LEAD_S."""
    return [replay(_segment(rec, a, b), preset, start_temperature_c=temp) for (a, b), temp in zip(spans, temps)]


def capped_clock_reading(recs, starts, durations, from_s: float = 1.0) -> float:
    """Mean NVML clock reading (MHz) from ``from_s`` into each span to its end, over all spans.

    Parameters
    ----------
    recs : sequence of Recording
        The recording of each span (the same one repeated, or each span's own replay).
    starts, durations : sequence of float
        Each span's start in its recording and its length (s).
    from_s : float, default=1.0
        Seconds skipped at each span's start (the controller's first swing).

    Returns
    -------
    float
        NaN where no span has a reading in it.
    """
    values = []
    for rec, a, d in zip(recs, starts, durations, strict=True):
        t = a + np.arange(from_s, d, 0.02)
        values.append(metrics.reading_series(rec, schema.SM_CLOCK_MHZ, t))
    return float(np.mean(np.concatenate(values))) if values else float("nan")


def settled_capped_series(rec: Recording, holdout=(), *, settle_s: float = SETTLE_S,
                          min_settled_s: float = 3.0) -> list[tuple[float, float]]:
    """The capped ``series`` entries long enough to have a settled part: ``(t0, t1)`` each.

    A series counts when NVML reported the power cap in it
    (:func:`~powermodels.twin.metrics.capped_series`) and it runs at least
    ``settle_s + min_settled_s``; series that overlap a held-out span are
    left out.
    """
    ph = rec.phase_rows(kind="series")
    capped = set(metrics.capped_series(rec))
    out = []
    for w, t0, t1 in zip(ph[schema.WORKLOAD], ph[schema.T0_S], ph[schema.T1_S], strict=True):
        a, b = float(t0), float(t1)
        if w in capped and b - a >= settle_s + min_settled_s and all(b <= lo or a - LEAD_S >= hi
                                                                       for lo, hi in holdout):
            out.append((a, b))
    return out


def fit_capped_clock(preset, rec: Recording, holdout=(), *, window: str = "spans", iterations: int = 4,
                     tolerance_mhz: float = 3.0, report: dict | None = None, target_mhz: float | None = None):
    """The preset with the core coefficient that gives the real clock under the power cap.

    A capped load's clock is where its power meets what the controller
    allows. The core coefficient is scaled until the twin, replaying the
    recording's capped load, reads the same mean SM clock (its NVML reading)
    as the real board did. The other workloads' activities are divided by the
    same factor, so their power at the top clock (what they were fitted to)
    stays as fitted.

    Parameters
    ----------
    window : {"spans", "settled"}, default="spans"
        Which clock is matched. ``"spans"``: from 1 s into each of the
        capped spans (:func:`capped_spans`: the longest ``pressure`` entries
        and the first :data:`SPAN_S` of capped series), where the controller's
        first swings dominate. ``"settled"``: from :data:`SETTLE_S` into each
        capped series to its end (:func:`settled_capped_series`), the clock a
        long capped load runs at and what its energy per launch follows. On
        the raw H200 recording the two differ: the ``"spans"`` fit matched
        its spans within 2 MHz but ran a 25 s capped series ~30 MHz (2 %)
        above the real clock (docs/twin.md, session 16). ``"settled"`` falls
        back to ``"spans"`` when the recording has no capped series long
        enough.
    target_mhz : float, optional
        The NVML clock reading the twin's is brought to over that window;
        None: the recording's own reading there. A board calibration that
        must leave the series held out reads its target elsewhere (e.g.
        :func:`~powermodels.board_calibration.calibrate.capped_clock_before_series`).

    Returns
    -------
    TwinPreset
        ``preset`` unchanged when there is no capped span to use.
    """
    if window not in ("spans", "settled"):
        raise ValueError(f"window must be 'spans' or 'settled', got {window!r}")
    if preset.physics.cap_window_s <= 0:
        return preset
    spans, from_s = capped_spans(rec, holdout), 1.0
    if window == "settled":
        series = settled_capped_series(rec, holdout)
        if series:
            spans, from_s = series, SETTLE_S
        else:
            window = "spans"
    if not spans:
        return preset
    temps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - LEAD_S])[0]) for a, _ in spans]
    dur = [b - a for a, b in spans]
    target = capped_clock_reading([rec] * len(spans), [a for a, _ in spans], dur, from_s) if target_mhz is None \
        else float(target_mhz)
    steps = []
    scale_total = 1.0
    twin = preset
    for _ in range(iterations):
        reps = replay_spans(twin, rec, spans, temps)
        got = capped_clock_reading(reps, [0.2 + LEAD_S] * len(spans), dur, from_s)
        steps.append({"core_w_per_ghz": twin.physics.core_w_per_ghz, "twin_clock_mhz": got})
        if not np.isfinite(got) or abs(got - target) <= tolerance_mhz:
            break
        # capped: the core power ~ f·V(f)² at the clock the cap allows, about f^2.5 near 1.4 GHz
        scale = float(np.clip((got / target) ** 2.5, 0.8, 1.25))
        scale_total *= scale
        twin = scaled_core(twin, scale)
    if report is not None:
        report["capped_clock"] = {"window": window, "real_reading_mhz": target, "iterations": steps,
                                  "core_scale": scale_total,
                                  "core_w_per_ghz": twin.physics.core_w_per_ghz}
    return twin


def scaled_core(preset, scale: float):
    """Core coefficient × ``scale``; the uncapped workloads' activities ÷ ``scale`` (their power kept)."""
    physics = replace(preset.physics, core_w_per_ghz=preset.physics.core_w_per_ghz * scale)
    workloads = {}
    for name, tw in preset.workloads.items():
        w = tw.workload
        if w.activity < 1.0:
            w = replace(w, activity=float(np.clip(w.activity / scale, 0.0, 1.0)))
        workloads[name] = replace(tw, workload=w)
    return replace(preset, physics=physics, workloads=workloads)
