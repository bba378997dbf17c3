"""FinGraV's time binning under a boxcar-averaging sensor: a profile by least squares.

FinGraV (§IV-B steps 6–8) places each ~1 ms log of many runs at its time of
interest inside the kernel and bins them. NVIDIA's instant reading is not a
1 ms log: every update publishes the mean power over a window ``w`` (~25 ms
of each 100 ms, :class:`~powermodels.sensor.window.BoxcarWindow`), so one
reading of a 2 ms kernel is mostly idle. The readings still pin the profile
down when many runs start at random offsets to the updates: a reading ``j``
whose window ``[u_j − d − w, u_j − d]`` covers part of run ``k`` is

    R_j = b + (1/w) · Σ_bins x_i · |window_j ∩ [s_k + τ_i, s_k + τ_i + Δ]|

with ``b`` the baseline, ``x_i`` the power above it in time bin ``i``
(width ``Δ``, TOI ``τ_i`` from the run start ``s_k``) — linear in
``(b, x)``. The window edges of many readings fall at every TOI, so the
binned profile is the regularised least-squares solution (a second-difference
penalty keeps bins that few edges resolve smooth). Runs are kept only in the
most populated run-length bin (FinGraV's golden runs, :func:`~powermodels.sensor.fingrav.golden_runs`),
and a reading whose window touches any other run is left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ._series import update_points
from .fingrav import golden_runs

__all__ = ["window_profile"]


def window_profile(trace: pd.DataFrame, runs: np.ndarray, *, window_s: float, delay_s: float,
                   bin_s: float, pre_s: float = 0.0, post_s: float = 0.0,
                   power_column=schema.POWER_INSTANT_W, smooth: float = 1e-3,
                   margin: float | None = None,
                   baseline_w: float | None = None) -> tuple[pd.DataFrame, float, dict]:
    """Fine-grain power profile of a repeated run from a boxcar sensor's readings.

    Parameters
    ----------
    trace : DataFrame
        One trace (:data:`schema.T_S`, the reading) covering all runs, times
        on the host clock the runs are given on.
    runs : array of shape (n_runs, 2)
        ``[start_s, end_s]`` of every run (first execution's start, last's end).
    window_s, delay_s : float
        The reading's boxcar window and delay (:class:`BoxcarWindow`).
    bin_s : float
        Profile bin width.
    pre_s, post_s : float
        Profile also this long before the run start and after the golden run
        length (the power's ramp and tail).
    smooth : float
        Weight of the second-difference penalty, relative to the mean
        squared column norm of the design matrix.
    margin : float, optional
        Run-length binning margin of :func:`golden_runs`.
    baseline_w : float, optional
        The idle power, measured apart from the runs (e.g.
        :func:`~powermodels.sensor.fingrav_level.counter_baseline` over an idle
        segment before them). None fits it as a constant with the bins — which
        then takes up whatever power lingers after the runs beyond ``post_s``
        (on a real H100 2–5 W above the idle before the session).

    Returns
    -------
    profile : DataFrame
        :data:`schema.TOI_S` (bin centre from the run start), :data:`schema.POWER_W`
        (baseline + bin power), :data:`schema.POWER_SE_W` (its standard error
        from the residual scatter: neighbouring bins are strongly
        anti-correlated, so a wiggle within a few standard errors is noise) and
        :data:`schema.REPEAT` (readings whose window covers the bin).
    baseline_w : float
    info : dict
        ``golden`` (runs kept), ``readings`` (readings used), ``run_s``
        (golden run length), ``rms_residual_w``.
    """
    if not (window_s > 0 and bin_s > 0):
        raise ValueError(f"window_s and bin_s must be > 0, got {window_s}, {bin_s}")
    iv = np.asarray(runs, dtype=float).reshape(-1, 2)
    if iv.shape[0] < 3:
        raise ValueError(f"runs: need three or more runs, got {iv.shape[0]}")
    for c in (schema.T_S, power_column):
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing")
    iv = iv[np.argsort(iv[:, 0])]
    golden = golden_runs(iv[:, 1] - iv[:, 0], margin)
    run_s = float(np.median(iv[golden, 1] - iv[golden, 0]))
    tau = np.arange(-pre_s, run_s + post_s, bin_s)
    g = trace[[schema.T_S, power_column]].dropna()
    t = g[schema.T_S].to_numpy(dtype=float)
    v = g[power_column].to_numpy(dtype=float)
    idx = update_points(t, v)
    u, r = 0.5 * (t[idx - 1] + t[idx]), v[idx]
    hi_w, lo_w = u - delay_s, u - delay_s - window_s
    spans = np.column_stack([iv[:, 0] - pre_s, iv[:, 0] + run_s + post_s])
    spans[~golden] = iv[~golden]  # another run's load must not enter a kept reading
    spans[~golden, 1] += post_s
    rows, keep = [], []
    for j in range(u.size):
        k = np.flatnonzero((spans[:, 0] < hi_w[j]) & (spans[:, 1] > lo_w[j]))
        if k.size and not golden[k].all():
            continue
        a = np.zeros(tau.size)
        for kk in k:
            lo = iv[kk, 0] + tau
            a += np.clip(np.minimum(hi_w[j], lo + bin_s) - np.maximum(lo_w[j], lo), 0.0, None)
        rows.append(a / window_s)
        keep.append(j)
    hits = int(sum(bool(a.any()) for a in rows))  # readings whose window covers a run
    if hits < tau.size // 4 + 2:
        raise ValueError(f"window_profile: only {hits} readings cover a run, for {tau.size} bins; "
                         "record more runs")
    fit_base = baseline_w is None
    bins = np.asarray(rows)
    A = np.column_stack([np.ones(len(keep)), bins]) if fit_base else bins
    y = r[keep] - (0.0 if fit_base else float(baseline_w))
    nb = 1 if fit_base else 0
    D = np.diff(np.eye(tau.size), 2, axis=0)
    lam = smooth * float(np.mean(np.sum(A[:, nb:] ** 2, axis=0)))
    gram = A.T @ A
    M = gram.copy()
    M[nb:, nb:] += lam * D.T @ D
    sol = np.linalg.lstsq(M, A.T @ y, rcond=None)[0]
    base = float(sol[0]) if fit_base else float(baseline_w)
    x = sol[nb:]
    resid = A @ sol - y
    # sandwich covariance of the penalised solution: σ² M⁻¹ AᵀA M⁻¹
    sigma2 = float(np.sum(resid ** 2) / max(len(y) - A.shape[1], 1))
    Minv = np.linalg.pinv(M)
    cov = sigma2 * Minv @ gram @ Minv
    if fit_base:  # a bin's power is base + x_i
        var = np.diag(cov)[1:] + cov[0, 0] + 2 * cov[0, 1:]
    else:
        var = np.diag(cov)
    covered = (bins > 0).sum(axis=0)
    prof = pd.DataFrame({schema.TOI_S: tau + bin_s / 2, schema.POWER_W: base + x,
                         schema.POWER_SE_W: np.sqrt(np.clip(var, 0.0, None)),
                         schema.REPEAT: covered})
    info = {"golden": int(golden.sum()), "runs": int(iv.shape[0]), "readings": hits,
            "run_s": run_s, "rms_residual_w": float(np.sqrt(np.mean(resid ** 2)))}
    return prof, base, info
