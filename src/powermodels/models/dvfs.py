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

from dataclasses import asdict, dataclass, replace
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar, nnls
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from powermodels import schema
from powermodels.models.voltage import relative_voltage

__all__ = [
    "DVFSEnergyModel",
    "DVFSParams",
    "DVFSPowerModel",
    "DVFSTimeModel",
    "fit_voltage_curve",
]


# --------------------------------------------------------------------------
# The parameter set.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class DVFSParams:
    """The seven DSO parameters of one kernel plus the GPU's V(f) shape.

    Attributes
    ----------
    p0_w, kappa_w, gamma_w_per_mhz, c_w_per_mhz : float
        Power parameters of DSO eq. 1 (``kappa_w`` per unit relative voltage).
    t0_s, alpha_s_mhz, beta_s_mhz : float
        Time parameters of DSO eq. 2 (α and β in s·MHz).
    voltage_knee_mhz, voltage_slope_per_ghz : float
        The relative-voltage curve V(f) (a property of the GPU, not the kernel).
    """

    p0_w: float = 0.0
    kappa_w: float = 0.0
    gamma_w_per_mhz: float = 0.0
    c_w_per_mhz: float = 0.0
    t0_s: float = 0.0
    alpha_s_mhz: float = 0.0
    beta_s_mhz: float = 0.0
    voltage_knee_mhz: float = 0.0
    voltage_slope_per_ghz: float = 0.0

    _NAMES: ClassVar[dict[str, str]] = {
        "p0_w": schema.DVFS_P0_W,
        "kappa_w": schema.DVFS_KAPPA_W,
        "gamma_w_per_mhz": schema.DVFS_GAMMA_W_PER_MHZ,
        "c_w_per_mhz": schema.DVFS_C_W_PER_MHZ,
        "t0_s": schema.DVFS_T0_S,
        "alpha_s_mhz": schema.DVFS_ALPHA_S_MHZ,
        "beta_s_mhz": schema.DVFS_BETA_S_MHZ,
    }

    def voltage(self, f_core_mhz) -> np.ndarray:
        """Relative voltage V(f_c)."""
        return relative_voltage(f_core_mhz, self.voltage_knee_mhz, self.voltage_slope_per_ghz)

    def power(self, f_core_mhz, f_mem_mhz) -> np.ndarray:
        """Power in W (DSO eq. 1)."""
        fc = np.asarray(f_core_mhz, dtype=float)
        fm = np.asarray(f_mem_mhz, dtype=float)
        v = self.voltage(fc)
        return self.p0_w + self.kappa_w * v + self.gamma_w_per_mhz * fm + self.c_w_per_mhz * v**2 * fc

    def time(self, f_core_mhz, f_mem_mhz) -> np.ndarray:
        """Time in s (DSO eq. 2)."""
        fc = np.asarray(f_core_mhz, dtype=float)
        fm = np.asarray(f_mem_mhz, dtype=float)
        return self.t0_s + np.maximum(self.alpha_s_mhz / fm, self.beta_s_mhz / fc)

    def energy(self, f_core_mhz, f_mem_mhz) -> np.ndarray:
        """Energy in J (DSO eq. 3)."""
        return self.power(f_core_mhz, f_mem_mhz) * self.time(f_core_mhz, f_mem_mhz)

    def ridge_core_mhz(self, f_mem_mhz: float) -> float:
        """Core clock where the kernel turns memory-bound, ``(β/α)·f_m`` (DSO Theorem 1)."""
        if self.alpha_s_mhz <= 0:
            return np.inf
        return self.beta_s_mhz / self.alpha_s_mhz * float(f_mem_mhz)

    def scaled(self, time_factor: float = 1.0, power_factor: float = 1.0) -> DVFSParams:
        """The same model with time multiplied by ``time_factor`` and power by ``power_factor``."""
        return replace(
            self,
            p0_w=self.p0_w * power_factor,
            kappa_w=self.kappa_w * power_factor,
            gamma_w_per_mhz=self.gamma_w_per_mhz * power_factor,
            c_w_per_mhz=self.c_w_per_mhz * power_factor,
            t0_s=self.t0_s * time_factor,
            alpha_s_mhz=self.alpha_s_mhz * time_factor,
            beta_s_mhz=self.beta_s_mhz * time_factor,
        )

    def clipped(self) -> DVFSParams:
        """The same model with negative parameters set to 0 (physical range of eq. 1-2)."""
        values = {k: max(v, 0.0) for k, v in asdict(self).items() if k in self._NAMES}
        return replace(self, **values)

    def to_shares(self, f_core_mhz: float, f_mem_mhz: float, time_s: float,
                  power_w: float) -> np.ndarray:
        """Each term's share of T and P at a reference clock pair (``schema.DVFS_SHARES`` order).

        ``(P0, κV, γf_m, cV²f_c)/P_ref`` and ``(t0, α/f_m, β/f_c)/T_ref``:
        dimensionless, O(1) and comparable across kernels of any size, so a
        regressor can learn them from size-free features.
        """
        v = float(self.voltage(f_core_mhz))
        return np.array([
            self.p0_w / power_w, self.kappa_w * v / power_w,
            self.gamma_w_per_mhz * f_mem_mhz / power_w, self.c_w_per_mhz * v**2 * f_core_mhz / power_w,
            self.t0_s / time_s, self.alpha_s_mhz / f_mem_mhz / time_s,
            self.beta_s_mhz / f_core_mhz / time_s,
        ])

    @classmethod
    def from_shares(cls, shares, *, f_core_mhz: float, f_mem_mhz: float, time_s: float,
                    power_w: float, voltage_knee_mhz: float,
                    voltage_slope_per_ghz: float) -> DVFSParams:
        """Inverse of :meth:`to_shares`."""
        s = np.asarray(shares, dtype=float).ravel()
        if s.size != 7 or not np.all(np.isfinite(s)):
            raise ValueError(f"shares: expected 7 finite values, got {s.size}")
        for name, val in (("f_core_mhz", f_core_mhz), ("f_mem_mhz", f_mem_mhz),
                          ("time_s", time_s), ("power_w", power_w)):
            if not np.isfinite(val) or val <= 0:
                raise ValueError(f"{name} must be positive, got {val}")
        v = float(relative_voltage(f_core_mhz, voltage_knee_mhz, voltage_slope_per_ghz))
        return cls(
            p0_w=s[0] * power_w, kappa_w=s[1] * power_w / v,
            gamma_w_per_mhz=s[2] * power_w / f_mem_mhz, c_w_per_mhz=s[3] * power_w / (v**2 * f_core_mhz),
            t0_s=s[4] * time_s, alpha_s_mhz=s[5] * time_s * f_mem_mhz,
            beta_s_mhz=s[6] * time_s * f_core_mhz,
            voltage_knee_mhz=float(voltage_knee_mhz), voltage_slope_per_ghz=float(voltage_slope_per_ghz),
        )

    def as_series(self) -> pd.Series:
        """The seven kernel parameters under their schema names."""
        return pd.Series({col: getattr(self, attr) for attr, col in self._NAMES.items()})

    @classmethod
    def from_values(cls, values, *, voltage_knee_mhz: float, voltage_slope_per_ghz: float) -> DVFSParams:
        """Build from a mapping with schema names or a sequence in ``schema.DVFS_PARAMETERS`` order."""
        if isinstance(values, (dict, pd.Series)):
            missing = [c for c in schema.DVFS_PARAMETERS if c not in values]
            if missing:
                raise ValueError(f"DVFS parameters: column {missing[0]!r} is missing")
            seq = [float(values[c]) for c in schema.DVFS_PARAMETERS]
        else:
            seq = [float(v) for v in np.ravel(values)]
            if len(seq) != len(schema.DVFS_PARAMETERS):
                raise ValueError(
                    f"DVFS parameters: expected {len(schema.DVFS_PARAMETERS)} values, got {len(seq)}"
                )
        if not np.all(np.isfinite(seq)):
            raise ValueError("DVFS parameters: values must be finite")
        kw = dict(zip(cls._NAMES, seq, strict=True))
        return cls(**kw, voltage_knee_mhz=float(voltage_knee_mhz),
                   voltage_slope_per_ghz=float(voltage_slope_per_ghz))


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
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.regressor_tags.poor_score = True
        return tags


# --------------------------------------------------------------------------
# Power.
# --------------------------------------------------------------------------


def _power_design(fc, fm, knee, slope):
    v = relative_voltage(fc, knee, slope)
    return np.column_stack([np.ones_like(fc), v, fm, v**2 * fc])


def _nnls_fit(A, y, keep):
    """Non-negative least squares on the kept columns; dropped columns get 0."""
    coef = np.zeros(A.shape[1])
    sub = A[:, keep]
    scale = np.abs(sub).max(axis=0)
    scale[scale == 0] = 1.0
    c, _ = nnls(sub / scale, y, maxiter=50 * sub.shape[1] + 100)
    coef[keep] = c / scale
    sse = float(np.sum((A @ coef - y) ** 2))
    return coef, sse


def _fit_power(fc, fm, y, knee, slope):
    A = _power_design(fc, fm, knee, slope)
    # Columns that are constant in the data are not identifiable beside P0:
    # a fixed memory clock puts γ·f_m into P0, clocks all below the knee put κ·V there.
    keep = np.array([True, np.ptp(A[:, 1]) > 1e-12, np.ptp(fm) > 1e-9, True])
    return _nnls_fit(A, y, keep)


class DVFSPowerModel(_DVFSBase):
    """DSO power model (eq. 1), fitted by non-negative least squares.

    ``P = P0 + κ·V + γ·f_m + c·V²·f_c`` with ``V`` the relative voltage of
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
                 voltage_slope_per_ghz=None):
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column
        self.voltage_knee_mhz = voltage_knee_mhz
        self.voltage_slope_per_ghz = voltage_slope_per_ghz

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
        fc, fm = _clock_arrays(self, X)
        knees = (np.unique(fc) if self.voltage_knee_mhz is None else [float(self.voltage_knee_mhz)])
        slopes = ((0.25, 0.5, 1.0, 2.0) if self.voltage_slope_per_ghz is None
                  else [float(self.voltage_slope_per_ghz)])
        if np.any(np.asarray(slopes) < 0):
            raise ValueError("voltage_slope_per_ghz must be >= 0")
        best = None
        for knee in knees:
            for slope in slopes:
                coef, sse = _fit_power(fc, fm, y, knee, slope)
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


def _time_sse(r, u, w, y):
    """Fit t0, β ≥ 0 for a fixed ratio r = α/β; returns (sse, t0, α, β)."""
    if np.isinf(r):  # memory-bound everywhere: β = 0
        coef, sse = _nnls_fit(np.column_stack([np.ones_like(u), u]), y, np.array([True, True]))
        return sse, coef[0], coef[1], 0.0
    z = np.maximum(r * u, w)
    coef, sse = _nnls_fit(np.column_stack([np.ones_like(z), z]), y, np.array([True, True]))
    return sse, coef[0], r * coef[1], coef[1]


def _fit_time(fc, fm, y):
    """Piecewise regression of DSO eq. 2: search the ratio α/β, least squares for the rest."""
    u, w = 1.0 / fm, 1.0 / fc
    # The max() switches branch where r = w/u, i.e. at the data's breakpoints;
    # between them SSE(r) is smooth, so a grid plus a bounded refinement suffices.
    bp = np.unique(w / u)
    lo, hi = bp.min() / 2.0, bp.max() * 2.0
    grid = np.unique(np.concatenate([bp, np.geomspace(lo, hi, 64)]))
    cands = [(_time_sse(r, u, w, y), r) for r in (0.0, *grid, np.inf)]
    (best, r_best) = min(cands, key=lambda c: c[0][0])
    if np.isfinite(r_best) and r_best > 0:
        i = int(np.searchsorted(grid, r_best))
        a, b = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
        if b > a:
            res = minimize_scalar(lambda r: _time_sse(r, u, w, y)[0], bounds=(a, b),
                                  method="bounded", options={"xatol": 1e-6 * a})
            refined = _time_sse(res.x, u, w, y)
            if refined[0] < best[0]:
                best = refined
    return best


class DVFSTimeModel(_DVFSBase):
    """DSO time model (eq. 2), ``T = t0 + max(α/f_m, β/f_c)``, by piecewise regression.

    The ratio ``α/β`` (which sets the ridge clock ``f_c = (β/α)·f_m`` where
    the kernel turns memory-bound) is searched over the data's breakpoints
    and refined; for each ratio, ``t0`` and the slope come from non-negative
    least squares. With a single memory clock ``α`` is determined only as
    the plateau ``α/f_m`` (enough for predictions at that memory clock).

    Parameters
    ----------
    core_clock_column, mem_clock_column : str or int, default=0, 1
        Core and memory clock columns (MHz) of X, by name or position.

    Attributes
    ----------
    t0_, alpha_, beta_ : float
        Fitted parameters (s, s·MHz, s·MHz).
    params_ : DVFSParams
        The time parameters (power parameters 0).
    """

    _expected_failed_checks = _CLOCK_FAILS

    def __init__(self, core_clock_column=0, mem_clock_column=1):
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column

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
        fc, fm = _clock_arrays(self, X)
        _, self.t0_, self.alpha_, self.beta_ = (float(v) for v in _fit_time(fc, fm, y))
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
                 voltage_slope_per_ghz=None):
        self.core_clock_column = core_clock_column
        self.mem_clock_column = mem_clock_column
        self.voltage_knee_mhz = voltage_knee_mhz
        self.voltage_slope_per_ghz = voltage_slope_per_ghz

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
        fc, fm = _clock_arrays(self, X)
        if y.ndim != 2 or y.shape[1] != 2:
            raise ValueError(
                f"y must have 2 columns (time_s, power_w), got shape {np.shape(y)}"
            )
        clocks = np.column_stack([fc, fm])
        self.time_model_ = DVFSTimeModel(0, 1).fit(clocks, y[:, 0])
        self.power_model_ = DVFSPowerModel(0, 1, self.voltage_knee_mhz,
                                           self.voltage_slope_per_ghz).fit(clocks, y[:, 1])
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


def fit_voltage_curve(core_mhz, mem_mhz, power_w, groups, *, knees=None,
                      slopes=(0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0)):
    """Choose one V(f) shape for a GPU from the power of many kernels.

    V(f) belongs to the GPU, not the kernel, so it is chosen once: for each
    candidate ``(knee, slope)`` a :class:`DVFSPowerModel` is fitted per
    kernel and the relative squared errors are summed over all kernels.

    Parameters
    ----------
    core_mhz, mem_mhz, power_w : array-like of shape (n,)
        Clocks and measured power of every run.
    groups : array-like of shape (n,)
        Kernel of each run.
    knees : array-like or None
        Candidate knees (MHz); default: the distinct core clocks.
    slopes : sequence of float
        Candidate slopes per GHz.

    Returns
    -------
    (float, float)
        ``(voltage_knee_mhz, voltage_slope_per_ghz)``.
    """
    fc = np.asarray(core_mhz, dtype=float)
    fm = np.asarray(mem_mhz, dtype=float)
    p = np.asarray(power_w, dtype=float)
    g = np.asarray(groups)
    if not (fc.shape == fm.shape == p.shape == g.shape) or fc.ndim != 1:
        raise ValueError("core_mhz, mem_mhz, power_w and groups must be 1-D of the same length")
    for name, v in (("core_mhz", fc), ("mem_mhz", fm), ("power_w", p)):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be finite and positive")
    knees = np.unique(fc) if knees is None else np.asarray(knees, dtype=float)
    idx = [np.flatnonzero(g == k) for k in pd.unique(g)]
    best = None
    for knee in knees:
        for slope in slopes:
            total = 0.0
            for i in idx:
                coef, _ = _fit_power(fc[i], fm[i], p[i], knee, slope)
                pred = _power_design(fc[i], fm[i], knee, slope) @ coef
                total += float(np.sum(((pred - p[i]) / p[i]) ** 2))
            if best is None or total < best[0]:
                best = (total, float(knee), float(slope))
    return best[1], best[2]
