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
import warnings
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from numbers import Integral
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_array, check_consistent_length, check_is_fitted, column_or_1d
from sklearn.utils.validation import validate_data

from .. import schema
from ._columns import (
    COLUMN,
    RenamedParametersMixin,
    column_index,
    column_label,
    numeric_column,
    renamed_parameter,
    table_array,
)
from ._curvefit import pad_groups

__all__ = ["ClockCurveRegressor", "check_target", "fit_groups_table"]


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


def _clocks_phrase(n: int, clocks: np.ndarray) -> str:
    """``"1 distinct clock (1410 MHz)"``, ``"2 distinct clocks (900, 1500 MHz)"``."""
    shown = ", ".join(f"{c:g}" for c in clocks[:5]) + (", ..." if clocks.size > 5 else "")
    return f"{n} distinct clock{'' if n == 1 else 's'} ({shown} MHz)"


class ClockCurveRegressor(RenamedParametersMixin, RegressorMixin, BaseEstimator, metaclass=ABCMeta):
    """Base of a four-parameter curve of the core clock, fitted by ``_curvefit``.

    Subclasses set ``_PARAMS`` (fitted attribute names), ``_TARGET`` (the
    target's name in error messages), ``_batch_fit`` (the batched fitter of
    ``_curvefit``), and implement ``_set_params_from_row`` and ``predict_at``.
    Both have the parameters ``clock_column`` and ``max_iter`` (and the
    deprecated ``frequency_column``, the old name of ``clock_column``).
    """

    _PARAMS: ClassVar[tuple[str, ...]] = ()
    _TARGET: ClassVar[str] = "y"
    _batch_fit: ClassVar[Callable]
    #: Fewest distinct clocks a fit accepts: fewer leave the curve's shape unidentified.
    _MIN_CLOCKS: ClassVar[int] = 3
    #: Largest plausible target (None: no limit).
    _Y_MAX: ClassVar[float | None] = None
    _parameter_constraints: ClassVar[dict] = {
        "clock_column": COLUMN,
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "frequency_column": COLUMN,  # deprecated name of clock_column
    }
    _RENAMED: ClassVar[dict[str, str]] = {"frequency_column": "clock_column"}

    @abstractmethod
    def _set_params_from_row(self, row, sse, n, *extras):
        """Set the fitted attributes from one row of ``_batch_fit``'s parameters."""

    @abstractmethod
    def predict_at(self, frequency_mhz):
        """The curve at any clock(s), MHz."""

    @classmethod
    def _check_instance(cls):
        # sklearn's checks pass arrays of several columns: name the clock's position. Column 1,
        # because check_positive_only_tag_during_fit's data (iris minus its mean) is negative
        # only in columns 1 and 3, and the estimator reads (and checks) its clock column alone.
        return cls(clock_column=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.string = True  # a run table may carry kernel/benchmark names
        tags.target_tags.positive_only = True
        tags.regressor_tags.poor_score = True  # a 4-parameter curve of one column
        return tags

    def _clock(self, X, *, fitting: bool) -> tuple[np.ndarray, object]:
        """The clock column (MHz) of ``X`` and its label (name or position) for messages."""
        column = renamed_parameter(self, "clock_column", "frequency_column", warn=fitting)
        j = column_index(X, column, "clock_column", sole=True, legacy=0, default=schema.SM_CLOCK_MHZ)
        return numeric_column(X, j, "clock_column", nonnegative=True, unit=" MHz"), column_label(X, j)

    def _fit_data(self, X, y):
        """Validated clocks (MHz) and target of ``fit``; resets the feature bookkeeping."""
        self._validate_params()
        X = table_array(X)
        validate_data(self, X, reset=True, skip_check_array=True)
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None "
                             f"(y: {self._TARGET})")
        y = column_or_1d(check_array(y, ensure_2d=False, dtype="numeric", input_name="y"), warn=True)
        check_consistent_length(X, y)
        f, label = self._clock(X, fitting=True)
        y = check_target(y, self._TARGET)
        clocks = np.unique(f)
        if clocks.size < self._MIN_CLOCKS:
            raise ValueError(
                f"{type(self).__name__}: column {label!r} (clock_column) holds "
                f"{_clocks_phrase(clocks.size, clocks)}; the four-parameter curve needs at least "
                f"{self._MIN_CLOCKS}. Is {label!r} the core clock?"
            )
        if self._Y_MAX is not None and y.size and y.max() > self._Y_MAX:
            raise ValueError(f"{self._TARGET} (y) has value {y.max():g} above the plausible maximum "
                             f"{self._Y_MAX:g}")
        return f, y

    def _fit_options(self) -> dict:
        """Keyword arguments of ``_batch_fit`` besides ``max_iter`` (none by default)."""
        return {}

    def fit(self, X, y):
        """Fit the curve (thesis eq. 4.1 or 4.5) to the clocks in ``X`` and ``y``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core clock (MHz) in ``clock_column``; other columns
            are ignored (they may hold text).
        y : array-like of shape (n_samples,)
            Power (W) or time, ≥ 0, at least 2 samples.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        f, y = self._fit_data(X, y)
        fit = type(self)._batch_fit(f[None], y[None], np.ones((1, f.size)), max_iter=self.max_iter,
                                    **self._fit_options())
        params, sse, n_iter, extras = fit[0], fit[1], fit[2], fit[3:]
        self._set_params_from_row(params[0], sse[0], f.size, *(e[0] for e in extras))
        self.n_iter_ = int(n_iter)
        return self

    def predict(self, X):
        """The fitted curve at the clocks in ``X``'s ``clock_column``.

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
        X = table_array(X)
        validate_data(self, X, reset=False, skip_check_array=True)
        return self.predict_at(self._clock(X, fitting=False)[0])

    @classmethod
    def _batch_fit_groups(cls, template, X, y, codes, n_groups):
        """Fit one copy of ``template`` per group at once (fast path of GroupedEstimator)."""
        f, y = template._fit_data(X, y)
        mask, fp, yp = pad_groups(codes, n_groups, f, y)
        fit = cls._batch_fit(fp, yp, mask, max_iter=template.max_iter, **template._fit_options())
        params, sse, n_iter, extras = fit[0], fit[1], fit[2], fit[3:]
        counts = mask.sum(axis=1)
        out = []
        with warnings.catch_warnings(record=True) as caught:  # one summary, not one per group
            warnings.simplefilter("always")
            for g in range(n_groups):
                est = copy.copy(template)  # params are scalars; clone() per group costs more than the fit
                est._set_params_from_row(params[g], sse[g], counts[g], *(e[g] for e in extras))
                est.n_iter_ = int(n_iter)
                out.append(est)
        kinds = {}
        for w in caught:
            kinds.setdefault(w.category, []).append(str(w.message))
        for category, messages in kinds.items():
            more = f" (and {len(messages) - 1} other group(s) alike)" if len(messages) > 1 else ""
            warnings.warn(f"{messages[0]}{more}", category, stacklevel=3)
        return out


def fit_groups_table(fitter, x_name: str, x, y_name: str, y, groups, *, max_iter: int, **options):
    """Run a batched ``_curvefit`` fitter once per group of 1-D inputs.

    Returns ``(labels, params, rmse, n_samples, *extras)``: the sorted group
    labels, the fitted parameters (one row per group), the root-mean-square
    residual, the number of samples of each group, and whatever else the
    fitter returns per group (``fit_power_batch``: the knee's gap).
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
    params, sse, _, *extras = fitter(xp, yp, mask, max_iter=max_iter, **options)
    n = mask.sum(axis=1)
    return (labels, params, np.sqrt(sse / np.maximum(n, 1)), n.astype(int), *extras)
