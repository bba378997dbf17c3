"""Windows shared with a pressure load: the ``ladder`` part of a natural-DVFS recording.

Under natural DVFS an uncapped workload holds an intermediate clock for a whole ~100 ms
energy-counter window only beside a load at the power cap: the H200's capped bf16 GEMM held
its 100 ms means at 1,491–1,535 MHz (5–95 %, 13 MHz within a window; GPU-168e6658), while after
a cap load the clock climbs back at ~5 GHz/s. The ``ladder`` part
(:class:`~powermodels.natural_dvfs.natural_recording.Ladder`) therefore alternates one pressure
launch with a few milliseconds of the workload, both timed and probed. A counter window then
holds two loads, and by thesis eq. 4.1 applied to each load over its own time,

    P̄ = P_static + a·s·mean_s(g(f)) + a_c·s_c·mean_c(g(f)),

with ``s`` and ``s_c`` the shares of the window the workload's and the companion's launches
cover and each mean over that load's own time: still linear in the unknowns, so
:mod:`~powermodels.natural_dvfs.clock_power` fits the workload's ``a`` beside the companion's
``a_c`` (the gaps between launches, ~1–3 %, carry ``P_static`` only, as in a window of one load).
That a mixed window's power is the time-weighted sum of the two loads' is the assumption
this rests on; it holds on the simulated GPU by construction. :mod:`~powermodels.natural_dvfs.mixed_heldout`
fits the companion on its own windows instead, so that mixed windows can be held out too (on the
real H100 GPU-f73aad1d and H200 GPU-25027b10 ladders they were the only windows in the band).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema

__all__ = ["companion_probes", "companions", "covered", "covered_mask"]


def companions(recording, workloads) -> dict:
    """Per workload, the other loads' launches inside its ``ladder`` phases.

    Returns
    -------
    dict of str to (ndarray, ndarray, list of str)
        ``(intervals (n, 2) sorted by start, ladder spans (m, 2), companion names)``; only
        workloads with a ladder phase.
    """
    phases = recording.phases
    if phases is None or not len(phases) or schema.PHASE_KIND not in phases:
        return {}
    ladder = phases.loc[phases[schema.PHASE_KIND] == "ladder"]
    if not len(ladder):
        return {}
    launches = recording.launches
    start = launches[schema.START_S].to_numpy(float)
    end = launches[schema.END_S].to_numpy(float)
    name = launches[schema.WORKLOAD].to_numpy(object)
    out = {}
    for w, g in ladder.groupby(schema.WORKLOAD, sort=False):
        if w not in set(workloads):
            continue
        spans = g[[schema.T0_S, schema.T1_S]].to_numpy(float)
        inside = np.zeros(start.size, dtype=bool)
        for t0, t1 in spans:
            inside |= (start >= t0) & (end <= t1)
        inside &= name != w
        order = np.argsort(start[inside])
        out[w] = (np.column_stack([start[inside], end[inside]])[order], spans,
                  sorted(set(name[inside].tolist())))
    return out


def covered(intervals: np.ndarray, w0: np.ndarray, w1: np.ndarray) -> np.ndarray:
    """Seconds of each window ``[w0, w1]`` that the sorted, disjoint ``intervals`` cover."""
    if not len(intervals):
        return np.zeros(np.size(w0))
    s, e = intervals[:, 0], intervals[:, 1]
    cum = np.concatenate([[0.0], np.cumsum(e - s)])

    def upto(t):  # seconds covered before time t
        k = np.searchsorted(s, t, side="right")  # intervals starting at or before t
        inside = np.minimum(t - s[np.maximum(k - 1, 0)], (e - s)[np.maximum(k - 1, 0)])
        return cum[np.maximum(k - 1, 0)] + np.where(k > 0, np.maximum(inside, 0.0), 0.0)

    w0, w1 = np.asarray(w0, float), np.asarray(w1, float)
    return upto(w1) - upto(w0)


def covered_mask(intervals: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Whether each time ``t`` lies inside one of the sorted, disjoint ``intervals``."""
    if not len(intervals):
        return np.zeros(np.size(t), dtype=bool)
    k = np.searchsorted(intervals[:, 0], t, side="right") - 1
    return (k >= 0) & (t <= intervals[np.maximum(k, 0), 1])


def companion_probes(recording, workload: str, spans: np.ndarray) -> pd.DataFrame:
    """The other loads' probes inside ``workload``'s ladder spans (the same chip clock)."""
    probes = recording.probes
    if probes is None or not len(probes):
        return pd.DataFrame(columns=[schema.T_S, schema.PROBE_CLOCK_MHZ])
    t = probes[schema.T_S].to_numpy(float)
    inside = np.zeros(t.size, dtype=bool)
    for t0, t1 in spans:
        inside |= (t >= t0) & (t <= t1)
    return probes.loc[inside & (probes[schema.WORKLOAD] != workload).to_numpy()]
