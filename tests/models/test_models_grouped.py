"""GroupedEstimator and the per-config vs global comparison (thesis §5.7)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_validate

from powermodels import schema
from powermodels.models.frequency import FrequencyCorrection, FrequencyPowerModel
from powermodels.models.grouped import GroupedEstimator, compare_per_group_vs_global
from powermodels.models.runtime import RationalTimeModel
from powermodels.models.voltage import relative_voltage


def _runs(n_configs=8, seed=0):
    rng = np.random.default_rng(seed)
    f = np.tile(np.arange(800.0, 2001.0, 100.0), n_configs)
    cfg = np.repeat([f"cfg{i}" for i in range(n_configs)], 13)
    k = np.repeat(np.arange(n_configs), 13)
    p0 = 40 + 5 * k
    a = 0.04 + 0.01 * k
    power = p0 + a * f * relative_voltage(f, 1300, 0.5) ** 2 + rng.normal(0, 0.3, f.size)
    time = 1e-3 * (1 + k) + (0.5 + k) / f
    return pd.DataFrame({schema.CONFIG: cfg, schema.SM_CLOCK_MHZ: f, schema.POWER_W: power,
                         schema.TIME_S: time})


def test_one_model_per_group_with_group_column():
    df = _runs()
    X = df[[schema.CONFIG, schema.SM_CLOCK_MHZ]]
    ge = GroupedEstimator(FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ),
                          group_column=schema.CONFIG).fit(X, df[schema.POWER_W])
    assert set(ge.estimators_) == set(df[schema.CONFIG])
    assert ge.estimators_["cfg3"].p_static_w_ == pytest.approx(55, abs=3)
    pred = ge.predict(X)
    assert np.mean(np.abs(pred / df[schema.POWER_W] - 1)) < 0.01


def test_fast_path_equals_loop():
    df = _runs()
    X = df[[schema.SM_CLOCK_MHZ]].to_numpy()
    g = df[schema.CONFIG].to_numpy()
    fast = GroupedEstimator(RationalTimeModel()).fit(X, df[schema.TIME_S], groups=g)
    for label in ("cfg0", "cfg5"):
        single = RationalTimeModel().fit(X[g == label], df[schema.TIME_S][g == label])
        np.testing.assert_allclose(fast.estimators_[label].predict_at([900, 1900]),
                                   single.predict_at([900, 1900]), rtol=1e-6)


def test_unseen_policy():
    df = _runs()
    X = df[[schema.CONFIG, schema.SM_CLOCK_MHZ]]
    y = df[schema.POWER_W]
    train = df[schema.CONFIG] != "cfg7"
    strict = GroupedEstimator(FrequencyPowerModel(clock_column=0), group_column=0).fit(X[train], y[train])
    with pytest.raises(ValueError, match="cfg7"):
        strict.predict(X)
    lax = GroupedEstimator(FrequencyPowerModel(clock_column=0), group_column=0, unseen="global")
    assert np.isfinite(lax.fit(X[train], y[train]).predict(X)).all()
    nan = GroupedEstimator(FrequencyPowerModel(clock_column=0), group_column=0, unseen="nan")
    pred = nan.fit(X[train], y[train]).predict(X)
    assert np.isnan(pred[~train]).all() and np.isfinite(pred[train]).all()


def test_groups_argument_and_errors():
    df = _runs()
    X = df[[schema.SM_CLOCK_MHZ]].to_numpy()
    g = df[schema.CONFIG].to_numpy()
    ge = GroupedEstimator(LinearRegression()).fit(X, df[schema.POWER_W], groups=g)
    assert ge.predict(X, groups=g).shape == (len(df),)
    with pytest.raises(ValueError, match="groups"):
        ge.predict(X)
    with pytest.raises(ValueError, match="unseen"):
        GroupedEstimator(LinearRegression(), unseen="maybe").fit(X, df[schema.POWER_W], groups=g)


def test_transformer_per_group_keeps_the_group_column():
    df = _runs()
    X = df[[schema.CONFIG, schema.POWER_W, schema.SM_CLOCK_MHZ]]
    ge = GroupedEstimator(FrequencyCorrection(reference_frequency_mhz=1500.0), group_column=schema.CONFIG)
    out = ge.fit(X).transform(X)
    assert list(out.columns) == list(X.columns)
    assert out[schema.CONFIG].equals(X[schema.CONFIG])
    # every config is moved to its own P(1500): spread within a config is just the noise
    assert out.groupby(schema.CONFIG)[schema.POWER_W].std().max() < 1.0


def test_gridsearch_and_cross_validate_with_groups():
    df = _runs()
    X = df[[schema.CONFIG, schema.SM_CLOCK_MHZ]]
    y = df[schema.POWER_W]
    est = GroupedEstimator(FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ),
                           group_column=schema.CONFIG, unseen="global")
    res = cross_validate(est, X, y, groups=df[schema.CONFIG], cv=GroupKFold(4),
                         scoring="neg_mean_absolute_percentage_error")
    assert res["test_score"].shape == (4,)
    search = GridSearchCV(est, {"unseen": ["global"], "estimator__max_iter": [20, 100]},
                          cv=GroupKFold(4), scoring="neg_mean_absolute_percentage_error")
    search.fit(X, y, groups=df[schema.CONFIG])
    assert search.best_params_["estimator__max_iter"] in (20, 100)


def test_compare_per_group_vs_global():
    df = _runs()
    res = compare_per_group_vs_global(FrequencyPowerModel(), df[[schema.SM_CLOCK_MHZ]].to_numpy(),
                                      df[schema.POWER_W], df[schema.CONFIG], df[schema.SM_CLOCK_MHZ],
                                      n_clock_splits=4, n_group_splits=4)
    per = res.set_index(["model", "held_out"])["mape_pct"]
    assert per[("per-group", "clocks")] < 2.0
    assert per[("global", "clocks")] > 3 * per[("per-group", "clocks")]
