"""What energy-counter reads bound about the energy at any instant.

The logs that keep the reads are in :mod:`~powermodels.measuring.counter_log`.

The total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``) is the exact
integral of the GPU's power, but it is *published* only at its updates (~100 ms
apart on Hopper, with jitter) and one read costs ~4 ms (DESIGN.md). So the
energy at an arbitrary host instant ``t`` is never read directly; it is
bracketed by counter values:

* a read that *ended* at or before ``t + delay`` returned a value published
  before then, so ``E(t) >=`` that value (the **lower** bound);
* a value that first appears after a read which *started* at or after
  ``t + delay`` was published after ``t + delay``, so ``E(t) <=`` that value
  (the **upper** bound);
* between the two, ``E(t)`` is estimated by linear interpolation between the
  observed updates, each placed at the middle of the pair of reads that saw
  it change (an update's instant jitters on real GPUs, so every update is
  bracketed on its own rather than fitted to a regular grid).

The bounds hold whatever the power did; the interpolation is exact when the
power is constant over the update interval that contains ``t``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["EnergyBounds", "anchored_energy", "counter_changes", "energy_bounds", "extrapolated_energy",
           "merge_reads", "steady_power"]


@dataclass(frozen=True)
class EnergyBounds:
    """What the counter reads say about the cumulative energy ``E(t)`` at one instant (J).

    ``lower <= E(t) <= upper`` always holds (NaN/inf where no read bounds it);
    ``estimate`` interpolates between the observed updates and lies inside.
    """

    lower: float
    upper: float
    estimate: float


def counter_changes(t0: np.ndarray, t1: np.ndarray, joules: np.ndarray):
    """Indices of reads that saw a new value, and the estimated publication instants."""
    new = np.flatnonzero(joules[1:] > joules[:-1]) + 1
    mid = 0.5 * (t0 + t1)
    return new, 0.5 * (mid[new - 1] + mid[new])


def energy_bounds(t0, t1, joules, t: float, delay_s: float = 0.0) -> EnergyBounds:
    """Bound and estimate the counter's energy at instant ``t`` from reads ``(t0, t1, joules)``.

    Parameters
    ----------
    t0, t1 : array of float
        Host times at which each read started and ended (equal for an instant read).
    joules : array of float
        The values read, non-decreasing.
    t : float
        The instant on the same host clock.
    delay_s : float, default=0
        Lag of the counter: a value published at ``u`` holds the energy up to
        ``u - delay_s`` (0 on the simulated presets; unknown and small on Hopper).

    Returns
    -------
    EnergyBounds
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    tau = t + delay_s
    before = t1 <= tau
    lower = float(joules[before].max()) if before.any() else -math.inf
    new, when = counter_changes(t0, t1, joules)
    after = t0[new - 1] >= tau  # the read before the change started after tau
    upper = float(joules[new][after].min()) if after.any() else math.inf
    estimate = math.nan
    knots_t, knots_j = when - delay_s, joules[new]
    if knots_t.size >= 2 and knots_t[0] <= t <= knots_t[-1]:
        estimate = float(np.interp(t, knots_t, knots_j))
        estimate = min(max(estimate, lower), upper)
    return EnergyBounds(lower, upper, estimate)


def anchored_energy(t0, t1, joules, t: float, side: str, power_w: float,
                    delay_s: float = 0.0) -> tuple[float, float]:
    """``E(t)`` from the nearest update on ``side`` of ``t`` when the GPU drew ``power_w`` in between.

    For a window with the GPU idle just before its start (``side="before"``)
    or just after its end (``side="after"``): ``E(t) = c + P·(t − u)`` with
    ``(u, c)`` the last update published before ``t`` (or the first after).
    The only unknown left is the update instant, known to its bracket
    (half-width ``h``), so the 1-σ error is ``P·h/√3`` — far below the
    interpolation's when the power changes at ``t``.

    Returns
    -------
    (estimate, sigma) : tuple of float
        NaN when no update on that side was observed.
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    if side not in ("before", "after"):
        raise ValueError(f"anchored_energy: side must be 'before' or 'after', got {side!r}")
    tau = t + delay_s
    new, when = counter_changes(t0, t1, joules)
    lo, hi = t0[new - 1], t1[new]
    pick = np.flatnonzero(hi <= tau) if side == "before" else np.flatnonzero(lo >= tau)
    if pick.size == 0:
        return math.nan, math.nan
    k = pick[-1] if side == "before" else pick[0]
    u = when[k] - delay_s
    half = 0.5 * (hi[k] - lo[k])
    return float(joules[new][k] + power_w * (t - u)), float(power_w * half / math.sqrt(3.0))


def steady_power(t0, t1, joules, start: float, end: float,
                 delay_s: float = 0.0) -> tuple[float, float, int]:
    """Mean power between the first and last counter updates published inside ``[start, end]``.

    For a steady load (back-to-back launches of one kernel) this is the
    window's mean power without interpolating across its edges: only the two
    updates' instants are uncertain, each to half its bracket ``h``, so the
    1-σ error is ``P·hypot(h_a, h_b)/√3/(u_b − u_a)`` (as the ``counter``
    protocol takes it).

    Returns
    -------
    (power_w, sigma_w, updates) : tuple
        NaN power with fewer than two updates inside.
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    new, when = counter_changes(t0, t1, joules)
    lo, hi = t0[new - 1], t1[new]
    inside = np.flatnonzero((lo >= start + delay_s) & (hi <= end + delay_s))
    if inside.size < 2:
        return math.nan, math.nan, int(inside.size)
    a, b = inside[0], inside[-1]
    span = when[b] - when[a]
    power = (joules[new][b] - joules[new][a]) / span
    half = np.hypot(0.5 * (hi[a] - lo[a]), 0.5 * (hi[b] - lo[b]))
    return float(power), float(power * half / math.sqrt(3.0) / span), int(inside.size)


def extrapolated_energy(t0, t1, joules, t: float, delay_s: float = 0.0) -> tuple[float, float]:
    """``E(t)`` after the last observed update: its interval's power carried forward (no waiting).

    ``E(t) = c_k + P_k·(t − u_k)`` with ``P_k`` the mean power between the
    last two updates ``u_{k−1} < u_k <= t``; the 1-σ error is taken as
    ``P_k·(t − u_k)/√3`` (the power since the last update is unknown).

    Returns
    -------
    (estimate, sigma) : tuple of float
        NaN when fewer than two updates were observed before ``t``.
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    new, when = counter_changes(t0, t1, joules)
    u = when - delay_s
    k = np.flatnonzero(u <= t)
    if k.size < 2:
        return math.nan, math.nan
    a, b = k[-2], k[-1]
    power = (joules[new][b] - joules[new][a]) / (u[b] - u[a])
    span = t - u[b]
    return float(joules[new][b] + power * span), float(power * span / math.sqrt(3.0))


def merge_reads(*parts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Counter reads from several sources as one time-ordered ``(t0, t1, joules)``, duplicates once."""
    rows = {}
    for t0, t1, j in parts:
        for a, b, c in zip(np.asarray(t0, float), np.asarray(t1, float), np.asarray(j, float)):
            rows.setdefault(round(float(a), 9), (float(a), float(b), float(c)))
    arr = np.asarray([rows[k] for k in sorted(rows)], dtype=float).reshape(-1, 3)
    return arr[:, 0], arr[:, 1], arr[:, 2]
