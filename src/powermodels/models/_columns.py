"""Column handling shared by the column-aware estimators (name or position)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, check_is_fitted

__all__ = ["column_index", "column_label", "is_fitted", "numeric_column", "replace_column", "table_array"]


def column_index(X, column, param: str) -> int:
    """Position of ``column`` (a name or a position) in ``X``; ValueError naming ``param``."""
    n_features = X.shape[1]
    if isinstance(column, str):
        if not isinstance(X, pd.DataFrame):
            raise ValueError(
                f"{param}={column!r} is a column name, but X is a {type(X).__name__} without "
                "column names; pass a DataFrame or a column position"
            )
        if column not in X.columns:
            raise ValueError(f"column {column!r} ({param}) is missing; have {list(X.columns)}")
        return int(X.columns.get_loc(column))
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


def table_array(X, *, reset_check=True) -> np.ndarray | pd.DataFrame:
    """Basic structural checks of a table; DataFrames pass through, arrays become 2-D float.

    DataFrames may carry non-numeric columns (kernel, config) that the
    estimator does not use; only the columns it reads are converted and
    checked (by :func:`numeric_column`).
    """
    if isinstance(X, pd.DataFrame):
        if X.shape[0] == 0:
            raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
        if X.shape[1] == 0:
            raise ValueError(f"Found array with 0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        return X
    return check_array(X, dtype=None, ensure_all_finite=False, ensure_2d=True)


def numeric_column(X, j: int, param: str, *, nonnegative: bool = False, unit: str = "") -> np.ndarray:
    """Column ``j`` of ``X`` as finite float array; ValueError naming the column.

    Negative values raise ``"Negative values in data ..."`` (the message
    scikit-learn's common checks expect for non-negative inputs).
    """
    col = X.iloc[:, j] if isinstance(X, pd.DataFrame) else X[:, j]
    label = column_label(X, j)
    values = np.asarray(col)
    if np.iscomplexobj(values):
        raise ValueError(f"Complex data not supported: column {label!r} ({param})")
    if values.dtype.kind in "mM":  # would become nanoseconds without a word
        raise ValueError(f"column {label!r} ({param}) holds dtype {values.dtype}, not numbers")
    try:
        values = values.astype(float)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, TypeError):
            raise
        raise ValueError(f"column {label!r} ({param}) is not numeric: {exc}") from exc
    bad = ~np.isfinite(values)
    if bad.any():
        raise ValueError(
            f"Input contains NaN or infinity: column {label!r} ({param}) has {int(bad.sum())} "
            f"non-finite value(s) (first at row {int(np.argmax(bad))})"
        )
    if nonnegative and values.size and values.min() < 0:
        raise ValueError(
            f"Negative values in data: column {label!r} ({param}) has {values.min():g}{unit}"
        )
    return values


def _all_nonnegative(X: np.ndarray) -> None:
    """Clock features are non-negative; reject any negative entry of numeric ``X``."""
    if X.size and np.min(X) < 0:
        j = int(np.argmin(np.min(X, axis=0)))
        raise ValueError(f"Negative values in data: column {j} has {np.min(X):g}; clocks are ≥ 0 MHz")


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
