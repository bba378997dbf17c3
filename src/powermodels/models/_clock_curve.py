"""What the one-clock curve regressors share (thesis eq. 4.1 power, eq. 4.5 time).

:class:`~powermodels.models.frequency.FrequencyPowerModel` and
:class:`~powermodels.models.runtime.RationalTimeModel` differ only in their
curve and its batched fit (``powermodels.models._curvefit``); reading the clock
column, checking the target, fitting one group or thousands at once
(:class:`~powermodels.models.grouped.GroupedEstimator`'s fast path) and the
per-group result table are the same code, kept here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._columns import _all_nonnegative, column_index, numeric_column
from ._curvefit import pad_groups

__all__ = ["check_target", "fit_groups_table"]


def check_target(y, name: str, min_samples: int = 2) -> np.ndarray:
    """``y`` as a float array with at least ``min_samples`` values, none negative."""
    y = np.asarray(y, dtype=float)
    if y.shape[0] < min_samples:
        raise ValueError(
            f"{name} has {y.shape[0]} sample{'s' if y.shape[0] != 1 else ''}, "
            f"needs at least {min_samples} (n_samples = {y.shape[0]})"
        )
    if y.size and y.min() < 0:
        raise ValueError(f"{name} (y) has negative value {y.min():g}")
    return y


class _ClockCurveRegressor(RegressorMixin, BaseEstimator):
    """Base of a four-parameter curve of the core clock, fitted by ``_curvefit``.

    Subclasses set ``_PARAMS`` (fitted attribute names), ``_TARGET`` (the
    target's name in error messages), ``_batch_fit`` (the batched fitter of
    ``_curvefit``), and implement ``_set_params_from_row`` and ``predict_at``.
    Both have the parameters ``frequency_column`` and ``max_iter``.
    """

    _PARAMS: ClassVar[tuple[str, ...]] = ()
    _TARGET: ClassVar[str] = "y"
    _batch_fit: ClassVar[Callable]
    #: Fewest distinct clocks a fit accepts: fewer leave the curve's shape unidentified.
    _MIN_CLOCKS: ClassVar[int] = 3
    #: Largest plausible target (None: no limit).
    _Y_MAX: ClassVar[float | None] = None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.target_tags.positive_only = True
        tags.regressor_tags.poor_score = True  # a 4-parameter curve of one column
        return tags

    def _frequency_column(self, X_in, X) -> np.ndarray:
        """The clock column (MHz) of validated ``X``; a DataFrame ``X_in`` lets errors name it."""
        src = X_in if isinstance(X_in, pd.DataFrame) else X
        j = column_index(src, self.frequency_column, "frequency_column")
        f = numeric_column(src, j, "frequency_column", nonnegative=True, unit=" MHz")
        _all_nonnegative(X)
        return f

    def _fit_data(self, X, y):
        """Validated clocks (MHz) and target of ``fit``; resets the feature bookkeeping."""
        X_in = X
        X, y = validate_data(self, X, y, y_numeric=True, dtype="numeric")
        f, y = self._frequency_column(X_in, X), check_target(y, self._TARGET)
        distinct = np.unique(f).size
        if distinct < self._MIN_CLOCKS:
            raise ValueError(
                f"{type(self).__name__}: {distinct} distinct clock(s) in frequency_column; the "
                f"four-parameter curve needs at least {self._MIN_CLOCKS} (a single clock identifies nothing)"
            )
        if self._Y_MAX is not None and y.size and y.max() > self._Y_MAX:
            raise ValueError(f"{self._TARGET} (y) has value {y.max():g} above the plausible maximum "
                             f"{self._Y_MAX:g}")
        return f, y

    def fit(self, X, y):
        """Fit the curve (thesis eq. 4.1 or 4.5) to the clocks in ``X`` and ``y``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core clock (MHz) in ``frequency_column``;
            other columns are ignored.
        y : array-like of shape (n_samples,)
            Power (W) or time, ≥ 0, at least 2 samples.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        f, y = self._fit_data(X, y)
        params, sse, n_iter = type(self)._batch_fit(f[None], y[None], np.ones((1, f.size)),
                                                    max_iter=self.max_iter)
        self._set_params_from_row(params[0], sse[0], f.size)
        self.n_iter_ = int(n_iter)
        return self

    def predict(self, X):
        """The fitted curve at the clocks in ``X``'s ``frequency_column``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Same columns as in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Power (W) or time, in the unit of ``y``.
        """
        check_is_fitted(self, self._PARAMS)
        X_in = X
        X = validate_data(self, X, reset=False, dtype="numeric")
        return self.predict_at(self._frequency_column(X_in, X))

    @classmethod
    def _batch_fit_groups(cls, template, X, y, codes, n_groups):
        """Fit one copy of ``template`` per group at once (fast path of GroupedEstimator)."""
        f, y = template._fit_data(X, y)
        mask, fp, yp = pad_groups(codes, n_groups, f, y)
        params, sse, n_iter = cls._batch_fit(fp, yp, mask, max_iter=template.max_iter)
        counts = mask.sum(axis=1)
        out = []
        for g in range(n_groups):
            est = copy.copy(template)  # params are scalars; clone() per group costs more than the fit
            est._set_params_from_row(params[g], sse[g], counts[g])
            est.n_iter_ = int(n_iter)
            out.append(est)
        return out


def fit_groups_table(fitter, x_name: str, x, y_name: str, y, groups, *, max_iter: int):
    """Run a batched ``_curvefit`` fitter once per group of 1-D inputs.

    Returns ``(labels, params, rmse, n_samples)``: the sorted group labels,
    the fitted parameters (one row per group), the root-mean-square residual
    and the number of samples of each group.
    """
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    g = np.asarray(groups).ravel()
    if not x.size == y.size == g.size:
        raise ValueError(f"{x_name}, {y_name} and groups differ in length: {x.size}, {y.size}, {g.size}")
    for name, arr in ((x_name, x), (y_name, y)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} has NaN or infinite values")
        if arr.size and arr.min() < 0:
            raise ValueError(f"{name} has negative values")
    labels, codes = np.unique(g, return_inverse=True)
    mask, xp, yp = pad_groups(codes, labels.size, x, y)
    params, sse, _ = fitter(xp, yp, mask, max_iter=max_iter)
    n = mask.sum(axis=1)
    return labels, params, np.sqrt(sse / np.maximum(n, 1)), n.astype(int)
