"""Energy from a characterised reading: naive, Yang's good practice, window-aware.

Three estimators of the energy of a run of kernel launches from one power
field of a trace table, so that they can be compared (Yang Fig. 18):

:func:`naive_energy`
    Integrate the reading over the run, as if it were the true power.
:func:`good_practice_energy`
    Yang §V-A: discard launches during the rise time, shift the readings by
    the delay, integrate over the kept launches, divide by their number.
:func:`window_aware_energy`
    Ours: every update publishes the mean power over a known window
    ``[u - delay - window, u - delay]`` (from :class:`BoxcarWindow`), so a
    reading is ``P_out + (P_run - P_out) · f`` where ``f`` is the share of its
    window that overlaps the launches. A least-squares line through the
    readings around the run gives the run's mean power ``P_run`` and its
    standard error, using readings whose windows only partly overlap the run
    (which the other two methods mis-attribute) instead of discarding them.

Plus the bookkeeping the good practice needs: :func:`delag`,
:func:`discard_rise` and :func:`phase_shift_gaps` (Yang's controlled delays
that move the sensor's partial window across the workload).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import schema
from ._coverage import covered_time
from ._series import update_points

__all__ = [
    "EnergyEstimate",
    "delag",
    "discard_rise",
    "good_practice_energy",
    "naive_energy",
    "overlap_fraction",
    "phase_shift_gaps",
    "window_aware_energy",
]


@dataclass(frozen=True)
class EnergyEstimate:
    """Energy of a run with its uncertainty.

    Attributes
    ----------
    energy_j : float
        Energy of all counted launches (joules).
    uncertainty_j : float
        One-sigma uncertainty of ``energy_j`` (NaN where it cannot be told).
    power_w : float
        Mean power during the launches.
    launches : int
        Launches counted.
    n_readings : int
        Sensor updates used.
    """

    energy_j: float
    uncertainty_j: float
    power_w: float
    launches: int
    n_readings: int

    @property
    def energy_per_launch_j(self) -> float:
        return self.energy_j / self.launches if self.launches else float("nan")


def _intervals(intervals) -> np.ndarray:
    iv = np.asarray(intervals, dtype=float)
    if iv.ndim == 1 and iv.size == 2:
        iv = iv[None, :]
    if iv.ndim != 2 or iv.shape[1] != 2 or iv.shape[0] == 0:
        raise ValueError(f"intervals: expected shape (n_launches, 2) of [start_s, end_s], got {iv.shape}")
    if not np.all(np.isfinite(iv)):
        raise ValueError("intervals: has NaN or infinite times")
    if np.any(iv[:, 1] < iv[:, 0]):
        raise ValueError("intervals: a launch ends before it starts")
    return iv[np.argsort(iv[:, 0])]


def _trace_series(trace: pd.DataFrame, power_column, time_column):
    if not isinstance(trace, pd.DataFrame):
        raise ValueError(f"trace: expected a trace table (DataFrame), got {type(trace).__name__}")
    for c in (time_column, power_column):
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing (have {list(trace.columns)})")
    df = trace[[time_column, power_column]].dropna()
    if len(df) < 2:
        raise ValueError(f"trace: column {power_column!r} has fewer than 2 readings")
    t = df[time_column].to_numpy(dtype=float)
    v = df[power_column].to_numpy(dtype=float)
    if np.any(np.diff(t) < 0):
        raise ValueError(f"trace: column {time_column!r} is not sorted")
    return t, v


def overlap_fraction(win_start, win_end, intervals) -> np.ndarray:
    """Share of each window ``[win_start, win_end]`` covered by the launches."""
    iv = _intervals(intervals)
    a = np.asarray(win_start, dtype=float)
    b = np.asarray(win_end, dtype=float)
    cover = covered_time(a, b, iv)  # binary search, not windows x launches
    width = np.maximum(b - a, 1e-12)
    return np.clip(cover / width, 0.0, 1.0)


def delag(trace: pd.DataFrame, delay_s: float, time_column=schema.T_S) -> pd.DataFrame:
    """A copy of ``trace`` with its times moved back by ``delay_s``.

    After this, a reading sits at the time of the activity it reflects
    (Yang §V-A: "shift data to sync with GPU activity").
    """
    if not np.isfinite(delay_s):
        raise ValueError(f"delay_s must be finite, got {delay_s}")
    if time_column not in trace.columns:
        raise ValueError(f"trace: column {time_column!r} is missing (have {list(trace.columns)})")
    out = trace.copy()
    out[time_column] = out[time_column] - float(delay_s)
    return out


def discard_rise(intervals, rise_s: float) -> np.ndarray:
    """Mask of launches that start at least ``rise_s`` after the first one.

    Yang §V-A, good practice 3: repetitions executed during the rise time
    (250 ms for the instant reading, 1250 ms for a 1 s average) are discarded.
    """
    if rise_s < 0:
        raise ValueError(f"rise_s must be >= 0, got {rise_s}")
    iv = _intervals(intervals)
    return iv[:, 0] >= iv[0, 0] + rise_s


def phase_shift_gaps(launches: int, shifts: int = 8, shift_s: float = 0.025) -> np.ndarray:
    """Idle gap after every launch for Yang's phase-shift strategy.

    Yang §V-A case 3 (Fig. 17): when the window covers only part of each
    update period (25 of 100 ms on A100/H100), insert ``shifts`` controlled
    delays of one window length, evenly spaced within the repetitions, so
    the window lands on different parts of the workload.

    Returns
    -------
    ndarray of shape (launches,)
        Seconds of idle after each launch (``shift_s`` after every
        ``launches // shifts``-th launch, 0 elsewhere).
    """
    if launches < 1 or shifts < 0 or shift_s < 0:
        raise ValueError(f"phase_shift_gaps: need launches >= 1, shifts >= 0, shift_s >= 0; "
                         f"got {launches}, {shifts}, {shift_s}")
    gaps = np.zeros(int(launches))
    if shifts == 0:
        return gaps
    every = max(1, int(launches) // int(shifts))
    gaps[every - 1::every] = shift_s
    gaps[-1] = 0.0
    return gaps


def naive_energy(trace: pd.DataFrame, intervals, *, power_column=schema.POWER_INSTANT_W,
                 time_column=schema.T_S) -> EnergyEstimate:
    """Integrate the raw reading over each launch (the naive measurement).

    The reading is held between samples (it is what the sampler saw).
    """
    iv = _intervals(intervals)
    t, v = _trace_series(trace, power_column, time_column)
    e = _held_integral(t, v, iv)
    dur = float(np.sum(iv[:, 1] - iv[:, 0]))
    return EnergyEstimate(e, float("nan"), e / dur if dur > 0 else float("nan"), len(iv),
                          int(np.sum((t >= iv[0, 0]) & (t <= iv[-1, 1]))))


def _held_integral(t, v, iv) -> float:
    """Integral of the zero-order-held samples ``(t, v)`` over the intervals."""
    c = np.concatenate([[0.0], np.cumsum(v[:-1] * np.diff(t))])

    def C(s):
        s = np.asarray(s, dtype=float)
        k = np.clip(np.searchsorted(t, s, side="right") - 1, 0, len(t) - 1)
        return c[k] + v[k] * (s - t[k])

    return float(np.sum(C(iv[:, 1]) - C(iv[:, 0])))


def good_practice_energy(trace: pd.DataFrame, intervals, *, rise_s: float, shift_s: float,
                         power_column=schema.POWER_INSTANT_W,
                         time_column=schema.T_S) -> EnergyEstimate:
    """Yang's good practice: drop the rise, shift by the delay, integrate.

    Parameters
    ----------
    trace : DataFrame
        Trace table covering the launches and at least ``shift_s`` after.
    intervals : array-like of shape (n_launches, 2)
        ``[start_s, end_s]`` of every launch, on the trace's clock.
    rise_s : float
        Launches starting within this time of the first are discarded
        (Yang: 0.25 s for the instant field, 1.25 s for the 1 s average).
    shift_s : float
        Readings are moved back by this much before integrating (Yang shifts
        by the update period when window = update period).

    Returns
    -------
    EnergyEstimate
        Energy of the kept launches; ``launches`` says how many were kept.
    """
    iv = _intervals(intervals)
    keep = discard_rise(iv, rise_s)
    if not keep.any():
        raise ValueError(f"rise_s={rise_s}: every launch falls inside the rise time")
    t, v = _trace_series(trace, power_column, time_column)
    kept = iv[keep]
    e = _held_integral(t - shift_s, v, kept)
    dur = float(np.sum(kept[:, 1] - kept[:, 0]))
    return EnergyEstimate(e, float("nan"), e / dur if dur > 0 else float("nan"),
                          int(keep.sum()), int(np.sum((t >= kept[0, 0]) & (t <= kept[-1, 1]))))


def window_aware_energy(trace: pd.DataFrame, intervals, *, window_s: float, delay_s: float = 0.0,
                        gain: float = 1.0, offset_w: float = 0.0, settle_s: float = 0.0,
                        context_s: float | None = None, gain_uncertainty: float = 0.0,
                        power_column=schema.POWER_INSTANT_W,
                        time_column=schema.T_S) -> EnergyEstimate:
    """Energy of the launches from the readings whose windows overlap them.

    Every update ``u`` of the reading publishes ``gain · mean(P) + offset``
    over ``[u - delay_s - window_s, u - delay_s]``. With ``f`` the share of
    that window covered by the launches, a calibrated reading is modelled as
    ``P_out + (P_run - P_out) · f``; least squares over the updates whose
    windows lie within ``context_s`` of the run gives ``P_run``. Windows that
    overlap the first ``settle_s`` of the run are left out (the GPU's own
    power rise; Yang's discarded rise-time repetitions). The energy is
    ``P_run`` times the launches' total duration.

    Parameters
    ----------
    trace : DataFrame
        Trace table that extends at least ``delay_s + window_s`` plus one
        update period past the last launch (so its last windows are read)
        and, ideally, a few updates before the first (for ``P_out``).
    intervals : array-like of shape (n_launches, 2)
        ``[start_s, end_s]`` of every launch on the trace's clock.
    window_s, delay_s : float
        From :class:`BoxcarWindow` (``window_s_``, ``delay_s_``).
    gain, offset_w : float
        From :class:`SteadyStateGain`; 1 and 0 keep the sensor's scale.
    settle_s : float
        Start of the run left out.
    context_s : float, optional
        How far before and after the run outside readings are used for
        ``P_out``; default ``max(window_s, 0.3)``.
    gain_uncertainty : float
        Relative one-sigma uncertainty of ``gain``, added in quadrature.

    Returns
    -------
    EnergyEstimate
        With the least-squares standard error propagated to the energy.
    """
    if not window_s > 0:
        raise ValueError(f"window_s must be > 0, got {window_s}")
    if not gain > 0:
        raise ValueError(f"gain must be > 0, got {gain}")
    if settle_s < 0:
        raise ValueError(f"settle_s must be >= 0, got {settle_s}")
    iv = _intervals(intervals)
    t, v = _trace_series(trace, power_column, time_column)
    idx = update_points(t, v)
    u = 0.5 * (t[idx - 1] + t[idx])
    val = (v[idx] - offset_w) / gain
    end = u - delay_s
    start = end - window_s
    ctx = max(window_s, 0.3) if context_s is None else float(context_s)
    run0, run1 = iv[0, 0], iv[-1, 1]
    near = (end >= run0 - ctx) & (start <= run1 + ctx)
    if settle_s > 0:
        near &= ~((end > run0) & (start < run0 + settle_s))
    f = overlap_fraction(start[near], end[near], iv)
    y = val[near]
    n_in = int(np.sum(f > 0))
    if n_in == 0:
        raise ValueError(
            "window_aware_energy: no reading's window overlaps the launches; extend the trace "
            f"past the run by delay + window + one update period ({delay_s + window_s:.3f} s + ...)")
    dur = float(np.sum(iv[:, 1] - iv[:, 0]))
    if np.ptp(f) > 1e-6 and f.size >= 2:
        A = np.column_stack([1.0 - f, f])
        coef, *_ = np.linalg.lstsq(A, y, rcond=None)
        p_run = float(coef[1])
        dof = y.size - 2
        cov = np.linalg.pinv(A.T @ A)
        if dof > 0:
            s2 = float(np.sum((A @ coef - y) ** 2) / dof)
            se = float(np.sqrt(max(s2 * cov[1, 1], 0.0)))
        else:
            se = float("nan")
    else:  # every window inside the run (or all with the same overlap)
        p_run = float(np.mean(y) / f.mean())
        se = float(np.std(y, ddof=1) / np.sqrt(y.size)) if y.size > 1 else float("nan")
    rel = np.hypot(se / p_run if p_run else np.nan, gain_uncertainty)
    return EnergyEstimate(p_run * dur, float(rel * p_run * dur), p_run, len(iv), int(y.size))
