"""Every public estimator fitted on small suitable data, for round-trip and bad-input tests.

Most estimators take the data sklearn's ``check_estimators_pickle`` uses
(blobs, adapted to the estimator's tags); the few whose expected-failure lists
say that data cannot fit them (sensor characterisation, DVFS energy) get the
data of their own docstrings and tests.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.datasets import make_blobs
from sklearn.utils.estimator_checks import _enforce_estimator_tags_X, _enforce_estimator_tags_y

from powermodels import schema
from powermodels.utils import all_estimators


def instance(cls):
    """The estimator the common checks use (``_check_instance`` where parameters are required)."""
    make = getattr(cls, "_check_instance", None)
    return make() if make is not None else cls()


def _blobs(est):
    X, y = make_blobs(n_samples=30, centers=[[0, 0, 0], [1, 1, 1]], random_state=0,
                      n_features=2, cluster_std=0.1)
    X = _enforce_estimator_tags_X(est, X)
    y = _enforce_estimator_tags_y(est, y)
    return X, y


def _square_wave():
    # BoxcarWindow docstring: 70 ms square wave, 100 ms updates, 25 ms window
    from powermodels.sensor.window import boxcar_mean, cumulative_integral

    t = np.arange(0, 3, 5e-4)
    load = (np.floor(t / 0.035) % 2).astype(float)
    reading = boxcar_mean(cumulative_integral(t, load), np.floor(t / 0.1) * 0.1, 0.025, 0.0)
    return np.c_[t, load], reading


def _dvfs_grid():
    from powermodels.models.dvfs import DVFSParams
    from powermodels.models.dvfs_optimizer import clock_pairs

    cores = np.arange(600.0, 1981.0, 120.0)
    pairs = clock_pairs({m: list(cores) for m in (2201.0, 3201.0)})
    p = DVFSParams(p0_w=60.0, kappa_w=40.0, gamma_w_per_mhz=0.01, c_w_per_mhz=0.06, t0_s=2e-4,
                   alpha_s_mhz=4.0, beta_s_mhz=3.0, voltage_knee_mhz=1200.0,
                   voltage_slope_per_ghz=0.8)
    fc, fm = pairs[:, 0], pairs[:, 1]
    return np.column_stack([fc, fm]), p.time(fc, fm), p.power(fc, fm)


def fitted(name: str, cls):
    """``(estimator fitted, X to predict/transform on)`` for one public estimator."""
    est = instance(cls)
    if name == "BoxcarWindow":
        est.set_params(max_window_s=0.3)
        X, y = _square_wave()
    elif name == "UpdatePeriod":
        t = np.arange(0, 2, 1e-3)
        X, y = t[:, None], np.floor(t / 0.1)
    elif name == "DVFSEnergyModel":
        X, t, p = _dvfs_grid()
        y = np.column_stack([t, p])
    elif name in ("DVFSPowerModel", "DVFSTimeModel"):
        X, t, p = _dvfs_grid()
        y = p if name == "DVFSPowerModel" else t
    else:
        X, y = _blobs(est)
    return clone(est).fit(X, y), X


def all_fitted():
    """``[(name, fitted estimator, X)]`` for every estimator of ``all_estimators()``."""
    out = []
    for name, cls in all_estimators():
        est, X = fitted(name, cls)
        out.append((name, est, X))
    return out


def outputs(est, X) -> dict:
    """Every prediction-like output of ``est`` on ``X`` (to compare after a round trip)."""
    got = {}
    for method in ("predict", "transform", "decision_function", "predict_proba"):
        if hasattr(est, method):
            try:
                got[method] = np.asarray(getattr(est, method)(X))
            except (AttributeError, NotImplementedError):
                continue
    return got


def doc_pipelines():
    """The pipelines and meta-estimators our docs show (docs/calibration.md, docs/smoothing.md)."""
    from sklearn.model_selection import GridSearchCV, GroupKFold
    from sklearn.pipeline import Pipeline

    from powermodels.models import (
        FrequencyCorrection,
        FrequencyPowerModel,
        GHFilter,
        GroupedEstimator,
        RationalTimeModel,
        TemperatureCorrection,
        TraceEnergy,
    )

    rng = np.random.default_rng(0)
    out = []
    # docs/smoothing.md: GridSearchCV over Pipeline(GHFilter, TraceEnergy)
    n, dt = 60, 0.01
    X = np.clip(150 + rng.normal(0, 10, (20, n)), 0, None)
    y = X.mean(axis=1) * n * dt
    groups = np.repeat(np.arange(5), 4)
    search = GridSearchCV(Pipeline([("smooth", GHFilter()), ("energy", TraceEnergy(dt_s=dt))]),
                          {"smooth__g": [0.5, 0.1], "smooth__h": [0.0, 0.01]},
                          cv=GroupKFold(5), scoring="neg_mean_absolute_percentage_error",
                          ).fit(X, y, groups=groups)
    out.append(("GridSearchCV(Pipeline(GHFilter, TraceEnergy))", search, X))
    out.append(("Pipeline(GHFilter, TraceEnergy)", search.best_estimator_, X))
    # docs/calibration.md: GroupedEstimator over FrequencyPowerModel / RationalTimeModel
    f = np.tile(np.arange(800.0, 2001.0, 100.0), 3)
    config = np.repeat(["a", "b", "c"], 13)
    runs = pd.DataFrame({schema.CONFIG: config, schema.SM_CLOCK_MHZ: f})
    power = 50 + 0.07 * f * (1 + 0.1 * (config == "b"))
    time = 1e-3 / (1 + 1e-3 * f) + 2e-4
    for inner, target in ((FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ), power),
                          (RationalTimeModel(clock_column=schema.SM_CLOCK_MHZ), time)):
        est = GroupedEstimator(inner, group_column=schema.CONFIG, unseen="global").fit(runs, target)
        out.append((f"GroupedEstimator({type(inner).__name__})", est, runs))
    # docs/calibration.md walk-through: corrections fitted on a sweep
    sweep = pd.DataFrame({schema.SM_CLOCK_MHZ: f[:13], schema.POWER_W: power[:13],
                          schema.TEMPERATURE_C: 50 + 0.01 * f[:13]})
    pm = FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
        sweep[[schema.SM_CLOCK_MHZ]], sweep[schema.POWER_W])
    corr = FrequencyCorrection(model=pm, reference_frequency_mhz=1620.0).fit(sweep)
    out.append(("FrequencyCorrection(FrequencyPowerModel)", corr, sweep))
    temp = TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ, reference_temperature_c=55.0)
    ramp = pd.DataFrame({schema.SM_CLOCK_MHZ: 1485.0, schema.POWER_W: 200 + 1.5 * np.linspace(40, 70, 20),
                         schema.TEMPERATURE_C: np.linspace(40, 70, 20)})
    pipe = Pipeline([("freq", corr), ("temp", temp.fit(ramp))])
    out.append(("Pipeline(FrequencyCorrection, TemperatureCorrection)", pipe, sweep))
    return out
