"""How often the sensor publishes a new value (Yang §IV-A, artifact A1)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from .. import schema
from ._series import COLUMN, NON_NEGATIVE, OPTIONAL_COLUMN, period_from_intervals, series_from_input
from ._series import update_points

__all__ = ["UpdatePeriod"]


class UpdatePeriod(BaseEstimator):
    """The sensor's update period: the typical time between value changes.

    Yang §IV-A: poll the reading much faster than it updates while the load
    varies, remove consecutively repeated values, and take the median of the
    durations between the remaining changes. An update that happens to repeat
    the previous value doubles one interval; intervals near an integer
    multiple of the median are therefore counted as that many periods
    (see :func:`robust_update_period`), so the estimate stays on the true
    period even when many updates repeat.

    Parameters
    ----------
    time_column : str or int, default=schema.T_S
        Time column of a trace table.
    power_column : str or int, default=schema.POWER_INSTANT_W
        The reading whose update period is wanted (any power field, or
        :data:`schema.ENERGY_COUNTER_J` for the counter's rows).
    group_column : str or int or None, default=schema.RUN_ID
        Runs within which time increases; intervals never span two runs.
    change_tol : float, default=0.0
        Smallest change of the reading that counts as an update.

    Attributes
    ----------
    update_period_s_ : float
        Estimated update period in seconds.
    median_interval_s_ : float
        Plain median of the intervals (Yang's estimator).
    intervals_s_ : ndarray
        Every interval between value changes (for a histogram, Yang Fig. 6).
    n_updates_ : int
        Number of value changes seen.
    n_features_in_ : int
        Columns of ``X`` seen during fit (for a trace table, the columns used).

    Examples
    --------
    >>> import numpy as np
    >>> t = np.arange(0, 2, 1e-3)
    >>> reading = np.floor(t / 0.1)          # a new value every 100 ms
    >>> round(UpdatePeriod().fit(t[:, None], reading).update_period_s_, 3)
    0.1
    """

    # Blob data sorted by its first column (time) gives a reading that changes
    # once or twice: nothing to characterise, so fit raises a ValueError.
    _expected_failed_checks = {  # noqa: RUF012 (read-only, per sklearn convention)
        name: "sklearn's blob data, sorted by time, is not a varying load (reading changes < 3 times)"
        for name in ("check_pipeline_consistency", "check_estimators_pickle",
                     "check_fit2d_1feature")
    }

    _parameter_constraints: ClassVar[dict] = {
        "time_column": COLUMN, "power_column": COLUMN, "group_column": OPTIONAL_COLUMN, "change_tol": NON_NEGATIVE,
    }

    def __init__(self, time_column=schema.T_S, power_column=schema.POWER_INSTANT_W,
                 group_column=schema.RUN_ID, change_tol=0.0):
        self.time_column = time_column
        self.power_column = power_column
        self.group_column = group_column
        self.change_tol = change_tol

    def fit(self, X, y=None):
        """Estimate the update period from a trace.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            A trace table, or an array whose column 0 is the time in seconds.
        y : array-like of shape (n_samples,), optional
            The reading (required with an array ``X``; taken from
            ``power_column`` of a trace table otherwise).

        Returns
        -------
        self
        """
        self._validate_params()
        t, _, reading, groups = series_from_input(
            self, X, y, time_column=self.time_column, load_column=None,
            power_column=self.power_column, group_column=self.group_column, need_load=False)
        intervals, periods_w, n_updates = [], [], 0
        for g in np.unique(groups):
            m = groups == g
            idx = update_points(t[m], reading[m], self.change_tol)
            n_updates += idx.size
            if idx.size >= 2:
                intervals.append(np.diff(t[m][idx]))
                periods_w.append(t[m][idx])
        self.n_updates_ = int(n_updates)
        if not periods_w:
            raise ValueError(
                f"{type(self).__name__}: the reading changed fewer than 3 times; "
                "run a varying load while sampling faster than the sensor updates")
        all_d = np.concatenate(intervals)
        self.intervals_s_ = all_d
        self.median_interval_s_ = float(np.median(all_d[all_d > 0])) if (all_d > 0).any() else 0.0
        # intervals never span two runs; pool them as one sequence of updates
        period = period_from_intervals(all_d)
        self.update_period_s_ = period if np.isfinite(period) else 0.0
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags
