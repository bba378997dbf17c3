"""The default protocol's error against the reference, measured on a twin as it was on the real GPU.

The real runs (``benchmarks/gpu_user_workloads.py``, e.g. ``../shared/data/
h100-2026-11-24/user_workloads`` and ``user_source_campaign``) measured each
workload with the default protocol (``powermodels.measure``: the energy
counter over ~1 s) and then with the independent reference (the same work
back to back for 12 s, counter from 2 s on). Their error is the protocol's
bias on that GPU: the warm-up a short measurement sees, the power cap's
start. :func:`protocol_errors` does the same on a twin preset, in the same
order, and states the twin's error beside the real one (issue 27: within 1
percentage point).

Each workload's twin is made from its real row: its time at the top clock
(the row's time per launch × its SM clock reading / the top clock: clock
bound) and the core activity that gives the row's *reference* power at the
row's clock and temperature (the level only; the protocol's error comes from
the twin's own warm-up and cap). The protocol runs as it did on
2026-11-24 (:data:`AS_ON_2026_11_24`): the energy counter over ~1 s, without
what later versions added — waiting for the power cap to settle and the
temperature-slope warm-up on a workload's first measurement (each runs the
workload seconds longer). The memory activity is
:data:`MEM_ACTIVITY` (a GEMM's). Rows of other protocols (``EnergyMeter``,
``program``) are not compared, but what they ran is: the real script ran
each callable 3 s back to back after its reference. A measurement's wall
time beyond what the protocol takes on the twin (a callable's set-up, a
campaign's compilation: ``wall_measure_s`` is the campaign's mean per
configuration) idles the twin before it, as it idled the GPU.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..devices.simulated_workload import SimulatedWorkload
from ..thermal.alpha import AlphaAssumedWarning
from .preset import load_preset

__all__ = ["AS_ON_2026_11_24", "MEM_ACTIVITY", "TARGET_POINTS", "protocol_errors"]

#: memory activity given to every replayed workload (matrix multiplications: mostly on-chip)
MEM_ACTIVITY = 0.1
#: the counter protocol's options that make it the one of 2026-11-24 (commit aed07b7): no settling
#: extension for a capped start, no α warm-up
AS_ON_2026_11_24 = {"max_settle_s": 0.0, "learn_alpha": False}
#: issue 27: the twin's error within this many percentage points of the real one
TARGET_POINTS = 1.0
#: seconds of back-to-back launches the real script ran after each callable's reference (its EnergyMeter rows)
METER_S = 3.0
#: the kinds of rows replayed and how the real script ordered them
CALLABLE, CAMPAIGN = "callable", "source (campaign)"


def _twin_workload(preset, row: pd.Series, name: str) -> SimulatedWorkload:
    f_max = preset.physics.sm_clock_max_mhz
    f = float(row.get("sm_clock_mhz", f_max))
    f = f if np.isfinite(f) and f > 0 else f_max
    t_top = float(row["time_s"]) * min(f, f_max) / f_max
    temp = float(row.get("temperature_c", np.nan))
    temp = temp if np.isfinite(temp) else 50.0
    load = SimulatedWorkload(name, core_work=t_top * f_max, mem_activity=MEM_ACTIVITY)
    return preset.at_power(load, float(row["reference_power_w"]), clock_mhz=f, temperature_c=temp)


def protocol_errors(preset, comparison: pd.DataFrame, *, reference_s: float = 12.0, skip_s: float = 2.0,
                    seed: int = 0, start_temperature_c: float | None = None, progress=None) -> pd.DataFrame:
    """Replay a real protocol-vs-reference comparison on a twin; the errors side by side.

    Parameters
    ----------
    preset : TwinPreset or str
    comparison : DataFrame
        The real ``comparison.csv`` (columns ``workload``, ``kind``,
        ``config``, ``protocol``, ``time_s``, ``sm_clock_mhz``,
        ``temperature_c``, ``reference_power_w``, ``error_pct``).
    reference_s, skip_s : float
        The reference's length and skipped start (as the real run: 12, 2).
    seed : int, default=0
    start_temperature_c : float, optional
        Idle temperature the twin starts from (default its idle steady state).
    progress : callable, optional
        ``progress(done, total)`` after each workload.

    Returns
    -------
    DataFrame
        Per replayed row: ``workload``, ``kind``, ``config``, ``real_error_pct``,
        ``twin_error_pct``, ``difference_points``, ``target_points``, ``within``,
        ``twin_activity``.
    """
    from .. import api, schema
    from ..measuring.reference import reference_energy
    from ..measuring.runner import make_runner
    from ..workloads import CallableWorkload

    twin = load_preset(preset)
    missing = [c for c in ("workload", "kind", "protocol", "time_s", "reference_power_w", "error_pct")
               if c not in comparison.columns]
    if missing:
        raise ValueError(f"protocol_errors: the comparison table lacks column(s) {', '.join(missing)}")
    rows = comparison.loc[comparison["kind"].isin([CALLABLE, CAMPAIGN])].reset_index(drop=True)
    gpu = twin.gpu(seed=seed, history_s=60.0)
    if start_temperature_c is not None:
        gpu.start_at_temperature(start_temperature_c)
    runner = make_runner(gpu)
    loads = [_twin_workload(twin, r, f"{r['workload']}[{r.get('config', '')}]") for _, r in rows.iterrows()]

    def noop():
        """Stands for the user's callable: on the simulated GPU only its twin runs."""

    measured: dict[int, float] = {}
    referenced: dict[int, float] = {}

    def measure(i):
        # the host's set-up before the first launch (imports, allocations) idled the GPU: the real call's
        # wall time beyond what the protocol itself takes (timed on a scratch twin)
        wall = float(rows["wall_measure_s"].iloc[i]) if "wall_measure_s" in rows else np.nan
        if np.isfinite(wall):
            scratch = twin.gpu(seed=seed, history_s=60.0)
            api.measure(noop, device=make_runner(scratch), simulated=loads[i], **AS_ON_2026_11_24)
            gpu.idle(max(wall - scratch.now(), 0.0))
        m = api.measure(noop, device=runner, simulated=loads[i], **AS_ON_2026_11_24)
        measured[i] = float(m.row[schema.ENERGY_J])

    def reference(i):
        ref = reference_energy(runner, CallableWorkload(noop, simulated=loads[i]), duration_s=reference_s,
                               skip_s=skip_s)
        referenced[i] = float(ref.energy_j)
        if rows["kind"].iloc[i] == CALLABLE:  # the real script then ran it 3 s back to back (EnergyMeter rows)
            gpu.run(loads[i], launches=max(1, round(METER_S / float(ref.time_s))))

    # the real script's order: each callable measured then referenced; the campaign's rows all
    # measured first, then each referenced
    order = []
    for i, kind in enumerate(rows["kind"]):
        if kind == CALLABLE:
            order += [(measure, i), (reference, i)]
    campaign = [i for i, kind in enumerate(rows["kind"]) if kind == CAMPAIGN]
    order += [(measure, i) for i in campaign] + [(reference, i) for i in campaign]
    with warnings.catch_warnings():
        # the 2026-11-24 protocol had no α: the assumed-α warning of every row says nothing here
        warnings.simplefilter("ignore", AlphaAssumedWarning)
        for step, (call, i) in enumerate(order):
            call(i)
            if progress is not None:
                progress(step + 1, len(order))
    out = []
    for i, r in rows.iterrows():
        twin_err = 100.0 * (measured[i] / referenced[i] - 1.0)
        diff = twin_err - float(r["error_pct"])
        out.append({schema.WORKLOAD: r["workload"], "kind": r["kind"], "config": r.get("config", ""),
                    "real_error_pct": float(r["error_pct"]), "twin_error_pct": twin_err,
                    "difference_points": diff, "target_points": TARGET_POINTS,
                    schema.CHECK_WITHIN: bool(abs(diff) <= TARGET_POINTS), "twin_activity": loads[i].activity})
    return pd.DataFrame(out)
