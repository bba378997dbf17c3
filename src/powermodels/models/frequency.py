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

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin, clone
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import schema
from ._clock_curve import _ClockCurveRegressor, fit_groups_table
from ._columns import column_index, is_fitted, numeric_column, replace_column, table_array
from ._curvefit import fit_power_batch
from .voltage import relative_voltage

__all__ = ["FrequencyCorrection", "FrequencyPowerModel", "fit_frequency_power_batch"]

class FrequencyPowerModel(_ClockCurveRegressor):
    """Thesis eq. 4.1: ``P(f) = P_static + a·f·V(f)²`` with a knee in V(f).

    Parameters
    ----------
    frequency_column : str or int, default=0
        Column of ``X`` holding the core clock in MHz (a name needs a
        DataFrame). Other columns are ignored.
    max_iter : int, default=100
        Levenberg–Marquardt iterations after the grid start.

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

    def __init__(self, frequency_column=0, max_iter=100):
        self.frequency_column = frequency_column
        self.max_iter = max_iter

    def _set_params_from_row(self, row, sse, n):
        self.p_static_w_, self.a_, self.knee_mhz_, self.slope_per_ghz_ = (float(v) for v in row)
        self.ridge_frequency_mhz_ = self.knee_mhz_
        self.rmse_w_ = float(np.sqrt(sse / max(n, 1)))

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


def fit_frequency_power_batch(frequency_mhz, power_w, groups, *, max_iter=100) -> pd.DataFrame:
    """Fit eq. 4.1 separately for every group, all groups at once.

    Parameters
    ----------
    frequency_mhz, power_w : array-like of shape (n_samples,)
        Clock (MHz) and measured power (W) of every run.
    groups : array-like of shape (n_samples,)
        Configuration (kernel, config...) of every run.
    max_iter : int, default=100
        Levenberg–Marquardt iterations.

    Returns
    -------
    DataFrame
        Indexed by group: ``p_static_w``, ``a_w_per_mhz``, ``knee_mhz``,
        ``slope_per_ghz``, ``rmse_w``, ``n_samples``.
    """
    labels, params, rmse, n = fit_groups_table(fit_power_batch, "frequency_mhz", frequency_mhz,
                                               "power_w", power_w, groups, max_iter=max_iter)
    return pd.DataFrame(
        {schema.FIT_P_STATIC_W: params[:, 0], schema.FIT_A_W_PER_MHZ: params[:, 1],
         schema.FIT_KNEE_MHZ: params[:, 2], schema.FIT_SLOPE_PER_GHZ: params[:, 3],
         schema.FIT_RMSE_W: rmse, schema.N_SAMPLES: n},
        index=pd.Index(labels, name=schema.GROUP),
    )


class FrequencyCorrection(OneToOneFeatureMixin, TransformerMixin, BaseEstimator):
    """Thesis eq. 4.2: move measured power to a reference clock.

    ``P_corr = P_meas − P̂(f_k) + P̂(f_ref)`` where ``P̂`` is a fitted
    :class:`FrequencyPowerModel`. Returns the whole table with only the power
    column changed.

    Parameters
    ----------
    power_column : str or int, default="power_w"
        Column of measured power (W).
    frequency_column : str or int, default="sm_clock_mhz"
        Column of the clock each run ran at (MHz).
    reference_frequency_mhz : float or None, default=None
        ``f_ref``; None uses the highest clock seen in ``fit``.
    model : FrequencyPowerModel or None, default=None
        The power model. None fits a new one on ``fit``'s table; an unfitted
        model is cloned and fitted there; a fitted one is used as it is (fit
        it on a locked-clock sweep, then correct default-DVFS measurements).

    Attributes
    ----------
    model_ : FrequencyPowerModel
        The fitted power model in use.
    reference_frequency_mhz_ : float
        ``f_ref`` in use.
    reference_power_w_ : float
        ``P̂(f_ref)``.
    """

    def __init__(self, power_column=schema.POWER_W, frequency_column=schema.SM_CLOCK_MHZ,
                 reference_frequency_mhz=None, model=None):
        self.power_column = power_column
        self.frequency_column = frequency_column
        self.reference_frequency_mhz = reference_frequency_mhz
        self.model = model

    @classmethod
    def _check_instance(cls):
        return cls(power_column=0, frequency_column=1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.string = True  # tables may carry kernel/config names
        tags.requires_fit = True
        return tags

    def _columns(self, X):
        jp = column_index(X, self.power_column, "power_column")
        jf = column_index(X, self.frequency_column, "frequency_column")
        if jp == jf:
            raise ValueError("power_column and frequency_column name the same column")
        p = numeric_column(X, jp, "power_column", nonnegative=True, unit=" W")
        f = numeric_column(X, jf, "frequency_column", nonnegative=True, unit=" MHz")
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
        X = table_array(X)
        validate_data(self, X, reset=True, skip_check_array=True)
        _, p, f = self._columns(X)
        if self.model is not None and not isinstance(self.model, FrequencyPowerModel):
            raise ValueError(f"model must be a FrequencyPowerModel or None, got {type(self.model).__name__}")
        if self.model is not None and is_fitted(self.model):
            self.model_ = self.model
        else:
            self.model_ = clone(self.model) if self.model is not None else FrequencyPowerModel()
            self.model_.set_params(frequency_column=0)
            self.model_.fit(f[:, None], p)
        ref = self.reference_frequency_mhz
        if ref is None:
            ref = float(f.max())
        elif not np.isfinite(ref) or ref <= 0:
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
        jp, p, f = self._columns(X)
        corrected = p - self.model_.predict_at(f) + self.reference_power_w_
        return replace_column(X, jp, corrected)
