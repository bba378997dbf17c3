"""EnergyMeter windows and ``measure -- CMD`` rows carry the thermal columns a callable's row has (issue 19)."""

import math
import sys

import pytest

from powermodels import schema
from powermodels.meter import EnergyMeter
from powermodels.thermal.alpha_cache import AlphaCache
from powermodels.thermal.normalise import AlphaEstimate
from powermodels.devices.simulated import EXAMPLE_WORKLOADS

THERMAL = (schema.TEMPERATURE_START_C, schema.TEMPERATURE_END_C, schema.REFERENCE_TEMPERATURE_C,
           schema.ENERGY_AT_REF_J, schema.POWER_AT_REF_W, schema.ENERGY_AT_REF_UNCERTAINTY_J,
           schema.CORRECTION_ALPHA_W_PER_C, schema.ALPHA_SOURCE, schema.ALPHA_REGIME)


def _busy_window(meter, launches=200):
    gpu = meter.device
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=30)      # steady load across the window's ends
    meter.begin_window("w")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=launches)  # 2 s of FMA load
    return meter.end_window("w")


def test_meter_window_row_has_the_thermal_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("POWERMODELS_STATE_DIR", str(tmp_path))
    with EnergyMeter("simulated", reference_temperature_c=50.0) as meter:
        row = _busy_window(meter).as_row()
    for column in THERMAL:
        assert column in row, column
    assert row[schema.ALPHA_SOURCE] == "assumed"            # nothing learned on this board yet
    assert row[schema.REFERENCE_TEMPERATURE_C] == 50.0
    dt = row[schema.TEMPERATURE_C] - 50.0
    expected = row[schema.ENERGY_J] - row[schema.CORRECTION_ALPHA_W_PER_C] * dt * row[schema.TIME_S]
    assert row[schema.ENERGY_AT_REF_J] == pytest.approx(expected)          # thesis eq. 4.7
    assert row[schema.TEMPERATURE_END_C] >= row[schema.TEMPERATURE_START_C]


def test_meter_window_pools_the_boards_learned_alpha(tmp_path, monkeypatch):
    monkeypatch.setenv("POWERMODELS_STATE_DIR", str(tmp_path))
    with EnergyMeter("simulated") as meter:
        info = meter.device.info
        AlphaCache(tmp_path / "alpha").put(
            info.uuid or f"{info.kind}-{info.index}", "sgemm", "",
            AlphaEstimate(1.1, 0.05, "learned", power_w=400.0, sm_clock_mhz=1980.0, reference_temperature_c=55.0),
            driver=info.driver)
        row = _busy_window(meter).as_row()
    assert row[schema.ALPHA_SOURCE] == "pooled" and row[schema.REFERENCE_TEMPERATURE_C] == 55.0
    assert math.isfinite(row[schema.ENERGY_AT_REF_J])


def test_bad_reference_temperature_is_a_one_line_error():
    with pytest.raises(ValueError, match="reference_temperature_c"):
        EnergyMeter("simulated", reference_temperature_c=400.0)


def test_program_rows_have_energy_at_ref(tmp_path, monkeypatch):
    from powermodels.measuring.program import measure_program

    monkeypatch.setenv("POWERMODELS_STATE_DIR", str(tmp_path))
    from powermodels.measuring.program import ProgramWorkload

    m = measure_program(ProgramWorkload([sys.executable, "-c", "import time; time.sleep(0.3)"],
                                        simulated={"activity": 0.8}), "simulated", repeats=1, idle_s=0.5)
    row = m.table.iloc[0]
    for column in THERMAL:
        assert column in row, column
    assert math.isfinite(row[schema.ENERGY_AT_REF_J])


def test_the_alpha_cache_is_read_once_per_meter(tmp_path, monkeypatch):
    """A window per training step must not read the α cache file per step."""
    monkeypatch.setenv("POWERMODELS_STATE_DIR", str(tmp_path))
    calls = []
    real = AlphaCache.entries
    monkeypatch.setattr(AlphaCache, "entries", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    with EnergyMeter("simulated") as meter:
        for _ in range(3):
            assert math.isfinite(_busy_window(meter, launches=40).as_row()[schema.ENERGY_AT_REF_J])
    assert len(calls) == 1
