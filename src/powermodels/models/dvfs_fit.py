"""Fitting DSO eq. 1 (power) and eq. 2 (time) to one kernel's clock sweep, robustly.

DSO (§IV-D) fits eq. 1 by linear regression and eq. 2 by piecewise linear
regression. Real sweeps hold points that one least-squares fit cannot
survive (a P-state change at the lowest clock, a throttled run), so both
fits here minimise the **Huber loss of the relative residual**
``(model - y) / y`` by iteratively reweighted non-negative least squares:
a residual beyond ``c = max(huber_scale, 1.5 · 1.4826 · MAD)`` gets weight
``c / |r|``, so its pull grows linearly, not quadratically, and one bad
point cannot dominate. ``loss="squared"`` gives the plain relative least
squares. Relative residuals make the fit scale-free, which is also what the
MAPE that judges it measures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from powermodels.models.voltage import relative_voltage

__all__ = ["fit_power", "fit_time", "fit_voltage_curve", "power_design"]

_IRLS_ITERATIONS = 8
LOSSES = ("huber", "squared")


def power_design(fc, fm, knee, slope):
    """Columns ``(1, V, f_m, V²·f_c)`` of DSO eq. 1."""
    v = relative_voltage(fc, knee, slope)
    return np.column_stack([np.ones_like(fc), v, fm, v**2 * fc])


def _nnls_fit(A, y, keep, sw=None):
    """Non-negative least squares on the kept columns with row weights ``sw``; dropped columns get 0."""
    coef = np.zeros(A.shape[1])
    sub = A[:, keep] if sw is None else A[:, keep] * sw[:, None]
    yw = y if sw is None else y * sw
    scale = np.abs(sub).max(axis=0)
    scale[scale == 0] = 1.0
    c, _ = nnls(sub / scale, yw, maxiter=50 * sub.shape[1] + 100)
    coef[keep] = c / scale
    sse = float(np.sum(((A @ coef - y) if sw is None else (A @ coef - y) * sw) ** 2))
    return coef, sse


def relative_scale(y):
    """|y|, kept away from 0 so that relative residuals stay finite on any input."""
    a = np.abs(np.asarray(y, dtype=float))
    return np.maximum(a, 1e-9 * max(float(a.max(initial=0.0)), 1e-300))


def _huber_rows(pred, y, huber_scale, root_weight):
    """Row weights sqrt(w)/|y| of one IRLS step: Huber weights on the relative residual."""
    den = relative_scale(y)
    r = (pred - y) / den
    mad = 1.4826 * np.median(np.abs(r - np.median(r)))
    c = max(huber_scale, 1.5 * mad)
    w = np.where(np.abs(r) <= c, 1.0, c / np.maximum(np.abs(r), 1e-300))
    return root_weight * np.sqrt(w) / den


def _root_weight(sample_weight, y):
    """sqrt of the row weights (1 without ``sample_weight``); each weight must be ≥ 0 and finite."""
    if sample_weight is None:
        return np.ones(np.shape(y))
    w = np.asarray(sample_weight, dtype=float)
    if w.shape != np.shape(y) or not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise ValueError(f"sample_weight must hold {np.size(y)} finite weights ≥ 0, not all 0")
    return np.sqrt(w)


def _irls(fit_once, y, loss, huber_scale, sample_weight=None):
    """Iteratively reweighted fit: ``fit_once(sw) -> (pred, result)``; ``sample_weight`` scales each row's loss."""
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    root_weight = _root_weight(sample_weight, y)
    sw = root_weight / relative_scale(y)
    pred, result = fit_once(sw)
    if loss == "squared":
        return result
    for _ in range(_IRLS_ITERATIONS):
        new_sw = _huber_rows(pred, y, huber_scale, root_weight)
        if np.allclose(new_sw, sw, rtol=1e-6, atol=0):
            break
        sw = new_sw
        pred, result = fit_once(sw)
    return result


def fit_power(fc, fm, y, knee, slope, *, loss="huber", huber_scale=0.01, sample_weight=None):
    """Fit DSO eq. 1 with non-negative coefficients ``(P0, κ, γ, c)``.

    Columns that are constant in the data are not identifiable beside P0: a
    fixed memory clock puts γ·f_m into P0, clocks all below the knee put κ·V
    there; those coefficients are 0. ``sample_weight`` (one weight ≥ 0 per
    point, default 1) multiplies each point's loss.

    Returns
    -------
    ndarray of shape (4,)
        ``(P0, κ, γ, c)``.
    """
    A = power_design(fc, fm, knee, slope)
    keep = np.array([True, np.ptp(A[:, 1]) > 1e-12, np.ptp(fm) > 1e-9, True])

    def once(sw):
        coef, _ = _nnls_fit(A, y, keep, sw)
        return A @ coef, coef

    return _irls(once, y, loss, huber_scale, sample_weight)


def _line_fits(Z, y, q):
    """Best ``t0 + s·z`` with t0, s ≥ 0 for every row of Z (weights q); returns (sse, t0, s)."""
    S1, Sy, Syy = q.sum(), q @ y, q @ (y * y)
    Sz, Szz, Szy = Z @ q, (Z * Z) @ q, Z @ (q * y)

    def sse(t0, s):
        return Syy - 2 * t0 * Sy - 2 * s * Szy + t0 * t0 * S1 + 2 * t0 * s * Sz + s * s * Szz

    det = S1 * Szz - Sz * Sz
    with np.errstate(divide="ignore", invalid="ignore"):
        s_u = np.where(det > 0, (S1 * Szy - Sz * Sy) / det, -1.0)
        t_u = (Sy - s_u * Sz) / S1
        s_0 = np.where(Szz > 0, np.maximum(Szy / Szz, 0.0), 0.0)  # t0 = 0
    t_1 = np.full_like(Sz, max(Sy / S1, 0.0))                     # s = 0
    cands = [(np.zeros_like(Sz), s_0), (t_1, np.zeros_like(Sz))]
    ok = (s_u >= 0) & (t_u >= 0)
    cands.append((np.where(ok, t_u, 0.0), np.where(ok, s_u, s_0)))
    errs = np.array([sse(t, s) for t, s in cands])
    k = np.argmin(errs, axis=0)
    pick = np.arange(Z.shape[0])
    ts = np.array([c[0] for c in cands])[k, pick]
    ss = np.array([c[1] for c in cands])[k, pick]
    return errs[k, pick], ts, ss


def _time_once(fc, fm, y, sw):
    """Piecewise regression of DSO eq. 2: search the ratio r = α/β, weighted NNLS for the rest.

    The max() switches branch where r = w/u, i.e. at the data's breakpoints;
    between them SSE(r) is smooth, so a grid with the breakpoints plus a
    finer grid around the best suffices. ``r = 0`` is compute-bound
    everywhere (α = 0); memory-bound everywhere (β = 0) is the last row.
    """
    u, w = 1.0 / fm, 1.0 / fc
    q = sw * sw
    bp = np.unique(w / u)
    grid = np.unique(np.concatenate([[0.0], bp, np.geomspace(bp.min() / 2.0, bp.max() * 2.0, 64)]))
    sse, t0, sl = _line_fits(np.maximum(grid[:, None] * u, w), y, q)
    i = int(np.argmin(sse))
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    if grid[i] > 0 and hi > lo:  # r = 0 (compute-bound everywhere) is exact, not refined
        fine = np.linspace(lo, hi, 65)
        f_sse, f_t0, f_sl = _line_fits(np.maximum(fine[:, None] * u, w), y, q)
        j = int(np.argmin(f_sse))
        if f_sse[j] < sse[i] * (1 - 1e-12) - 1e-300:
            grid, sse, t0, sl, i = fine, f_sse, f_t0, f_sl, j
    m_sse, m_t0, m_sl = _line_fits(u[None, :], y, q)  # β = 0
    # A tie goes to β = 0: when no point is compute-bound, any β up to the one
    # that makes the slowest clock compute-bound fits equally well, and which
    # of those the grid returns is floating-point noise (a deleted-residual
    # search then "finds" an 8 % miss at the lowest clock). The tolerance is
    # relative to the signal, so exact synthetic data and real data tie alike.
    tie = 1e-12 * float(q @ (y * y))
    if m_sse[0] <= sse[i] + tie:
        t0v, alpha, beta = float(m_t0[0]), float(m_sl[0]), 0.0
    else:
        t0v, alpha, beta = float(t0[i]), float(grid[i] * sl[i]), float(sl[i])
    return t0v + np.maximum(alpha * u, beta * w), (t0v, alpha, beta)


def fit_time(fc, fm, y, *, loss="huber", huber_scale=0.01, sample_weight=None):
    """Fit DSO eq. 2, ``T = t0 + max(α/f_m, β/f_c)``, with t0, α, β ≥ 0.

    ``sample_weight`` (one weight ≥ 0 per point, default 1) multiplies each point's loss.

    Returns
    -------
    tuple of float
        ``(t0, α, β)`` in s, s·MHz, s·MHz.
    """
    return _irls(lambda sw: _time_once(fc, fm, y, sw), y, loss, huber_scale, sample_weight)


def fit_voltage_curve(core_mhz, mem_mhz, power_w, groups, *, knees=None,
                      slopes=(0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0), loss="squared"):
    """Choose one V(f) shape for a GPU from the power of many kernels.

    V(f) belongs to the GPU, not the kernel, so it is chosen once: for each
    candidate ``(knee, slope)`` DSO eq. 1 is fitted per kernel and the
    relative squared errors are summed over all kernels.

    Parameters
    ----------
    core_mhz, mem_mhz, power_w : array-like of shape (n,)
        Clocks and measured power of every run.
    groups : array-like of shape (n,)
        Kernel of each run.
    knees : array-like or None
        Candidate knees (MHz); default: the distinct core clocks.
    slopes : sequence of float
        Candidate slopes per GHz.
    loss : {"squared", "huber"}, default="squared"
        Loss of the per-kernel fits (see :func:`fit_power`).

    Returns
    -------
    (float, float)
        ``(voltage_knee_mhz, voltage_slope_per_ghz)``.
    """
    fc = np.asarray(core_mhz, dtype=float)
    fm = np.asarray(mem_mhz, dtype=float)
    p = np.asarray(power_w, dtype=float)
    g = np.asarray(groups)
    if not (fc.shape == fm.shape == p.shape == g.shape) or fc.ndim != 1:
        raise ValueError("core_mhz, mem_mhz, power_w and groups must be 1-D of the same length")
    for name, v in (("core_mhz", fc), ("mem_mhz", fm), ("power_w", p)):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be finite and positive")
    knees = np.unique(fc) if knees is None else np.asarray(knees, dtype=float)
    idx = [np.flatnonzero(g == k) for k in pd.unique(g)]
    best = None
    for knee in knees:
        for slope in slopes:
            total = 0.0
            for i in idx:
                coef = fit_power(fc[i], fm[i], p[i], knee, slope, loss=loss)
                pred = power_design(fc[i], fm[i], knee, slope) @ coef
                total += float(np.sum(((pred - p[i]) / p[i]) ** 2))
            if best is None or total < best[0]:
                best = (total, float(knee), float(slope))
    return best[1], best[2]
