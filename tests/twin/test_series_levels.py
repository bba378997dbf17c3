"""``powermodels.series_levels`` and ``benchmarks/series_levels.py`` on a twin-made recording."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import write_recording
from powermodels.series_levels import energy_levels_across_boards, series_levels
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


def _boards(rows):
    cols = (schema.DEVICE_UUID, schema.BOARD_PART_NUMBER, schema.WORKLOAD, schema.POWER_AVERAGE_W,
            schema.TEMPERATURE_C, schema.TIME_S)
    return pd.DataFrame(rows, columns=cols)


def test_energy_levels_move_each_board_to_the_median_die_and_compare_within_its_part():
    levels = _boards([("GPU-a", "p-000", "w", 500.0, 60.0, 1e-3),
                      ("GPU-b", "p-000", "w", 510.0, 70.0, 1e-3),   # 10 °C warmer: 14.09 W of it is leakage
                      ("GPU-c", "p-000", "w", 490.0, 50.0, 1e-3),
                      ("GPU-d", "p-001", "w", 600.0, 60.0, 1e-3),   # another part: its own median
                      ("GPU-e", "p-000", "w", 400.0, 60.0, np.nan)])  # no launch timed: dropped
    out = energy_levels_across_boards(levels, alpha_w_per_c=1.409)
    assert out[schema.DEVICE_UUID].tolist() == ["GPU-a", "GPU-b", "GPU-c", "GPU-d"]
    assert (out[schema.REFERENCE_TEMPERATURE_C] == 60.0).all()
    at_ref = dict(zip(out[schema.DEVICE_UUID], out[schema.ENERGY_AT_REF_J], strict=True))
    assert at_ref["GPU-b"] == pytest.approx((510.0 - 14.09) * 1e-3)
    assert at_ref["GPU-c"] == pytest.approx((490.0 + 14.09) * 1e-3)
    diff = dict(zip(out[schema.DEVICE_UUID], out[schema.PART_DIFF_PCT], strict=True))
    # p-000's median board at one die is GPU-a (500 W); GPU-b sits 4.09 W below it, GPU-c 4.09 W above
    assert diff["GPU-a"] == pytest.approx(0.0)
    assert diff["GPU-b"] == pytest.approx(-4.09 / 500.0 * 100.0)
    assert diff["GPU-c"] == pytest.approx(4.09 / 500.0 * 100.0)
    assert diff["GPU-d"] == pytest.approx(0.0)
    # with no slope the measured energy is compared as it is
    plain = energy_levels_across_boards(levels, alpha_w_per_c=0.0)
    assert plain[schema.ENERGY_AT_REF_J].tolist() == pytest.approx(plain[schema.ENERGY_J].tolist())


def test_energy_levels_refuse_a_missing_column_or_slope():
    levels = _boards([("GPU-a", "p", "w", 500.0, 60.0, 1e-3)])
    with pytest.raises(ValueError, match="finite"):
        energy_levels_across_boards(levels, alpha_w_per_c=float("nan"))
    with pytest.raises(ValueError, match="missing columns"):
        energy_levels_across_boards(levels.drop(columns=[schema.TIME_S]), alpha_w_per_c=1.0)


def test_board_levels_script_counts_a_board_once(rec, tmp_path, capsys):
    paths = []
    for name, uuid, part in (("raw_recording_0123abcd", "GPU-0123abcd-0000", "692-X-0282-001"),
                             ("raw_recording_repeat_0123abcd", "GPU-0123abcd-0000", "692-X-0282-001"),
                             ("raw_recording_4567cdef", "GPU-4567cdef-0000", "692-X-0282-001")):
        board = replace(rec, provenance={**rec.provenance, "uuid": uuid, "board_part_number": part})
        paths.append(str(write_recording(board, tmp_path / name)))
    script = load_benchmark("board_levels_plot")
    assert script.main([*paths, "--mark", "4567cdef", "--csv", str(tmp_path / "b.csv"),
                        "--out", str(tmp_path / "b.png")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 boards (real)")
    # two identical twin recordings: each is its part's median
    assert "| -001 | gemm | 2 | 0 | 0 | 0 | 0 |" in out
    assert (tmp_path / "b.png").stat().st_size > 0
    assert len(pd.read_csv(tmp_path / "b.csv")) == 2
