"""Clock-pair optimiser of DSO (§IV-C, eq. 4-5, Theorem 1).

The cost of running a kernel at clocks ``(f_c, f_m)`` is (DSO eq. 4)::

    C = (η·P + (1 − η)·P_max) · T

η = 1 minimises energy, η = 0 minimises time; ``P_max`` (the GPU's power
limit) puts both in the same unit. The optimiser searches the GPU's
supported clock pairs. Theorem 1 cuts the search: at a fixed memory clock,
clocks above the ridge ``f_c = (β/α)·f_m`` cannot help (T no longer falls
while P still rises), so only the supported core clocks up to the ridge —
plus the lowest one at or above it — are evaluated. The reduction is exact
whenever κ, γ, c ≥ 0 and V(f) does not fall; otherwise the optimiser falls
back to brute force over every pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from powermodels.models.dvfs import DVFSParams

__all__ = ["ClockChoice", "clock_pairs", "eta_for_slowdown", "optimize_clocks"]


@dataclass(frozen=True)
class ClockChoice:
    """The clock pair chosen for one kernel and what the model predicts for it.

    Attributes
    ----------
    sm_clock_mhz, mem_clock_mhz : float
        Chosen clocks.
    time_s, power_w, energy_j, cost : float
        Model predictions at the chosen clocks (cost: DSO eq. 4, W·s).
    reference_sm_clock_mhz, reference_mem_clock_mhz : float
        Clocks the saving and slowdown are relative to (default: the highest).
    energy_saving : float
        ``1 − E/E_ref`` (0.19 = 19 % saved).
    slowdown : float
        ``T/T_ref − 1`` (0.05 = 5 % slower).
    eta : float
        The η used.
    method : str
        ``"theorem1"`` or ``"brute_force"`` (what actually ran).
    n_evaluated : int
        Clock pairs whose cost was evaluated.
    """

    sm_clock_mhz: float
    mem_clock_mhz: float
    time_s: float
    power_w: float
    energy_j: float
    cost: float
    reference_sm_clock_mhz: float
    reference_mem_clock_mhz: float
    energy_saving: float
    slowdown: float
    eta: float
    method: str
    n_evaluated: int


def clock_pairs(clocks) -> np.ndarray:
    """Supported clock pairs as an ``(n, 2)`` array of ``(core, memory)`` MHz.

    Parameters
    ----------
    clocks : dict or array-like
        ``{mem_mhz: [core_mhz, ...]}`` as returned by
        ``Device.supported_clocks()``, or an ``(n, 2)`` array of pairs.
    """
    if isinstance(clocks, dict):
        rows = [(float(c), float(m)) for m, cores in clocks.items() for c in cores]
        pairs = np.array(rows, dtype=float).reshape(-1, 2)
    else:
        pairs = np.asarray(clocks, dtype=float)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or len(pairs) == 0:
        raise ValueError(f"clocks must be a non-empty (n, 2) array of (core, memory) MHz, got shape {pairs.shape}")
    if not np.all(np.isfinite(pairs)) or np.any(pairs <= 0):
        raise ValueError("clocks must be finite and positive MHz")
    return np.unique(pairs, axis=0)


def _params(model) -> DVFSParams:
    if isinstance(model, DVFSParams):
        return model
    params = getattr(model, "params_", None)
    if isinstance(params, DVFSParams):
        return params
    raise ValueError(f"model must be DVFSParams or a fitted DVFSEnergyModel, got {type(model).__name__}")


def _cost(p: DVFSParams, fc, fm, eta, p_max_w):
    return (eta * p.power(fc, fm) + (1.0 - eta) * p_max_w) * p.time(fc, fm)


def _theorem1_candidates(p: DVFSParams, pairs: np.ndarray) -> np.ndarray:
    """Pairs left after Theorem 1: per memory clock, core clocks up to the ridge (+ one above)."""
    keep = np.zeros(len(pairs), dtype=bool)
    for fm in np.unique(pairs[:, 1]):
        at = np.flatnonzero(pairs[:, 1] == fm)
        fc = pairs[at, 0]
        ridge = p.ridge_core_mhz(fm)
        below = fc <= ridge
        keep[at[below]] = True
        above = np.flatnonzero(~below)
        if above.size:  # the slowest clock that is already memory-bound
            keep[at[above[np.argmin(fc[above])]]] = True
    return pairs[keep]


def _reduction_is_exact(p: DVFSParams) -> bool:
    return (p.kappa_w >= 0 and p.c_w_per_mhz >= 0 and p.gamma_w_per_mhz >= 0
            and p.voltage_slope_per_ghz >= 0)


def optimize_clocks(model, clocks, *, eta: float, p_max_w: float, reference=None,
                    method: str = "theorem1") -> ClockChoice:
    """Clock pair minimising DSO's cost (eq. 4-5) among the supported ones.

    Parameters
    ----------
    model : DVFSParams or fitted DVFSEnergyModel
        The kernel's DVFS model (absolute units: s and W).
    clocks : dict or array-like
        Supported clocks, see :func:`clock_pairs`.
    eta : float in [0, 1]
        Weight of energy against time (1: minimum energy, 0: minimum time).
    p_max_w : float
        The GPU's maximum power limit in W (DSO ``P_max``).
    reference : (float, float) or None
        ``(core, memory)`` MHz the saving and slowdown are relative to;
        default: the highest memory clock and the highest core clock there.
    method : {"theorem1", "brute_force"}
        Search only Theorem 1's candidates, or every pair.

    Returns
    -------
    ClockChoice
    """
    p = _params(model)
    if not 0.0 <= float(eta) <= 1.0:
        raise ValueError(f"eta must be in [0, 1], got {eta}")
    if not np.isfinite(p_max_w) or p_max_w <= 0:
        raise ValueError(f"p_max_w must be a positive power in W, got {p_max_w}")
    if method not in ("theorem1", "brute_force"):
        raise ValueError(f"method must be 'theorem1' or 'brute_force', got {method!r}")
    pairs = clock_pairs(clocks)
    if reference is None:
        top_mem = pairs[:, 1].max()
        reference = (pairs[pairs[:, 1] == top_mem, 0].max(), top_mem)
    ref_c, ref_m = (float(v) for v in reference)
    used = method
    if method == "theorem1" and not _reduction_is_exact(p):
        used = "brute_force"  # negative coefficients break the monotonicity the proof needs
    cand = _theorem1_candidates(p, pairs) if used == "theorem1" else pairs
    cost = _cost(p, cand[:, 0], cand[:, 1], float(eta), float(p_max_w))
    # ties: prefer the faster (higher clock) pair, deterministically
    order = np.lexsort((-cand[:, 0], -cand[:, 1], cost))
    fc, fm = cand[order[0]]
    t, pw = float(p.time(fc, fm)), float(p.power(fc, fm))
    t_ref, e_ref = float(p.time(ref_c, ref_m)), float(p.energy(ref_c, ref_m))
    return ClockChoice(
        sm_clock_mhz=float(fc), mem_clock_mhz=float(fm), time_s=t, power_w=pw,
        energy_j=t * pw, cost=float(cost[order[0]]),
        reference_sm_clock_mhz=ref_c, reference_mem_clock_mhz=ref_m,
        energy_saving=1.0 - t * pw / e_ref if e_ref > 0 else np.nan,
        slowdown=t / t_ref - 1.0 if t_ref > 0 else np.nan,
        eta=float(eta), method=used, n_evaluated=len(cand),
    )


def eta_for_slowdown(model, clocks, *, max_slowdown: float, p_max_w: float, reference=None,
                     etas=None) -> ClockChoice:
    """The largest η whose optimal clocks keep the predicted slowdown ≤ ``max_slowdown``.

    DSO §V-C chooses η from the user's performance-loss limit. η is scanned
    on a grid (the optimum moves in discrete clock steps, so bisection could
    skip a feasible η).

    Parameters
    ----------
    model, clocks, p_max_w, reference
        As for :func:`optimize_clocks`.
    max_slowdown : float
        Allowed slowdown against the reference, e.g. 0.05 for 5 %.
    etas : array-like or None
        η values to scan; default 0, 0.01, ..., 1.

    Returns
    -------
    ClockChoice
        The choice at that η (η = 0, the fastest clocks, when none is feasible).
    """
    if not np.isfinite(max_slowdown) or max_slowdown < 0:
        raise ValueError(f"max_slowdown must be >= 0, got {max_slowdown}")
    etas = np.linspace(0.0, 1.0, 101) if etas is None else np.sort(np.asarray(etas, dtype=float))
    if etas.size == 0:
        raise ValueError("etas must not be empty")
    best = None
    for eta in etas:
        choice = optimize_clocks(model, clocks, eta=eta, p_max_w=p_max_w, reference=reference)
        if choice.slowdown <= max_slowdown + 1e-12:
            best = choice
    if best is None:
        best = optimize_clocks(model, clocks, eta=0.0, p_max_w=p_max_w, reference=reference)
    return best
