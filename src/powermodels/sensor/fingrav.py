"""Fine-grain power profiles of short kernels from many runs (FinGraV §IV).

A sensor that logs every millisecond (or, on NVIDIA, publishes a window
average every 20–100 ms) sees at best one reading per run of a sub-ms
kernel. FinGraV builds a profile anyway:

1. :func:`guidance` — how many runs and which binning margin for the
   kernel's execution time (FinGraV Table I);
2. :func:`golden_runs` — keep the runs whose execution time falls in the
   most populated bin of relative width ``margin`` (execution-time binning,
   §IV-A S3);
3. :func:`tag_executions` — within a run, tag the steady-state-execution
   (SSE) and steady-state-power (SSP) executions (§IV-A S4);
4. :func:`stitch` — with host and sensor times synced (the sensor's delay
   removed), place every reading taken during the tagged execution of a
   golden run at its time of interest (TOI) inside the kernel, and pool
   them: one fine-grain profile (§IV-B steps 6–8). :func:`profile` bins it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ._series import update_points

__all__ = ["GUIDANCE", "golden_runs", "guidance", "profile", "stitch", "tag_executions"]

#: FinGraV Table I: (upper bound of execution time s, runs, LOI spacing s, margin).
GUIDANCE = (
    (50e-6, 400, 5e-6, 0.05),
    (200e-6, 200, 10e-6, 0.05),
    (1e-3, 200, 10e-6, 0.02),
    (np.inf, 200, 10e-6, 0.02),
)

TAG_WARMUP, TAG_SSE, TAG_SSP, TAG_BOTH, TAG_OTHER = "warmup", "sse", "ssp", "sse+ssp", "other"


def guidance(exec_time_s: float) -> dict:
    """FinGraV Table I for a kernel of ``exec_time_s``.

    Returns
    -------
    dict
        ``runs`` (runs to execute), ``loi_spacing_s`` (one log of interest
        per this much execution time) and ``margin`` (binning margin).
        Kernels under 25 µs get the first row (Table I starts at 25 µs).
    """
    if not (np.isfinite(exec_time_s) and exec_time_s > 0):
        raise ValueError(f"exec_time_s must be a positive number, got {exec_time_s}")
    for upper, runs, spacing, margin in GUIDANCE:
        if exec_time_s <= upper:
            return {"runs": runs, "loi_spacing_s": spacing, "margin": margin}
    raise AssertionError("unreachable: the last row has no upper bound")


def golden_runs(exec_times_s, margin: float | None = None) -> np.ndarray:
    """Mask of the runs in the most populated execution-time bin.

    FinGraV §IV-B step 5: golden runs are those whose (SSE/SSP) execution
    time belongs to the bin holding the most executions within ``margin``
    (relative) of each other. The bin is the window ``[s, s·(1+margin)]``
    over the sorted times that holds the most runs.

    Parameters
    ----------
    exec_times_s : array-like of shape (n_runs,)
    margin : float, optional
        Relative bin width; default from :func:`guidance` for the median time.
    """
    x = np.asarray(exec_times_s, dtype=float).ravel()
    if x.size == 0 or not np.all(np.isfinite(x)) or np.any(x <= 0):
        raise ValueError("exec_times_s: needs one or more positive, finite execution times")
    if margin is None:
        margin = guidance(float(np.median(x)))["margin"]
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    s = np.sort(x)
    hi = np.searchsorted(s, s * (1 + margin), side="right")
    i = int(np.argmax(hi - np.arange(s.size)))
    return (x >= s[i]) & (x <= s[i] * (1 + margin))


def tag_executions(exec_times_s, powers_w=None, *, time_tol: float = 0.02,
                   power_tol: float = 0.02) -> np.ndarray:
    """Tag the executions of one run: warm-up, SSE, SSP (FinGraV §IV-A S4).

    SSE is the first execution after which execution time no longer drops by
    more than ``time_tol``; SSP is the first execution at or after SSE after
    which the power stays within ``power_tol`` of the run's last execution
    (without powers, the last execution). Executions before SSE are
    warm-ups; when SSE and SSP coincide the tag is ``"sse+ssp"``.

    Returns
    -------
    ndarray of str, shape (n_executions,)
    """
    t = np.asarray(exec_times_s, dtype=float).ravel()
    if t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError("exec_times_s: needs one or more finite execution times")
    suffix_min = np.minimum.accumulate(t[::-1])[::-1]
    k_sse = int(np.argmax(t <= suffix_min * (1 + time_tol)))
    if powers_w is None:
        k_ssp = t.size - 1
    else:
        p = np.asarray(powers_w, dtype=float).ravel()
        if p.shape != t.shape:
            raise ValueError(f"powers_w: has {p.size} value(s), exec_times_s {t.size}")
        dev = np.abs(p - p[-1]) > power_tol * abs(p[-1])
        # first index from which no later execution deviates
        bad_after = np.flatnonzero(dev)
        k_ssp = max(k_sse, int(bad_after[-1]) + 1 if bad_after.size else 0)
        k_ssp = min(k_ssp, t.size - 1)
    tags = np.full(t.size, TAG_OTHER, dtype=object)
    tags[:k_sse] = TAG_WARMUP
    tags[k_sse] = TAG_SSE
    tags[k_ssp] = TAG_BOTH if k_ssp == k_sse else TAG_SSP
    return tags


def stitch(trace: pd.DataFrame, launches: pd.DataFrame, *, power_column=schema.POWER_INSTANT_W,
           delay_s: float = 0.0, window_s: float = 0.0, tag: str | None = TAG_SSP,
           margin: float | None = None, updates_only: bool = True) -> pd.DataFrame:
    """Pool the readings of many runs into one profile over kernel time.

    Parameters
    ----------
    trace : DataFrame
        Trace table (:data:`schema.RUN_ID`, :data:`schema.T_S`, the power).
    launches : DataFrame
        One row per kernel execution: :data:`schema.RUN_ID`,
        :data:`schema.START_S`, :data:`schema.END_S` on the trace's clock, and
        optionally :data:`schema.EXECUTION` and :data:`schema.PROFILE_TAG`
        (from :func:`tag_executions`; without it the last execution of each
        run is taken, as FinGraV's SSP).
    delay_s, window_s : float
        The sensor's delay and window (:class:`BoxcarWindow`): a reading at
        ``t`` describes the time ``t - delay_s - window_s / 2`` (its window's
        centre). 0 and 0 for an instantaneous logger.
    tag : str or None
        Profile to build: ``"ssp"`` (also takes ``"sse+ssp"``), ``"sse"``, or
        None for every execution.
    margin : float, optional
        Binning margin for :func:`golden_runs`; runs outside the golden bin
        are dropped.
    updates_only : bool
        Use only the sample at which each new value appeared (a held value
        is one reading, not many).

    Returns
    -------
    DataFrame
        :data:`schema.RUN_ID`, :data:`schema.TOI_S` (time since the kernel
        start), :data:`schema.POWER_W`, sorted by TOI.
    """
    for name, df, cols in (("trace", trace, (schema.RUN_ID, schema.T_S, power_column)),
                           ("launches", launches, (schema.RUN_ID, schema.START_S, schema.END_S))):
        if not isinstance(df, pd.DataFrame):
            raise ValueError(f"{name}: expected a DataFrame, got {type(df).__name__}")
        for c in cols:
            if c not in df.columns:
                raise ValueError(f"{name}: column {c!r} is missing (have {list(df.columns)})")
    lz = launches.copy()
    if schema.PROFILE_TAG in lz.columns and tag is not None:
        want = {TAG_SSP: (TAG_SSP, TAG_BOTH), TAG_SSE: (TAG_SSE, TAG_BOTH)}.get(tag, (tag,))
        lz = lz[lz[schema.PROFILE_TAG].isin(want)]
    elif tag is not None:
        order = schema.EXECUTION if schema.EXECUTION in lz.columns else schema.START_S
        lz = lz.sort_values(order).groupby(schema.RUN_ID, sort=False).tail(1)
    if lz.empty:
        raise ValueError(f"launches: no execution tagged {tag!r}")
    dur = (lz[schema.END_S] - lz[schema.START_S]).to_numpy(dtype=float)
    lz = lz[golden_runs(dur, margin)]
    shift = delay_s + window_s / 2
    rows = []
    by_run = dict(tuple(trace.groupby(schema.RUN_ID, sort=False)))
    for run, start, end in lz[[schema.RUN_ID, schema.START_S, schema.END_S]].itertuples(
            index=False):
        g = by_run.get(run)
        if g is None:
            continue
        g = g[[schema.T_S, power_column]].dropna()
        t = g[schema.T_S].to_numpy(dtype=float)
        v = g[power_column].to_numpy(dtype=float)
        if updates_only and t.size >= 2:
            idx = update_points(t, v)
            t, v = 0.5 * (t[idx - 1] + t[idx]), v[idx]
        at = t - shift
        inside = (at >= start) & (at <= end)
        rows.append(pd.DataFrame({schema.RUN_ID: run, schema.TOI_S: at[inside] - start,
                                  schema.POWER_W: v[inside]}))
    if not rows:
        raise ValueError("stitch: no golden run has a trace")
    out = pd.concat(rows, ignore_index=True)
    return out.sort_values(schema.TOI_S, kind="stable").reset_index(drop=True)


def profile(stitched: pd.DataFrame, bin_s: float) -> pd.DataFrame:
    """Mean power per TOI bin of a stitched profile.

    Returns
    -------
    DataFrame
        :data:`schema.TOI_S` (bin centre), :data:`schema.POWER_W` (mean) and
        :data:`schema.REPEAT` (readings in the bin); empty bins are left out.
    """
    if not bin_s > 0:
        raise ValueError(f"bin_s must be > 0, got {bin_s}")
    for c in (schema.TOI_S, schema.POWER_W):
        if c not in stitched.columns:
            raise ValueError(f"stitched: column {c!r} is missing")
    k = np.floor(stitched[schema.TOI_S].to_numpy(dtype=float) / bin_s).astype(int)
    g = stitched.groupby(k)[schema.POWER_W]
    return pd.DataFrame({schema.TOI_S: (g.mean().index.to_numpy() + 0.5) * bin_s,
                         schema.POWER_W: g.mean().to_numpy(),
                         schema.REPEAT: g.size().to_numpy()})
