"""A clock sweep of the simulated GPU with injected regime changes, and its ground truth.

The simulated Hopper's physics (:class:`~powermodels.devices.physics.GPUPhysics`:
V(f) with a knee, dynamic power ∝ activity·f·V², leakage rising with
temperature, steady-state thermal RC) and DSO eq. 2 time laws of random
workloads give the *regular* sweep. Real GPUs do not stay in one regime
over a sweep, so three documented effects are injected, each recorded in a
truth column:

``pstate``
    At the lowest core clock the GPU drops to another P-state: time ×
    ``pstate_time_factor`` beyond eq. 2 (so it more than doubles between
    the two lowest clocks for compute-bound work), power × 0.85.
``memory_clock``
    At one low core clock the memory clock moves down with the core clock
    (to the GPU's lowest memory clock) while the table still records the
    nominal one: memory-bound kernels step, compute-bound ones do not notice.
``throttled``
    A share of the interior points ran at ``throttle_factor`` × the
    requested core clock (time and power at the clock actually run).

Features are DCGM-style ratios of the profiling run at the highest clocks
(``schema.RUNTIME_FEATURES`` names, 1 % noise) — the same meaning as on a real GPU.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated_workload import SimulatedWorkload

__all__ = ["simulated_dvfs_sweep"]

_AMBIENT_C = 30.0


def _steady_power(ph: GPUPhysics, fc, fm, a, m):
    """Power at the steady temperature ``T = T_amb + R·P(T)`` (P is linear in T)."""
    p_at0 = ph.power_w(fc, fm, 0.0, a, m)
    q = ph.power_w(fc, fm, 1.0, a, m) - p_at0
    r = ph.thermal_resistance_k_per_w
    temp = (_AMBIENT_C + r * p_at0) / (1.0 - r * q)
    return ph.power_w(fc, fm, temp, a, m)


def _applications(rng, n_apps, inputs, fmax, mmax):
    out = []
    for i in range(n_apps):
        balance = rng.uniform(0.0, 1.6)          # memory/compute time at the top clocks
        activity = rng.uniform(0.3, 1.0)
        for j in range(inputs):
            beta = rng.uniform(0.5, 20.0)        # MHz·s
            r = float(np.clip(balance * rng.uniform(0.8, 1.25), 0, 2))
            out.append((f"app{i:03d}:input{j:03d}", SimulatedWorkload(
                f"app{i:03d}-{j:03d}", core_work=beta, mem_work=r * beta * mmax / fmax,
                t0_s=rng.uniform(0.0, 0.15) * beta / fmax,
                activity=float(np.clip(activity * rng.uniform(0.9, 1.1), 0.05, 1.0)),
                mem_activity=float(np.clip(0.2 + 0.6 * r / 1.6 + rng.uniform(-0.1, 0.1), 0, 1)))))
    return out


def _features(w: SimulatedWorkload, fc, fm, rng) -> dict:
    t = float(w.time_s(fc, fm))
    mem, core = w.mem_work / fm, w.core_work / fc
    f = {schema.FEAT_SM_ACTIVE: max(mem, core) / t, schema.FEAT_SM_OCCUPANCY: w.activity,
         schema.FEAT_DRAM_ACTIVE: mem / t * w.mem_activity, schema.FEAT_FP32_ACTIVE: core / t * w.activity,
         schema.FEAT_FP16_ACTIVE: 0.0, schema.FEAT_FP64_ACTIVE: 0.0, schema.FEAT_TENSOR_ACTIVE: 0.0}
    return {k: float(np.clip(v + rng.normal(0, 0.01), 0, 1)) if v else 0.0 for k, v in f.items()}


def simulated_dvfs_sweep(n_apps: int = 24, inputs: int = 5, *, seed: int = 0, n_core_clocks: int = 12,
                         inject: bool = True, pstate_time_factor: float = 2.0,
                         memory_clock_index: int = 1, throttle_share: float = 0.03,
                         throttle_factor: float = 0.85, noise: float = 0.005,
                         physics: GPUPhysics | None = None, prefix: str = "") -> pd.DataFrame:
    """Sweep random workloads over the simulated GPU's core clocks at its highest memory clock.

    Parameters
    ----------
    n_apps, inputs : int
        Applications and inputs per application (kernel ids ``"app003:input001"``).
    seed : int
        Seed of the workloads, the injections and the noise.
    n_core_clocks : int, default=12
        Core clocks, evenly spread over the upper 60 % of the supported range.
    inject : bool, default=True
        Inject the regime changes of the module docstring.
    pstate_time_factor, memory_clock_index, throttle_share, throttle_factor : float, int
        Size of the injections (see the module docstring).
    noise : float, default=0.005
        Relative measurement noise of time and power (Gaussian).
    physics : GPUPhysics or None
        GPU physics; default the simulated Hopper's.
    prefix : str
        Prepended to kernel ids.

    Returns
    -------
    DataFrame
        A sweep table (kernel, clocks, time, power, energy, features) with the
        truth columns ``schema.DVFS_INJECTED`` (kind or "") and
        ``schema.DVFS_TIME_S_REGULAR`` (the time the GPU would have taken in
        its regular regime).
    """
    ph = physics or GPUPhysics()
    rng = np.random.default_rng(seed)
    cores = np.arange(ph.sm_clock_min_mhz, ph.sm_clock_max_mhz + 1e-9, ph.sm_clock_step_mhz)
    pick = np.linspace(int(0.4 * len(cores)), len(cores) - 1, n_core_clocks).astype(int)
    clocks = cores[np.unique(pick)]
    fm, fm_low = max(ph.mem_clocks_mhz), min(ph.mem_clocks_mhz)
    rows = []
    for kernel, w in _applications(rng, n_apps, inputs, clocks.max(), fm):
        feats = _features(w, clocks.max(), fm, rng)
        for i, fc in enumerate(clocks):
            kind, fc_run, fm_run, t_mult, p_mult = "", fc, fm, 1.0, 1.0
            if inject and i == 0:
                kind, t_mult, p_mult = "pstate", pstate_time_factor, 0.85
            elif inject and i == memory_clock_index:
                kind, fm_run = "memory_clock", fm_low
            elif inject and 2 < i < len(clocks) - 1 and rng.random() < throttle_share:
                kind, fc_run = "throttled", fc * throttle_factor
            regular = float(w.time_s(fc, fm))
            t = float(w.time_s(fc_run, fm_run)) * t_mult
            p = float(_steady_power(ph, fc_run, fm_run, w.activity, w.mem_activity)) * p_mult
            t *= 1 + rng.normal(0, noise)
            p *= 1 + rng.normal(0, noise)
            rows.append({schema.KERNEL: prefix + kernel, schema.SM_CLOCK_MHZ: float(fc),
                         schema.MEM_CLOCK_MHZ: float(fm), schema.TIME_S: t, schema.POWER_W: p,
                         schema.ENERGY_J: t * p, **feats, schema.DVFS_INJECTED: kind,
                         schema.DVFS_TIME_S_REGULAR: regular})
    return pd.DataFrame(rows)
