"""Predicting the DVFS model's parameters from kernel features (DSO §IV-D).

DSO learns the seven parameters of eq. 1-2 from a kernel's runtime
utilisation (DCGM, Table I) and static PTX instruction mix (Table II) with
a multi-layer perceptron (100, 50, 25 neurons, sigmoid activations),
tuning batch size and learning rate by grid search with three-fold
cross-validation. The features are size-free ratios, so the targets are
each parameter's *share* of time and power at the reference (highest)
clock pair (``schema.DVFS_SHARES``; the DSO authors' own parameter files are
normalised likewise), and the profiling run that measures the features
also measures ``T_ref`` and ``P_ref``, which scale them back.

Workflow::

    table = kernel_parameters(runs, ...)          # per-kernel fits (training kernels)
    pred = DVFSParameterPredictor().fit(features, table[list(schema.DVFS_SHARES)])
    params = pred.predict_params(new_features, reference_sm_clock_mhz=..., ...)
    optimize_clocks(params[0], clocks, eta=0.8, p_max_w=...)
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from powermodels import schema
from powermodels.models.dvfs_params import DVFSParams
from powermodels.models.dvfs_targets import kernel_parameters

__all__ = ["DVFSParameterPredictor", "kernel_parameters"]

#: DSO tunes batch size and learning rate (§IV-D).
DEFAULT_PARAM_GRID = {"batch_size": [16, 64], "learning_rate_init": [1e-3, 1e-2]}


class DVFSParameterPredictor(RegressorMixin, BaseEstimator):
    """Scaled features → MLP (100, 50, 25), logistic, grid search with 3-fold CV (DSO §IV-D).

    A multi-output regressor from kernel features to DVFS parameters
    (usually the normalised ones from :func:`kernel_parameters`). Targets
    are standardised as well, since the seven parameters differ by orders of
    magnitude.

    Parameters
    ----------
    estimator : regressor or None, default=None
        Replaces the MLP pipeline (then ``hidden_layer_sizes``, ``activation``,
        ``max_iter`` are unused and ``param_grid`` keys are its own).
    hidden_layer_sizes : tuple of int, default=(100, 50, 25)
        Hidden layers of the MLP (DSO's 100, 50, 25 neurons).
    activation : str, default="logistic"
        DSO's sigmoid.
    param_grid : dict or None, default=None
        Grid over the MLP's parameters (e.g. ``{"batch_size": [16, 64]}``);
        ``None`` uses ``DEFAULT_PARAM_GRID``, ``{}`` fits once without search.
    cv : int, default=3
        Folds of the grid search.
    max_iter : int, default=500
        Epochs of the MLP (``MLPRegressor.max_iter``).
    n_jobs : int or None, default=None
        Parallel fits of the grid search.
    random_state : int or None, default=None
        Seed of the MLP's initial weights and of the fold shuffling.
    feature_log_offset : float or None, default=None
        ``None`` feeds the features as they are; a positive value feeds
        ``log(|x| + feature_log_offset)`` (utilisation ratios and instruction
        shares span decades near 0).

    Attributes
    ----------
    model_ : regressor
        The fitted regressor (the grid search's best when searching).
    best_params_ : dict
        Grid values chosen (empty without search).
    n_iter_ : int
        Epochs of the final MLP fit (default estimator only).
    n_outputs_ : int
        Number of targets seen in ``fit``.
    """

    _parameter_constraints: ClassVar[dict] = {
        "estimator": [HasMethods(["fit", "predict"]), None],
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions({"identity", "logistic", "tanh", "relu"})],
        "param_grid": [dict, None],
        "cv": [Interval(Integral, 2, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "feature_log_offset": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(self, estimator=None, hidden_layer_sizes=(100, 50, 25), activation="logistic",
                 param_grid=None, cv=3, max_iter=500, n_jobs=None, random_state=None,
                 feature_log_offset=None):
        self.estimator = estimator
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.param_grid = param_grid
        self.cv = cv
        self.max_iter = max_iter
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.feature_log_offset = feature_log_offset

    def _features(self, X):
        if self.feature_log_offset is None:
            return X
        if not np.isfinite(self.feature_log_offset) or self.feature_log_offset <= 0:
            raise ValueError(f"feature_log_offset must be None or > 0, got {self.feature_log_offset!r}")
        return np.log(np.abs(X) + self.feature_log_offset)

    @classmethod
    def _check_instance(cls):
        # A small net and no search keep sklearn's ~40 common checks fast.
        return cls(hidden_layer_sizes=(8,), param_grid={}, max_iter=200, random_state=0)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.regressor_tags.poor_score = True  # a neural net on the checks' tiny data
        return tags

    def _base(self):
        """The model to fit and the prefix of its MLP parameters for the grid."""
        if self.estimator is not None:
            return clone(self.estimator), ""
        mlp = MLPRegressor(hidden_layer_sizes=self.hidden_layer_sizes, activation=self.activation,
                           max_iter=self.max_iter, random_state=self.random_state)
        net = Pipeline([("scale", StandardScaler()), ("mlp", mlp)])
        return TransformedTargetRegressor(regressor=net, transformer=StandardScaler()), "regressor__mlp__"

    def fit(self, X, y):
        """Fit the feature → parameter regressor (DSO §IV-D).

        Parameters
        ----------
        X : array-like of shape (n_kernels, n_features)
            Kernel features (DSO Tables I-II).
        y : array-like of shape (n_kernels, n_params)
            DVFS parameters or shares (see :func:`kernel_parameters`).

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        X, y = validate_data(self, X, y, multi_output=True, y_numeric=True, dtype=np.float64)
        X = self._features(X)
        self.n_outputs_ = 1 if y.ndim == 1 else y.shape[1]
        base, prefix = self._base()
        grid = DEFAULT_PARAM_GRID if self.param_grid is None else self.param_grid
        if grid:
            grid = {prefix + k: list(v) for k, v in grid.items()}
            cv = KFold(self.cv, shuffle=True, random_state=self.random_state)
            search = GridSearchCV(base, grid, cv=cv, scoring="neg_mean_squared_error",
                                  n_jobs=self.n_jobs)
            search.fit(X, y)
            self.model_ = search.best_estimator_
            self.best_params_ = {k[len(prefix):]: v for k, v in search.best_params_.items()}
        else:
            self.model_ = base.fit(X, y)
            self.best_params_ = {}
        if self.estimator is None:
            self.n_iter_ = self.model_.regressor_.named_steps["mlp"].n_iter_
        return self

    def predict(self, X):
        """Predicted parameters of each kernel.

        Parameters
        ----------
        X : array-like of shape (n_kernels, n_features)
            Kernel features, as in ``fit``.

        Returns
        -------
        y_pred : ndarray of shape (n_kernels, n_params) or (n_kernels,)
            One column per target of ``fit``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return self.model_.predict(self._features(X))

    def predict_params(self, X, *, reference_sm_clock_mhz, reference_mem_clock_mhz,
                       reference_time_s, reference_power_w, voltage_knee_mhz: float,
                       voltage_slope_per_ghz: float, anchor: bool = True) -> list[DVFSParams]:
        """Predicted DVFS models in s and W, one per row of ``X``, ready for the optimiser.

        The predictor is trained on shares (``schema.DVFS_SHARES``, see
        :func:`kernel_parameters`); the profiled kernel's clocks, time and
        power at its reference clocks turn them back into parameters.
        Negative predictions are clipped to 0 (eq. 1-2 need non-negative
        parameters). With ``anchor`` the power shares are rescaled to sum to
        1 and the time shares so that ``t0 + max(α, β)`` shares is 1: the
        model then reproduces the measured reference run exactly and the
        prediction only supplies the shape of the DVFS curves.

        Parameters
        ----------
        X : array-like of shape (n_kernels, n_features)
            Kernel features, as in ``fit``.
        reference_sm_clock_mhz, reference_mem_clock_mhz : float or array-like of shape (n_kernels,)
            Clocks (MHz) of each kernel's profiling run.
        reference_time_s, reference_power_w : float or array-like of shape (n_kernels,)
            Time (s) and power (W) measured in that run.
        voltage_knee_mhz, voltage_slope_per_ghz : float
            The GPU's V(f) shape (:func:`~powermodels.models.dvfs.fit_voltage_curve`).
        anchor : bool, default=True
            Rescale the shares so the model reproduces the reference run.

        Returns
        -------
        list of DVFSParams
            One parameter set per row of ``X``.
        """
        pred = np.asarray(self.predict(X), dtype=float)
        if pred.ndim != 2 or pred.shape[1] != len(schema.DVFS_SHARES):
            raise ValueError(
                f"predictor outputs {pred.shape[-1] if pred.ndim else 1} value(s) per kernel; "
                f"predict_params needs the {len(schema.DVFS_SHARES)} shares of schema.DVFS_SHARES"
            )
        n = len(pred)
        refs = [np.broadcast_to(np.asarray(v, dtype=float), (n,)) for v in (
            reference_sm_clock_mhz, reference_mem_clock_mhz, reference_time_s, reference_power_w)]
        out = []
        for row, fc, fm, t, p in zip(pred, *refs, strict=True):
            row = np.maximum(row, 0.0)
            if anchor:
                row = _anchored(row)
            params = DVFSParams.from_shares(
                row, f_core_mhz=fc, f_mem_mhz=fm, time_s=t, power_w=p,
                voltage_knee_mhz=voltage_knee_mhz, voltage_slope_per_ghz=voltage_slope_per_ghz)
            out.append(params)
        return out


def _anchored(shares: np.ndarray) -> np.ndarray:
    """Shares rescaled so that the model equals the reference run at the reference clocks."""
    out = shares.copy()
    p_sum = out[:4].sum()
    t_sum = out[4] + max(out[5], out[6])
    if p_sum > 0:
        out[:4] /= p_sum
    if t_sum > 0:
        out[4:] /= t_sum
    return out
