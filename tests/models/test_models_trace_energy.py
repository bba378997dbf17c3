"""TraceEnergy: energy/power of trace-matrix rows, and tuning smoothing with GridSearchCV."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.model_selection import GridSearchCV, GroupKFold, cross_val_score
from sklearn.pipeline import Pipeline

from powermodels.models.smoothing import GHFilter, KalmanFilter1D
from powermodels.models.trace_energy import TraceEnergy

DT = 0.01  # s between time points of the synthetic trace matrix


def synthetic_runs(seed=0, n_configs=12, repeats=5, n=200):
    """Noisy sensor traces of kernels with known constant power.

    Each config has a true power level; its reference energy is that level
    times the run's duration. The sensor reading rises from 60 W with an
    80 ms time constant, has 15 % Gaussian noise and 3 % spikes.
    """
    rng = np.random.default_rng(seed)
    levels = rng.uniform(100, 400, n_configs)
    t = np.arange(n) * DT
    X, y, groups = [], [], []
    for c, true in enumerate(levels):
        for _ in range(repeats):
            reading = 60 + (true - 60) * (1 - np.exp(-t / 0.08))
            reading = reading + rng.normal(0, 0.15 * true, n)
            spikes = rng.random(n) < 0.03
            reading[spikes] += rng.uniform(0.5, 1.0, spikes.sum()) * true
            X.append(np.clip(reading, 0, None))
            y.append(true * n * DT)
            groups.append(f"config{c}")
    return np.array(X), np.array(y), np.array(groups)


X_DOC = np.array([[50.0, 90.0, 100.0, 100.0], [100.0, 200.0, 200.0, 200.0]])


def test_energy_is_the_rectangle_rule_integral():
    est = TraceEnergy(dt_s=0.5).fit(X_DOC, [0.0, 0.0])
    np.testing.assert_allclose(est.predict(X_DOC), 0.5 * X_DOC.sum(axis=1))
    assert (est.scale_, est.offset_) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"what": "power"}, [85.0, 175.0]),
        ({"what": "power", "statistic": "median"}, [95.0, 200.0]),
        ({"what": "power", "statistic": "last", "trim_end": 1}, [100.0, 200.0]),
        ({"what": "power", "trim_start": 2}, [100.0, 200.0]),
        # trimmed rise: the steady level is extrapolated over all 4 columns
        ({"trim_start": 2, "dt_s": 0.5}, [200.0, 400.0]),
        ({"statistic": "median", "dt_s": 0.25}, [95.0, 200.0]),
    ],
)
def test_statistics_and_trimming(params, expected):
    est = TraceEnergy(**params).fit(X_DOC, [1.0, 2.0])
    np.testing.assert_allclose(est.predict(X_DOC), expected)


@pytest.mark.parametrize("calibration", ["scale", "linear"])
def test_calibration_recovers_a_sensor_gain(calibration):
    X, y, _ = synthetic_runs(n=100)
    gain = 1.08  # the sensor reads 8 % high
    est = TraceEnergy(dt_s=DT, what="power", trim_start=40, calibration=calibration)
    est.fit(gain * X, y / (100 * DT))
    # the fit is linear in X: a sensor gain divides the learned slope exactly
    ref = TraceEnergy(dt_s=DT, what="power", trim_start=40, calibration=calibration)
    ref.fit(X, y / (100 * DT))
    assert est.scale_ == pytest.approx(ref.scale_ / gain, rel=1e-12)
    assert est.offset_ == pytest.approx(ref.offset_, abs=1e-9)
    if calibration == "scale":
        assert est.offset_ == 0.0
    raw = TraceEnergy(dt_s=DT, what="power", trim_start=40).fit(gain * X, y)
    y_power = y / (100 * DT)
    err_raw = np.abs(raw.predict(gain * X) / y_power - 1).mean()
    err_cal = np.abs(est.predict(gain * X) / y_power - 1).mean()
    assert err_cal < 0.5 * err_raw


def test_pandas_input_and_column_names():
    df = pd.DataFrame(X_DOC, columns=["t0", "t1", "t2", "t3"])
    est = TraceEnergy(dt_s=0.5).fit(df, [1.0, 2.0])
    assert list(est.feature_names_in_) == ["t0", "t1", "t2", "t3"]
    np.testing.assert_allclose(est.predict(df), [170.0, 350.0])
    df.loc[1, "t2"] = -1.0
    with pytest.raises(ValueError, match=r"'t2'.*negative"):
        est.predict(df)


@pytest.mark.parametrize(
    ("params", "name"),
    [
        ({"dt_s": 0.0}, "dt_s"),
        ({"dt_s": "10ms"}, "dt_s"),
        ({"what": "joules"}, "what"),
        ({"statistic": "mode"}, "statistic"),
        ({"calibration": "cubic"}, "calibration"),
        ({"trim_start": -1}, "trim_start"),
        ({"trim_end": 1.5}, "trim_end"),
        ({"trim_start": 2, "trim_end": 2}, "trim_start"),
    ],
)
def test_bad_parameters_raise_naming_them(params, name):
    # sklearn's _parameter_constraints name the parameter; trim_start + trim_end is checked in fit
    with pytest.raises(ValueError, match=rf"^(The '{name}' parameter of TraceEnergy|{name})"):
        TraceEnergy(**params).fit(X_DOC, [1.0, 2.0])


def test_constant_estimates_cannot_be_calibrated_linearly():
    X = np.full((3, 4), 100.0)
    with pytest.raises(ValueError, match="calibration='linear'"):
        TraceEnergy(calibration="linear").fit(X, [1.0, 2.0, 3.0])


def test_grid_search_over_smoothing_beats_the_unsmoothed_baseline():
    """The DESIGN.md usage: tune a g-h filter in front of TraceEnergy, per-config folds."""
    trace_matrix, reference_energy, configs = synthetic_runs()
    search = GridSearchCV(
        Pipeline([("smooth", GHFilter()),
                  ("energy", TraceEnergy(dt_s=DT, statistic="median"))]),
        {"smooth__g": [1.0, 0.5, 0.2, 0.1], "smooth__h": [0.0, 0.01]},
        cv=GroupKFold(5),
        scoring="neg_mean_absolute_percentage_error",
    )
    search.fit(trace_matrix, reference_energy, groups=configs)
    # g = 1, h = 0 is the identity filter: the unsmoothed baseline
    baseline = cross_val_score(
        TraceEnergy(dt_s=DT, statistic="median"), trace_matrix, reference_energy,
        groups=configs, cv=GroupKFold(5), scoring="neg_mean_absolute_percentage_error",
    ).mean()
    assert search.best_params_ != {"smooth__g": 1.0, "smooth__h": 0.0}
    assert -search.best_score_ < 0.85 * -baseline
    # and on fresh runs of other configs
    X_new, y_new, _ = synthetic_runs(seed=1)
    mape = np.abs(search.predict(X_new) / y_new - 1).mean()
    mape_raw = np.abs(TraceEnergy(dt_s=DT, statistic="median").fit(X_new, y_new)
                      .predict(X_new) / y_new - 1).mean()
    assert mape < mape_raw


def test_kalman_in_a_pipeline_with_the_last_value():
    # The Kalman filter's final state estimates the steady level far better
    # than the last raw sample does.
    X, y, _ = synthetic_runs(n=300)
    y_power = y / (300 * DT)
    raw = TraceEnergy(what="power", statistic="last").fit(X, y_power).predict(X)
    pipe = Pipeline([("smooth", KalmanFilter1D(Q=0.01, R=25.0)),
                     ("power", TraceEnergy(what="power", statistic="last"))])
    smooth = pipe.fit(X, y_power).predict(X)
    assert np.abs(smooth / y_power - 1).mean() < 0.5 * np.abs(raw / y_power - 1).mean()


def test_design_example_end_to_end_and_calibration_round_trip(tmp_path):
    """DESIGN.md's example as written (package imports, default steps), then persisted."""
    from powermodels.io import load_calibration, save_calibration
    from powermodels.models import GHFilter as PublicGHFilter
    from powermodels.models import TraceEnergy as PublicTraceEnergy

    trace_matrix, reference_energy, configs = synthetic_runs(n_configs=10, repeats=3, n=100)
    search = GridSearchCV(Pipeline([("smooth", PublicGHFilter()), ("energy", PublicTraceEnergy())]),
                          {"smooth__g": [0.1, 0.2, 0.4], "smooth__h": [0.01, 0.05]},
                          cv=GroupKFold(5), scoring="neg_mean_absolute_percentage_error")
    search.fit(trace_matrix, reference_energy, groups=configs)
    assert set(search.best_params_) == {"smooth__g", "smooth__h"}
    assert np.isfinite(search.best_score_)

    X = pd.DataFrame(trace_matrix, columns=[f"t{i}" for i in range(trace_matrix.shape[1])])
    fitted = search.best_estimator_.fit(X, reference_energy)
    path = save_calibration(fitted, tmp_path / "smooth_energy.pmcal", {"device": "synthetic"})
    loaded, meta = load_calibration(path, expected_schema=list(X.columns), return_metadata=True)
    assert isinstance(loaded, Pipeline) and loaded.get_params()["smooth__g"] == search.best_params_["smooth__g"]
    np.testing.assert_array_equal(loaded.predict(X), fitted.predict(X))
    assert meta["device"] == "synthetic" and meta["object"] == "sklearn.pipeline.Pipeline"
