"""The inlet (ambient) temperature a recording ran at, seen through a preset's thermal network.

The ambient temperature is the environment, like the schedule, not a
property of the GPU model: a board in a warmer slot, or an inlet that warms
during the run, reads hotter at the same power. A replay may take it from the
recording it replays (:func:`~powermodels.twin.replay.replay`'s ``ambient``)
while the preset's physics — leakage slope, thermal poles, controller — stay
as fitted.

:func:`recorded_ambient` drives the preset's Foster network
(:mod:`~powermodels.thermal.foster`: ``T = T_amb + Σ_i x_i``,
``τ_i·dx_i/dt = R_i·P − x_i``) with the recording's own power (the energy
counter's mean between updates, less the memory's dynamic power that does
not heat the die sensor, as in the twin) and reads the ambient as
``T_recorded − Σ_i x_i`` in the idle stretches, once the die pole has
settled: one value per idle stretch, at its middle. Idle is where the
estimate rests on the least physics (power ≈ idle power; no workload's
activity or heat share enters), so the estimate is a boundary condition,
not a fit of the loads.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..recording import Recording
from ..thermal.foster import simulate_foster
from .fit import power_intervals
from .preset import load_preset

__all__ = ["ambient_at", "die_heat", "initial_ambient", "network_rise", "recorded_ambient"]

#: seconds into an idle stretch before its temperature is read (a few die time constants: the die has settled)
SETTLE_S = 2.0
#: shortest idle stretch read (s)
MIN_IDLE_S = 3.0


def recorded_ambient(rec: Recording, preset, *, causal: bool = False, settle_s: float = SETTLE_S,
                     min_idle_s: float = MIN_IDLE_S) -> pd.DataFrame:
    """The ambient temperature of each idle stretch of ``rec``, through ``preset``'s thermal network.

    Parameters
    ----------
    rec : Recording
        A recording with a trace (temperature readings) and an energy counter.
    preset : TwinPreset or str
        Its thermal poles, memory heat share and workloads' memory activity are used.
    causal : bool, default=False
        Return a profile that uses only the past: each idle stretch's value
        holds from the stretch's end (the first one's from the start) until
        the next stretch ends. A measurement in an idle stretch after the
        first then never sees its own temperature through the ambient (the
        cooling check stays held out); the first stretch's value also stands
        for the time before it, so that stretch is not held out. The default
        interpolates between stretch middles.
    settle_s, min_idle_s : float
        Seconds skipped at an idle stretch's start; shortest stretch read.

    Returns
    -------
    pandas.DataFrame
        ``t_s``, ``ambient_c`` (a piecewise-linear profile, held constant
        beyond its ends) and per point the stretch it came from
        (``t0_s``, ``t1_s``, ``readings``).

    Raises
    ------
    ValueError
        If the recording has no trace or no idle stretch of ``min_idle_s``.
    """
    twin = load_preset(preset)
    if not rec.has_trace:
        raise ValueError(f"recorded_ambient: {rec.name} has no trace.parquet (no temperature readings)")
    iv, rise = network_rise(rec, twin)
    t = iv[schema.T_S].to_numpy(float)
    estimate = iv[schema.TEMPERATURE_C].to_numpy(float) - rise
    rows = []
    idle = rec.phases.loc[rec.phases[schema.PHASE_KIND] == "idle"]
    for t0, t1 in zip(idle[schema.T0_S].to_numpy(float), idle[schema.T1_S].to_numpy(float), strict=True):
        if t1 - t0 < min_idle_s:
            continue
        sel = (iv[schema.PHASE_KIND].to_numpy() == "idle") & (t - iv[schema.DT_S].to_numpy(float) >= t0 + settle_s) \
            & (t <= t1)
        if sel.sum() < 3:
            continue
        # whole-°C readings: the mean over the stretch resolves finer than one reading
        rows.append({schema.T_S: 0.5 * (t0 + settle_s + t1), schema.AMBIENT_C: float(np.mean(estimate[sel])),
                     schema.T0_S: t0, schema.T1_S: t1, "readings": int(sel.sum())})
    if not rows:
        raise ValueError(f"recorded_ambient: {rec.name} has no idle stretch of {min_idle_s:g} s or more "
                         "with temperature readings (its ambient cannot be read)")
    points = pd.DataFrame(rows)
    if not causal:
        return points
    # from the past only: a stretch's value holds from its end (the first one's from the start)
    steps = []
    for k, row in enumerate(points.itertuples(index=False)):
        if k == 0:
            steps.append({**row._asdict(), schema.T_S: 0.0})
        else:
            steps.append({**points.iloc[k - 1].to_dict(), schema.T_S: row.t1_s})
        steps.append({**row._asdict(), schema.T_S: row.t1_s + 1e-6})
    return pd.DataFrame(steps)[list(points.columns)]


def die_heat(rec: Recording, preset) -> tuple[pd.DataFrame, np.ndarray]:
    """The power that heats the die sensor over each energy-counter interval of ``rec``, as the twin has it.

    The counter's mean power between updates
    (:func:`~powermodels.twin.fit.power_intervals`) less the share of the
    memory's dynamic power that does not heat the die (``1 − mem_heat_share``
    of the preset's memory power at each interval's workload's memory activity).

    Returns
    -------
    (DataFrame, ndarray)
        The power intervals (with the temperature readings at their ends) and
        the heating power (W) over each.
    """
    twin = load_preset(preset)
    iv = power_intervals(rec)
    ph = twin.physics
    bm = float(ph.power_terms(ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0], ph.t_ref_c)[2])
    mem = {name: tw.workload.mem_activity for name, tw in twin.workloads.items()}
    cool_w = (1.0 - ph.mem_heat_share) * bm * iv[schema.WORKLOAD].map(mem).fillna(0.0).to_numpy(float)
    return iv, iv[schema.POWER_W].to_numpy(float) - cool_w


def network_rise(rec: Recording, preset, *, per_pole: bool = False) -> tuple[pd.DataFrame, np.ndarray]:
    """The die's rise above ambient that ``preset``'s thermal network gives for ``rec``'s own power.

    The network is driven by the energy counter's mean power between updates
    (:func:`~powermodels.twin.fit.power_intervals`) less the memory's dynamic
    power that does not heat the die sensor, as in the twin, and starts at
    its idle steady state (the recording starts idle, as a replay's twin
    does) at the median of the first second's power (the counter's first
    interval can span the time before the start).

    Parameters
    ----------
    rec : Recording
        A recording with an energy counter (and a trace for the readings).
    preset : TwinPreset or str
        The preset whose network is driven.
    per_pole : bool, default=False
        Return each pole's rise apart (one row per pole of ``preset.physics.poles``):
        their sum is the network's rise.

    Returns
    -------
    (DataFrame, ndarray)
        The power intervals (with the temperature readings at their ends) and
        the network's rise (°C) at each interval's end, shape ``(n,)``, or
        ``(n_poles, n)`` with ``per_pole``.
    """
    twin = load_preset(preset)
    ph = twin.physics
    iv, heat = die_heat(rec, twin)
    t = iv[schema.T_S].to_numpy(float)
    start = float(np.median(heat[t <= t[0] + 1.0]))
    if per_pole:
        return iv, np.vstack([simulate_foster(t, heat, [pole], 0.0, start_power=start) for pole in ph.poles])
    return iv, simulate_foster(t, heat, ph.poles, 0.0, start_power=start)


def initial_ambient(rec: Recording, preset, **kwargs) -> pd.DataFrame:
    """The ambient of ``rec``'s first idle stretch (:func:`recorded_ambient`), as a one-row constant profile.

    The recording's own idle temperature before its first load is an input
    of the schedule, as observed as its phases; nothing measured during or
    after a load enters, so every row of a comparison after the first load
    stays held out. ``kwargs`` go to :func:`recorded_ambient`.

    Returns
    -------
    pandas.DataFrame
        One row of :func:`recorded_ambient`'s columns, ``t_s`` = 0.

    Raises
    ------
    ValueError
        If the first idle stretch that can be read starts after a load.
    """
    points = recorded_ambient(rec, preset, **kwargs)
    first = points.sort_values(schema.T0_S).iloc[[0]].copy()
    ph = rec.phases
    loads = ph.loc[ph[schema.PHASE_KIND] != "idle", schema.T0_S]
    if len(loads) and float(first[schema.T0_S].iloc[0]) > float(loads.min()):
        raise ValueError(f"initial_ambient: {rec.name}'s first readable idle stretch "
                         f"({float(first[schema.T0_S].iloc[0]):.1f} s) comes after a load; use recorded ambient")
    first[schema.T_S] = 0.0
    return first.reset_index(drop=True)


def ambient_at(profile: pd.DataFrame, t: float) -> float:
    """The profile's ambient temperature at ``t`` (linear between points, held beyond its ends)."""
    return float(np.interp(t, profile[schema.T_S].to_numpy(float), profile[schema.AMBIENT_C].to_numpy(float)))
