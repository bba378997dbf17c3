"""Smoothing filters (thesis §4.3): equality with FilterPy, properties, sklearn plumbing."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from powermodels.models.smoothing import (
    GHFilter,
    KalmanFilter1D,
    MovingAverage,
    first_order_recurrence,
    kalman_gains,
)

filterpy_gh = pytest.importorskip("filterpy.gh")
filterpy_kalman = pytest.importorskip("filterpy.kalman")

ATOL = 1e-9


@pytest.fixture(scope="module")
def traces():
    """Six noisy power traces of 400 points around different levels, with a step."""
    rng = np.random.default_rng(42)
    level = rng.uniform(80, 350, size=(6, 1))
    Z = level + 25 * rng.standard_normal((6, 400))
    Z[:, 200:] += 60.0
    return np.clip(Z, 0, None)


def _filterpy_kalman(z, Q, R, P0, x0):
    kf = filterpy_kalman.KalmanFilter(dim_x=1, dim_z=1)
    kf.x = np.array([[x0]])
    kf.F = np.eye(1)
    kf.H = np.eye(1)
    kf.P *= P0
    kf.Q *= Q
    kf.R *= R
    out = np.empty(len(z))
    for i, zi in enumerate(z):
        kf.predict()
        kf.update(zi)
        out[i] = kf.x[0, 0]
    return out


# ------------------------------------------------------------------ FilterPy


@pytest.mark.parametrize(
    ("g", "h", "dt", "x0", "dx0"),
    [
        (0.2, 0.02, 1.0, None, 0.0),       # thesis initial state: first sample, no trend
        (0.5, 0.1, 0.01, None, 3.0),       # dx0 enters through dt
        (0.05, 0.001, 0.1, 150.0, -2.0),   # slow filter, fixed x0
        (1.0, 0.0, 1.0, None, 0.0),        # identity
        (1.6, 0.7, 1.0, None, 0.0),        # under-damped but stable
    ],
)
def test_gh_equals_filterpy_batch_filter(traces, g, h, dt, x0, dx0):
    out = GHFilter(g=g, h=h, dt=dt, x0=x0, dx0=dx0).fit_transform(traces)
    ref = np.array([
        filterpy_gh.GHFilter(x=z[0] if x0 is None else x0, dx=dx0, dt=dt, g=g, h=h)
        .batch_filter(z)[1:, 0]
        for z in traces
    ])
    np.testing.assert_allclose(out, ref, rtol=0, atol=ATOL)


@pytest.mark.parametrize(
    ("Q", "R", "P0", "x0"),
    [
        (0.01, 1.0, 1.0, None),      # gain settles after ~200 steps: scan then lfilter
        (10.0, 1.0, 0.0, None),      # settles in a few steps
        (1e-7, 4.0, 500.0, None),    # never settles within 400 steps: scan only
        (0.0, 1.0, 1.0, None),       # Q = 0: gain P0 / (R + k P0)
        (2.0, 50.0, 1e6, 100.0),     # vague prior around a fixed x0
    ],
)
def test_kalman_equals_filterpy_predict_update_loop(traces, Q, R, P0, x0):
    out = KalmanFilter1D(Q=Q, R=R, P0=P0, x0=x0).fit_transform(traces)
    ref = np.array([_filterpy_kalman(z, Q, R, P0, z[0] if x0 is None else x0) for z in traces])
    np.testing.assert_allclose(out, ref, rtol=0, atol=ATOL)


def test_kalman_gains_match_riccati_loop():
    for Q, R, P0 in [(0.01, 1.0, 1.0), (3.0, 0.5, 0.0), (1e-5, 2.0, 1e4), (0.0, 1.0, 2.0)]:
        gains, steady = kalman_gains(3000, Q, R, P0)
        P, ref = P0, []
        for _ in range(3000):
            s = P + Q
            K = s / (s + R)
            ref.append(K)
            P = (1 - K) ** 2 * s + K * K * R  # FilterPy's Joseph form
        full = np.concatenate([gains, np.full(3000 - gains.size, steady or 0.0)])
        np.testing.assert_allclose(full, ref, rtol=1e-12, atol=0)
        if Q >= 1e-2:  # settles well within 3000 steps: the rest is the steady gain
            assert gains.size < 3000
            assert steady == pytest.approx(ref[-1], rel=1e-12)


@pytest.mark.parametrize("T", [1, 2, 3, 17, 1000])
def test_first_order_recurrence_matches_loop(T):
    rng = np.random.default_rng(T)
    a = rng.uniform(0, 1, T)
    u = rng.normal(size=(4, T))
    x0 = rng.normal(size=4)
    ref = np.empty_like(u)
    x = x0.copy()
    for k in range(T):
        x = a[k] * x + u[:, k]
        ref[:, k] = x
    np.testing.assert_allclose(first_order_recurrence(a, u, x0), ref, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------ moving average


def _naive_moving_average(z, k, align):
    before = {"centered": k // 2, "trailing": k - 1, "leading": 0}[align]
    n = len(z)
    return np.array([z[max(i - before, 0):min(i - before + k, n)].mean() for i in range(n)])


@pytest.mark.parametrize("align", ["centered", "trailing", "leading"])
@pytest.mark.parametrize("window", [1, 2, 4, 9, 500])
def test_moving_average_definition(traces, window, align):
    out = MovingAverage(window=window, align=align).fit_transform(traces)
    ref = np.array([_naive_moving_average(z, window, align) for z in traces])
    np.testing.assert_allclose(out, ref, rtol=1e-12)


def test_moving_average_leading_is_thesis_eq_4_8(traces):
    k, z = 9, traces[0]
    eq_4_8 = np.array([z[i:i + k].sum() / k for i in range(len(z) - k + 1)])
    out = MovingAverage(window=k, align="leading").fit_transform(traces)[0]
    np.testing.assert_allclose(out[:len(eq_4_8)], eq_4_8, rtol=1e-12)


# ------------------------------------------------------------------ properties

FILTERS = [
    MovingAverage(window=5),
    MovingAverage(window=4, align="trailing"),
    GHFilter(g=0.3, h=0.05),
    KalmanFilter1D(Q=0.05, R=2.0, P0=10.0),
]
matrices = st.tuples(st.integers(1, 5), st.integers(1, 60)).flatmap(
    lambda shape: st.lists(st.floats(0.0, 1e4), min_size=shape[0] * shape[1],
                           max_size=shape[0] * shape[1])
    .map(lambda v, s=shape: np.array(v).reshape(s))
)


@pytest.mark.parametrize("est", FILTERS, ids=repr)
@settings(max_examples=25, deadline=None)
@given(level=st.floats(0.0, 1e4), shape=st.tuples(st.integers(1, 4), st.integers(1, 80)))
def test_constant_trace_is_a_fixed_point(est, level, shape):
    # x0 = None starts every filter on the first sample, so there is no transient.
    Z = np.full(shape, level)
    np.testing.assert_allclose(est.fit_transform(Z), Z, rtol=1e-12, atol=1e-9)


@pytest.mark.parametrize("est", FILTERS, ids=repr)
@settings(max_examples=20, deadline=None)
@given(Z=matrices)
def test_shape_kept_and_rows_independent(est, Z):
    out = est.fit_transform(Z)
    assert out.shape == Z.shape
    # each row is filtered on its own: filtering one row alone gives the same row
    np.testing.assert_allclose(est.fit_transform(Z[-1:]), out[-1:], rtol=1e-12, atol=1e-9)


@settings(max_examples=25, deadline=None)
@given(g=st.floats(0.1, 1.0), h=st.floats(0.02, 0.5), start=st.floats(50, 500),
       slope=st.floats(-0.01, 0.5))
def test_gh_tracks_a_ramp_without_lag_at_steady_state(g, h, start, slope):
    assume(2 * g + h < 4)
    a = [1.0, g + h - 2.0, 1.0 - g]
    assume(np.abs(np.roots(a)).max() < 0.98)   # the transient dies out within the trace
    n = 3000
    ramp = start + slope * np.arange(n)   # stays > 0 W: start >= 50, slope >= -0.01
    out = GHFilter(g=g, h=h).fit_transform(ramp[None, :])[0]   # starts with dx0 = 0
    np.testing.assert_allclose(out[-50:], ramp[-50:], rtol=0, atol=1e-6)


def test_kalman_lags_a_ramp_by_slope_times_1_minus_k_over_k():
    # A random-walk model has no rate: its steady-state lag is slope (1 - K) / K.
    Q, R, slope = 0.5, 2.0, 0.3
    ramp = 100 + slope * np.arange(2000)
    out = KalmanFilter1D(Q=Q, R=R).fit_transform(ramp[None, :])[0]
    _, k_inf = kalman_gains(1, Q, R, 1.0)
    assert ramp[-1] - out[-1] == pytest.approx(slope * (1 - k_inf) / k_inf, rel=1e-9)


def test_kalman_without_process_noise_is_the_running_mean():
    z = np.array([[3.0, 5.0, 10.0, 2.0, 7.0]])
    out = KalmanFilter1D(Q=0.0, R=1.0, P0=1e15).fit_transform(z)
    np.testing.assert_allclose(out[0], np.cumsum(z[0]) / np.arange(1, 6), rtol=1e-12)


def test_smoothing_reduces_noise(traces):
    rng = np.random.default_rng(1)
    truth = np.full((20, 500), 200.0)
    Z = truth + 20 * rng.standard_normal(truth.shape)
    for est in (MovingAverage(), GHFilter(g=0.1, h=0.001), KalmanFilter1D(Q=0.01, R=400.0)):
        err = est.fit_transform(Z)[:, 50:] - truth[:, 50:]
        assert err.std() < 0.5 * 20, est


# ------------------------------------------------------------------ sklearn plumbing


@pytest.mark.parametrize("est", FILTERS, ids=repr)
def test_pandas_in_pandas_out(est, traces):
    cols = [f"t{i:04d}" for i in range(traces.shape[1])]
    df = pd.DataFrame(traces, columns=cols, index=[f"run{i}" for i in range(len(traces))])
    out = est.set_output(transform="pandas").fit_transform(df)
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == cols
    assert list(out.index) == list(df.index)
    np.testing.assert_allclose(out.to_numpy(), est.set_output(transform="default")
                               .fit_transform(traces))


@pytest.mark.parametrize(
    ("est", "name"),
    [
        (MovingAverage(window=0), "window"),
        (MovingAverage(window=2.5), "window"),
        (MovingAverage(align="middle"), "align"),
        (GHFilter(g=0.0), "g"),
        (GHFilter(g=1.5, h=1.2), "h"),
        (GHFilter(dt=0.0), "dt"),
        (GHFilter(x0=np.nan), "x0"),
        (KalmanFilter1D(R=0.0), "R"),
        (KalmanFilter1D(Q=-1.0), "Q"),
        (KalmanFilter1D(P0="big"), "P0"),
    ],
)
def test_bad_parameters_raise_naming_them(est, name, traces):
    # sklearn's _parameter_constraints name the parameter; h's bound on g is checked in fit
    with pytest.raises(ValueError, match=rf"^(The '{name}' parameter of {type(est).__name__}|{name}) must"):
        est.fit(traces)


def test_bad_trace_matrix_names_the_column(traces):
    df = pd.DataFrame(traces, columns=[f"t{i}" for i in range(traces.shape[1])])
    df.iloc[2, 7] = np.nan
    with pytest.raises(ValueError, match=r"'t7'.*NaN"):
        GHFilter().fit(df)
    df.iloc[2, 7] = -3.0
    with pytest.raises(ValueError, match=r"'t7'.*negative"):
        KalmanFilter1D().fit(df)


def test_transform_checks_the_number_of_time_points(traces):
    est = MovingAverage().fit(traces)
    with pytest.raises(ValueError, match="features"):
        est.transform(traces[:, :-1])
