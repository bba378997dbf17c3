"""DVFS power, time and energy models of DSO (Wang et al., §IV-B, eq. 1-3).

Power (DSO eq. 1)::

    P(f_c, f_m) = P0 + κ·V(f_c) + γ·f_m + c·V(f_c)²·f_c

Time (DSO eq. 2, the "DVFS roofline")::

    T(f_c, f_m) = t0 + max(α / f_m, β / f_c)

Energy (DSO eq. 3): ``E = P·T``. NVML reports no voltage, so ``V`` is the
shared relative-voltage shape of :func:`powermodels.models.voltage.relative_voltage`
(constant below a knee, linear above). Clocks are in MHz throughout.

Every estimator takes ``X`` holding a core-clock and a memory-clock column
(``clock_column`` / ``memory_clock_column``, by default ``sm_clock_mhz`` and
``mem_clock_mhz``: a name for DataFrames or a position); other columns are
ignored, text included (:mod:`powermodels.models.dvfs_columns`).
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from powermodels import schema
from powermodels.models._columns import COLUMN, DEPRECATED, RenamedParametersMixin
from powermodels.models.dvfs_columns import CLOCK_FAILS, Y2_FAILS, clock_pair, fit_clock_pair

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


_VOLTAGE_CONSTRAINTS = {
    "voltage_knee_mhz": [Interval(Real, 0, None, closed="neither"), None],
    "voltage_slope_per_ghz": [Interval(Real, 0, None, closed="left"), None],
}


class _DVFSBase(RenamedParametersMixin, RegressorMixin, BaseEstimator):
    """What the three DSO estimators share: the clock columns, the loss, the tags."""

    _parameter_constraints: ClassVar[dict] = {
        "clock_column": COLUMN,
        "memory_clock_column": COLUMN,
        "loss": [StrOptions(set(LOSSES))],
        "huber_scale": [Interval(Real, 0, None, closed="neither")],
        "core_clock_column": COLUMN,  # deprecated name of clock_column
        "mem_clock_column": COLUMN,  # deprecated name of memory_clock_column
    }
    _RENAMED: ClassVar[dict[str, str]] = {"core_clock_column": "clock_column",
                                          "mem_clock_column": "memory_clock_column"}

    @classmethod
    def _check_instance(cls):
        # sklearn's checks pass arrays of several columns: name the clocks' positions.
        return cls(clock_column=0, memory_clock_column=1)

    def _loss_kw(self):
        if not np.isfinite(self.huber_scale):
            raise ValueError(f"huber_scale must be a positive relative residual, got {self.huber_scale!r}")
        return {"loss": self.loss, "huber_scale": float(self.huber_scale)}

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.string = True  # a run table may carry kernel/benchmark names
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
    clock_column, memory_clock_column : str or int, default="sm_clock_mhz", "mem_clock_mhz"
        Core and memory clock columns (MHz) of X, by name (DataFrame) or
        position; other columns are ignored (see ``docs/columns.md``).
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
    core_clock_column, mem_clock_column : str or int, default="deprecated"
        Deprecated old names of ``clock_column``/``memory_clock_column``
        (removed in 0.3).

    Attributes
    ----------
    coef_ : ndarray of shape (4,)
        ``(P0, κ, γ, c)``.
    voltage_knee_mhz_, voltage_slope_per_ghz_ : float
        The V(f) shape used.
    params_ : DVFSParams
        The power parameters (time parameters 0).
    """

    _expected_failed_checks = CLOCK_FAILS
    _parameter_constraints: ClassVar[dict] = {**_DVFSBase._parameter_constraints, **_VOLTAGE_CONSTRAINTS}

    def __init__(self, clock_column=schema.SM_CLOCK_MHZ, memory_clock_column=schema.MEM_CLOCK_MHZ,
                 voltage_knee_mhz=None, voltage_slope_per_ghz=None, loss="huber", huber_scale=0.01,
                 core_clock_column=DEPRECATED, mem_clock_column=DEPRECATED):
        self.clock_column = clock_column
        self.memory_clock_column = memory_clock_column
        self.voltage_knee_mhz = voltage_knee_mhz
        self.voltage_slope_per_ghz = voltage_slope_per_ghz
        self.loss = loss
        self.huber_scale = huber_scale
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column

    def fit(self, X, y):
        """Fit DSO eq. 1 to power ``y`` (W) measured at the clocks in ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples,)
            Measured power, W.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        fc, fm, y = fit_clock_pair(self, X, y)
        knees = (np.unique(fc) if self.voltage_knee_mhz is None else [float(self.voltage_knee_mhz)])
        slopes = ((0.25, 0.5, 1.0, 2.0) if self.voltage_slope_per_ghz is None
                  else [float(self.voltage_slope_per_ghz)])
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
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Power, W.
        """
        check_is_fitted(self)
        fc, fm = clock_pair(self, X)
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
    clock_column, memory_clock_column : str or int, default="sm_clock_mhz", "mem_clock_mhz"
        Core and memory clock columns (MHz) of X, by name (DataFrame) or
        position; other columns are ignored (see ``docs/columns.md``).
    loss : {"huber", "squared"}, default="huber"
        Loss of the relative residual ``(model - y)/y``: Huber (one bad point
        cannot dominate, see :mod:`~powermodels.models.dvfs_fit`) or squared.
    huber_scale : float, default=0.01
        Smallest relative residual at which the Huber loss turns linear.
    core_clock_column, mem_clock_column : str or int, default="deprecated"
        Deprecated old names of ``clock_column``/``memory_clock_column``
        (removed in 0.3).

    Attributes
    ----------
    t0_, alpha_, beta_ : float
        Fitted parameters (s, s·MHz, s·MHz).
    params_ : DVFSParams
        The time parameters (power parameters 0).
    """

    _expected_failed_checks = CLOCK_FAILS

    def __init__(self, clock_column=schema.SM_CLOCK_MHZ, memory_clock_column=schema.MEM_CLOCK_MHZ,
                 loss="huber", huber_scale=0.01, core_clock_column=DEPRECATED, mem_clock_column=DEPRECATED):
        self.clock_column = clock_column
        self.memory_clock_column = memory_clock_column
        self.loss = loss
        self.huber_scale = huber_scale
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column

    def fit(self, X, y):
        """Fit DSO eq. 2 to kernel time ``y`` (s) measured at the clocks in ``X``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples,)
            Measured kernel time, s.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        fc, fm, y = fit_clock_pair(self, X, y)
        self.t0_, self.alpha_, self.beta_ = fit_time(fc, fm, y, **self._loss_kw())
        self.params_ = DVFSParams(t0_s=self.t0_, alpha_s_mhz=self.alpha_, beta_s_mhz=self.beta_)
        return self

    def predict(self, X):
        """Kernel time at the clocks in ``X`` (DSO eq. 2).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Kernel time, s.
        """
        check_is_fitted(self)
        fc, fm = clock_pair(self, X)
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
    clock_column, memory_clock_column : str or int, default="sm_clock_mhz", "mem_clock_mhz"
        Core and memory clock columns (MHz) of X, by name (DataFrame) or
        position; other columns are ignored (see ``docs/columns.md``).
    voltage_knee_mhz, voltage_slope_per_ghz : float or None, default=None
        V(f) shape, see :class:`DVFSPowerModel`.
    loss : {"huber", "squared"}, default="huber"
        Loss of the relative residual ``(model - y)/y``: Huber (one bad point
        cannot dominate, see :mod:`~powermodels.models.dvfs_fit`) or squared.
    huber_scale : float, default=0.01
        Smallest relative residual at which the Huber loss turns linear.
    core_clock_column, mem_clock_column : str or int, default="deprecated"
        Deprecated old names of ``clock_column``/``memory_clock_column``
        (removed in 0.3).

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

    _expected_failed_checks: ClassVar[dict[str, str]] = {**CLOCK_FAILS, **Y2_FAILS}
    _parameter_constraints: ClassVar[dict] = DVFSPowerModel._parameter_constraints
    # The parameters of the power model it fits (and the clocks it reads): one signature.
    __init__ = DVFSPowerModel.__init__

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
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.
        y : array-like of shape (n_samples, 2)
            Kernel time (s) and power (W) of every run, in that order.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        fc, fm, y = fit_clock_pair(self, X, y, multi_output=True)
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(
                f"y must have 2 columns (time_s, power_w), got shape {np.shape(y)}"
            )
        clocks = np.column_stack([fc, fm])
        self.time_model_ = DVFSTimeModel(0, 1, loss=self.loss, huber_scale=self.huber_scale).fit(
            clocks, y[:, 0])
        self.power_model_ = DVFSPowerModel(0, 1, voltage_knee_mhz=self.voltage_knee_mhz,
                                           voltage_slope_per_ghz=self.voltage_slope_per_ghz,
                                           loss=self.loss, huber_scale=self.huber_scale).fit(clocks, y[:, 1])
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
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.

        Returns
        -------
        time_s : ndarray of shape (n_samples,)
            Kernel time, s.
        """
        check_is_fitted(self)
        fc, fm = clock_pair(self, X)
        return self.params_.time(fc, fm)

    def predict_power(self, X):
        """Power at the clocks in ``X`` (DSO eq. 1).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.

        Returns
        -------
        power_w : ndarray of shape (n_samples,)
            Power, W.
        """
        check_is_fitted(self)
        fc, fm = clock_pair(self, X)
        return self.params_.power(fc, fm)

    def predict(self, X):
        """Energy per launch at the clocks in ``X``, ``E = P·T`` (DSO eq. 3).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            Energy per launch, J.
        """
        check_is_fitted(self)
        fc, fm = clock_pair(self, X)
        return self.params_.energy(fc, fm)

    def score(self, X, y, sample_weight=None):
        """R² of the predicted energy against the measured energy.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Holds the core and memory clock columns (MHz), see
            ``clock_column`` / ``memory_clock_column``; other columns are ignored.
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
