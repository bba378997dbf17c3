"""Temperature correction of measured power (thesis eq. 4.6–4.7).

At a fixed clock, power rises linearly with die temperature (leakage; thesis
§4.2.2); under default DVFS the clock changes mask that trend (§4.2.1). So the
slope ``α = ΔP/ΔT`` (eq. 4.6) is fitted *within* groups of constant clock (or
configuration): one common slope, one intercept per group. Every reading is then
moved to a reference temperature (eq. 4.7):

``P_corr = P_meas − α·(T − T_ref)``,

with ``T_ref`` by default the coldest temperature seen in ``fit`` (the GPU's
cold state, as in the thesis).
"""

from __future__ import annotations

import warnings
from numbers import Real
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import schema
from ._columns import COLUMN, column_index, column_label, numeric_column, replace_column, table_array

__all__ = ["TemperatureCorrection", "WeakTemperatureCorrelationWarning"]


class WeakTemperatureCorrelationWarning(UserWarning):
    """The fitted power–temperature slope is weak, negative or undetermined.

    Usually the data mix clocks (default DVFS, thesis §4.2.1) or barely
    vary in temperature; the correction then does little or the wrong thing.
    """


class TemperatureCorrection(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Thesis eq. 4.7: ``P_corr = P_meas − α·(T − T_ref)``.

    Parameters
    ----------
    power_column : str or int, default="power_w"
        Column of measured power (W); the only column ``transform`` changes.
    temperature_column : str or int, default="temperature_c"
        Column of the run temperature (°C).
    group_column : str, int or None, default=None
        Column of constant-clock (or configuration) groups. The slope is
        fitted within groups (a common slope, one intercept per group), so
        differences *between* clocks do not leak into α. None: one group.
    reference_temperature_c : float or None, default=None
        ``T_ref``; None uses the coldest temperature seen in ``fit``.
    min_correlation : float, default=0.3
        A :class:`WeakTemperatureCorrelationWarning` is issued when the
        within-group correlation of power and temperature is below this, or
        the slope is negative.
    confidence : float, default=0.95
        Level of the slope's confidence interval.

    Attributes
    ----------
    alpha_w_per_c_ : float
        Fitted slope α, W/°C (eq. 4.6).
    alpha_ci_w_per_c_ : tuple of float
        ``confidence`` interval of α (t-distribution, pooled within groups).
    alpha_stderr_w_per_c_ : float
        Standard error of α.
    correlation_ : float
        Within-group Pearson correlation of power and temperature.
    reference_temperature_c_ : float
        ``T_ref`` in use.
    n_groups_ : int
        Groups the slope was pooled over.
    """

    def __init__(self, power_column=schema.POWER_W, temperature_column=schema.TEMPERATURE_C,
                 group_column=None, reference_temperature_c=None, min_correlation=0.3,
                 confidence=0.95):
        self.power_column = power_column
        self.temperature_column = temperature_column
        self.group_column = group_column
        self.reference_temperature_c = reference_temperature_c
        self.min_correlation = min_correlation
        self.confidence = confidence

    _parameter_constraints: ClassVar[dict] = {
        "power_column": COLUMN,
        "temperature_column": COLUMN,
        "group_column": [*COLUMN, None],
        "reference_temperature_c": [Real, None],
        "min_correlation": [Real],
        "confidence": [Interval(Real, 0, 1, closed="neither")],
    }

    @classmethod
    def _check_instance(cls):
        # Power in column 1: only the power column must be ≥ 0 (°C may be negative), and
        # check_positive_only_tag_during_fit's data (iris minus its mean) are negative in column 1.
        return cls(power_column=1, temperature_column=0)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.string = True
        return tags

    def _read(self, X):
        jp = column_index(X, self.power_column, "power_column")
        jt = column_index(X, self.temperature_column, "temperature_column")
        if jp == jt:
            raise ValueError(f"power_column and temperature_column both name column {column_label(X, jp)!r}")
        p = numeric_column(X, jp, "power_column", nonnegative=True, unit=" W")
        t = numeric_column(X, jt, "temperature_column", unit=" °C")
        return jp, p, t

    def fit(self, X, y=None):
        """Fit the within-group slope α (thesis eq. 4.6) and fix ``T_ref``.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table with the power, temperature (and group) columns.
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        X = table_array(X)
        validate_data(self, X, reset=True, skip_check_array=True)
        _, p, t = self._read(X)
        if self.group_column is None:
            codes = np.zeros(p.size, dtype=int)
        else:
            jg = column_index(X, self.group_column, "group_column")
            col = X.iloc[:, jg] if isinstance(X, pd.DataFrame) else X[:, jg]
            if pd.isna(np.asarray(col, dtype=object)).any():
                raise ValueError(f"column {column_label(X, jg)!r} (group_column) has missing values")
            _, codes = np.unique(np.asarray(col).astype(str), return_inverse=True)
        n_groups = int(codes.max()) + 1 if codes.size else 0
        if p.size < n_groups + 2:
            raise ValueError(
                f"temperature slope needs at least n_groups + 2 = {n_groups + 2} samples, "
                f"has {p.size} (n_samples = {p.size})"
            )
        # Demean within groups: the common slope of a model with one intercept per group.
        counts = np.bincount(codes, minlength=n_groups)
        dt = t - (np.bincount(codes, t, n_groups) / counts)[codes]
        dp = p - (np.bincount(codes, p, n_groups) / counts)[codes]
        stt = float(dt @ dt)
        spp = float(dp @ dp)
        dof = p.size - n_groups - 1
        if stt <= 1e-12 * max(float(t @ t), 1.0):
            alpha, stderr, r = 0.0, np.inf, 0.0
            warnings.warn(
                "temperature does not vary within the groups; alpha set to 0 (no correction)",
                WeakTemperatureCorrelationWarning, stacklevel=2,
            )
        else:
            alpha = float(dt @ dp) / stt
            resid = dp - alpha * dt
            stderr = float(np.sqrt(max(resid @ resid, 0.0) / dof / stt))
            r = float(dt @ dp / np.sqrt(stt * spp)) if spp > 0 else 0.0
            if alpha < 0 or r < self.min_correlation:
                warnings.warn(
                    f"weak or negative power-temperature correlation (r = {r:.2f}, alpha = "
                    f"{alpha:.3g} W/°C); fit alpha at constant clock (group_column) — "
                    "under default DVFS the clock masks the trend (thesis §4.2.1)",
                    WeakTemperatureCorrelationWarning, stacklevel=2,
                )
        half = float(stats.t.ppf(0.5 + self.confidence / 2, dof)) * stderr
        self.alpha_w_per_c_ = alpha
        self.alpha_stderr_w_per_c_ = stderr
        self.alpha_ci_w_per_c_ = (alpha - half, alpha + half)
        self.correlation_ = r
        self.n_groups_ = n_groups
        ref = self.reference_temperature_c
        self.reference_temperature_c_ = float(t.min()) if ref is None else float(ref)
        if not np.isfinite(self.reference_temperature_c_):
            raise ValueError(f"reference_temperature_c must be finite, got {ref!r}")
        return self

    def transform(self, X):
        """Move every run's power to the reference temperature (thesis eq. 4.7).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table with the power and temperature columns.

        Returns
        -------
        X_corrected : DataFrame or ndarray of shape (n_samples, n_features)
            ``X`` with only the power column changed.
        """
        check_is_fitted(self, "alpha_w_per_c_")
        X = table_array(X)
        validate_data(self, X, reset=False, skip_check_array=True)
        jp, p, t = self._read(X)
        corrected = p - self.alpha_w_per_c_ * (t - self.reference_temperature_c_)
        return replace_column(X, jp, corrected)
