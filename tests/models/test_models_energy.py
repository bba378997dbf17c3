"""EnergyModel (thesis eq. 4.3-4.4) and the correction pipeline."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.pipeline import Pipeline

from powermodels import schema
from powermodels.models.energy import EnergyModel
from powermodels.models.frequency import FrequencyCorrection, FrequencyPowerModel
from powermodels.models.runtime import RationalTimeModel
from powermodels.models.temperature import TemperatureCorrection


def _table():
    f = np.arange(800.0, 2001.0, 100.0)
    return pd.DataFrame({schema.CONFIG: "c0", schema.SM_CLOCK_MHZ: f,
                         schema.POWER_W: 50 + 0.08 * f, schema.TIME_S: 1e-3 + 2.0 / f,
                         schema.TEMPERATURE_C: 40.0 + f / 100})


def test_measured_time():
    df = _table()
    e = EnergyModel().fit(df).predict(df)
    np.testing.assert_allclose(e, df[schema.POWER_W] * df[schema.TIME_S])


def test_modelled_time_at_unseen_clock():
    df = _table()
    em = EnergyModel(time="model").fit(df.iloc[::2])  # fit the time model on half the clocks
    unseen = df.iloc[1::2]
    np.testing.assert_allclose(em.predict(unseen), unseen[schema.POWER_W] * unseen[schema.TIME_S], rtol=1e-3)
    assert isinstance(em.time_model_, RationalTimeModel)


def test_prefit_time_model_used_as_given():
    df = _table()
    tm = RationalTimeModel().fit(df[[schema.SM_CLOCK_MHZ]].to_numpy(), df[schema.TIME_S])
    em = EnergyModel(time="model", time_model=tm, time_column=None).fit(df)
    assert em.time_model_ is tm
    at_ref = EnergyModel(time="model", time_model=tm, reference_frequency_mhz=1500.0).fit(df)
    np.testing.assert_allclose(at_ref.predict(df), df[schema.POWER_W] * tm.predict_at(1500.0))


def test_pipeline_frequency_temperature_energy():
    df = _table()
    fpm = FrequencyPowerModel().fit(df[[schema.SM_CLOCK_MHZ]].to_numpy(), df[schema.POWER_W])
    pipe = Pipeline([
        ("freq", FrequencyCorrection(model=fpm, reference_frequency_mhz=1500.0)),
        ("temp", TemperatureCorrection(reference_temperature_c=40.0, min_correlation=-1)),
        ("energy", EnergyModel()),
    ])
    pipe.fit(df)
    e = pipe.predict(df)
    assert e.shape == (len(df),) and np.all(e > 0)


def test_bad_input():
    df = _table()
    with pytest.raises(ValueError, match="time"):
        EnergyModel(time="bogus").fit(df)
    with pytest.raises(ValueError, match="time_s"):
        EnergyModel().fit(df.drop(columns=schema.TIME_S))
    with pytest.raises(ValueError, match=r"Negative values.*power_w"):
        EnergyModel().fit(df.assign(**{schema.POWER_W: -1.0}))
