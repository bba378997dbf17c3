"""What the trace-matrix filters share: input checks and the fit/transform plumbing.

A trace matrix holds one run per row and one resampled time point per column
(:func:`powermodels.schema.validate_trace_matrix`). Every filter of
:mod:`powermodels.models.smoothing` and :mod:`powermodels.models.kalman`
derives from :class:`TraceFilter`, which validates the matrix (naming the
DataFrame column of a NaN or a negative power), keeps its shape and leaves
the filter itself to the subclass. The filters are stateless transformers:
``fit`` only validates and records the number of time points.
"""

from __future__ import annotations

import math
import numbers
from abc import ABCMeta, abstractmethod

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from powermodels.schema import validate_trace_matrix

__all__ = ["FINITE", "TraceFilter", "check_real", "initial_level"]


#: ``_parameter_constraints`` entry of a finite real number (sklearn's Interval excludes NaN and ±inf).
FINITE = Interval(numbers.Real, None, None, closed="neither")


def check_real(name: str, value, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Check a scalar parameter and return it as float; the ValueError names it.

    Parameters
    ----------
    name : str
        Parameter name, for the error message.
    value : object
        The value to check: a finite real number, not a bool.
    low, high : float or None, default=None
        Bounds (None: unbounded on that side).
    low_open, high_open : bool, default=False
        Whether the bound itself is excluded.

    Returns
    -------
    float
        ``value`` as a float.

    Raises
    ------
    ValueError
        If ``value`` is not a finite real number or lies outside the bounds.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    value = float(value)
    if low is not None and (value < low or (low_open and value == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {value:g}")
    if high is not None and (value > high or (high_open and value == high)):
        raise ValueError(f"{name} must be {'<' if high_open else '<='} {high:g}, got {value:g}")
    return value


def initial_level(x0, Z: np.ndarray) -> np.ndarray:
    """Per-row initial state: the first sample of each row (thesis §4.3.2/§4.3.3) or ``x0``.

    Parameters
    ----------
    x0 : float or None
        The filter's ``x0`` parameter (checked with :func:`check_real`).
    Z : ndarray of shape (n_runs, n_times)
        Validated trace matrix.

    Returns
    -------
    ndarray of shape (n_runs,)
    """
    if x0 is None:
        return Z[:, 0].copy()
    return np.full(Z.shape[0], check_real("x0", x0))


class TraceFilter(OneToOneFeatureMixin, TransformerMixin, BaseEstimator, metaclass=ABCMeta):
    """Base of the trace-matrix filters: validation of the matrix, shape-preserving transform.

    A subclass sets ``_parameter_constraints`` and implements ``_check_params``
    (validate the parameters, raising ValueError) and ``_filter`` (filter a
    validated ``(n_runs, n_times)`` float array along axis 1, returning an
    array of the same shape). Abstract, so :func:`powermodels.utils.all_estimators`
    does not list it.
    """

    @abstractmethod
    def _check_params(self):
        """Validate the parameters; raise ValueError naming the bad one."""

    @abstractmethod
    def _filter(self, Z: np.ndarray) -> np.ndarray:
        """Filter every row of the validated trace matrix ``Z`` along time."""

    def _validate(self, X, *, reset: bool) -> np.ndarray:
        arr = validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite=False)
        # Domain checks (NaN/inf, negative power) name the DataFrame column when there is one.
        validate_trace_matrix(X if isinstance(X, pd.DataFrame) else arr, min_columns=1)
        return arr

    def fit(self, X, y=None):
        """Validate the parameters and the trace matrix; the filter learns nothing.

        Parameters
        ----------
        X : array-like of shape (n_runs, n_times)
            Trace matrix (one run per row, one time point per column).
        y : None
            Ignored.

        Returns
        -------
        self
        """
        self._validate(X, reset=True)
        self._check_params()
        return self

    def transform(self, X):
        """Filter every row of ``X`` along time (axis 1).

        Parameters
        ----------
        X : array-like of shape (n_runs, n_times)
            Trace matrix with the same number of time points as in ``fit``.

        Returns
        -------
        X_smooth : ndarray of shape (n_runs, n_times)
            The filtered trace matrix (a DataFrame with ``set_output(transform="pandas")``).
        """
        check_is_fitted(self)
        Z = self._validate(X, reset=False)
        self._check_params()
        return self._filter(Z)

    def fit_transform(self, X, y=None):
        """Fit and filter ``X`` in one pass (validates it once).

        Parameters
        ----------
        X : array-like of shape (n_runs, n_times)
            Trace matrix.
        y : None
            Ignored.

        Returns
        -------
        X_smooth : ndarray of shape (n_runs, n_times)
        """
        Z = self._validate(X, reset=True)
        self._check_params()
        return self._filter(Z)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True  # rows are power traces (validate_trace_matrix)
        return tags
