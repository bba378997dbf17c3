"""Clocks where a GPU left the regime that DSO eq. 1-2 describe, found in one kernel's sweep.

DSO eq. 2 (``T = t0 + max(α/f_m, β/f_c)``, t0, α, β ≥ 0) allows time to
fall with the core clock at most as ``1/f_c`` and never to rise. Real sweeps
break this at clocks where the GPU changed regime: another P-state at the
lowest clock (time more than doubles between the two lowest clocks), a
memory clock that moved with the core clock (a step in a memory-bound
kernel's plateau), a throttled point (the GPU ran slower than the requested
clock). All three show in the kernel's time, which is what is searched:
such a point is found by its **deleted residual**: the model is
refitted without the point (robust Huber fit, :mod:`~powermodels.models.dvfs_fit`)
and the point's relative miss is compared with a threshold,
``max(min_relative_error, z · noise)``; the worst offender is removed and
the search repeats, so a high-leverage point at the end of the range cannot
hide by pulling the fit towards itself. Power (eq. 1, whose V(f) is one
shape for the whole GPU, so its misses are mostly model error) only helps
to name the kind: a slower point drawing less power was throttled. Nothing is dropped silently: :func:`detect_regimes` returns every
point with its verdict and the caller warns with the clock.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from powermodels.models.dvfs_fit import fit_power, fit_time, power_design

__all__ = ["REGIME_KINDS", "DVFSRegimeWarning", "detect_regimes"]

#: What an excluded point is called, by where it sits and which way it misses.
REGIME_KINDS = ("pstate", "memory_clock", "throttled", "outlier")


class DVFSRegimeWarning(UserWarning):
    """A sweep point was excluded from a DVFS fit because the GPU changed regime there."""


def _time_pred(fc, fm, y, keep, loss):
    t0, a, b = fit_time(fc[keep], fm[keep], y[keep], loss=loss)
    return t0 + np.maximum(a / fm, b / fc)


def _power_pred(fc, fm, y, keep, knee, slope, loss):
    coef = fit_power(fc[keep], fm[keep], y[keep], knee, slope, loss=loss)
    return power_design(fc, fm, knee, slope) @ coef


def _deleted_residuals(fc, fm, y, keep, predict):
    """Relative miss of every kept point by the model fitted without it."""
    out = np.full(len(y), np.nan)
    for i in np.flatnonzero(keep):
        k = keep.copy()
        k[i] = False
        out[i] = y[i] / predict(k)[i] - 1.0
    return out


def _noise(resid, keep):
    r = resid[keep]
    return 1.4826 * float(np.median(np.abs(r - np.median(r)))) if r.size else 0.0


def detect_regimes(core_mhz, mem_mhz, time_s, power_w=None, *, voltage_knee_mhz=None,
                   voltage_slope_per_ghz=None, min_relative_error=0.08, z=6.0,
                   max_excluded_fraction=0.3, min_points=5, loss="huber") -> pd.DataFrame:
    """Flag the sweep points of one kernel that DSO eq. 1-2 cannot describe.

    Parameters
    ----------
    core_mhz, mem_mhz, time_s : array-like of shape (n,)
        The kernel's sweep: clocks (MHz) and kernel time (s).
    power_w : array-like of shape (n,) or None
        Power (W); compared with eq. 1 (fitted without the excluded points)
        when given together with the V(f) shape ``voltage_knee_mhz``,
        ``voltage_slope_per_ghz``, to tell a throttled point.
    min_relative_error : float, default=0.08
        A point is never flagged for missing by less than this (8 %): smaller
        misses are measurement noise or model error, not a regime change.
    z : float, default=6
        A point is flagged when its deleted residual exceeds ``z`` times the
        robust (MAD) scale of the kept points' deleted residuals.
    max_excluded_fraction : float, default=0.3
        At most this share of the points is flagged.
    min_points : int, default=5
        Never leave fewer points than this for the fit.
    loss : {"huber", "squared"}, default="huber"
        Loss of the refits (see :func:`~powermodels.models.dvfs_fit.fit_time`).

    Returns
    -------
    DataFrame
        One row per point in input order: ``excluded`` (bool), ``kind`` (one
        of :data:`REGIME_KINDS` or ""), ``time_miss`` and ``power_miss`` (the
        relative deleted residual, measured/model - 1, of the last search round for kept points, against the final fit for
        excluded ones; ``power_miss`` against the final eq. 1 fit, NaN without power).
    """
    fc = np.asarray(core_mhz, dtype=float)
    fm = np.asarray(mem_mhz, dtype=float)
    t = np.asarray(time_s, dtype=float)
    n = len(t)
    if not (fc.shape == fm.shape == t.shape) or fc.ndim != 1:
        raise ValueError("core_mhz, mem_mhz and time_s must be 1-D of the same length")
    for name, v in (("core_mhz", fc), ("mem_mhz", fm), ("time_s", t)):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be finite and positive")
    use_power = power_w is not None and voltage_knee_mhz is not None and voltage_slope_per_ghz is not None
    p = np.asarray(power_w, dtype=float) if use_power else None
    if use_power and (p.shape != t.shape or not np.all(np.isfinite(p)) or np.any(p <= 0)):
        raise ValueError("power_w must be finite, positive and as long as time_s")

    keep = np.ones(n, dtype=bool)
    max_out = min(int(np.floor(max_excluded_fraction * n)), n - min_points)
    tm = pm = np.full(n, np.nan)
    while True:
        tm = _deleted_residuals(fc, fm, t, keep, lambda k: _time_pred(fc, fm, t, k, loss))
        score = np.abs(tm) / max(min_relative_error, z * _noise(tm, keep))
        score[~keep] = -np.inf
        worst = int(np.argmax(score))
        if (~keep).sum() >= max_out or not score[worst] > 1.0:
            break
        keep[worst] = False
    # excluded points: their miss against the final model (fitted without them)
    tm = np.where(keep, tm, t / _time_pred(fc, fm, t, keep, loss) - 1.0)
    if use_power:
        pm = p / _power_pred(fc, fm, p, keep, voltage_knee_mhz,
                                  voltage_slope_per_ghz, loss) - 1.0

    kind = np.full(n, "", dtype=object)
    order = np.argsort(fc, kind="stable")
    rank = np.empty(n, dtype=int)
    rank[order] = np.arange(n)
    lowest = rank == 0
    for i in np.flatnonzero(~keep):
        # a run of excluded neighbours = the memory clock moved over a clock range
        neighbours = [j for j in np.flatnonzero(~keep) if abs(rank[j] - rank[i]) == 1]
        slower = tm[i] > 0
        if neighbours:
            kind[i] = "memory_clock"
        elif lowest[i] and slower:
            kind[i] = "pstate"
        elif slower or (use_power and pm[i] < 0):
            kind[i] = "throttled"
        else:
            kind[i] = "outlier"
    return pd.DataFrame({"excluded": ~keep, "kind": kind, "time_miss": tm, "power_miss": pm})
