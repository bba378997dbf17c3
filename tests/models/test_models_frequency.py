"""FrequencyPowerModel (thesis eq. 4.1) and FrequencyCorrection (eq. 4.2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.frequency import (
    FrequencyCorrection,
    FrequencyPowerModel,
    KneeInGapWarning,
    fit_frequency_power_batch,
)
from powermodels.models.voltage import relative_voltage

TRUE = {"p0": 45.0, "a": 0.06, "knee": 1350.0, "slope": 0.6}


def _power(f, p0=TRUE["p0"], a=TRUE["a"], knee=TRUE["knee"], slope=TRUE["slope"]):
    return p0 + a * f * relative_voltage(f, knee, slope) ** 2


@pytest.fixture
def sweep():
    rng = np.random.default_rng(0)
    f = np.repeat(np.arange(600.0, 2001.0, 100.0), 3)
    return f, _power(f) + rng.normal(0, 0.3, f.size)


def test_recovers_known_parameters(sweep):
    f, p = sweep
    m = FrequencyPowerModel().fit(f[:, None], p)
    assert m.p_static_w_ == pytest.approx(TRUE["p0"], abs=2.0)
    assert m.a_ == pytest.approx(TRUE["a"], rel=0.05)
    assert m.knee_mhz_ == pytest.approx(TRUE["knee"], abs=60)
    assert m.slope_per_ghz_ == pytest.approx(TRUE["slope"], rel=0.15)
    assert m.ridge_frequency_mhz_ == m.knee_mhz_
    assert m.rmse_w_ < 0.5
    # prediction at an unseen clock
    assert m.predict_at(1650.0) == pytest.approx(_power(1650.0), rel=0.01)


def test_dataframe_column_by_name(sweep):
    f, p = sweep
    X = pd.DataFrame({schema.TEMPERATURE_C: 50.0 + 0 * f, schema.SM_CLOCK_MHZ: f})
    m = FrequencyPowerModel().fit(X, p)  # the schema name is the default
    assert np.allclose(m.predict(X), m.predict_at(f))


def test_bad_input_names_the_column(sweep):
    f, p = sweep
    X = pd.DataFrame({schema.SM_CLOCK_MHZ: f})
    with pytest.raises(ValueError, match="missing"):
        FrequencyPowerModel(clock_column="nope").fit(X, p)
    with pytest.raises(ValueError, match="Negative values"):
        FrequencyPowerModel().fit(-f[:, None], p)
    with pytest.raises(ValueError, match="power"):
        FrequencyPowerModel().fit(f[:, None], -p)


def test_batch_matches_single_fits():
    rng = np.random.default_rng(1)
    f = np.tile(np.arange(700.0, 2001.0, 100.0), 5)
    g = np.repeat(np.arange(5), 14)
    knees = np.array([1000, 1200, 1400, 1500, 1700.0])
    p = _power(f, knee=knees[g]) + rng.normal(0, 0.2, f.size)
    table = fit_frequency_power_batch(f, p, g)
    for k in range(5):
        single = FrequencyPowerModel().fit(f[g == k, None], p[g == k])
        assert table.loc[k, "knee_mhz"] == pytest.approx(single.knee_mhz_, rel=1e-6)
        assert abs(table.loc[k, "knee_mhz"] - knees[k]) < 80


def test_correction_moves_power_to_reference_clock(sweep):
    f, p = sweep
    model = FrequencyPowerModel().fit(f[:, None], p)
    runs = pd.DataFrame({
        schema.KERNEL: "gemm",
        schema.SM_CLOCK_MHZ: [1980.0, 1900.0, 1850.0],
        schema.POWER_W: _power(np.array([1980.0, 1900.0, 1850.0])) + 1.0,
    })
    corr = FrequencyCorrection(reference_frequency_mhz=1500.0, model=model).fit(runs)
    out = corr.transform(runs)
    assert list(out.columns) == list(runs.columns)
    assert (out[schema.KERNEL] == "gemm").all()
    assert (out[schema.SM_CLOCK_MHZ] == runs[schema.SM_CLOCK_MHZ]).all()
    np.testing.assert_allclose(out[schema.POWER_W], _power(1500.0) + 1.0, atol=0.6)
    assert corr.model_ is model  # a fitted model is used as given


def test_correction_fits_its_own_model_and_set_output(sweep):
    f, p = sweep
    X = np.column_stack([p, f])
    corr = FrequencyCorrection(power_column=0, clock_column=1).fit(X)
    assert corr.reference_frequency_mhz_ == f.max()
    out = corr.transform(X)
    assert out.shape == X.shape and np.array_equal(out[:, 1], f)
    np.testing.assert_allclose(out[:, 0], corr.reference_power_w_, atol=1.5)
    df = pd.DataFrame({schema.POWER_W: p, schema.SM_CLOCK_MHZ: f})
    pdout = FrequencyCorrection().set_output(transform="pandas").fit_transform(df)
    assert isinstance(pdout, pd.DataFrame) and list(pdout.columns) == list(df.columns)


def test_correction_rejects_bad_columns(sweep):
    f, p = sweep
    df = pd.DataFrame({schema.POWER_W: p, schema.SM_CLOCK_MHZ: f})
    df.loc[3, schema.POWER_W] = np.nan
    with pytest.raises(ValueError, match="power_w"):
        FrequencyCorrection().fit(df)
    with pytest.raises(ValueError, match="reference_frequency_mhz"):
        FrequencyCorrection(reference_frequency_mhz=-5).fit(df.dropna())


def _soft_knee_power(f, knee, width=120.0, slope=0.8):
    """Eq. 4.1 with a knee that bends over ~``width`` MHz (real V/f tables do not kink)."""
    rise = width * np.logaddexp(0.0, (f - knee) / width) / 1000.0
    return 60.0 + 0.07 * f * (1 + slope * rise) ** 2


@pytest.mark.parametrize("knee", [1100.0, 1200.0, 1300.0])
@pytest.mark.parametrize("band", [(1100.0, 1400.0), (1200.0, 1500.0)])
def test_knee_in_a_held_out_band_is_moved_to_the_data(knee, band):
    # Issue 23: with a middle band of clocks held out, the free knee jumps into the gap, static
    # power drops and the gap is under-predicted. Measured here (simulated curve, mean error in
    # the band): free -2.5 to -3.3 %, edge -1.9 to +1.0 %.
    f = np.arange(600.0, 2001.0, 100.0)
    test = (f >= band[0]) & (f <= band[1])
    p = _soft_knee_power(f, knee)
    with pytest.warns(KneeInGapWarning, match=r"lies in a gap of the training clocks"):
        free = FrequencyPowerModel(knee_in_gap="free").fit(f[~test, None], p[~test])
    edge = FrequencyPowerModel().fit(f[~test, None], p[~test])
    gap = (band[0] - 100.0, band[1] + 100.0)
    assert free.knee_gap_mhz_ == edge.knee_gap_mhz_ == gap
    assert gap[0] < free.knee_mhz_ < gap[1]
    assert edge.knee_mhz_ in gap
    err_free = np.mean(free.predict(f[test, None]) / p[test] - 1)
    err_edge = np.mean(edge.predict(f[test, None]) / p[test] - 1)
    assert err_free < -0.02  # the under-prediction of the issue
    assert abs(err_edge) < 0.02 and abs(err_edge) < abs(err_free)


def test_no_gap_no_change(sweep):
    f, p = sweep
    m = FrequencyPowerModel().fit(f[:, None], p)
    assert m.knee_gap_mhz_ is None
    free = FrequencyPowerModel(knee_in_gap="free").fit(f[:, None], p)
    assert (m.knee_mhz_, m.p_static_w_) == (free.knee_mhz_, free.p_static_w_)


def test_batch_reports_the_gap_and_warns_once():
    f = np.arange(600.0, 2001.0, 100.0)
    keep = (f < 1100.0) | (f > 1400.0)
    g = np.repeat(np.arange(4), keep.sum())
    ff = np.tile(f[keep], 4)
    p = _soft_knee_power(ff, np.array([1100.0, 1200.0, 1300.0, 1250.0])[g])
    table = fit_frequency_power_batch(ff, p, g)
    assert (table[schema.FIT_KNEE_GAP_LOW_MHZ] == 1000.0).all()
    assert (table[schema.FIT_KNEE_GAP_HIGH_MHZ] == 1500.0).all()
    assert table[schema.FIT_KNEE_MHZ].isin([1000.0, 1500.0]).all()
    from powermodels.models.grouped import GroupedEstimator

    with pytest.warns(KneeInGapWarning) as record:
        ge = GroupedEstimator(FrequencyPowerModel(knee_in_gap="free")).fit(ff[:, None], p, groups=g)
    assert len(record) == 1 and "and 3 other group(s) alike" in str(record[0].message)
    assert all(est.knee_gap_mhz_ == (1000.0, 1500.0) for est in ge.estimators_.values())
