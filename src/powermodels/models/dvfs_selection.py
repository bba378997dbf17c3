"""Choosing the DVFS parameter predictor by grouped cross-validation on the training kernels.

DSO (§IV-D) predicts the parameters of eq. 1-2 with an MLP. Whether an MLP
is the right regressor for a given GPU's training set is a model-selection
question, answered here without the test applications: every candidate is
cross-validated with folds that hold out whole *applications* (all inputs
of one benchmark together, so a kernel never helps predict its own
sibling), and scored by what the user cares about — the time and power
MAPE of the reconstructed DVFS curves over the held-out kernels' measured
clocks — averaged over seeds, whose spread is reported as the stability.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.ensemble import ExtraTreesRegressor, GradientBoostingRegressor, RandomForestRegressor
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold
from sklearn.multioutput import MultiOutputRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from powermodels import schema
from powermodels.models.dvfs_curves import TARGET_KINDS, curve_clocks, curve_targets, params_from_curves
from powermodels.models.dvfs_predictor import DVFSParameterPredictor
from powermodels.models.dvfs_targets import kept_runs

__all__ = ["CANDIDATES", "cross_validate_predictors", "curve_errors", "make_candidate",
           "reference_of"]

#: Regressors compared: DSO's MLP and five alternatives.
CANDIDATES = ("mlp", "gradient_boosting", "extra_trees", "random_forest", "ridge", "ridge_log")


def make_candidate(name: str, random_state=None) -> DVFSParameterPredictor:
    """A :class:`DVFSParameterPredictor` with one of :data:`CANDIDATES` as its regressor.

    ``"mlp"`` is DSO's (100, 50, 25) sigmoid MLP with its grid search;
    ``"gradient_boosting"`` one boosted-tree model per share (200 depth-3
    trees, learning rate 0.05, subsample 0.8); ``"extra_trees"`` 300
    extremely randomised trees (leaves ≥ 2 kernels); ``"random_forest"`` 300
    bootstrapped trees (leaves ≥ 2 kernels); ``"ridge"`` ridge regression
    on standardised features and ``"ridge_log"`` on standardised
    ``log(x + 0.01)`` features, α by leave-one-out CV.
    """
    if name == "mlp":
        return DVFSParameterPredictor(random_state=random_state)
    if name == "gradient_boosting":
        est = MultiOutputRegressor(GradientBoostingRegressor(
            n_estimators=200, max_depth=3, learning_rate=0.05, subsample=0.8,
            random_state=random_state))
    elif name == "extra_trees":
        est = ExtraTreesRegressor(n_estimators=300, min_samples_leaf=2, random_state=random_state)
    elif name == "random_forest":
        est = RandomForestRegressor(n_estimators=300, min_samples_leaf=2, random_state=random_state)
    elif name == "ridge":
        est = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))
    elif name == "ridge_log":
        # utilisation ratios and instruction shares span decades near 0; +0.01 keeps 0 finite
        return DVFSParameterPredictor(
            estimator=make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13))),
            param_grid={}, random_state=random_state, feature_log_offset=0.01)
    else:
        raise ValueError(f"predictor candidate must be one of {CANDIDATES}, got {name!r}")
    return DVFSParameterPredictor(estimator=est, param_grid={}, random_state=random_state)


def reference_of(table: pd.DataFrame) -> dict:
    """Keyword arguments of :meth:`DVFSParameterPredictor.predict_params` from a targets table."""
    return {"reference_sm_clock_mhz": table[schema.SM_CLOCK_MHZ].to_numpy(dtype=float),
            "reference_mem_clock_mhz": table[schema.MEM_CLOCK_MHZ].to_numpy(dtype=float),
            "reference_time_s": table[schema.DVFS_REFERENCE_TIME_S].to_numpy(dtype=float),
            "reference_power_w": table[schema.DVFS_REFERENCE_POWER_W].to_numpy(dtype=float)}


def curve_errors(runs: pd.DataFrame, params_list, kernels) -> tuple[np.ndarray, np.ndarray]:
    """Per-kernel time and power MAPE (fractions) of DVFS models over each kernel's measured runs."""
    by_kernel = dict(tuple(runs.groupby(schema.KERNEL, sort=False)))
    t_err, p_err = [], []
    for k, prm in zip(kernels, params_list, strict=True):
        g = by_kernel[k]
        fc = g[schema.SM_CLOCK_MHZ].to_numpy(dtype=float)
        fm = g[schema.MEM_CLOCK_MHZ].to_numpy(dtype=float)
        t_err.append(np.mean(np.abs(prm.time(fc, fm) / g[schema.TIME_S].to_numpy(dtype=float) - 1)))
        p_err.append(np.mean(np.abs(prm.power(fc, fm) / g[schema.POWER_W].to_numpy(dtype=float) - 1)))
    return np.asarray(t_err), np.asarray(p_err)


def cross_validate_predictors(features: pd.DataFrame, table: pd.DataFrame, runs: pd.DataFrame,
                              groups, *, voltage_knee_mhz: float, voltage_slope_per_ghz: float,
                              candidates=CANDIDATES, seeds=(0, 1, 2), n_splits: int = 6,
                              trusted_only: bool = True, targets: str = "shares") -> pd.DataFrame:
    """Grouped cross-validation of predictor candidates on the training kernels.

    Parameters
    ----------
    features : DataFrame
        One row per kernel (index = kernel, as ``table``), the predictor's features.
    table : DataFrame
        Per-kernel targets (:func:`~powermodels.models.dvfs_targets.kernel_parameters`).
    runs : DataFrame
        The training sweep (kernel, clocks, time, power), to score the curves
        (on the points ``table`` kept; its excluded regime points are left out).
    groups : array-like of shape (n_kernels,)
        Application of each kernel; a fold holds out whole applications.
    voltage_knee_mhz, voltage_slope_per_ghz : float
        The GPU's V(f) shape.
    candidates : sequence of str
        Names from :data:`CANDIDATES`.
    seeds : sequence of int
        Seeds of the regressors (stability over seeds).
    n_splits : int, default=6
        Folds (at most the number of applications).
    trusted_only : bool, default=True
        Train each fold only on kernels whose eq. 1-2 fit is trusted
        (``schema.DVFS_TRUSTED``); every held-out kernel is scored.
    targets : {"shares", "curve"}, default="shares"
        What the regressor learns: DSO's parameter shares (§IV-D), or each kernel's
        log time and power ratios at the clock pairs common to all kernels, to which
        eq. 1-2 are then fitted (:mod:`~powermodels.models.dvfs_curves`).

    Returns
    -------
    DataFrame
        One row per candidate, best first: ``candidate``, ``targets``, ``cv_time_mape``,
        ``cv_power_mape``, ``cv_mape`` (their mean; the selection score) —
        each the mean over seeds of the mean over kernels, in percent — and
        ``cv_time_sd``, ``cv_power_sd`` (standard deviation over seeds).
    """
    if not features.index.equals(table.index):
        raise ValueError("features and table must be indexed by the same kernels in the same order")
    g = np.asarray(groups)
    if g.shape != (len(table),):
        raise ValueError(f"groups: expected {len(table)} values (one per kernel), got {g.shape}")
    n_splits = min(int(n_splits), len(np.unique(g)))
    if n_splits < 2:
        raise ValueError("groups: cross-validation needs at least 2 applications")
    if targets not in TARGET_KINDS:
        raise ValueError(f"targets must be one of {TARGET_KINDS}, got {targets!r}")
    vkw = {"voltage_knee_mhz": voltage_knee_mhz, "voltage_slope_per_ghz": voltage_slope_per_ghz}
    trusted = (table[schema.DVFS_TRUSTED].to_numpy(dtype=bool) if trusted_only
               and schema.DVFS_TRUSTED in table.columns else np.ones(len(table), dtype=bool))
    X = features.to_numpy(dtype=float)
    if targets == "curve":
        clocks = curve_clocks(runs)
        Y = curve_targets(runs, table, clocks)
    else:
        Y = table[list(schema.DVFS_SHARES)].to_numpy(dtype=float)
    # score the regular regime only: the excluded points are what eq. 1-2 do not describe
    runs = kept_runs(runs, table)
    kernels = np.asarray(table.index)
    rows = []
    for name in candidates:
        per_seed = []
        for seed in seeds:
            t_err, p_err = np.zeros(len(table)), np.zeros(len(table))
            for a, b in GroupKFold(n_splits).split(X, Y, g):
                a = a[trusted[a]]
                pred = make_candidate(name, seed).fit(features.iloc[a], Y[a])
                if targets == "curve":
                    plist = params_from_curves(pred.predict(features.iloc[b]), clocks, **vkw,
                                               **reference_of(table.iloc[b]))
                else:
                    plist = pred.predict_params(features.iloc[b], **vkw, **reference_of(table.iloc[b]))
                t_err[b], p_err[b] = curve_errors(runs, plist, kernels[b])
            per_seed.append((t_err.mean() * 100, p_err.mean() * 100))
        r = np.array(per_seed)
        rows.append({"candidate": name, "targets": targets, "cv_time_mape": r[:, 0].mean(),
                     "cv_power_mape": r[:, 1].mean(), "cv_mape": r.mean(), "cv_time_sd": r[:, 0].std(), "cv_power_sd": r[:, 1].std()})
    return pd.DataFrame(rows).sort_values("cv_mape", ignore_index=True)
