"""Batched bounded least squares for the small physical curves (thesis eq. 4.1 and 4.5).

Both curves are *linear* in two of their four parameters once the other two
are fixed: eq. 4.1 ``P = p0 + a·f·V(f; knee, slope)²`` is linear in
``(p0, a)``; eq. 4.5 ``T = a/(1+b f) + c/(1+d f)`` is linear in ``(a, c)``.
So every fit here is

1. a grid over the two nonlinear parameters, solving the 2×2 linear least
   squares in closed form at each grid point (a deterministic multi-start that
   never lands in a bad local minimum of the linear part), then
2. a projected Levenberg–Marquardt refinement of all four parameters inside
   box bounds.

Everything is vectorised over *groups*: arrays have shape ``(G, n)`` with a
0/1 mask for groups with fewer than ``n`` points, so one call fits thousands
of configurations at once. Frequencies are scaled per group to ``x = f / f_max``
and targets to ``y / y_max`` so the same damping and tolerances work for MHz
and watts alike; the callers convert the parameters back to physical units.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GAP_FACTOR", "fit_power_batch", "fit_rational_batch", "knee_gaps", "pad_groups", "power_curve",
           "rational_curve"]


# --------------------------------------------------------------------------
# Data layout
# --------------------------------------------------------------------------


def pad_groups(codes: np.ndarray, n_groups: int, *columns: np.ndarray):
    """Scatter 1-D ``columns`` into padded ``(G, n_max)`` arrays by group code.

    Returns ``(mask, padded...)``; padded cells hold 0 and have mask 0.
    """
    codes = np.asarray(codes)
    order = np.argsort(codes, kind="stable")
    counts = np.bincount(codes, minlength=n_groups)
    n_max = max(int(counts.max(initial=0)), 1)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    sorted_codes = codes[order]
    pos = np.arange(codes.size) - starts[sorted_codes]
    mask = np.zeros((n_groups, n_max))
    mask[sorted_codes, pos] = 1.0
    out = []
    for col in columns:
        arr = np.zeros((n_groups, n_max))
        arr[sorted_codes, pos] = np.asarray(col, dtype=float)[order]
        out.append(arr)
    return (mask, *out)


# --------------------------------------------------------------------------
# Curves and Jacobians in scaled units
# --------------------------------------------------------------------------


def power_curve(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Eq. 4.1 in scaled units; ``p[..., :] = (p0, a, knee, slope)``."""
    p0, a, knee, slope = (p[..., i : i + 1] for i in range(4))
    v = 1.0 + slope * np.maximum(x - knee, 0.0)
    return p0 + a * x * v * v


def _power_jac(p, x):
    p0, a, knee, slope = (p[..., i : i + 1] for i in range(4))
    above = np.maximum(x - knee, 0.0)
    v = 1.0 + slope * above
    f = p0 + a * x * v * v
    dv = 2.0 * a * x * v
    jac = np.stack(
        [np.ones_like(x), x * v * v, -dv * slope * (x > knee), dv * above], axis=-1
    )
    return f, jac


def rational_curve(p: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Eq. 4.5 in scaled units; ``p[..., :] = (a, b, c, d)``."""
    a, b, c, d = (p[..., i : i + 1] for i in range(4))
    return a / (1.0 + b * x) + c / (1.0 + d * x)


def _rational_jac(p, x):
    a, b, c, d = (p[..., i : i + 1] for i in range(4))
    u = 1.0 / (1.0 + b * x)
    w = 1.0 / (1.0 + d * x)
    f = a * u + c * w
    jac = np.stack([u, -a * x * u * u, w, -c * x * w * w], axis=-1)
    return f, jac


# --------------------------------------------------------------------------
# Closed-form two-basis least squares (with non-negative coefficients)
# --------------------------------------------------------------------------


def _nonneg_two_basis(b0, b1, y, m):
    """Least squares ``y ≈ c0·b0 + c1·b1`` with ``c0, c1 ≥ 0``, batched.

    All inputs broadcast to ``(..., n)`` (``b0=None`` means a constant 1);
    returns ``c0, c1, sse`` of shape ``(...)``.
    """
    mb1 = m * b1
    if b0 is None:  # constant first basis (eq. 4.1's P_static): its sums are cheap
        s00 = np.sum(m, -1)
        s01 = np.sum(mb1, -1)
        s0y = np.sum(m * y, -1)
    else:
        mb0 = m * b0
        s00 = np.sum(mb0 * b0, -1)
        s01 = np.sum(mb0 * b1, -1)
        s0y = np.sum(mb0 * y, -1)
    s11 = np.sum(mb1 * b1, -1)
    s1y = np.sum(mb1 * y, -1)
    syy = np.sum(m * y * y, -1)
    det = s00 * s11 - s01 * s01
    ok = det > 1e-12 * np.maximum(s00 * s11, 1e-300)
    safe = np.where(ok, det, 1.0)
    c0 = np.where(ok, (s11 * s0y - s01 * s1y) / safe, 0.0)
    c1 = np.where(ok, (s00 * s1y - s01 * s0y) / safe, 0.0)
    # Candidates on the boundary of the non-negative quadrant.
    only0 = np.where(s00 > 0, np.maximum(s0y, 0.0) / np.where(s00 > 0, s00, 1.0), 0.0)
    only1 = np.where(s11 > 0, np.maximum(s1y, 0.0) / np.where(s11 > 0, s11, 1.0), 0.0)

    def sse(k0, k1):
        return syy - 2 * k0 * s0y - 2 * k1 * s1y + k0 * k0 * s00 + 2 * k0 * k1 * s01 + k1 * k1 * s11

    inside = ok & (c0 >= 0) & (c1 >= 0)
    e_in = np.where(inside, sse(c0, c1), np.inf)
    e0 = sse(only0, 0.0)
    e1 = sse(0.0, only1)
    best = np.argmin(np.stack([e_in, e0, e1]), axis=0)
    c0 = np.choose(best, [c0, only0, np.zeros_like(only0)])
    c1 = np.choose(best, [c1, np.zeros_like(only1), only1])
    return c0, c1, np.maximum(np.choose(best, [e_in, e0, e1]), 0.0)


# --------------------------------------------------------------------------
# Projected Levenberg–Marquardt
# --------------------------------------------------------------------------


def _lm(fun_jac, p, x, y, m, lower, upper, max_iter=100, tol=1e-10):
    """Batched projected Levenberg–Marquardt; returns ``(p, sse, n_iter)``.

    ``lower``/``upper`` broadcast to ``p``'s shape ``(G, P)``. Each group keeps
    its own damping; a step is accepted only where it lowers that group's SSE,
    so the result is never worse than the start.
    """
    p = np.clip(p, lower, upper)
    f, jac = fun_jac(p, x)
    r = m * (y - f)
    cost = np.sum(r * r, -1)
    lam = np.full(p.shape[0], 1e-3)
    active = np.ones(p.shape[0], dtype=bool)
    n_iter = 0
    eye = np.eye(p.shape[1])
    for n_iter in range(1, max_iter + 1):  # noqa: B007 - n_iter is returned
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        ja = jac[idx] * m[idx, :, None]
        ra = r[idx]
        jt = ja.transpose(0, 2, 1)
        a_mat = jt @ ja
        grad = (jt @ ra[..., None])[..., 0]
        # Parameters on a bound whose descent direction points outside are frozen
        # for this step; otherwise clipping bends every step and LM stalls there.
        lo = lower if np.ndim(lower) < 2 else lower[idx]
        hi = upper if np.ndim(upper) < 2 else upper[idx]
        pa = p[idx]
        frozen = ((pa <= lo) & (grad < 0)) | ((pa >= hi) & (grad > 0))
        free = (~frozen).astype(float)
        a_mat = a_mat * free[:, :, None] * free[:, None, :]
        grad = grad * free
        diag = np.diagonal(a_mat, axis1=1, axis2=2)
        scale = np.maximum(diag, 1e-12 * np.maximum(diag.max(-1, keepdims=True), 1e-300))
        lhs = a_mat + (lam[idx, None, None] * scale[:, :, None] + frozen[:, :, None]) * eye
        try:
            step = np.linalg.solve(lhs, grad[..., None])[..., 0]
        except np.linalg.LinAlgError:  # singular even with damping: take the pseudo-inverse step
            step = np.einsum("gij,gj->gi", np.linalg.pinv(lhs), grad)
        trial = np.clip(pa + step, lo, hi)
        f_t, jac_t = fun_jac(trial, x[idx])
        r_t = m[idx] * (y[idx] - f_t)
        cost_t = np.sum(r_t * r_t, -1)
        better = np.isfinite(cost_t) & (cost_t < cost[idx])
        gain = np.where(better, cost[idx] - cost_t, 0.0)
        b_idx = idx[better]
        p[b_idx] = trial[better]
        r[b_idx] = r_t[better]
        jac[b_idx] = jac_t[better]
        cost[b_idx] = cost_t[better]
        lam[idx] = np.where(better, np.maximum(lam[idx] / 3.0, 1e-12), lam[idx] * 4.0)
        # Converged: tiny relative gain after an accepted step, or damping blew up.
        small = better & (gain <= tol * np.maximum(cost[idx], 1e-30))
        done = small | (lam[idx] > 1e10) | (cost[idx] <= 1e-30)
        active[idx[done]] = False
    return p, cost, n_iter


# --------------------------------------------------------------------------
# The two fits
# --------------------------------------------------------------------------

_RISES = np.array([0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5])
_KNEE_FRACTIONS = np.linspace(0.0, 1.0, 21)
_N_STARTS = 3


def _scaled(x_raw, y_raw, m):
    """Float copies of the padded inputs, each row divided by its largest |value|.

    Returns ``(x, y, m, xs, ys)``: scaled clock and target, the float mask,
    and the per-row scales (1 for an all-zero row) to undo it.
    """
    x_raw = np.asarray(x_raw, float)
    y_raw = np.asarray(y_raw, float)
    m = np.asarray(m, float)
    xs = np.max(np.abs(x_raw) * m, axis=1)
    ys = np.max(np.abs(y_raw) * m, axis=1)
    xs = np.where(xs > 0, xs, 1.0)
    ys = np.where(ys > 0, ys, 1.0)
    return x_raw / xs[:, None], y_raw / ys[:, None], m, xs, ys


def fit_power_batch(f, p, m, max_iter=100, max_rise=5.0, knee_in_gap="edge"):
    """Fit eq. 4.1 to every row of padded ``f`` (MHz), ``p`` (W) with mask ``m``.

    Returns ``(params, sse, n_iter, knee_gap)``; ``params[:, :] = (p_static_w,
    a_w_per_mhz, knee_mhz, slope_per_ghz)``, ``sse`` in W², ``knee_gap`` of
    shape ``(G, 2)``: the gap of the group's clocks (MHz, see :func:`knee_gaps`)
    that the unconstrained knee fell into, NaN where it fell in none.

    ``knee_in_gap="edge"`` then refits such a group with the knee fixed at
    either edge of the gap and keeps the better one: inside a gap no data
    locate the knee, and a free knee drifts there and trades static for
    dynamic power (under-predicting the gap). ``"free"`` keeps the knee where
    the fit put it.
    """
    x, y, m, xs, ys = _scaled(f, p, m)
    big = np.where(m > 0, x, np.inf)
    xmin = np.min(big, axis=1)
    xmin = np.where(np.isfinite(xmin), xmin, 0.0)
    xmax = np.max(np.where(m > 0, x, -np.inf), axis=1)
    xmax = np.where(np.isfinite(xmax), xmax, 1.0)
    cells = x.shape[1] * _KNEE_FRACTIONS.size * _RISES.size
    starts = np.concatenate(
        [_power_grid(x[s], y[s], m[s], xmin[s], xmax[s]) for s in _chunks(x.shape[0], cells)]
    )  # (G, S, 4)
    n_g, n_s = starts.shape[:2]
    lower = np.stack([np.zeros_like(xmin), np.zeros_like(xmin), xmin, np.zeros_like(xmin)], axis=1)
    upper = np.stack(
        [np.full_like(xmin, np.inf), np.full_like(xmin, np.inf), xmax,
         max_rise / np.maximum(xmax - xmin, 1e-6)], axis=1
    )
    # Refine every start at once (groups × starts as one batch), keep each group's best.
    rep = np.repeat(np.arange(n_g), n_s)
    par, cost, n_iter = _lm(_power_jac, starts.reshape(-1, 4), x[rep], y[rep], m[rep],
                            lower[rep], upper[rep], max_iter=max_iter)
    pick = cost.reshape(n_g, n_s).argmin(axis=1)
    par = par.reshape(n_g, n_s, 4)[np.arange(n_g), pick]
    cost = cost.reshape(n_g, n_s)[np.arange(n_g), pick]
    # The model has a kink in the knee at every measured clock, where LM can
    # stall: restart once from the knee moved half a clock step either way.
    n_pts = np.maximum(m.sum(axis=1), 2.0)
    half = 0.5 * (xmax - xmin) / (n_pts - 1)
    restarts = np.repeat(par[:, None, :], 2, axis=1)
    restarts[:, 0, 2] -= half
    restarts[:, 1, 2] += half
    rep2 = np.repeat(np.arange(n_g), 2)
    par2, cost2, n_iter2 = _lm(_power_jac, restarts.reshape(-1, 4), x[rep2], y[rep2], m[rep2],
                               lower[rep2], upper[rep2], max_iter=max_iter)
    cand_p = np.concatenate([par[:, None], par2.reshape(n_g, 2, 4)], axis=1)
    cand_c = np.concatenate([cost[:, None], cost2.reshape(n_g, 2)], axis=1)
    pick = cand_c.argmin(axis=1)
    par = cand_p[np.arange(n_g), pick]
    cost = cand_c[np.arange(n_g), pick]
    n_iter = max(n_iter, n_iter2)
    # Gaps from the clocks as given (MHz), so their edges are the measured clocks exactly.
    gap = knee_gaps(np.asarray(f, float), m, par[:, 2] * xs)
    inside = np.flatnonzero(np.isfinite(gap[:, 0]))
    moved = np.zeros(n_g, dtype=bool)
    if knee_in_gap == "edge" and inside.size:
        par[inside], cost[inside], n_iter3 = _fit_knee_at_edges(
            x[inside], y[inside], m[inside], gap[inside] / xs[inside, None], xmax[inside], lower[inside],
            upper[inside], max_iter)
        n_iter = max(n_iter, n_iter3)
        moved[inside] = True
    out = np.empty_like(par)
    out[:, 0] = par[:, 0] * ys
    out[:, 1] = par[:, 1] * ys / xs
    out[:, 2] = par[:, 2] * xs
    out[:, 3] = par[:, 3] / xs * 1000.0
    # a knee fixed at a gap's edge is that measured clock, not its scaled-and-back rounding
    edge = np.argmin(np.abs(gap[moved] - out[moved, 2:3]), axis=1) if moved.any() else []
    out[moved, 2] = gap[moved][np.arange(int(moved.sum())), edge]
    return out, cost * ys**2, n_iter, gap


#: An interval between neighbouring clocks is a gap when it is wider than this
#: many times the median interval of the group (no clock was measured there).
GAP_FACTOR = 2.0


def knee_gaps(x, m, knee):
    """Per group, the gap of the clocks ``x`` (mask ``m``) that strictly holds ``knee``.

    A gap is an interval between neighbouring distinct clocks wider than
    ``GAP_FACTOR`` times the group's median interval. Returns ``(G, 2)``
    ``(low, high)`` edges in the unit of ``x``, NaN where ``knee`` lies in no gap.
    """
    xs = np.sort(np.where(np.asarray(m) > 0, x, np.inf), axis=1)
    lo, hi = xs[:, :-1], xs[:, 1:]
    with np.errstate(invalid="ignore"):
        width = hi - lo
    real = np.isfinite(width) & (width > 0)
    med = np.nanmedian(np.where(real, width, np.nan), axis=1) if real.any() else np.full(xs.shape[0], np.nan)
    k = np.asarray(knee, float)[:, None]
    hit = real & (width > GAP_FACTOR * med[:, None]) & (lo < k) & (k < hi)
    out = np.full((xs.shape[0], 2), np.nan)
    g, i = np.nonzero(hit)
    out[g, 0], out[g, 1] = lo[g, i], hi[g, i]
    return out


def _fit_knee_at_edges(x, y, m, gap, xmax, lower, upper, max_iter):
    """Refit eq. 4.1 with the knee fixed at each edge of ``gap``; the better edge per group."""
    n_g = x.shape[0]
    starts, _ = _grid_at_knees(x, y, m, gap, xmax)  # (G, 2, 4)
    lo = np.repeat(lower, 2, axis=0)
    hi = np.repeat(upper, 2, axis=0)
    lo[:, 2] = hi[:, 2] = gap.reshape(-1)
    rep = np.repeat(np.arange(n_g), 2)
    par, cost, n_iter = _lm(_power_jac, starts.reshape(-1, 4), x[rep], y[rep], m[rep], lo, hi,
                            max_iter=max_iter)
    pick = cost.reshape(n_g, 2).argmin(axis=1)
    return (par.reshape(n_g, 2, 4)[np.arange(n_g), pick], cost.reshape(n_g, 2)[np.arange(n_g), pick],
            n_iter)


def _grid_at_knees(x, y, m, knees, xmax):
    """Best rise and closed-form linear part at every knee of ``knees`` (G, K).

    Returns ``(starts, sse)``: ``starts`` of shape ``(G, K, 4)``, ``sse`` ``(G, K)``.
    """
    room = np.maximum(xmax[:, None] - knees, 1e-6)
    slopes = _RISES[None, None, :] / room[:, :, None]  # (G, K, R)
    xx = x[:, None, None, :]
    v = 1.0 + slopes[..., None] * np.maximum(xx - knees[:, :, None, None], 0.0)
    b1 = xx * v * v
    c0, c1, sse = _nonneg_two_basis(None, b1, y[:, None, None, :], m[:, None, None, :])
    best_r = sse.argmin(axis=2)  # (G, K): best rise per knee
    g = np.arange(x.shape[0])[:, None]
    k_all = np.arange(sse.shape[1])[None, :]
    starts = np.stack([c0[g, k_all, best_r], c1[g, k_all, best_r], knees,
                       slopes[g, k_all, best_r]], axis=-1)
    return starts, sse[g, k_all, best_r]


def _power_grid(x, y, m, xmin, xmax):
    """Best grid start for eq. 4.1: knee × rise (``rise = slope·(x_max − knee)``)."""
    knees = xmin[:, None] + _KNEE_FRACTIONS[None, :] * (xmax - xmin)[:, None]  # (G, K)
    starts, per_knee = _grid_at_knees(x, y, m, knees, xmax)
    # The knee makes the SSE piecewise smooth (it changes whenever the knee
    # crosses a measured clock), so keep the best start of each of several knees.
    # Prefer local minima along the knee axis (distinct basins), best first.
    padded = np.pad(per_knee, ((0, 0), (1, 1)), constant_values=np.inf)
    local = (per_knee <= padded[:, :-2]) & (per_knee <= padded[:, 2:])
    key = np.where(local, per_knee, per_knee + np.abs(per_knee).max(axis=1, keepdims=True) + 1.0)
    top = np.argsort(key, axis=1)[:, :_N_STARTS]  # (G, S)
    return np.take_along_axis(starts, top[:, :, None], axis=1)


def _chunks(n_groups, cells_per_group, budget=4_000_000):
    """Slices of groups so each grid evaluation stays within ``budget`` cells (memory)."""
    step = max(1, budget // max(cells_per_group, 1))
    return [slice(i, i + step) for i in range(0, max(n_groups, 1), step)]


_RATES = np.concatenate(([0.0], np.logspace(-2, 3, 16)))


def _rational_grid(x, y, m):
    """Best grid start for eq. 4.5 over pairs of rates ``b < d``."""
    i_b, i_d = np.triu_indices(_RATES.size, k=1)  # b < d: the two terms are interchangeable
    b = _RATES[i_b]
    d = _RATES[i_d]
    xx = x[:, None, :]
    u = 1.0 / (1.0 + b[None, :, None] * xx)
    w = 1.0 / (1.0 + d[None, :, None] * xx)
    c0, c1, sse = _nonneg_two_basis(u, w, y[:, None, :], m[:, None, :])
    best = sse.argmin(axis=1)
    g = np.arange(x.shape[0])
    return np.stack([c0[g, best], b[best], c1[g, best], d[best]], axis=1)


def fit_rational_batch(f, t, m, max_iter=200, max_rate=1e4):
    """Fit eq. 4.5 to every row of padded ``f`` (MHz), ``t`` with mask ``m``.

    Returns ``(params, sse, n_iter)``; ``params[:, :] = (a, b, c, d)`` with
    ``b, d`` in 1/MHz and ``a, c`` in the unit of ``t``; ``b ≤ d`` by convention.
    """
    x, y, m, xs, ys = _scaled(f, t, m)
    start = np.concatenate(
        [_rational_grid(x[s], y[s], m[s]) for s in _chunks(x.shape[0], x.shape[1] * 136)]
    )
    lower = np.zeros(4)
    upper = np.array([np.inf, max_rate, np.inf, max_rate])
    par, cost, n_iter = _lm(_rational_jac, start, x, y, m, lower, upper, max_iter=max_iter)
    # Canonical order: the slower-decaying term first.
    swap = par[:, 1] > par[:, 3]
    par[swap] = par[swap][:, [2, 3, 0, 1]]
    out = np.empty_like(par)
    out[:, 0] = par[:, 0] * ys
    out[:, 1] = par[:, 1] / xs
    out[:, 2] = par[:, 2] * ys
    out[:, 3] = par[:, 3] / xs
    return out, cost * ys**2, n_iter
