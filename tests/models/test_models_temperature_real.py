"""TemperatureCorrection on the real H200 SGEMM runs of datasets/ (constant 1980 MHz clock)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.temperature import TemperatureCorrection


@pytest.fixture
def sgemm_runs(datasets):
    path = datasets / "h200" / "harness_sgemm_runs.parquet"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return pd.read_parquet(path)


def test_within_config_slope_is_positive_and_far_below_the_pooled_one(sgemm_runs):
    X = sgemm_runs[[schema.POWER_W, schema.TEMPERATURE_C, schema.CONFIG]]
    assert sgemm_runs[schema.SM_CLOCK_MHZ].nunique() == 1  # constant clock: thesis §4.2.2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        within = TemperatureCorrection(group_column=schema.CONFIG).fit(X)
        pooled = TemperatureCorrection().fit(X)
    lo, hi = within.alpha_ci_w_per_c_
    assert 0 < lo < within.alpha_w_per_c_ < hi
    # Pooling mixes configurations: hotter runs are the high-power configs, so
    # the pooled slope measures the configs, not leakage.
    assert pooled.alpha_w_per_c_ > 5 * hi
