"""TemperatureCorrection (thesis eq. 4.6-4.7)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.temperature import TemperatureCorrection, WeakTemperatureCorrelationWarning


def _runs(alpha=0.7, seed=0):
    """Three locked clocks, temperature drifting 35-70 °C, power = base(clock) + alpha·T."""
    rng = np.random.default_rng(seed)
    clocks = np.repeat([1200.0, 1500.0, 1800.0], 40)
    temp = rng.uniform(35, 70, clocks.size)
    base = {1200.0: 90.0, 1500.0: 130.0, 1800.0: 190.0}
    power = np.array([base[c] for c in clocks]) + alpha * temp + rng.normal(0, 0.5, clocks.size)
    return pd.DataFrame({schema.KERNEL: "fp32", schema.SM_CLOCK_MHZ: clocks,
                         schema.TEMPERATURE_C: temp, schema.POWER_W: power})


def test_slope_within_clock_groups():
    df = _runs()
    tc = TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ).fit(df)
    assert tc.alpha_w_per_c_ == pytest.approx(0.7, abs=0.03)
    lo, hi = tc.alpha_ci_w_per_c_
    assert lo < 0.7 < hi and hi - lo < 0.1
    assert tc.reference_temperature_c_ == df[schema.TEMPERATURE_C].min()
    out = tc.transform(df)
    expected = df[schema.POWER_W] - tc.alpha_w_per_c_ * (df[schema.TEMPERATURE_C] - tc.reference_temperature_c_)
    np.testing.assert_allclose(out[schema.POWER_W], expected)
    assert out.drop(columns=schema.POWER_W).equals(df.drop(columns=schema.POWER_W))


def test_pooled_over_clocks_warns_or_misfits():
    # Mixed clocks whose temperature ordering anti-correlates with clock: pooled slope is wrong.
    df = _runs()
    df[schema.TEMPERATURE_C] = 100 - df[schema.SM_CLOCK_MHZ] / 30 + np.random.default_rng(1).normal(0, 1, len(df))
    with pytest.warns(WeakTemperatureCorrelationWarning):
        TemperatureCorrection().fit(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error", WeakTemperatureCorrelationWarning)
        TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ).fit(_runs())


def test_negative_slope_warns():
    with pytest.warns(WeakTemperatureCorrelationWarning, match="negative"):
        TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ).fit(_runs(alpha=-0.5))


def test_reference_temperature_and_positions():
    df = _runs()
    X = df[[schema.POWER_W, schema.TEMPERATURE_C]].to_numpy()
    with pytest.warns(WeakTemperatureCorrelationWarning):  # three clocks pooled: weak correlation
        tc = TemperatureCorrection(power_column=0, temperature_column=1, reference_temperature_c=25.0).fit(X)
    out = tc.transform(X)
    assert out.shape == X.shape and np.array_equal(out[:, 1], X[:, 1])
    assert np.all(out[:, 0] < X[:, 0])  # everything warmer than 25 °C is lowered


def test_bad_input_names_the_column():
    df = _runs()
    with pytest.raises(ValueError, match="temperature_c"):
        TemperatureCorrection().fit(df.assign(**{schema.TEMPERATURE_C: np.nan}))
    with pytest.raises(ValueError, match="missing"):
        TemperatureCorrection().fit(df.drop(columns=schema.TEMPERATURE_C))
