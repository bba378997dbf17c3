"""The power level of a FinGraV session that the NVIDIA sensors can identify.

FinGraV (§IV-A S4, §IV-B step 3) profiles the *steady-state power* (SSP)
execution: the last execution of a run long enough that the power no longer
changes, found by doubling the executions per run. Its premise is a ~1 ms
logger. NVIDIA's instant reading is a ~20–30 ms boxcar mean published every
100 ms, and the energy counter also moves only every 100 ms, so on a real
H100 (``docs/sensor.md``, "FinGraV on the H100") a per-bin profile of a
2–10 ms run is not identified: the bins trade energy with each other and
with the bins before and after the run, as the window and delay — known only
to a few ms — move, and the baseline fitted between runs absorbs the power
that lingers after each run. Two quantities the sensors do identify:

* :func:`inside_level` — the SSP power itself, from readings whose whole
  window (with a margin for the window's and delay's uncertainty) lies
  inside the SSP part of runs that are long enough: each such reading *is*
  the mean power over its window, no deconvolution needed;
* :func:`counter_run_energy` — the energy of one run above an idle
  baseline measured by the counter *before* the session
  (:func:`counter_baseline`), not fitted between runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ._series import update_points

__all__ = ["counter_baseline", "counter_run_energy", "inside_level"]


def _counter_updates(trace: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Times and values where a new energy-counter value appeared."""
    for c in (schema.T_S, schema.ENERGY_COUNTER_J):
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing")
    g = trace[[schema.T_S, schema.ENERGY_COUNTER_J]].dropna().sort_values(schema.T_S)
    t = g[schema.T_S].to_numpy(dtype=float)
    e = g[schema.ENERGY_COUNTER_J].to_numpy(dtype=float)
    if t.size < 3:
        raise ValueError(f"trace: needs 3 or more energy-counter reads, got {t.size}")
    ch = np.flatnonzero(np.diff(e) != 0) + 1
    # a new value appeared between the previous read and this one: the midpoint
    return 0.5 * (t[ch - 1] + t[ch]), e[ch]


def counter_baseline(trace: pd.DataFrame, t0: float, t1: float) -> tuple[float, float]:
    """Idle power from the energy counter between ``t0`` and ``t1``: slope and its standard error.

    Fitted by least squares to the counter values at their updates inside the
    interval (three or more updates needed: at ~100 ms per update, 0.3 s).

    Returns
    -------
    power_w, se_w : float
    """
    tu, eu = _counter_updates(trace)
    m = (tu >= t0) & (tu <= t1)
    if m.sum() < 3:
        raise ValueError(f"counter_baseline: {int(m.sum())} counter update(s) in "
                         f"[{t0:.3f}, {t1:.3f}] s; needs 3 or more (a longer idle segment)")
    x, y = tu[m] - tu[m].mean(), eu[m]
    slope = float(np.sum(x * (y - y.mean())) / np.sum(x * x))
    res = y - y.mean() - slope * x
    dof = max(int(m.sum()) - 2, 1)
    se = float(np.sqrt(np.sum(res ** 2) / dof / np.sum(x * x)))
    return slope, se


def counter_run_energy(trace: pd.DataFrame, runs, baseline_w: float, *,
                       baseline_se_w: float = 0.0) -> dict:
    """Energy per run above an idle baseline, from the counter over the whole session.

    The session is taken from the last counter update before the first run to
    the first update after the last run ends; everything the runs cost (the
    power that lingers after each run included) is inside it.

    Parameters
    ----------
    trace : DataFrame
        :data:`schema.T_S` and :data:`schema.ENERGY_COUNTER_J` (rows without a
        counter read may hold NaN).
    runs : array of shape (n_runs, 2)
        ``[start_s, end_s]`` of every run, on the trace's clock.
    baseline_w, baseline_se_w : float
        Idle power (:func:`counter_baseline`) and its standard error.

    Returns
    -------
    dict
        ``energy_j`` (per run), ``se_j`` (from the baseline's standard error:
        the baseline times the session, shared by few runs, dominates),
        ``runs``, ``session_s``.
    """
    iv = np.asarray(runs, dtype=float).reshape(-1, 2)
    if iv.shape[0] < 1 or not np.all(np.isfinite(iv)) or np.any(iv[:, 1] < iv[:, 0]):
        raise ValueError("runs: needs one or more [start_s, end_s] rows with end >= start")
    tu, eu = _counter_updates(trace)
    before = np.flatnonzero(tu <= iv[:, 0].min())
    after = np.flatnonzero(tu >= iv[:, 1].max())
    if before.size == 0 or after.size == 0:
        raise ValueError("counter_run_energy: the trace needs a counter update before the first "
                         "run and one after the last")
    a, b = before[-1], after[0]
    span = float(tu[b] - tu[a])
    n = iv.shape[0]
    return {"energy_j": float((eu[b] - eu[a] - baseline_w * span) / n),
            "se_j": float(baseline_se_w * span / n), "runs": n, "session_s": span}


def inside_level(trace: pd.DataFrame, runs, *, window_s: float, delay_s: float,
                 after_s: float = 0.0, margin_s: float = 0.0,
                 power_column=schema.POWER_INSTANT_W) -> tuple[pd.DataFrame, dict]:
    """Readings whose window lies wholly inside the steady part of a run, and their mean.

    A reading published at ``u`` describes ``[u − delay − window, u − delay]``
    (:class:`~powermodels.sensor.window.BoxcarWindow`); it is kept when that
    interval, widened by ``margin_s`` on both sides, lies inside
    ``[start + after_s, end]`` of one run.

    Parameters
    ----------
    trace : DataFrame
        :data:`schema.T_S` and the reading (held values are fine: only the
        sample where a new value appeared is used).
    runs : array of shape (n_runs, 2)
        ``[start_s, end_s]`` of every run.
    window_s, delay_s : float
        The reading's window and delay.
    after_s : float
        Skip this long after each run's start (the executions before SSP).
    margin_s : float
        Widen each window by this on both sides (the window's and delay's
        uncertainty).

    Returns
    -------
    readings : DataFrame
        :data:`schema.T_S` (update time), :data:`schema.POWER_W`,
        :data:`schema.TOI_S` (window centre from the run's start).
    summary : dict
        ``power_w`` (mean), ``se_w`` (standard error), ``n``.
    """
    if not (window_s > 0 and delay_s >= 0 and after_s >= 0 and margin_s >= 0):
        raise ValueError(f"window_s must be > 0 and delay_s, after_s, margin_s >= 0; got "
                         f"{window_s}, {delay_s}, {after_s}, {margin_s}")
    for c in (schema.T_S, power_column):
        if c not in trace.columns:
            raise ValueError(f"trace: column {c!r} is missing")
    iv = np.asarray(runs, dtype=float).reshape(-1, 2)
    iv = iv[np.argsort(iv[:, 0])]
    g = trace[[schema.T_S, power_column]].dropna().sort_values(schema.T_S)
    t, v = g[schema.T_S].to_numpy(dtype=float), g[power_column].to_numpy(dtype=float)
    idx = update_points(t, v)
    u, r = 0.5 * (t[idx - 1] + t[idx]), v[idx]
    lo, hi = u - delay_s - window_s - margin_s, u - delay_s + margin_s
    k = np.searchsorted(iv[:, 0], lo, side="right") - 1  # the run starting last before the window
    ok = k >= 0
    kk = np.clip(k, 0, None)
    ok &= (lo >= iv[kk, 0] + after_s) & (hi <= iv[kk, 1])
    out = pd.DataFrame({schema.T_S: u[ok], schema.POWER_W: r[ok],
                        schema.TOI_S: (lo[ok] + hi[ok]) / 2 - iv[kk[ok], 0]})
    n = len(out)
    mean = float(out[schema.POWER_W].mean()) if n else float("nan")
    se = float(out[schema.POWER_W].std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    return out, {"power_w": mean, "se_w": se, "n": n}
