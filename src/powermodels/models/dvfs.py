"""DVFS power, time and energy models of DSO (Wang et al., §IV-B, eq. 1-3).

Power (DSO eq. 1)::

    P(f_c, f_m) = P0 + κ·V(f_c) + γ·f_m + c·V(f_c)²·f_c

Time (DSO eq. 2, the "DVFS roofline")::

    T(f_c, f_m) = t0 + max(α / f_m, β / f_c)

Energy (DSO eq. 3): ``E = P·T``. NVML reports no voltage, so ``V`` is the
shared relative-voltage shape of :func:`powermodels.models.voltage.relative_voltage`
(constant below a knee, linear above). Clocks are in MHz throughout.

Every estimator takes ``X`` holding a core-clock and a memory-clock column
(``core_clock_column`` / ``mem_clock_column``: a name for DataFrames or a
position); other columns are ignored.
"""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from powermodels.models.dvfs_fit import (
    LOSSES,
    fit_power,
    fit_time,
    fit_voltage_curve,
    power_design,
    relative_scale,
)
from powermodels.models.dvfs_params import DVFSParams

__all__ = [
    "DVFSEnergyModel",
    "DVFSParams",
    "DVFSPowerModel",
    "DVFSTimeModel",
    "fit_voltage_curve",
]


# --------------------------------------------------------------------------
# Input handling shared by the estimators.
# --------------------------------------------------------------------------


def _column_index(est, X, column, name: str) -> int:
    """Position of ``column`` (a name or an index) in the validated X."""
    n = X.shape[1]
    if isinstance(column, str):
        names = getattr(est, "feature_names_in_", None)
        if names is None or column not in list(names):
            raise ValueError(f"{name}={column!r} is not a column of X")
        return list(names).index(column)
    if isinstance(column, (int, np.integer)) and not isinstance(column, bool):
        if not -n <= column < n:
            raise ValueError(
                f"X has {n} feature(s) but {name}={column} needs at least {column + 1}"
            )
        return int(column) % n
    raise ValueError(f"{name} must be a column name or position, got {column!r}")


def _clocks(est, X, *, reset: bool):
    """Validate X and return its (core, memory) clock columns in MHz."""
    X = validate_data(est, X, reset=reset, dtype=np.float64, ensure_min_features=1)
    return _clock_arrays(est, X)


def _clock_arrays(est, X):
    """(core, memory) clock columns of an already validated X."""
    ic = _column_index(est, X, est.core_clock_column, "core_clock_column")
    im = _column_index(est, X, est.mem_clock_column, "mem_clock_column")
    if ic == im:
        raise ValueError("core_clock_column and mem_clock_column point at the same column")
    fc, fm = X[:, ic], X[:, im]
    for values, col in ((fc, est.core_clock_column), (fm, est.mem_clock_column)):
        if np.any(values <= 0):
            # sklearn's wording for negative input (the positive_only tag's contract)
            prefix = "Negative values in data: " if values.min() < 0 else ""
            raise ValueError(
                f"{prefix}clock column {col!r} has non-positive values, minimum {values.min():g} "
                "(clocks are MHz > 0)"
            )
    return fc, fm


def _fit_clock_arrays(est, X):
    """:func:`_clock_arrays` for ``fit``: the data must hold at least two clock pairs.

    One (core, memory) pair cannot tell a clock-dependent term from a constant one (DSO
    eq. 1–2 fitted through one point), so it is an error rather than a silent fit.
    """
    fc, fm = _clock_arrays(est, X)
    if np.unique(np.column_stack([fc, fm]), axis=0).shape[0] < 2:
        raise ValueError(f"{type(est).__name__}: every sample is at the same clock pair "
                         f"({fc[0]:g}, {fm[0]:g}) MHz; the clock dependence is not identified "
                         "(need at least 2 distinct clock pairs)")
    return fc, fm


_CLOCK_FAILS = {
    # With the positive_only tag the checks shift X to X - X.min() (sklearn 1.9,
    # _enforce_estimator_tags_X), which puts exactly one 0 in the data; a 0 MHz
    # clock is refused because eq. 2 divides by f_c and f_m. No honest tag or
    # parameter makes the check data strictly positive, so these stay declared.
    name: "clock columns must hold MHz > 0; the check's X - X.min() feeds a 0 MHz clock"
    for name in (
        "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object",
        "check_estimators_dtypes", "check_estimators_fit_returns_self",
        "check_estimators_nan_inf", "check_estimators_overwrite_params",
        "check_f_contiguous_array_estimator", "check_fit2d_predict1d",
        "check_fit_check_is_fitted", "check_fit_idempotent", "check_fit_score_takes_y",
        "check_methods_sample_order_invariance", "check_methods_subset_invariance",
        "check_n_features_in", "check_n_features_in_after_fitting",
        "check_readonly_memmap_input", "check_regressors_no_decision_function",
        "check_supervised_y_2d",
    )
}
_Y2_FAILS = {
    # DVFSEnergyModel needs y = (time, power); the checks give one target column.
    name: "y must hold two columns (time_s, power_w); the check gives one"
    for name in (
        "check_estimators_pickle", "check_pipeline_consistency",
        "check_regressor_data_not_an_array", "check_regressor_multioutput",
        "check_regressors_int", "check_regressors_train",
    )
}


class _DVFSBase(RegressorMixin, BaseEstimator):
    def _loss_kw(self):
        if self.loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {self.loss!r}")
        if not np.isfinite(self.huber_scale) or self.huber_scale <= 0:
            raise ValueError(f"huber_scale must be a positive relative residual, got {self.huber_scale!r}")
        return {"loss": self.loss, "huber_scale": float(self.huber_scale)}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.regressor_tags.poor_score = True
        return tags


# --------------------------------------------------------------------------
# Power.
# --------------------------------------------------------------------------


class DVFSPowerModel(_DVFSBase):
    """DSO power model (eq. 1), fitted by non-negative least squares.

    ``P = P0 + κ·V + γ·f_m + c·V²·f_c`` (robust fit, see ``loss``) with ``V`` the relative voltage of
    :func:`~powermodels.models.voltage.relative_voltage`. All four
    coefficients are constrained ≥ 0 (static and dynamic power cannot be
    negative); a coefficient whose regressor is constant in the data (a fixed
    memory clock, all clocks below the knee) is set to 0 and absorbed in P0.

    Parameters
    ----------
    core_clock_column, mem_clock_column : str or int, default=0, 1
        Core and memory clock columns (MHz) of X, by name or position.
    voltage_knee_mhz : float or None, default=None
        Knee of V(f). ``None`` chooses it from the distinct core clocks of
        the data by least squares.
    voltage_slope_per_ghz : float or None, default=None
        Relative voltage rise per GHz above the knee. ``None`` chooses it from
        ``(0.25, 0.5, 1, 2)`` by least squares.
    loss : {"huber", "squared"}, default="huber"
        Loss of the relative residual ``(model - y)/y``: Huber (one bad point
        cannot dominate, see :mod:`~powermodels.models.dvfs_fit`) or squared.
    huber_scale : float, default=0.01
        Smallest relative residual at which the Huber loss turns linear.

    Attributes
    ----------
    coef_ : ndarray of shape (4,)
        ``(P0, κ, γ, c)``.
    voltage_knee_mhz_, voltage_slope_per_ghz_ : float
        The V(f) shape used.
    params_ : DVFSParams
        The power parameters (time parameters 0).
    """

    _expected_failed_checks = _CLOCK_FAILS

    def __init__(self, core_clock_column=0, mem_clock_column=1, voltage_knee_mhz=None,
                 voltage_slope_per_ghz=None, loss="huber", huber_scale=0.01):
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column
        self.voltage_knee_mhz = voltage_knee_mhz
        self.voltage_slope_per_ghz = voltage_slope_per_ghz
        self.loss = loss
        self.huber_scale = huber_scale

    def fit(self, X, y):
        """Fit DSO eq. 1 to power ``y`` (W) measured at the clocks in ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples,)
            Measured power, W.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64, ensure_min_samples=2)
        fc, fm = _fit_clock_arrays(self, X)
        knees = (np.unique(fc) if self.voltage_knee_mhz is None else [float(self.voltage_knee_mhz)])
        slopes = ((0.25, 0.5, 1.0, 2.0) if self.voltage_slope_per_ghz is None
                  else [float(self.voltage_slope_per_ghz)])
        if np.any(np.asarray(slopes) < 0):
            raise ValueError("voltage_slope_per_ghz must be >= 0")
        best = None
        for knee in knees:
            for slope in slopes:
                coef = fit_power(fc, fm, y, knee, slope, **self._loss_kw())
                sse = float(np.sum(((power_design(fc, fm, knee, slope) @ coef - y) / relative_scale(y)) ** 2))
                if best is None or sse < best[0] - 1e-12 * (1 + abs(best[0])):
                    best = (sse, coef, knee, slope)
        _, self.coef_, self.voltage_knee_mhz_, self.voltage_slope_per_ghz_ = best
        self.params_ = DVFSParams(*(float(c) for c in self.coef_), voltage_knee_mhz=float(self.voltage_knee_mhz_),
                                  voltage_slope_per_ghz=float(self.voltage_slope_per_ghz_))
        return self

    def predict(self, X):
        """Power at the clocks in ``X`` (DSO eq. 1).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Power, W.
        """
        check_is_fitted(self)
        fc, fm = _clocks(self, X, reset=False)
        return self.params_.power(fc, fm)


# --------------------------------------------------------------------------
# Time.
# --------------------------------------------------------------------------


class DVFSTimeModel(_DVFSBase):
    """DSO time model (eq. 2), ``T = t0 + max(α/f_m, β/f_c)``, by robust piecewise regression.

    The ratio ``α/β`` (which sets the ridge clock ``f_c = (β/α)·f_m`` where
    the kernel turns memory-bound) is searched over the data's breakpoints
    and refined; for each ratio, ``t0`` and the slope come from non-negative
    least squares. With a single memory clock ``α`` is determined only as
    the plateau ``α/f_m`` (enough for predictions at that memory clock).

    Parameters
    ----------
    core_clock_column, mem_clock_column : str or int, default=0, 1
        Core and memory clock columns (MHz) of X, by name or position.
    loss : {"huber", "squared"}, default="huber"
        Loss of the relative residual ``(model - y)/y``: Huber (one bad point
        cannot dominate, see :mod:`~powermodels.models.dvfs_fit`) or squared.
    huber_scale : float, default=0.01
        Smallest relative residual at which the Huber loss turns linear.

    Attributes
    ----------
    t0_, alpha_, beta_ : float
        Fitted parameters (s, s·MHz, s·MHz).
    params_ : DVFSParams
        The time parameters (power parameters 0).
    """

    _expected_failed_checks = _CLOCK_FAILS

    def __init__(self, core_clock_column=0, mem_clock_column=1, loss="huber", huber_scale=0.01):
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column
        self.loss = loss
        self.huber_scale = huber_scale

    def fit(self, X, y):
        """Fit DSO eq. 2 to kernel time ``y`` (s) measured at the clocks in ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples,)
            Measured kernel time, s.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        X, y = validate_data(self, X, y, y_numeric=True, dtype=np.float64, ensure_min_samples=2)
        fc, fm = _fit_clock_arrays(self, X)
        self.t0_, self.alpha_, self.beta_ = fit_time(fc, fm, y, **self._loss_kw())
        self.params_ = DVFSParams(t0_s=self.t0_, alpha_s_mhz=self.alpha_, beta_s_mhz=self.beta_)
        return self

    def predict(self, X):
        """Kernel time at the clocks in ``X`` (DSO eq. 2).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Kernel time, s.
        """
        check_is_fitted(self)
        fc, fm = _clocks(self, X, reset=False)
        return self.params_.time(fc, fm)


# --------------------------------------------------------------------------
# Energy.
# --------------------------------------------------------------------------


class DVFSEnergyModel(_DVFSBase):
    """DSO energy model (eq. 3): a :class:`DVFSTimeModel` times a :class:`DVFSPowerModel`.

    ``fit(X, y)`` takes ``y`` with two columns, kernel time (s) and power
    (W), at the clocks in ``X`` — both are needed, since energy alone does
    not separate P from T. ``predict`` returns energy per launch in J;
    ``predict_time`` and ``predict_power`` return the factors.

    Parameters
    ----------
    core_clock_column, mem_clock_column : str or int, default=0, 1
        Core and memory clock columns (MHz) of X, by name or position.
    voltage_knee_mhz, voltage_slope_per_ghz : float or None, default=None
        V(f) shape, see :class:`DVFSPowerModel`.
    loss : {"huber", "squared"}, default="huber"
        Loss of the relative residual ``(model - y)/y``: Huber (one bad point
        cannot dominate, see :mod:`~powermodels.models.dvfs_fit`) or squared.
    huber_scale : float, default=0.01
        Smallest relative residual at which the Huber loss turns linear.

    Attributes
    ----------
    time_model_ : DVFSTimeModel
        The fitted time model (eq. 2).
    power_model_ : DVFSPowerModel
        The fitted power model (eq. 1).
    params_ : DVFSParams
        All seven parameters and the V(f) shape, ready for
        :func:`powermodels.models.dvfs_optimizer.optimize_clocks`.
    """

    _expected_failed_checks: ClassVar[dict[str, str]] = {**_CLOCK_FAILS, **_Y2_FAILS}

    def __init__(self, core_clock_column=0, mem_clock_column=1, voltage_knee_mhz=None,
                 voltage_slope_per_ghz=None, loss="huber", huber_scale=0.01):
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column
        self.voltage_knee_mhz = voltage_knee_mhz
        self.voltage_slope_per_ghz = voltage_slope_per_ghz
        self.loss = loss
        self.huber_scale = huber_scale

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = False
        return tags

    def fit(self, X, y):
        """Fit the time (DSO eq. 2) and power (eq. 1) models.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples, 2)
            Kernel time (s) and power (W) of every run, in that order.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64,
                             ensure_min_samples=2)
        fc, fm = _fit_clock_arrays(self, X)
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(
                f"y must have 2 columns (time_s, power_w), got shape {np.shape(y)}"
            )
        clocks = np.column_stack([fc, fm])
        self.time_model_ = DVFSTimeModel(0, 1, self.loss, self.huber_scale).fit(clocks, y[:, 0])
        self.power_model_ = DVFSPowerModel(0, 1, self.voltage_knee_mhz, self.voltage_slope_per_ghz,
                                           self.loss, self.huber_scale).fit(clocks, y[:, 1])
        tp = self.time_model_.params_
        self.params_ = replace(self.power_model_.params_, t0_s=tp.t0_s,
                               alpha_s_mhz=tp.alpha_s_mhz, beta_s_mhz=tp.beta_s_mhz)
        return self

    def predict_time(self, X):
        """Kernel time at the clocks in ``X`` (DSO eq. 2).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.

        Returns
        -------
        time_s : ndarray of shape (n_samples,)
            Kernel time, s.
        """
        check_is_fitted(self)
        fc, fm = _clocks(self, X, reset=False)
        return self.params_.time(fc, fm)

    def predict_power(self, X):
        """Power at the clocks in ``X`` (DSO eq. 1).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.

        Returns
        -------
        power_w : ndarray of shape (n_samples,)
            Power, W.
        """
        check_is_fitted(self)
        fc, fm = _clocks(self, X, reset=False)
        return self.params_.power(fc, fm)

    def predict(self, X):
        """Energy per launch at the clocks in ``X``, ``E = P·T`` (DSO eq. 3).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Energy per launch, J.
        """
        check_is_fitted(self)
        fc, fm = _clocks(self, X, reset=False)
        return self.params_.energy(fc, fm)

    def score(self, X, y, sample_weight=None):
        """R² of the predicted energy against the measured energy.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``core_clock_column`` / ``mem_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples, 2) or (n_samples,)
            Time (s) and power (W), whose product is the energy,
            or the energy per launch (J).
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            Coefficient of determination of the energy.
        """
        y = np.asarray(y, dtype=float)
        if y.ndim == 2 and y.shape[1] == 2:
            y = y[:, 0] * y[:, 1]
        return super().score(X, y, sample_weight=sample_weight)
