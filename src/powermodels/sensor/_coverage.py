"""How much of each time window a set of launches covers, in time linear in the trace.

Attaching a known load to a trace asks, for every sample window ``[a_j, b_j]``,
for the summed overlap with every launch ``[s_i, e_i]``. Broadcasting windows
against launches costs samples × launches (a 72 s run at 2 kHz with 36,000
launches: 0.5 s and 900 MB). Instead the summed overlap is a difference of one
cumulative function, ``cover(a, b) = F(b) - F(a)`` with
``F(x) = Σ_i clip(x - s_i, 0, e_i - s_i)`` (the launch time elapsed by ``x``),
evaluated by binary search: O((samples + launches) · log launches).
"""

from __future__ import annotations

import numpy as np

__all__ = ["covered_time"]


def _elapsed(x: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """``F(x) = Σ_i clip(x - s_i, 0, e_i - s_i)`` for launches sorted by start."""
    d = e - s
    if s.size < 2 or np.all(s[1:] >= e[:-1]):
        # disjoint launches (the usual case): the completed ones plus the one in progress
        cum = np.concatenate([[0.0], np.cumsum(d)])
        k = np.searchsorted(s, x, side="right") - 1
        kc = np.maximum(k, 0)
        return np.where(k >= 0, cum[kc] + np.clip(x - s[kc], 0.0, d[kc]), 0.0)
    # overlapping launches: Σ_{s_i <= x} (x - s_i) - Σ_{e_i <= x} (x - e_i), on times
    # relative to the first start so the running sums keep their precision
    x0 = s[0]
    sr, er = s - x0, np.sort(e) - x0
    xr = x - x0
    cs = np.concatenate([[0.0], np.cumsum(sr)])
    ce = np.concatenate([[0.0], np.cumsum(er)])
    ns = np.searchsorted(sr, xr, side="right")
    ne = np.searchsorted(er, xr, side="right")
    return (ns * xr - cs[ns]) - (ne * xr - ce[ne])


def covered_time(win_start, win_end, intervals) -> np.ndarray:
    """Summed overlap of each window ``[win_start_j, win_end_j]`` with the launches.

    Parameters
    ----------
    win_start, win_end : array-like of float
        Window bounds (same shape).
    intervals : array-like, shape (n_launches, 2)
        ``[start_s, end_s]`` rows, in any order; they may overlap (each
        overlap then counts once per launch, as a sum of overlaps does).

    Returns
    -------
    ndarray
        Covered seconds per window (0 where ``win_end <= win_start``).

    Raises
    ------
    ValueError
        If a launch ends before it starts.
    """
    a = np.asarray(win_start, dtype=float)
    b = np.asarray(win_end, dtype=float)
    iv = np.asarray(intervals, dtype=float).reshape(-1, 2)
    if iv.shape[0] == 0:
        return np.zeros(np.broadcast(a, b).shape)
    if np.any(iv[:, 1] < iv[:, 0]):
        # a negative length would be subtracted from the neighbours' coverage in F
        raise ValueError("intervals: a launch ends before it starts")
    iv = iv[np.argsort(iv[:, 0], kind="stable")]
    s, e = iv[:, 0], iv[:, 1]
    cover = _elapsed(b, s, e) - _elapsed(a, s, e)
    return np.where(b > a, np.maximum(cover, 0.0), 0.0)
