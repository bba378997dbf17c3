"""Fit the thermal network of the twin: a Foster network driven by the measured power.

The die temperature is modelled as ``T(t) = T_amb + Σ_i x_i(t)`` where each
pole follows ``τ_i·dx_i/dt = R_i·P(t) − x_i`` (a Foster RC network; the
thesis' linear leakage, eq. 4.6, makes power depend on it). For fixed time
constants the temperature is linear in ``(T_amb, R_1, …)``, so the fit is a
grid over the time constants (log-spaced, one decade band per pole: die,
package, heatsink) with non-negative least squares for the rest.

Input is what a recording has: the energy counter's power between its
updates (~100 ms; a gap in a trace is one interval whose mean power the
counter still gives) and the temperature reading (whole °C).
:func:`fit_foster_segments` fits one network to several traces at once (boards
of one model: shared poles, each trace its own ambient and start).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import nnls

__all__ = ["MEM_HEAT_SHARES", "fit_foster", "fit_foster_segments", "fit_with_memory_share", "foster_temperature",
           "pole_bands", "simulate_foster"]

#: shares of the memory's dynamic power heating the die sensor tried by :func:`fit_with_memory_share`
MEM_HEAT_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)

#: time-constant bands searched per pole (s): die, package, heatsink
POLE_BANDS = ((0.03, 1.0), (0.5, 8.0), (8.0, 60.0))


def simulate_foster(t, power, poles, ambient_c, start_power=None) -> np.ndarray:
    """Temperature of a Foster network on times ``t``, ``power[i]`` held over ``(t[i-1], t[i]]``.

    Each pole starts in steady state with ``start_power`` (default the first power).
    """
    t = np.asarray(t, float)
    p = np.asarray(power, float)
    out = np.full(t.size, float(ambient_c))
    p0 = p[0] if start_power is None else start_power
    for r, tau in poles:
        out += r * _filtered(t, p, tau, p0)
    return out


def _filtered(t: np.ndarray, p: np.ndarray, tau: float, p0: float) -> np.ndarray:
    """First-order lag of ``p`` with unit gain, exact per step: ``p[i]`` is held over ``(t[i-1], t[i]]``.

    ``p[i]`` is the power over the interval *ending* at ``t[i]`` (what an energy counter gives). Driving
    that interval with ``p[i-1]`` instead delays the heat by one interval: ~0.1 s on a 100 ms counter,
    and a whole gap's worth on a trace with gaps (a 28 s idle driven at the load before it).
    """
    y = np.empty(t.size)
    x = p0
    dt = np.diff(t, prepend=t[0])
    decay = np.exp(-dt / tau)
    for i in range(t.size):  # ~10k steps at 100 ms: a plain loop is fast enough
        x = x * decay[i] + p[i] * (1.0 - decay[i])
        y[i] = x
    return y


def fit_foster(t, power, temperature, *, n_poles: int = 3, grid: int = 7, weight=None, bands=None) -> dict:
    """Fit ``n_poles`` Foster poles and the ambient temperature to a temperature trace.

    Parameters
    ----------
    t, power, temperature : array-like
        Times (s), power over the interval ending at each time (W), and the
        temperature reading at each time (°C).
    n_poles : int, default=3
        1 to 3 poles (bands :data:`POLE_BANDS`, the fastest first).
    grid : int, default=7
        Time constants tried per band.
    weight : array-like of bool, optional
        Which readings are fitted (held-out times are simulated through,
        driven by their power, but their temperatures are not fitted).
    bands : sequence of (lo_s, hi_s), optional
        Time-constant band of each pole, fastest first (default: the
        :data:`POLE_BANDS` that ``n_poles`` picks).

    Returns
    -------
    dict
        ``poles`` (list of ``[R_k_per_w, tau_s]``, poles with R = 0 dropped),
        ``ambient_c``, ``start_excess_c`` and ``start_tau_s`` (the start's
        excess over the network's state and the time constant it decays
        with), ``rmse_c``.
    """
    fit = fit_foster_segments([(t, power, temperature, weight)], n_poles=n_poles, grid=grid, bands=bands)
    return {"poles": fit["poles"], "ambient_c": fit["ambient_c"][0], "start_excess_c": fit["start_excess_c"][0],
            "start_tau_s": fit["start_tau_s"], "rmse_c": fit["rmse_c"]}


def pole_bands(n_poles: int) -> tuple:
    """The default time-constant bands of ``n_poles`` poles (:data:`POLE_BANDS`: die, package, heatsink)."""
    if not 1 <= n_poles <= len(POLE_BANDS):
        raise ValueError(f"fit_foster: n_poles must be 1..{len(POLE_BANDS)}, got {n_poles}")
    if n_poles == 3:
        return POLE_BANDS
    return POLE_BANDS[:1] + POLE_BANDS[-1:] if n_poles == 2 else ((POLE_BANDS[0][0], POLE_BANDS[-1][1]),)


def fit_foster_segments(segments, *, n_poles: int = 2, grid: int = 7, bands=None) -> dict:
    """One Foster network fitted to several traces at once, each with its own ambient and start.

    The poles ``(R_k, τ_k)`` are shared (one cooling design: boards of one
    model, or one board's runs separated by gaps whose power is unknown);
    each segment gets its own ambient (the inlet temperature of its machine)
    and its own start excess, decaying with the slowest band's τ.

    Parameters
    ----------
    segments : sequence of (t, power, temperature, weight)
        Each as :func:`fit_foster` takes them (``weight`` may be None).
    n_poles, grid, bands
        As for :func:`fit_foster` (``bands`` overrides the ``n_poles`` default).

    Returns
    -------
    dict
        ``poles``, ``ambient_c`` and ``start_excess_c`` (one per segment),
        ``start_tau_s``, ``rmse_c`` (over every fitted reading) and
        ``rmse_by_segment_c``.
    """
    bands = tuple(tuple(b) for b in bands) if bands is not None else pole_bands(n_poles)
    segs = []
    for t, p, y, w in segments:
        t, p, y = np.asarray(t, float), np.asarray(p, float), np.asarray(y, float)
        segs.append((t, p, y, np.ones(t.size, bool) if w is None else np.asarray(w, bool)))
    k = len(segs)
    taus = [np.geomspace(lo, hi, grid) for lo, hi in bands]
    cache: dict[tuple, np.ndarray] = {}
    y_all = np.concatenate([y[w] for _, _, y, w in segs])
    best = None
    for combo in itertools.product(*taus):
        blocks = []
        for j, (t, p, _, w) in enumerate(segs):
            cols = []
            for tau in combo:
                if (j, tau) not in cache:
                    cache[(j, tau)] = _filtered(t, p, tau, p[0])
                cols.append(cache[(j, tau)])
            # the start is not a steady state: the slowest pole's initial excess decays freely (± columns)
            decay = np.exp(-(t - t[0]) / combo[-1])
            own = np.zeros((t.size, 3 * k))
            own[:, 3 * j:3 * j + 3] = np.column_stack([np.ones(t.size), decay, -decay])
            blocks.append(np.column_stack([own, *cols])[w])
        A = np.vstack(blocks)
        coef, _ = nnls(A, y_all)
        rmse = float(np.sqrt(np.mean((A @ coef - y_all) ** 2)))
        if best is None or rmse < best[0]:
            best = (rmse, combo, coef, A)
    rmse, combo, coef, A = best
    resid = A @ coef - y_all
    edges = np.cumsum([0] + [int(w.sum()) for *_, w in segs])
    poles = [[float(r), float(tau)] for r, tau in zip(coef[3 * k:], combo) if r > 1e-6]
    return {"poles": poles, "ambient_c": [float(coef[3 * j]) for j in range(k)],
            "start_excess_c": [float(coef[3 * j + 1] - coef[3 * j + 2]) for j in range(k)],
            "start_tau_s": float(combo[-1]), "rmse_c": rmse,
            "rmse_by_segment_c": [float(np.sqrt(np.mean(resid[a:b] ** 2))) for a, b in zip(edges[:-1], edges[1:])]}


def foster_temperature(t, power, fit: dict) -> np.ndarray:
    """The temperature a :func:`fit_foster` result gives on ``t`` driven by ``power`` (its start excess included)."""
    t = np.asarray(t, float)
    out = simulate_foster(t, power, fit["poles"], fit["ambient_c"])
    tau = fit.get("start_tau_s") or max((tau for _, tau in fit["poles"]), default=None)
    if tau:
        out += fit.get("start_excess_c", 0.0) * np.exp(-(t - t[0]) / tau)
    return out


def fit_with_memory_share(t, power, temperature, mem_w, *, n_poles: int = 2, weight=None,
                          shares=MEM_HEAT_SHARES) -> dict:
    """:func:`fit_foster` driven by ``power − (1 − share)·mem_w`` for each share; the best fit.

    HBM sits beside the die: its power heats the die's temperature sensor
    less than the SMs' does. ``mem_w`` is each interval's memory dynamic
    power (W); the share with the lowest temperature residual is kept as
    ``mem_heat_share``, every share's residual as ``rmse_by_mem_heat_share``.
    """
    p = np.asarray(power, float)
    m = np.asarray(mem_w, float)
    fits = {share: fit_foster(t, p - (1.0 - share) * m, temperature, n_poles=n_poles, weight=weight)
            for share in shares}
    best = min(fits, key=lambda k: fits[k]["rmse_c"])
    return {**fits[best], "mem_heat_share": best,
            "rmse_by_mem_heat_share": {str(k): v["rmse_c"] for k, v in fits.items()}}
