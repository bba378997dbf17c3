"""The capped start's mean shape in a recording: what a twin's cap controller is fitted and scored on.

Single capped starts from idle scatter: ten on one H100 read 0.2–24 W of
overshoot and 0.0–5.6 s of settling (:func:`powermodels.twin.metrics.cap_starts`).
Their mean over many starts does not: on two H100 and two H200 boards the
NVML instant power above each start's settled power is one curve — a spike as
the clock falls from its top, a plateau some 30 W above the settled power, a
~100 ms dip of ~120 W about 0.95 s in and echoes of it every ~0.95 s, each about
half the last (docs/twin.md, session 13). :func:`cap_start_profile` gives that
curve, :func:`cap_start_window_means` the energy counter's 1 s means that the
issue's overshoot and settling rows read one start at a time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import schema
from .recording import Recording
from .twin.metrics import cap_starts, energy_between, reading_series, series_entries

__all__ = ["cap_start_profile", "cap_start_window_means"]


def cap_start_profile(rec: Recording, workload: str, *, bin_s: float = 0.05, span_s: float = 6.0,
                      steady_from_s: float = 5.0) -> pd.DataFrame:
    """The capped starts' mean shape: NVML instant power above each start's settled power, in time bins.

    The mean of 8–14 starts averages their scatter out (module docstring); the
    cap controller's fit (``benchmarks/twin_cap_profile_fit.py``) is scored on it.

    Parameters
    ----------
    rec : Recording
        A recording with a trace and one or more capped ``series`` of ``workload``.
    workload : str
    bin_s : float, default=0.05
        Width of the time bins (s after each start).
    span_s : float, default=6.0
        Seconds after each start the profile covers.
    steady_from_s : float, default=5.0
        Each start's settled power is its counter mean from here to its end (as :func:`~powermodels.twin.metrics.cap_overshoot`).

    Returns
    -------
    pandas.DataFrame
        One row per bin: ``t_s`` (bin start after the start), ``power_w`` (mean over
        starts of the instant reading minus the start's settled power) and ``starts``
        (starts with a reading in the bin).
    """
    if not rec.has_trace:
        raise ValueError(f"recording {rec.name}: no trace; the start profile reads the instant power")
    starts = _starts(rec, workload, span_s, steady_from_s, "the profile")
    n_bins = round(span_s / bin_s)
    # the reading as a poller saw it every bin_s / 10 (the last value at or before each time): a full-rate
    # real trace and a twin trace kept only where a value changed read alike
    grid = (np.arange(n_bins * 10) + 0.5) * bin_s / 10.0
    total, count = np.zeros(n_bins), np.zeros(n_bins)
    for t0, settled in starts:
        p = reading_series(rec, schema.POWER_INSTANT_W, t0 + grid).reshape(n_bins, 10)
        have = np.isfinite(p).all(axis=1)
        total[have] += p[have].mean(axis=1) - settled  # each start weighs the same in every bin
        count[have] += 1
    with np.errstate(invalid="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return pd.DataFrame({schema.T_S: np.arange(n_bins) * bin_s, schema.POWER_W: mean, "starts": count.astype(int)})


def cap_start_window_means(rec: Recording, workload: str, *, step_s: float = 0.1, span_s: float = 7.0,
                           steady_from_s: float = 5.0) -> pd.DataFrame:
    """The capped starts' mean energy-counter 1 s mean above each start's settled power, window by window.

    The curve :func:`~powermodels.twin.metrics.cap_overshoot` reads one start from (its first value is the
    overshoot; where it last leaves ±1 % gives the settling), averaged over the
    starts. Unlike :func:`cap_start_profile` it sees every joule: a start's
    first ~0.1 s, which the 100 ms instant reading barely samples, is in it.

    Returns
    -------
    pandas.DataFrame
        One row per window: ``t_s`` (window end after the start, 1 s to
        ``span_s``), ``power_w`` (mean over starts of the window's mean power
        minus the start's settled power) and ``starts``.
    """
    ends = np.arange(1.0, span_s + 1e-9, step_s)
    curves = []
    for t0, settled in _starts(rec, workload, span_s, steady_from_s, "the window-mean curve"):
        curves.append(energy_between(rec, t0 + ends - 1.0, t0 + ends) - settled)
    return pd.DataFrame({schema.T_S: ends, schema.POWER_W: np.mean(curves, axis=0), "starts": len(curves)})


def _starts(rec: Recording, workload: str, span_s: float, steady_from_s: float, what: str):
    """Each capped start of ``workload``: its start time and settled power, as the rows read them.

    The settled power is :func:`~powermodels.twin.metrics.cap_starts`' own (the counter's mean from
    ``steady_from_s`` to the series' end), so a curve and the overshoot rows share one definition.
    """
    rows = cap_starts(rec, workload, steady_from_s=steady_from_s)
    if rows.empty:
        raise ValueError(f"recording {rec.name}: no {workload!r} series to profile")
    ph = rec.phases.reset_index(drop=True)
    for i, t0 in zip(series_entries(rec, workload), rows[schema.T0_S], strict=True):
        lasts = float(ph[schema.T1_S].iloc[i]) - t0
        if lasts < span_s:
            raise ValueError(f"recording {rec.name}: {workload!r} series at {t0:.1f} s lasts {lasts:.1f} s; "
                             f"{what} needs {span_s:g} s")
    return list(zip(rows[schema.T0_S].to_numpy(float), rows[schema.SETTLED_W].to_numpy(float), strict=True))
