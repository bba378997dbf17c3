"""The column convention every estimator of :mod:`powermodels.models` follows.

An estimator that reads some columns of a run table takes one ``*_column``
parameter per quantity it reads, named after the quantity and defaulting to
its name in :mod:`powermodels.schema` (``clock_column="sm_clock_mhz"``,
``memory_clock_column="mem_clock_mhz"``, ``power_column="power_w"``,
``time_column="time_s"``, ``temperature_column="temperature_c"``,
``group_column``). A name is looked up in a DataFrame's columns; an integer
is a position (for arrays without names). Columns an estimator does not read
are ignored, text included; the ones it reads must hold numbers, and every
error names the column and the parameter that chose it. ``docs/columns.md``
is the user's page of this convention.
"""

from __future__ import annotations

import os
import sys
import warnings
from numbers import Integral
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_array, check_is_fitted

__all__ = [
    "COLUMN",
    "DEPRECATED",
    "RenamedParametersMixin",
    "column_index",
    "column_label",
    "is_fitted",
    "numeric_column",
    "renamed_parameter",
    "replace_column",
    "table_array",
]

#: ``_parameter_constraints`` entry of a column parameter: a name or a position.
COLUMN = [str, Interval(Integral, None, None, closed="neither")]
#: Default of a renamed parameter's old name (scikit-learn's convention): "not passed".
DEPRECATED = "deprecated"
#: The release that drops the old parameter names (they warn until then).
REMOVED_IN = "0.3"


def _caller_level() -> int:
    """``stacklevel`` that points a warning at the first frame outside this package."""
    here = os.path.dirname(os.path.abspath(__file__))
    frame, level = sys._getframe(1), 1  # the function that calls warnings.warn: level 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(here):
        frame, level = frame.f_back, level + 1
    return level


def renamed_parameter(est, new: str, old: str, *, warn: bool = True):
    """Value of parameter ``new`` of ``est``, or of its deprecated old name ``old`` where passed.

    The old name keeps working for one release with a ``FutureWarning``
    (raised when ``warn``, i.e. in ``fit``); passing both names is an error.
    """
    old_value = getattr(est, old)
    if isinstance(old_value, str) and old_value == DEPRECATED:
        return getattr(est, new)
    default = type(est)().get_params(deep=False)[new]
    new_value = getattr(est, new)
    if not (type(new_value) is type(default) and new_value == default):
        raise ValueError(f"{type(est).__name__}: pass {new} only; {old}={old_value!r} is its "
                         f"deprecated name and {new}={new_value!r} was passed too")
    if warn:
        warnings.warn(f"{type(est).__name__}: the parameter {old} is now {new} ({old} is deprecated "
                      f"and will be removed in {REMOVED_IN}); pass {new}={old_value!r}",
                      FutureWarning, stacklevel=_caller_level())
    return old_value


class RenamedParametersMixin:
    """Mix in before ``BaseEstimator``: estimators saved before a parameter was renamed still load.

    ``_RENAMED`` maps an old parameter name to its new one, ``_ADDED`` a parameter added later
    to the value that reproduces the old behaviour. A state saved (pickle, skops calibration
    file) before the change holds the old name and not the new one: loading moves the value to
    the new name (no FutureWarning then: the user wrote no old name) and fills the added ones.
    """

    _RENAMED: ClassVar[dict[str, str]] = {}
    _ADDED: ClassVar[dict[str, object]] = {}

    def __setstate__(self, state):
        state = dict(state)
        for old, new in self._RENAMED.items():
            if new not in state and old in state:
                state[new], state[old] = state[old], DEPRECATED
        for name, value in self._ADDED.items():
            state.setdefault(name, value)
        super().__setstate__(state)


def _shown(columns) -> str:
    names = [str(c) for c in columns]
    return repr(names) if len(names) <= 12 else repr(names[:12])[:-1] + f", ... ({len(names)} columns)]"


def column_index(X, column, param: str, *, sole: bool = False, legacy: int | None = None,
                 default=None) -> int:
    """Position of ``column`` (a name or a position) in ``X``; ValueError naming ``param``.

    A name needs a DataFrame, except in two cases for an ``X`` without
    column names: with ``sole``, an ``X`` of one column is that column (a
    single column is unambiguous); with ``legacy``, the ``default`` name falls
    back to the position ``legacy`` the parameter used to default to, with a
    ``FutureWarning`` (for one release).
    """
    n_features = X.shape[1]
    if isinstance(column, str):
        if isinstance(X, pd.DataFrame):
            if column not in X.columns:
                raise ValueError(f"column {column!r} ({param}) is missing; X has {_shown(X.columns)}: "
                                 f"pass {param}=<the column's name>")
            where = X.columns.get_loc(column)
            if not isinstance(where, (int, np.integer)):
                raise ValueError(f"column {column!r} ({param}) appears {int(np.sum(X.columns == column))} "
                                 "times in X; column names must be unique")
            return int(where)
        if sole and n_features == 1:
            return 0
        if legacy is not None and column == default and -n_features <= legacy < n_features:
            warnings.warn(f"X has no column names, so {param}={column!r} (the default) names no "
                          f"column; using column {legacy} as before. Pass a DataFrame with column "
                          f"{column!r} or {param}={legacy}: from {REMOVED_IN} an X without names needs "
                          "the position", FutureWarning, stacklevel=_caller_level())
            return legacy % n_features
        raise ValueError(
            f"{param}={column!r} is a column name, but X is a {type(X).__name__} without "
            f"column names; pass a DataFrame with column {column!r} or {param}=<position>"
        )
    if isinstance(column, (int, np.integer)) and not isinstance(column, bool):
        j = int(column)
        if not -n_features <= j < n_features:
            raise ValueError(
                f"X has {n_features} feature(s), but {param}={j} needs at least {j + 1 if j >= 0 else -j}"
            )
        return j % n_features
    raise ValueError(f"{param} must be a column name or an integer position, got {column!r}")


def column_label(X, j: int):
    """Readable label of column ``j`` for error messages."""
    return X.columns[j] if isinstance(X, pd.DataFrame) else j


def table_array(X) -> np.ndarray | pd.DataFrame:
    """Basic structural checks of a table; DataFrames pass through, arrays become 2-D.

    DataFrames may carry non-numeric columns (kernel, config) that the
    estimator does not use; only the columns it reads are converted and
    checked (by :func:`numeric_column`). An array has no names to tell a
    note from a feature, so it is a numeric matrix checked whole (finite
    numbers in every column), as scikit-learn checks arrays.
    """
    if isinstance(X, pd.DataFrame):
        if X.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
        if X.shape[1] == 0:
            raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        return X
    X = check_array(X, dtype=None, ensure_all_finite=False, ensure_2d=True)
    if X.dtype.kind not in "fiu" or not np.all(np.isfinite(X)):
        for j in range(X.shape[1]):
            numeric_column(X, j, None)
    return X


def numeric_column(X, j: int, param: str | None, *, nonnegative: bool = False, unit: str = "") -> np.ndarray:
    """Column ``j`` of ``X`` as finite float array; ValueError naming the column.

    Negative values raise ``"Negative values in data ..."`` (the message
    scikit-learn's common checks expect for non-negative inputs).
    """
    col = X.iloc[:, j] if isinstance(X, pd.DataFrame) else X[:, j]
    label = column_label(X, j)
    # Without a parameter the whole array is being checked: say so, and how to avoid it.
    where = (f"column {label!r} ({param})" if param else
             f"column {label!r} of X (an array without column names is checked whole; a DataFrame "
             "has its unread columns ignored)")
    values = np.asarray(col)
    if values.dtype.kind in "USO" and any(isinstance(v, (str, bytes)) for v in values.ravel()):
        first = next(v for v in values.ravel() if isinstance(v, (str, bytes)))
        hint = f": is {param} the right column?" if param else ""
        raise ValueError(f"{where} is not numeric: it holds text ({first!r}){hint}")
    if np.iscomplexobj(values):
        raise ValueError(f"Complex data not supported: {where}")
    if values.dtype.kind in "mM":  # would become nanoseconds without a word
        raise ValueError(f"{where} holds dtype {values.dtype}, not numbers")
    try:
        values = values.astype(float)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TypeError):
            raise
        raise ValueError(f"{where} is not numeric: {exc}") from exc
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(
            f"Input contains NaN or infinity: {where} has {int(bad.sum())} "
            f"non-finite value(s) (first at row {int(np.argmax(bad))})"
        )
    if nonnegative and values.size and values.min() < 0:
        raise ValueError(f"Negative values in data: {where} has {values.min():g}{unit}")
    return values


def is_fitted(est) -> bool:
    """Whether ``est`` is a fitted estimator (``check_is_fitted`` passes)."""
    try:
        check_is_fitted(est)
    except NotFittedError:
        return False
    return True


def replace_column(X, j: int, values: np.ndarray):
    """Copy of ``X`` with column ``j`` replaced (DataFrame stays a DataFrame)."""
    if isinstance(X, pd.DataFrame):
        out = X.copy()
        out.isetitem(j, values.astype(float))
        return out
    out = np.array(X, dtype=float, copy=True)
    out[:, j] = values
    return out
