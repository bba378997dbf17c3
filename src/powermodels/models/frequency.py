"""Power as a function of the core clock, and correction to a reference clock.

:class:`FrequencyPowerModel` fits thesis eq. 4.1,
``P(f) = P_static + a·f·V(f)²``, with the Kernel Tuner voltage shape of
:func:`powermodels.models.voltage.relative_voltage` (V = 1 below a knee, rising
linearly above it). :class:`FrequencyCorrection` applies thesis eq. 4.2,
``P_corr = P_meas − P̂(f_k) + P̂(f_ref)``, to a table of measurements.

The fit is a deterministic multi-start: a grid over (knee, slope) with the
linear part ``(P_static, a)`` solved in closed form at every grid point,
then a bounded Levenberg–Marquardt refinement of all four parameters on
scaled frequency and power (see ``powermodels.models._curvefit``). The same
code fits thousands of configurations at once through
:func:`fit_frequency_power_batch` or :class:`~powermodels.models.grouped.GroupedEstimator`.
"""

from __future__ import annotations

import warnings
from numbers import Real
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import schema
from ._clock_curve import ClockCurveRegressor, fit_groups_table
from ._columns import (
    COLUMN,
    DEPRECATED,
    RenamedParametersMixin,
    column_index,
    is_fitted,
    numeric_column,
    renamed_parameter,
    replace_column,
    table_array,
)
from ._curvefit import GAP_FACTOR, fit_power_batch
from .voltage import relative_voltage

__all__ = ["FrequencyCorrection", "FrequencyPowerModel", "KneeInGapWarning", "fit_frequency_power_batch"]


class KneeInGapWarning(UserWarning):
    """The fitted knee of eq. 4.1 lies in a gap of the training clocks, where no data locate it."""


class FrequencyPowerModel(ClockCurveRegressor):
    """Thesis eq. 4.1: ``P(f) = P_static + a·f·V(f)²`` with a knee in V(f).

    Parameters
    ----------
    clock_column : str or int, default="sm_clock_mhz"
        Column of ``X`` holding the core clock in MHz: a name (looked up in a
        DataFrame's columns) or a position. An ``X`` of a single column
        without names is that column. Other columns are ignored, text
        included (see ``docs/columns.md``).
    max_iter : int, default=100
        Levenberg–Marquardt iterations after the grid start.
    knee_in_gap : {"edge", "free"}, default="edge"
        What to do when the fitted knee falls inside a gap of the training
        clocks (neighbouring clocks more than twice the median clock step
        apart): no data there locate the knee, and left free it drifts into
        the gap and trades static for dynamic power, under-predicting the
        gap. ``"edge"`` refits with the knee at either edge of the gap and
        keeps the better; ``"free"`` keeps it where it fell and warns
        (:class:`KneeInGapWarning`). Either way ``knee_gap_mhz_`` says so.
    frequency_column : str or int, default="deprecated"
        Deprecated old name of ``clock_column`` (removed in 0.3).

    Attributes
    ----------
    p_static_w_ : float
        Static (frequency-independent) power, W.
    a_ : float
        Dynamic coefficient, W per MHz at V = 1.
    knee_mhz_ : float
        Clock where the voltage starts to rise.
    slope_per_ghz_ : float
        Relative voltage rise per GHz above the knee.
    ridge_frequency_mhz_ : float
        The ridge frequency (Kernel Tuner's name for the knee): the highest
        clock that still runs at minimum voltage, hence the most
        energy-efficient clock for a compute-bound kernel.
    rmse_w_ : float
        Root-mean-square residual of the fit, W.
    knee_gap_mhz_ : tuple of float or None
        ``(low, high)``, the gap of the training clocks the unconstrained
        knee fell into (then moved to ``low`` or ``high`` with
        ``knee_in_gap="edge"``); None when it fell in none.
    n_iter_ : int
        Levenberg–Marquardt iterations used.

    Examples
    --------
    >>> import numpy as np
    >>> f = np.linspace(600, 2000, 15)
    >>> p = 40 + 0.08 * f * (1 + 0.5 * np.maximum(f - 1300, 0) / 1000) ** 2
    >>> model = FrequencyPowerModel().fit(f[:, None], p)
    >>> round(model.knee_mhz_), round(model.p_static_w_, 1)
    (1300, 40.0)
    """

    _PARAMS = ("p_static_w_", "a_", "knee_mhz_", "slope_per_ghz_")
    _TARGET = "power"
    _Y_MAX = 1e5  # W: the plausible maximum of every power column (schema)
    _batch_fit = staticmethod(fit_power_batch)
    _parameter_constraints: ClassVar[dict] = {
        **ClockCurveRegressor._parameter_constraints,
        "knee_in_gap": [StrOptions({"edge", "free"})],
    }
    _ADDED: ClassVar[dict[str, object]] = {"knee_in_gap": "free"}  # how models saved before it were fitted

    def __init__(self, clock_column=schema.SM_CLOCK_MHZ, max_iter=100, knee_in_gap="edge",
                 frequency_column=DEPRECATED):
        self.clock_column = clock_column
        self.max_iter = max_iter
        self.knee_in_gap = knee_in_gap
        self.frequency_column = frequency_column

    def _fit_options(self):
        return {"knee_in_gap": self.knee_in_gap}

    def _set_params_from_row(self, row, sse, n, knee_gap=(np.nan, np.nan)):
        self.p_static_w_, self.a_, self.knee_mhz_, self.slope_per_ghz_ = (float(v) for v in row)
        self.ridge_frequency_mhz_ = self.knee_mhz_
        self.rmse_w_ = float(np.sqrt(sse / max(n, 1)))
        self.knee_gap_mhz_ = None if not np.isfinite(knee_gap[0]) else (float(knee_gap[0]), float(knee_gap[1]))
        if self.knee_gap_mhz_ is not None and self.knee_in_gap == "free":
            lo, hi = self.knee_gap_mhz_
            warnings.warn(f"{type(self).__name__}: the knee ({self.knee_mhz_:.0f} MHz) lies in a gap "
                          f"of the training clocks ({lo:g}–{hi:g} MHz, wider than {GAP_FACTOR:g}× the "
                          "median clock step) where no data locate it; predictions in the gap are "
                          "guesses (knee_in_gap='edge' moves it to the gap's edge)",
                          KneeInGapWarning, stacklevel=2)

    def predict_at(self, frequency_mhz):
        """Modelled power at any clock(s), thesis eq. 4.1.

        Parameters
        ----------
        frequency_mhz : float or array-like
            Core clock(s), MHz.

        Returns
        -------
        power_w : float or ndarray
            Power, W, of the shape of ``frequency_mhz``.
        """
        check_is_fitted(self, self._PARAMS)
        f = np.asarray(frequency_mhz, dtype=float)
        v = relative_voltage(f, self.knee_mhz_, self.slope_per_ghz_)
        return self.p_static_w_ + self.a_ * f * v * v


def fit_frequency_power_batch(frequency_mhz, power_w, groups, *, max_iter=100,
                              knee_in_gap="edge") -> pd.DataFrame:
    """Fit eq. 4.1 separately for every group, all groups at once.

    Parameters
    ----------
    frequency_mhz, power_w : array-like of shape (n_samples,)
        Clock (MHz) and measured power (W) of every run.
    groups : array-like of shape (n_samples,)
        Configuration (kernel, config...) of every run.
    max_iter : int, default=100
        Levenberg–Marquardt iterations.
    knee_in_gap : {"edge", "free"}, default="edge"
        See :class:`FrequencyPowerModel`.

    Returns
    -------
    DataFrame
        Indexed by group: ``p_static_w``, ``a_w_per_mhz``, ``knee_mhz``,
        ``slope_per_ghz``, ``rmse_w``, ``n_samples``, and
        ``knee_gap_low_mhz``/``knee_gap_high_mhz``: the gap of the group's
        clocks its unconstrained knee fell into (NaN where none).
    """
    if knee_in_gap not in ("edge", "free"):
        raise ValueError(f"knee_in_gap must be 'edge' or 'free', got {knee_in_gap!r}")
    labels, params, rmse, n, gap = fit_groups_table(fit_power_batch, "frequency_mhz", frequency_mhz,
                                                    "power_w", power_w, groups, max_iter=max_iter,
                                                    knee_in_gap=knee_in_gap)
    return pd.DataFrame(
        {schema.FIT_P_STATIC_W: params[:, 0], schema.FIT_A_W_PER_MHZ: params[:, 1],
         schema.FIT_KNEE_MHZ: params[:, 2], schema.FIT_SLOPE_PER_GHZ: params[:, 3],
         schema.FIT_RMSE_W: rmse, schema.N_SAMPLES: n,
         schema.FIT_KNEE_GAP_LOW_MHZ: gap[:, 0], schema.FIT_KNEE_GAP_HIGH_MHZ: gap[:, 1]},
        index=pd.Index(labels, name=schema.GROUP),
    )


class FrequencyCorrection(RenamedParametersMixin, OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Thesis eq. 4.2: move measured power to a reference clock.

    ``P_corr = P_meas − P̂(f_k) + P̂(f_ref)`` where ``P̂`` is a fitted
    :class:`FrequencyPowerModel`. Returns the whole table with only the power
    column changed.

    Parameters
    ----------
    power_column : str or int, default="power_w"
        Column of measured power (W), a name or a position.
    clock_column : str or int, default="sm_clock_mhz"
        Column of the core clock each run ran at (MHz). Other columns are
        passed through unread (see ``docs/columns.md``).
    reference_frequency_mhz : float or None, default=None
        ``f_ref``; None uses the highest clock seen in ``fit``.
    model : FrequencyPowerModel or None, default=None
        The power model. None fits a new one on ``fit``'s table; an unfitted
        model is cloned and fitted there; a fitted one is used as it is (fit
        it on a locked-clock sweep, then correct default-DVFS measurements).
    frequency_column : str or int, default="deprecated"
        Deprecated old name of ``clock_column`` (removed in 0.3).

    Attributes
    ----------
    model_ : FrequencyPowerModel
        The fitted power model in use.
    reference_frequency_mhz_ : float
        ``f_ref`` in use.
    reference_power_w_ : float
        ``P̂(f_ref)``.
    """

    _parameter_constraints: ClassVar[dict] = {
        "power_column": COLUMN,
        "clock_column": COLUMN,
        "reference_frequency_mhz": [Interval(Real, 0, None, closed="neither"), None],
        "model": [FrequencyPowerModel, None],
        "frequency_column": COLUMN,  # deprecated name of clock_column
    }
    _RENAMED: ClassVar[dict[str, str]] = {"frequency_column": "clock_column"}

    def __init__(self, power_column=schema.POWER_W, clock_column=schema.SM_CLOCK_MHZ,
                 reference_frequency_mhz=None, model=None, frequency_column=DEPRECATED):
        self.power_column = power_column
        self.clock_column = clock_column
        self.reference_frequency_mhz = reference_frequency_mhz
        self.model = model
        self.frequency_column = frequency_column

    @classmethod
    def _check_instance(cls):
        return cls(power_column=0, clock_column=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.string = True  # tables may carry kernel/config names
        tags.requires_fit = True
        return tags

    def _columns(self, X, *, fitting):
        jp = column_index(X, self.power_column, "power_column")
        clock = renamed_parameter(self, "clock_column", "frequency_column", warn=fitting)
        jf = column_index(X, clock, "clock_column")
        if jp == jf:
            raise ValueError(f"power_column and clock_column both name column {self.power_column!r}")
        p = numeric_column(X, jp, "power_column", nonnegative=True, unit=" W")
        f = numeric_column(X, jf, "clock_column", nonnegative=True, unit=" MHz")
        return jp, p, f

    def fit(self, X, y=None):
        """Fit (or adopt) the power model of eq. 4.1 and fix the reference clock.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table with the power and clock columns.
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
        _, p, f = self._columns(X, fitting=True)
        if self.model is not None and is_fitted(self.model):
            self.model_ = self.model
        else:
            self.model_ = clone(self.model) if self.model is not None else FrequencyPowerModel()
            self.model_.set_params(clock_column=0, frequency_column=DEPRECATED)
            self.model_.fit(f[:, None], p)
        ref = self.reference_frequency_mhz
        if ref is None:
            ref = float(f.max())
        elif not np.isfinite(ref):
            raise ValueError(f"reference_frequency_mhz must be a positive clock in MHz, got {ref!r}")
        self.reference_frequency_mhz_ = float(ref)
        self.reference_power_w_ = float(self.model_.predict_at(self.reference_frequency_mhz_))
        return self

    def transform(self, X):
        """Move every run's power to the reference clock (thesis eq. 4.2).

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            Run table with the power and clock columns.

        Returns
        -------
        X_corrected : DataFrame or ndarray of shape (n_samples, n_features)
            ``X`` with only the power column changed.
        """
        check_is_fitted(self, "model_")
        X = table_array(X)
        validate_data(self, X, reset=False, skip_check_array=True)
        jp, p, f = self._columns(X, fitting=False)
        corrected = p - self.model_.predict_at(f) + self.reference_power_w_
        return replace_column(X, jp, corrected)
