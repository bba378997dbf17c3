"""Shared input handling for the sensor estimators: columns, groups, updates.

Every characterisation estimator takes the same input: either a trace table
(a DataFrame; columns picked by name or position through ``*_column``
parameters, the reading taken from ``power_column`` unless ``y`` is given) or
a numeric array whose column 0 is the time in seconds and column 1 the known
load (activity or reference power), with the sensor reading passed as ``y``.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pandas as pd
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import validate_data

from .. import schema

#: ``_parameter_constraints`` entries of the sensor estimators: a column (a name or a position),
#: an optional one, a finite real, a real >= 0.
COLUMN = [str, Interval(Integral, None, None, closed="neither")]
OPTIONAL_COLUMN = [*COLUMN, None]
FINITE = [Interval(Real, None, None, closed="neither")]
NON_NEGATIVE = [Interval(Real, 0, None, closed="left")]

MIN_SAMPLES = 3


def table_column(X: pd.DataFrame, spec, what: str) -> pd.Series:
    """Column ``spec`` (a name or a position) of ``X``; ValueError naming ``what`` when it is not there."""
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        if not -X.shape[1] <= spec < X.shape[1]:
            raise ValueError(f"{what}: position {spec} is out of range for {X.shape[1]} column(s)")
        return X.iloc[:, int(spec)]
    if spec not in X.columns:
        raise ValueError(f"{what}: column {spec!r} is missing (have {list(X.columns)})")
    return X[spec]


def series_from_input(estimator, X, y, *, time_column, load_column, power_column,
                      group_column=None, need_load=True, reset=True):
    """Validate ``X``/``y`` and return ``(t, load, reading, groups)`` as arrays.

    Parameters
    ----------
    estimator : BaseEstimator
        Receives ``n_features_in_`` (and ``feature_names_in_``) from
        :func:`sklearn.utils.validation.validate_data`.
    X : DataFrame or array-like of shape (n_samples, n_features)
        A trace table, or an array ``[time_s, load, ...]``.
    y : array-like of shape (n_samples,) or None
        The sensor reading; required with an array ``X``.
    time_column, load_column, power_column, group_column : str or int or None
        Column names (or positions) used when ``X`` is a DataFrame.
    need_load : bool
        Whether the load column is needed (update-period estimation does not).

    Returns
    -------
    t, load, reading : ndarray of shape (n_samples,)
        Sorted by ``(group, t)``; ``load`` is None when not needed.
    groups : ndarray of shape (n_samples,)
        Integer group codes (all zero without a group column).
    """
    name = type(estimator).__name__
    groups = None
    if isinstance(X, pd.DataFrame):
        cols = {"time": table_column(X, time_column, f"{name}: time_column")}
        if need_load:
            cols["load"] = table_column(X, load_column, f"{name}: load_column")
        if y is None:
            cols["reading"] = table_column(X, power_column, f"{name}: power_column")
        if group_column is not None and (
            isinstance(group_column, (int, np.integer)) or group_column in X.columns
        ):
            groups = pd.factorize(table_column(X, group_column, f"{name}: group_column"))[0]
        names = [str(s.name) for s in cols.values()]
        if len(set(names)) == len(names):
            sel = pd.DataFrame({n: s.to_numpy() for n, s in zip(names, cols.values(), strict=True)})
        else:  # one column used twice: no feature names
            sel = np.column_stack([s.to_numpy() for s in cols.values()])
        arr = validate_data(estimator, sel, reset=reset, dtype="numeric",
                            ensure_min_samples=MIN_SAMPLES)
        arr = np.asarray(arr, dtype=float)
        t = arr[:, 0]
        load = arr[:, 1] if need_load else None
        if y is None:
            reading = arr[:, -1]
        else:
            reading = _reading(y, len(t), name)
    else:
        if y is None:
            raise ValueError(
                f"{name} requires y to be passed, but the target y is None "
                "(with an array X, y is the sensor reading; or pass a trace table)"
            )
        if getattr(X, "dtype", None) is not None and X.dtype.kind in "mM":
            # datetime64 would become nanoseconds: the estimators take seconds
            raise ValueError(f"{name}: X holds dtype {X.dtype}; give time in seconds (float)")
        arr, yy = validate_data(estimator, X, y, reset=reset, dtype="numeric",
                                ensure_min_samples=MIN_SAMPLES, y_numeric=True)
        arr = np.asarray(arr, dtype=float)
        need = 2 if need_load else 1
        if arr.shape[1] < need:
            raise ValueError(
                f"{name}: X needs {need} feature(s) (time_s{', load' if need_load else ''}), "
                f"got {arr.shape[1]} feature(s)"
            )
        t = arr[:, 0]
        load = arr[:, 1] if need_load else None
        reading = np.asarray(yy, dtype=float)
    if groups is None:
        groups = np.zeros(len(t), dtype=int)
    if t.size and np.unique(t).size < 2:  # every interval would be zero
        raise ValueError(f"{name}: time does not advance (every time value is {t[0]:g} s)")
    order = np.lexsort((t, groups))
    return (t[order], None if load is None else load[order], reading[order], groups[order])


def _reading(y, n: int, name: str) -> np.ndarray:
    r = np.asarray(y, dtype=float).ravel()
    if r.shape[0] != n:
        raise ValueError(f"{name}: y has {r.shape[0]} value(s) but X has {n} row(s)")
    if not np.all(np.isfinite(r)):
        raise ValueError(f"{name}: y (the sensor reading) has NaN or infinite values")
    return r


def update_points(t: np.ndarray, reading: np.ndarray, tol: float = 0.0):
    """Times and values at which the reading changed (the sensor's updates).

    The first sample of a run is not an update (its start is unknown), so it
    is dropped. ``tol`` is the smallest change that counts as an update.

    Returns
    -------
    index : ndarray of int
        Row indices of the first sample of every new value.
    """
    if len(reading) < 2:
        return np.zeros(0, dtype=int)
    changed = np.abs(np.diff(reading)) > tol
    return np.flatnonzero(changed) + 1


def robust_update_period(t_updates: np.ndarray) -> tuple[float, np.ndarray]:
    """Update period from update times, robust to repeated equal values.

    The median interval between value changes (Yang §IV-A, artifact A1) is the
    first guess; an update that repeated the previous value shows up as an
    interval near an integer multiple of it, so every interval within 25 % of
    an integer multiple ``k`` is counted as ``k`` periods and the period is
    ``sum(intervals) / sum(k)``. Robust as long as fewer than half the updates
    repeat a value.

    Returns
    -------
    period : float
        Seconds; NaN with fewer than two updates.
    intervals : ndarray
        The raw intervals between value changes.
    """
    d = np.diff(np.asarray(t_updates, dtype=float))
    d = d[d > 0]
    return period_from_intervals(d), d


def period_from_intervals(intervals: np.ndarray) -> float:
    """The update period from intervals between value changes (see :func:`robust_update_period`).

    The intervals may come from several runs pooled (none spans two runs).
    NaN without a positive interval.
    """
    d = np.asarray(intervals, dtype=float)
    d = d[d > 0]
    if d.size == 0:
        return float("nan")
    base = float(np.median(d))
    k = np.maximum(np.rint(d / base), 1.0)
    ok = np.abs(d / base - k) <= 0.25
    if not ok.any():
        return base
    return float(d[ok].sum() / k[ok].sum())


def counter_power(trace: pd.DataFrame, *, counter_column=schema.ENERGY_COUNTER_J,
                  time_column=schema.T_S, group_column=schema.RUN_ID) -> pd.DataFrame:
    """Power derived from the energy counter: ``ΔE/Δt`` between its changes.

    The counter is read on its own slower cadence (NaN between reads) and
    itself changes only every counter update. At every read where it
    changed, the mean power since the previous change is ``ΔE/Δt``; that
    value is held until the next change and written, for every row of the
    trace, to :data:`schema.COUNTER_POWER_W` (NaN before the second change).
    The trace keeps its fine-grained load columns, so the same estimators
    characterise the counter like any power field (its window should come
    out as the interval between counter updates).

    Returns
    -------
    DataFrame
        A copy of ``trace`` with the derived power column added.
    """
    for c in (counter_column, time_column):
        if c not in trace.columns:
            raise ValueError(f"counter_power: column {c!r} is missing")
    out = trace.copy()
    derived = np.full(len(out), np.nan)
    keys = out[group_column] if group_column in out.columns else pd.Series(0, index=out.index)
    pos = np.arange(len(out))
    n_changes = 0
    for _, rows in pd.Series(pos, index=out.index).groupby(keys.to_numpy(), sort=False):
        r = rows.to_numpy()
        e = out[counter_column].to_numpy(dtype=float)[r]
        tt = out[time_column].to_numpy(dtype=float)[r]
        read = np.flatnonzero(np.isfinite(e))
        if read.size < 2:
            continue
        changed = read[np.concatenate([[True], np.diff(e[read]) != 0])]
        if changed.size < 3:
            continue
        n_changes += changed.size
        p = np.diff(e[changed]) / np.diff(tt[changed])
        held = np.full(r.size, np.nan)
        for k in range(1, changed.size):
            held[changed[k]:] = p[k - 1]
        derived[r] = held
    if n_changes == 0:
        raise ValueError(f"counter_power: column {counter_column!r} changes fewer than 3 times in every run")
    out[schema.COUNTER_POWER_W] = derived
    return out
