"""Energy from corrected power and time (thesis eq. 4.3 and 4.4).

``E = P_corr · Δt`` with the measured kernel time (eq. 4.3), or
``E = P_corr · T_model(f)`` with a fitted :class:`RationalTimeModel` (eq. 4.4)
when the kernel never ran at that clock. Put it after the corrections in a
``Pipeline``: ``FrequencyCorrection → TemperatureCorrection → EnergyModel``.
"""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .. import schema
from ._columns import COLUMN, DEPRECATED, RenamedParametersMixin, column_index, is_fitted
from ._columns import numeric_column, renamed_parameter, table_array
from .runtime import RationalTimeModel

__all__ = ["EnergyModel"]


class EnergyModel(RenamedParametersMixin, RegressorMixin, BaseEstimator):
    """Energy per launch: corrected power × measured (eq. 4.3) or modelled (eq. 4.4) time.

    Parameters
    ----------
    power_column : str or int, default="power_w"
        Column of (corrected) power, W: a name or a position.
    time_column : str or int or None, default="time_s"
        Column of measured time per launch, s. Needed by ``fit`` when the
        time model is fitted here, and by ``predict`` with ``time="measured"``.
    clock_column : str or int, default="sm_clock_mhz"
        Column of the core clock (MHz) each run ran at: the time model is
        fitted on it and, without ``reference_frequency_mhz``, evaluated at
        it. Other columns are ignored (see ``docs/columns.md``).
    time : {"measured", "model"}, default="measured"
        Which time to multiply by.
    time_model : RationalTimeModel or None, default=None
        Time model for ``time="model"``. None fits a new one on ``fit``'s
        table (clock → time column); an unfitted one is cloned and fitted; a
        fitted one is used as it is.
    reference_frequency_mhz : float or None, default=None
        With ``time="model"``: evaluate the time model at this clock for every
        row (eq. 4.4 after a :class:`FrequencyCorrection` to the same clock).
    frequency_column : str or int, default="deprecated"
        Deprecated old name of ``clock_column`` (removed in 0.3).

    Attributes
    ----------
    time_model_ : RationalTimeModel or None
        The fitted time model (None with ``time="measured"``).
    """

    _parameter_constraints: ClassVar[dict] = {
        "power_column": COLUMN,
        "time_column": [*COLUMN, None],
        "clock_column": COLUMN,
        "time": [StrOptions({"measured", "model"})],
        "time_model": [RationalTimeModel, None],
        "reference_frequency_mhz": [Interval(Real, 0, None, closed="neither"), None],
        "frequency_column": COLUMN,  # deprecated name of clock_column
    }
    _RENAMED: ClassVar[dict[str, str]] = {"frequency_column": "clock_column"}

    def __init__(self, power_column=schema.POWER_W, time_column=schema.TIME_S,
                 clock_column=schema.SM_CLOCK_MHZ, time="measured", time_model=None,
                 reference_frequency_mhz=None, frequency_column=DEPRECATED):
        self.power_column = power_column
        self.time_column = time_column
        self.clock_column = clock_column
        self.time = time
        self.time_model = time_model
        self.reference_frequency_mhz = reference_frequency_mhz
        self.frequency_column = frequency_column

    @classmethod
    def _check_instance(cls):
        return cls(power_column=0, time_column=1, time="measured")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.string = True
        tags.target_tags.required = False
        tags.regressor_tags.poor_score = True  # the target is never learnt from
        return tags

    def fit(self, X, y=None):
        """Validate the table and fit the time model (``time="model"``, thesis eq. 4.5).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table with the power, time and clock columns.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        ref = self.reference_frequency_mhz
        if ref is not None and not np.isfinite(ref):
            raise ValueError(f"reference_frequency_mhz must be a positive clock in MHz, got {ref!r}")
        X = table_array(X)
        validate_data(self, X, reset=True, skip_check_array=True)
        if y is not None:  # not learnt from, but must describe the same rows
            y = np.asarray(y)
            if y.ndim == 2 and y.shape[1] == 1:
                y = column_or_1d(y, warn=True)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"y has {y.shape[0]} rows, X has {X.shape[0]}")
            if y.dtype.kind in "fc" and not np.all(np.isfinite(y)):
                raise ValueError("Input y contains NaN or infinity")
        numeric_column(X, column_index(X, self.power_column, "power_column"), "power_column",
                       nonnegative=True, unit=" W")
        self.time_model_ = None
        if self.time == "measured":
            if self.time_column is None:
                raise ValueError("time='measured' needs time_column")
            numeric_column(X, column_index(X, self.time_column, "time_column"), "time_column",
                           nonnegative=True, unit=" s")
            return self
        if self.time_model is not None and is_fitted(self.time_model):
            self.time_model_ = self.time_model
            return self
        if self.time_column is None:
            raise ValueError("fitting the time model needs time_column (or pass a fitted time_model)")
        f = self._clock(X, fitting=True)
        t = numeric_column(X, column_index(X, self.time_column, "time_column"), "time_column",
                           nonnegative=True, unit=" s")
        model = clone(self.time_model) if self.time_model is not None else RationalTimeModel()
        self.time_model_ = model.set_params(clock_column=0, frequency_column=DEPRECATED).fit(f[:, None], t)
        return self

    def _clock(self, X, *, fitting):
        """The core clock column (MHz) of ``X``."""
        column = renamed_parameter(self, "clock_column", "frequency_column", warn=fitting)
        return numeric_column(X, column_index(X, column, "clock_column"), "clock_column",
                              nonnegative=True, unit=" MHz")

    def predict_time(self, X) -> np.ndarray:
        """Time per launch used for each row: measured (eq. 4.3) or modelled (eq. 4.4).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table.

        Returns
        -------
        time_s : ndarray of shape (n_samples,)
            Time per launch, s.
        """
        check_is_fitted(self, "time_model_")
        X = table_array(X)
        if self.time == "measured":
            return numeric_column(X, column_index(X, self.time_column, "time_column"),
                                  "time_column", nonnegative=True, unit=" s")
        if self.reference_frequency_mhz is not None:
            return np.full(X.shape[0], float(self.time_model_.predict_at(self.reference_frequency_mhz)))
        return self.time_model_.predict_at(self._clock(X, fitting=False))

    def predict(self, X) -> np.ndarray:
        """Energy per launch, ``E = P_corr · Δt`` (thesis eq. 4.3 / 4.4).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table (usually after the frequency and temperature corrections).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Energy per launch, J.
        """
        check_is_fitted(self, "time_model_")
        X = table_array(X)
        validate_data(self, X, reset=False, skip_check_array=True)
        p = numeric_column(X, column_index(X, self.power_column, "power_column"), "power_column",
                           nonnegative=True, unit=" W")
        return p * self.predict_time(X)
