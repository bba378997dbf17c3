"""The power stage of the twin's fit: leakage, the loads' temperature slope, core coefficient, activities.

At the top clock every interval of a recording (idle, bursts, series; from
0.3 s into the entry) is one equation of the physics' power
(:class:`~powermodels.devices.physics.GPUPhysics`)::

    P = A_ref + α·(T − T_ref) + D_w·(1 + μ·(T − T_ref))

with ``T`` the fitted thermal network's die temperature, ``A_ref`` the idle
board's power at ``T_ref``, ``α`` its slope (the leakage, thesis eq. 4.6),
``D_w`` what load ``w`` draws above the idle board at ``T_ref`` (0 for
idle) and ``μ`` the relative temperature slope of that load power
(``dynamic_per_c``). For a fixed μ the equation is linear in ``(A_ref, α,
D_w)``; μ is the value on a grid with the lowest residual (``mu="fit"``),
or given (``mu=0.0``: the thesis' model, one slope loaded and idle).

Why μ: on the real H100s a load's power rises 2–3.4 W/°C at 1980 MHz over
its series while the idle board's rises 0.7–1.1 W/°C, and one pooled α
(1.09 W/°C on GPU-14ab84a0) makes every twin warm-up too flat (docs/twin.md,
session 10). The data do not say which mechanism it is (a voltage that rises
with temperature at a clock, or leakage of the switching, ungated part of
the die): μ is what they identify, one number for the board.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..devices.physics import GPUPhysics
from ..devices.simulated_workload import SimulatedWorkload
from .preset import TwinWorkload

__all__ = ["CAPPED_MEM_ACTIVITY", "MU_GRID", "T_REF_C", "fit_leakage", "power_stage"]

#: memory activity given to a power-capped load that set the core coefficient (the capped
#: equilibrium cannot split core from memory power; the fit and the workload must agree on it)
CAPPED_MEM_ACTIVITY = 0.5
#: reference temperature of the fitted leakage and load slope (°C)
T_REF_C = 25.0
#: μ values tried (per °C): 0 to 1.5 %/°C, far above what three H100s show (~0.25 %/°C)
MU_GRID = np.round(np.arange(0.0, 0.015 + 1e-12, 0.0001), 6)


def _lstsq(d: pd.DataFrame, groups, mu: float) -> tuple[np.ndarray, np.ndarray]:
    dt = d["die_c"].to_numpy(float) - T_REF_C
    w = d[schema.WORKLOAD].to_numpy()
    X = np.column_stack([np.ones(len(d)), dt] + [(w == g).astype(float) * (1.0 + mu * dt) for g in groups])
    coef, *_ = np.linalg.lstsq(X, d[schema.POWER_W].to_numpy(float), rcond=None)
    return coef, X @ coef - d[schema.POWER_W].to_numpy(float)


def fit_leakage(iv: pd.DataFrame, f_max: float, report: dict, *, mu="fit") -> tuple[float, float, float, dict]:
    """α and μ at the top clock pooled over idle and every load, the idle power and each load's.

    Parameters
    ----------
    iv : pandas.DataFrame
        :func:`~powermodels.twin.fit.power_intervals` rows with ``die_c``
        (the thermal network's die temperature).
    f_max : float
        Top clock (MHz): only intervals whose clock reading is there are used.
    report : dict
        ``report["leakage"]`` is written (α, μ, the loads' powers, residuals
        by μ on the grid).
    mu : "fit" or float, default="fit"
        μ from the grid :data:`MU_GRID` (lowest RMS residual), or this value.

    Returns
    -------
    tuple
        ``(alpha_w_per_c, mu_per_c, idle_w_at_t_ref, {load: D_w at T_ref})``.
    """
    ok = (iv[schema.SM_CLOCK_MHZ] >= f_max) & (iv[schema.WORKLOAD] != "") \
        & (iv[schema.PHASE_KIND].isin(["idle", "burst", "series"])) & (iv[schema.SINCE_S] > 0.3)
    d = iv.loc[ok]
    groups = sorted(set(d[schema.WORKLOAD].unique()) - {"idle"})
    if "idle" not in set(d[schema.WORKLOAD]):
        raise ValueError("fit_twin: the recordings have no idle time at the top clock (idle power unknown)")
    grid = MU_GRID if mu == "fit" else np.array([float(mu)])
    rmse = np.array([float(np.sqrt(np.mean(_lstsq(d, groups, m)[1] ** 2))) for m in grid])
    best = float(grid[int(np.argmin(rmse))])
    coef, res = _lstsq(d, groups, best)
    alpha = float(coef[1])
    loads = {g: float(c) for g, c in zip(groups, coef[2:])}
    report["leakage"] = {
        "alpha_w_per_c": alpha, "mu_per_c": best, "mu": "fitted on the grid" if mu == "fit" else "given",
        "idle_w_at_t_ref": float(coef[0]), "t_ref_c": T_REF_C, "load_w_at_t_ref": loads,
        "load_slope_w_per_c": {g: alpha + best * v for g, v in loads.items()},
        "rows": int(len(d)), "rmse_w": float(np.sqrt(np.mean(res ** 2))),
        "rmse_by_mu": {f"{m:g}": float(r) for m, r in zip(grid, rmse)} if grid.size <= 20
        else {f"{m:g}": float(r) for m, r in zip(grid[::10], rmse[::10])},
        "temperature_range_c": [float(d["die_c"].min()), float(d["die_c"].max())],
        "temperature": "the fitted thermal network's die temperature"}
    if not alpha > 0:
        raise ValueError(f"fit_twin: leakage slope α = {alpha:.3g} W/°C is not positive; the recordings do "
                         "not span enough temperature at the top clock")
    return alpha, best, float(coef[0]), loads


def power_stage(iv: pd.DataFrame, *, f_max: float, limit: float, knee_mhz: float, thermal: dict, controller: dict,
                times: dict, report: dict, mu="fit", base: GPUPhysics | None = None) -> tuple[GPUPhysics, dict]:
    """Physics and workloads from the intervals at the top clock and a capped load's settled clock.

    Parameters
    ----------
    iv : pandas.DataFrame
        Intervals with ``die_c`` (:func:`fit_leakage`).
    f_max, limit, knee_mhz : float
        Top clock (MHz), power limit (W), V(f) knee (MHz).
    thermal : dict
        ``poles`` and ``mem_heat_share`` of the thermal network.
    controller : dict
        The controller's :class:`GPUPhysics` fields.
    times : dict
        Per workload ``t_fast_s``, ``clock_share``, ``gap_s``, ``launches_per_batch``.
    report : dict
        Diagnostics are written into it (``leakage``, ``core``, ``activities``).
    mu : "fit" or float, default="fit"
        The loads' temperature slope μ (:func:`fit_leakage`).
    base : GPUPhysics, optional
        Physics whose other fields are kept (default ``GPUPhysics()``).

    Returns
    -------
    tuple
        ``(GPUPhysics, {workload: TwinWorkload})``.
    """
    alpha, mu_fit, p_idle_ref, loads = fit_leakage(iv, f_max, report, mu=mu)
    base = base or GPUPhysics()
    v_max = float(replace(base, voltage_knee_mhz=knee_mhz).relative_voltage(f_max))
    leak_ref = min(alpha / 0.01, 0.5 * p_idle_ref)  # leakage at T_ref; λ ≥ 1 %/°C
    physics = replace(
        base, sm_clock_max_mhz=f_max, power_limit_w=limit,
        power_limit_max_w=max(limit, base.power_limit_max_w), voltage_knee_mhz=knee_mhz, t_ref_c=T_REF_C,
        leakage_w=leak_ref / v_max, leakage_per_c=alpha / leak_ref, dynamic_per_c=mu_fit,
        thermal_poles=tuple(tuple(p) for p in thermal["poles"]), mem_heat_share=thermal["mem_heat_share"],
        **controller)
    physics = _fit_core(physics, iv, p_idle_ref, report)
    return physics, _fit_activities(physics, loads, times, report)


def _fit_core(physics: GPUPhysics, iv: pd.DataFrame, p_idle_ref: float, report) -> GPUPhysics:
    """Core coefficient c from a capped load's settled clock (activity 1) and the idle power's split."""
    ph = physics
    fm = ph.mem_clocks_mhz[0]
    # P0 so that the idle power at the top clock and T_ref is p_idle_ref
    rest = float(ph.power_w(ph.sm_clock_max_mhz, fm, ph.t_ref_c)) - ph.p0_w
    ph = replace(ph, p0_w=max(p_idle_ref - rest, 0.0))
    capped = iv.loc[(iv[schema.PHASE_KIND] == "pressure") & (iv[schema.SINCE_S] > 1.0)]
    if len(capped) < 5:
        report["core"] = {"core_w_per_ghz": ph.core_w_per_ghz, "source": "default (no settled capped load)"}
        return ph
    f_eq = float(np.median(capped[schema.SM_CLOCK_MHZ]))
    t_eq = float(np.median(capped["die_c"]))
    p_eq = float(np.mean(capped[schema.POWER_W]))
    # P = A + Bc·1 + Bm·m at f_eq (m = CAPPED_MEM_ACTIVITY, as the workload gets); Bc ∝ core_w_per_ghz
    a0, bc, bm = (float(x) for x in ph.power_terms(f_eq, fm, t_eq))
    idle_core = ph.core_w_per_ghz * f_eq / 1000.0 * float(ph.relative_voltage(f_eq)) ** 2 * ph.idle_activity
    scale = (p_eq - (a0 - idle_core) - bm * CAPPED_MEM_ACTIVITY) / (bc + idle_core)
    core = float(ph.core_w_per_ghz * max(scale, 0.1))
    ph = replace(ph, core_w_per_ghz=core)
    rest = float(ph.power_w(ph.sm_clock_max_mhz, fm, ph.t_ref_c)) - ph.p0_w
    ph = replace(ph, p0_w=max(p_idle_ref - rest, 0.0))
    report["core"] = {"core_w_per_ghz": core, "capped_clock_mhz": f_eq, "capped_power_w": p_eq,
                      "capped_temperature_c": t_eq}
    return ph


def _fit_activities(ph: GPUPhysics, loads: dict, times: dict, report) -> dict:
    """Each workload's core and memory activity from its power above idle at the top clock and T_ref."""
    fm = ph.mem_clocks_mhz[0]
    f = ph.sm_clock_max_mhz
    _, bc, bm = (float(x) for x in ph.power_terms(f, fm, ph.t_ref_c))  # θ = 1 at T_ref
    out = {}
    acts = {}
    for w, spec in times.items():
        share = float(spec.get("clock_share", 1.0))
        mem = 1.0 - share
        if w in loads:
            act = float(np.clip((loads[w] - bm * mem) / bc, 0.0, 1.0))
        else:  # a capped pressure load: full activity (it set the core coefficient)
            act, mem = 1.0, CAPPED_MEM_ACTIVITY
        t_fast = float(spec["t_fast_s"])
        wl = SimulatedWorkload(w, core_work=share * t_fast * f, t0_s=(1.0 - share) * t_fast,
                               activity=act, mem_activity=float(np.clip(mem, 0.0, 1.0)))
        out[w] = TwinWorkload(wl, float(spec.get("gap_s", 0.0)), int(spec.get("launches_per_batch", 1)))
        acts[w] = {"activity": act, "mem_activity": float(mem)}
    report["activities"] = acts
    return out
