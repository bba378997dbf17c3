"""The thermal part's hot series: α from two die temperatures at one clock (thesis §4.2.1)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.simulated import SimulatedGPU
from powermodels.workflows.calibrate import calibrate
from powermodels.workflows.calibration_fit import fit_calibration
from powermodels.workflows.recording_calibration import pool_thermal_series


def _series_blocks(alpha_w_per_c: float, seed: int = 0) -> pd.DataFrame:
    """Two thermal series of one kernel at 1980 MHz, each moving 2 °C (as on the H200s recorded),
    5 °C apart (the hot one after a capped load), plus a natural-DVFS burst at another clock."""
    rng = np.random.default_rng(seed)
    rows = []
    for stretch, (phase, t0, clock) in enumerate([("natural", 45.0, 1700.0), ("thermal", 50.0, 1980.0),
                                                  ("thermal", 55.0, 1980.0)]):
        temps = np.linspace(t0, t0 + 2.0, 12)
        power = 300.0 + alpha_w_per_c * temps + rng.normal(0, 0.2, temps.size)
        rows.append(pd.DataFrame({schema.KERNEL: "fp32", schema.CONFIG: "", schema.WORKLOAD: "fp32",
                                  schema.RECORDING_PHASE: phase, schema.STRETCH: stretch,
                                  schema.SM_CLOCK_MHZ: clock, schema.TEMPERATURE_C: temps,
                                  schema.POWER_W: power, schema.SINCE_START_S: np.arange(12) + 2.0}))
    return pd.concat(rows, ignore_index=True)


def test_thermal_series_share_one_alpha_group():
    blocks = _series_blocks(1.5)
    # one group per stretch: each series spans 2 °C, below the 3 °C α needs at one clock
    apart = fit_calibration(None, None, blocks, temperature_samples=blocks)
    assert apart.temperature is None
    pooled = pool_thermal_series(blocks)
    assert (pooled.loc[pooled[schema.RECORDING_PHASE] == "thermal", schema.STRETCH] == -1).all()
    assert (pooled.loc[pooled[schema.RECORDING_PHASE] == "natural", schema.STRETCH] == 0).all()
    fit = fit_calibration(None, None, blocks, temperature_samples=pooled)
    assert fit.temperature is not None and fit.temperature.n_groups_ == 1
    lo, hi = fit.temperature.alpha_ci_w_per_c_
    assert lo > 0 and lo <= 1.5 <= hi and fit.temperature.alpha_w_per_c_ == pytest.approx(1.5, abs=0.1)
    # the input is not changed, and a table without the columns passes through
    assert blocks[schema.STRETCH].tolist() == sorted(blocks[schema.STRETCH].tolist())
    bare = blocks.drop(columns=[schema.RECORDING_PHASE])
    assert pool_thermal_series(bare) is bare


def test_hot_series_follows_a_capped_load():
    gpu = SimulatedGPU(seed=3)
    run = calibrate(["fp32"], gpu, cycles=2, pressure_s=0.3, burst_s=0.2, series_s=4.0, cool_s=1.0, hot_s=6.0)
    ph = run.recording.phases
    thermal = ph.loc[ph[schema.RECORDING_PHASE] == "thermal"]
    # cool idle, cool series, the pressure load, then the hot series right after it (no idle between)
    assert thermal[schema.PHASE_KIND].tolist() == ["idle", "series", "pressure", "series"]
    assert thermal[schema.REPEAT].tolist()[1:] == [0, 1, 1]
    hot, load = thermal.iloc[3], thermal.iloc[2]
    assert hot[schema.T0_S] - load[schema.T1_S] < 0.05
    assert load[schema.T1_S] - load[schema.T0_S] == pytest.approx(6.0, rel=0.1)
    assert run.recording.provenance["schedule"]["hot_s"] == 6.0
    s = run.samples
    series = s.loc[s[schema.RECORDING_PHASE] == "thermal"]
    # the hot series runs hotter than the cool one at the same clock
    by = series.groupby(schema.STRETCH)[schema.TEMPERATURE_C].mean()
    assert by.iloc[-1] > by.iloc[0] + 3.0


def test_hot_series_needs_a_pressure_load_and_a_series():
    gpu = SimulatedGPU(seed=3)
    with pytest.raises(ValueError, match="hot series"):
        calibrate(["fp32"], gpu, pressure=None, cycles=2, burst_s=0.2, series_s=4.0, hot_s=6.0)
    with pytest.raises(ValueError, match="hot series"):
        calibrate(["fp32"], gpu, cycles=2, burst_s=0.2, series_s=0.0, hot_s=6.0)
    with pytest.raises(ValueError, match="hot_s"):
        calibrate(["fp32"], gpu, cycles=2, burst_s=0.2, series_s=4.0, hot_s=-1.0)
