"""``powermodels.series_levels`` and ``benchmarks/series_levels.py`` on a twin-made recording."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import write_recording
from powermodels.series_levels import series_levels
from powermodels.twin.replay import replay

from .test_twin import known_preset, schedule


@pytest.fixture(scope="module")
def rec():
    """A twin-made recording with one 8 s series of ``gemm`` from idle."""
    return replay(schedule(), known_preset(), seed=3, poll_s=2e-3, start_temperature_c=40.0)


def test_levels_of_a_series_from_its_fifth_second(rec):
    levels = series_levels(rec)
    assert levels[schema.WORKLOAD].tolist() == ["gemm"]
    row = levels.iloc[0]
    trace, t0 = rec.trace, row[schema.T0_S]
    span = trace.loc[(trace[schema.T_S] >= t0 + 5.0) & (trace[schema.T_S] <= t0 + 8.0)]
    assert row[schema.POWER_AVERAGE_W] == pytest.approx(span[schema.POWER_AVERAGE_W].mean())
    assert row[schema.TEMPERATURE_C] == span[schema.TEMPERATURE_C].max()
    # a twin's trace has no HBM reading: NaN, not a number made up
    assert np.isnan(row[schema.MEMORY_TEMPERATURE_C])
    series = rec.launches.loc[(rec.launches[schema.START_S] >= t0 + 5.0) & (rec.launches[schema.WORKLOAD] == "gemm")]
    assert row[schema.TIME_S] == pytest.approx(series[schema.TIME_S].median())
    # a later start reads a warmer, not a cooler, die
    assert series_levels(rec, from_s=1.0)[schema.TEMPERATURE_C].iloc[0] <= row[schema.TEMPERATURE_C] + 1.0


def test_a_recording_without_series_or_too_short_is_refused(rec):
    natural = rec.phases.loc[rec.phases[schema.PHASE_KIND] != "series"]
    with pytest.raises(ValueError, match="no 'series' entry"):
        series_levels(replace(rec, phases=natural))
    with pytest.raises(ValueError, match="shorter than from_s=9"):
        series_levels(rec, from_s=9.0)


def test_script_prints_one_row_per_board(rec, tmp_path, capsys):
    rec = replace(rec, provenance={**rec.provenance, "uuid": "GPU-0123abcd-0000", "board_part_number": "692-X-0282-001"})
    path = write_recording(rec, tmp_path / "raw_recording_0123abcd")
    script = load_benchmark("series_levels")
    assert script.main([str(path), "--out", str(tmp_path / "levels.csv")]) == 0
    out = capsys.readouterr().out
    assert "| 0123abcd | -001 |" in out
    # the twin ran no triad and no capped GEMM: their cells stay blank
    row = next(line for line in out.splitlines() if "0123abcd" in line)
    assert row.count("|  |") >= 3
    levels = pd.read_csv(tmp_path / "levels.csv")
    assert levels[schema.RECORDING_NAME].tolist() == ["raw_recording_0123abcd"]
