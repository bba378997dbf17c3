"""Fit the thermal network of the twin: a Foster network driven by the measured power.

The die temperature is modelled as ``T(t) = T_amb + Σ_i x_i(t)`` where each
pole follows ``τ_i·dx_i/dt = R_i·P(t) − x_i`` (a Foster RC network; the
thesis' linear leakage, eq. 4.6, makes power depend on it). For fixed time
constants the temperature is linear in ``(T_amb, R_1, …)``, so the fit is a
grid over the time constants (log-spaced, one decade band per pole: die,
package, heatsink) with non-negative least squares for the rest.

Input is what a recording has: the energy counter's power between its
updates (~100 ms) and the temperature reading (whole °C).
"""

from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import nnls

__all__ = ["MEM_HEAT_SHARES", "fit_foster", "fit_with_memory_share", "foster_temperature", "simulate_foster"]

#: shares of the memory's dynamic power heating the die sensor tried by :func:`fit_with_memory_share`
MEM_HEAT_SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)

#: time-constant bands searched per pole (s): die, package, heatsink
POLE_BANDS = ((0.03, 1.0), (0.5, 8.0), (8.0, 60.0))


def simulate_foster(t, power, poles, ambient_c, start_power=None) -> np.ndarray:
    """Temperature of a Foster network driven by piecewise-constant ``power`` on times ``t``.

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
    """First-order lag of ``p`` (held over each interval) with unit gain, exact per step."""
    y = np.empty(t.size)
    x = p0
    dt = np.diff(t, prepend=t[0])
    decay = np.exp(-dt / tau)
    for i in range(t.size):  # ~10k steps at 100 ms: a plain loop is fast enough
        x = x * decay[i] + p[i - 1 if i else 0] * (1.0 - decay[i])
        y[i] = x
    return y


def fit_foster(t, power, temperature, *, n_poles: int = 3, grid: int = 7, weight=None) -> dict:
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

    Returns
    -------
    dict
        ``poles`` (list of ``[R_k_per_w, tau_s]``, poles with R = 0 dropped),
        ``ambient_c``, ``rmse_c``.
    """
    t = np.asarray(t, float)
    p = np.asarray(power, float)
    y = np.asarray(temperature, float)
    w = np.ones(t.size, bool) if weight is None else np.asarray(weight, bool)
    if not 1 <= n_poles <= len(POLE_BANDS):
        raise ValueError(f"fit_foster: n_poles must be 1..{len(POLE_BANDS)}, got {n_poles}")
    bands = POLE_BANDS if n_poles == 3 else POLE_BANDS[:1] + POLE_BANDS[-1:] if n_poles == 2 \
        else ((POLE_BANDS[0][0], POLE_BANDS[-1][1]),)
    taus = [np.geomspace(lo, hi, grid) for lo, hi in bands]
    cache: dict[float, np.ndarray] = {}
    rel = t - t[0]
    best = None
    for combo in itertools.product(*taus):
        cols = []
        for tau in combo:
            if tau not in cache:
                cache[tau] = _filtered(t, p, tau, p[0])
            cols.append(cache[tau])
        # the start is not a steady state: the slowest pole's initial excess decays freely (± columns)
        decay = np.exp(-rel / combo[-1])
        A = np.column_stack([np.ones(t.size), decay, -decay, *cols])
        coef, _ = nnls(A[w], y[w])
        rmse = float(np.sqrt(np.mean((A[w] @ coef - y[w]) ** 2)))
        if best is None or rmse < best[0]:
            best = (rmse, combo, coef)
    rmse, combo, coef = best
    poles = [[float(r), float(tau)] for r, tau in zip(coef[3:], combo) if r > 1e-6]
    return {"poles": poles, "ambient_c": float(coef[0]), "start_excess_c": float(coef[1] - coef[2]),
            "rmse_c": rmse}


def foster_temperature(t, power, fit: dict) -> np.ndarray:
    """The temperature a :func:`fit_foster` result gives on ``t`` driven by ``power`` (its start excess included)."""
    t = np.asarray(t, float)
    out = simulate_foster(t, power, fit["poles"], fit["ambient_c"])
    if fit["poles"]:
        out += fit.get("start_excess_c", 0.0) * np.exp(-(t - t[0]) / max(tau for _, tau in fit["poles"]))
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
