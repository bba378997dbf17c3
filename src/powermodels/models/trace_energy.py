"""Energy or steady power of each run of a trace matrix, as a scikit-learn regressor.

The last step of a smoothing pipeline::

    Pipeline([("smooth", GHFilter()), ("energy", TraceEnergy(dt_s=0.01))])

turns every (smoothed) row of a trace matrix (one run per row, one resampled
time point per column, :func:`powermodels.schema.validate_trace_matrix`) into
one number, so the smoothing parameters can be tuned with ``GridSearchCV``
against reference energies (``schema.REFERENCE_ENERGY_J``) or reference power.
"""

from __future__ import annotations

import numbers
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from powermodels.schema import validate_trace_matrix

__all__ = ["TraceEnergy"]

_STATISTICS = ("mean", "median", "last")
_CALIBRATIONS = (None, "scale", "linear")


class TraceEnergy(RegressorMixin, BaseEstimator):
    """Energy (J) or steady power (W) of each row of a trace matrix.

    The power level of a run is a statistic of its kept columns (the row
    without ``trim_start`` leading and ``trim_end`` trailing columns):

    - ``what="power"``: that level, in W;
    - ``what="energy"``: level × duration of the whole row
      (``n_columns * dt_s``), in J. With ``statistic="mean"`` and no trimming
      this is the rectangle-rule integral ``dt_s * sum(row)``; with trimming,
      the steady level is extrapolated over the columns dropped for the
      sensor's rise time (thesis eq. 4.3: ``E = P · Δt``).

    An optional linear calibration against the reference ``y`` is learned in
    ``fit`` (least squares), e.g. to absorb the sensor's gain error.

    Parameters
    ----------
    dt_s : float, default=1.0
        Spacing of the trace matrix's time points in seconds. Only affects
        ``what="energy"``; with the default 1.0 the energy is the sum of the
        samples (W per column) — set the real interval to get joules.
    what : {"energy", "power"}, default="energy"
        Predict the energy of the run or its power level.
    statistic : {"mean", "median", "last"}, default="mean"
        Level of the kept columns: their mean (linear; the physical
        integral), their median (robust to spikes and to a rise shorter than
        half the row), or the last kept value (the filter's final estimate of
        the level — meaningful after a smoothing filter).
    trim_start, trim_end : int, default=0
        Columns dropped at the start (sensor rise time) and at the end.
    calibration : {None, "scale", "linear"}, default=None
        Learn ``y ≈ scale * estimate`` ("scale") or
        ``y ≈ scale * estimate + offset`` ("linear") from the training data.

    Attributes
    ----------
    scale_ : float
        Learned calibration slope (1.0 without calibration).
    offset_ : float
        Learned calibration offset (0.0 unless ``calibration="linear"``).
    n_features_in_ : int
        Number of time points seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a DataFrame with string column names.

    Notes
    -----
    With ``statistic="mean"`` the prediction is linear in the row, and a
    linear smoothing filter in front of it only re-weights the samples
    (it preserves their sum up to end effects): smoothing cannot reduce the
    noise of a mean-based energy. It pays off with the nonlinear statistics
    (``"median"``, ``"last"``); see ``docs/smoothing.md``.

    Examples
    --------
    >>> import numpy as np
    >>> from powermodels.models.trace_energy import TraceEnergy
    >>> X = np.array([[50.0, 90.0, 100.0, 100.0], [100.0, 200.0, 200.0, 200.0]])
    >>> TraceEnergy(dt_s=0.5).fit(X, [200.0, 400.0]).predict(X)
    array([170., 350.])
    >>> TraceEnergy(dt_s=0.5, trim_start=1).fit(X, [200.0, 400.0]).predict(X)
    array([193.33333333, 400.        ])
    """

    _parameter_constraints: ClassVar[dict] = {
        "dt_s": [Interval(numbers.Real, 0, None, closed="neither")],
        "what": [StrOptions({"energy", "power"})],
        "statistic": [StrOptions(set(_STATISTICS))],
        "trim_start": [Interval(numbers.Integral, 0, None, closed="left")],
        "trim_end": [Interval(numbers.Integral, 0, None, closed="left")],
        "calibration": [StrOptions({c for c in _CALIBRATIONS if c is not None}), None],
    }

    def __init__(self, dt_s=1.0, what="energy", statistic="mean", trim_start=0, trim_end=0,
                 calibration=None):
        self.dt_s = dt_s
        self.what = what
        self.statistic = statistic
        self.trim_start = trim_start
        self.trim_end = trim_end
        self.calibration = calibration

    def _check_params(self, n_columns: int) -> None:
        self._validate_params()
        if self.trim_start + self.trim_end >= n_columns:
            raise ValueError(
                f"trim_start + trim_end = {self.trim_start + self.trim_end} leaves no column "
                f"of the trace matrix's {n_columns} time points"
            )

    def _estimate(self, P: np.ndarray) -> np.ndarray:
        """Uncalibrated energy or power of each row."""
        kept = P[:, self.trim_start:P.shape[1] - self.trim_end]
        if self.statistic == "mean":
            level = kept.mean(axis=1)
        elif self.statistic == "median":
            level = np.median(kept, axis=1)
        else:
            level = kept[:, -1]
        if self.what == "power":
            return level
        return level * (P.shape[1] * float(self.dt_s))

    def fit(self, X, y):
        """Validate, and learn the calibration if one is asked for.

        Parameters
        ----------
        X : array-like of shape (n_runs, n_times)
            Trace matrix (one run per row), e.g. the output of a smoothing filter.
        y : array-like of shape (n_runs,)
            Reference energy in J (``what="energy"``) or power in W.

        Returns
        -------
        self
        """
        P, y = validate_data(self, X, y, dtype=np.float64, ensure_all_finite=False,
                             y_numeric=True)
        validate_trace_matrix(X if isinstance(X, pd.DataFrame) else P, min_columns=1)
        if y.dtype.kind not in "biuf":  # y_numeric converts object arrays, not str ones
            raise ValueError(f"y (reference energy or power) must be numbers, got dtype {y.dtype}")
        if not np.all(np.isfinite(y)):
            raise ValueError("y (reference energy or power) has NaN or infinite values")
        self._check_params(P.shape[1])
        est = self._estimate(P)
        self.scale_, self.offset_ = 1.0, 0.0
        if self.calibration == "scale":
            denom = float(est @ est)
            if denom == 0.0:
                raise ValueError("calibration='scale': every estimate is zero (all-zero traces)")
            self.scale_ = float(est @ y) / denom
        elif self.calibration == "linear":
            if np.ptp(est) == 0.0:
                raise ValueError("calibration='linear': the estimates do not vary, the line is "
                                 "undetermined; use calibration='scale'")
            self.scale_, self.offset_ = (float(c) for c in np.polyfit(est, y, 1))
        return self

    def predict(self, X):
        """Energy (J) or power (W) of each run.

        Parameters
        ----------
        X : array-like of shape (n_runs, n_times)
            Trace matrix with the time points seen in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_runs,)
        """
        check_is_fitted(self)
        P = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
        validate_trace_matrix(X if isinstance(X, pd.DataFrame) else P, min_columns=1)
        self._check_params(P.shape[1])
        return self.scale_ * self._estimate(P) + self.offset_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True  # rows are power traces
        # A one-statistic physical estimate, not a general regressor of arbitrary features.
        tags.regressor_tags.poor_score = True
        return tags
