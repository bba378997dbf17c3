"""Two boards of one schedule side by side (powermodels.board_pair), on twins whose difference is known."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_pair import board_pair, board_pair_summary, cooling_pair, repeat_as_twin
from powermodels.twin.replay import replay

from .test_twin import known_preset


def _schedule() -> pd.DataFrame:
    rows = [("thermal", "-", -1, "idle", 0.0, 4.0), ("thermal", "gemm", 0, "series", 4.0, 10.0),
            ("thermal", "-", -1, "idle", 10.0, 16.0)]
    return pd.DataFrame(rows, columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                       schema.T0_S, schema.T1_S])


@pytest.fixture(scope="module")
def boards():
    preset = known_preset()
    a = replay(_schedule(), preset, seed=1, poll_s=2e-3, start_temperature_c=40.0)
    # board B: the same silicon in a hotter slot (6 °C more ambient), and a twin with 2 % more dynamic power
    hot = replace(preset, ambient_c=preset.ambient_c + 6.0)
    b_hot = replay(_schedule(), hot, seed=1, poll_s=2e-3, start_temperature_c=46.0)
    ph = preset.physics
    more = replace(preset, physics=replace(ph, core_w_per_ghz=ph.core_w_per_ghz * 1.02,
                                           mem_w_per_ghz=ph.mem_w_per_ghz * 1.02))
    b_more = replay(_schedule(), more, seed=1, poll_s=2e-3, start_temperature_c=40.0)
    gemm = preset.workloads["gemm"].workload
    f, fm = 1980.0, ph.mem_clocks_mhz[0]
    alpha = float(ph.power_w(f, fm, 61.0, gemm.activity, gemm.mem_activity)
                  - ph.power_w(f, fm, 60.0, gemm.activity, gemm.mem_activity))
    return a, b_hot, b_more, alpha


def test_a_hotter_board_reads_higher_and_the_same_at_one_temperature(boards):
    a, b_hot, _, alpha = boards
    pair = board_pair(a, b_hot, alpha_w_per_c=alpha)
    assert list(pair[schema.WORKLOAD].unique()) == ["gemm"] and list(pair[schema.SECOND]) == list(range(6))
    late = pair.iloc[2:]
    assert (late[schema.TEMPERATURE_B_C] - late[schema.TEMPERATURE_A_C]).mean() > 3.0
    assert late[schema.BOARD_DIFF_PCT].mean() > 0.5  # hotter: more leakage
    assert abs(late[schema.BOARD_DIFF_MATCHED_PCT]).max() < 0.35  # at one temperature: one board
    cooling = cooling_pair(a, b_hot)
    assert len(cooling) == 6 and (cooling[schema.TEMPERATURE_B_C] > cooling[schema.TEMPERATURE_A_C]).all()
    summary = board_pair_summary(pair, cooling)
    assert summary.loc[0, schema.WORST_COOLING_DIFF_C] > 3.0 and summary.loc[0, schema.MEAN_TEMPERATURE_DIFF_C] > 3.0


def test_a_board_with_more_dynamic_power_stays_apart_at_one_temperature(boards):
    a, _, b_more, alpha = boards
    pair = board_pair(a, b_more, alpha_w_per_c=alpha).iloc[1:]
    assert 1.0 < pair[schema.BOARD_DIFF_MATCHED_PCT].mean() < 2.5
    assert np.isnan(board_pair(a, b_more)[schema.BOARD_DIFF_MATCHED_PCT]).all()  # no α given: not normalised


def test_bad_input_is_refused(boards):
    a, b_hot, _, _ = boards
    with pytest.raises(ValueError, match="no 'series' entry of workload 'fma'"):
        board_pair(a, b_hot, workloads=["fma"])
    with pytest.raises(ValueError, match="finite"):
        board_pair(a, b_hot, alpha_w_per_c=float("nan"))


def test_repeat_as_twin_scores_from_second_two_as_measured_and_levelled_at_second_one():
    seconds = np.arange(25)
    a = np.full(25, 1.0)
    b = np.full(25, 1.02)          # the repeat 2 % above run 1 throughout ...
    b[5] *= 1.015                  # ... with one second 1.5 % above that
    b[0] = 0.90                    # second 0 is not scored (a calibration reads it)
    pair = pd.DataFrame({schema.WORKLOAD: "gemm", schema.SECOND: seconds, schema.ENERGY_A_J: a,
                         schema.ENERGY_B_J: b})
    row = repeat_as_twin(pair).iloc[0]
    assert row[schema.WORKLOAD] == "gemm"
    assert row[schema.WORST_SCORED_DIFF_PCT] == pytest.approx((1.02 * 1.015 - 1) * 100)
    assert row[schema.WORST_SCORED_DIFF_LEVELLED_PCT] == pytest.approx(1.5)
    # a level taken at second 5 puts the blip into the level: every other second then reads 1.5 % low
    assert repeat_as_twin(pair, from_second=6, level_second=5).iloc[0][schema.WORST_SCORED_DIFF_LEVELLED_PCT] == \
        pytest.approx((1 / 1.015 - 1) * 100)
    with pytest.raises(ValueError, match="must be before from_second"):
        repeat_as_twin(pair, from_second=2, level_second=2)
    with pytest.raises(ValueError, match="has no second 1 or none from 30 on"):
        repeat_as_twin(pair, from_second=30)
    with pytest.raises(ValueError, match="lacks column"):
        repeat_as_twin(pair.drop(columns=schema.ENERGY_B_J))
    with pytest.raises(ValueError, match="holds no second"):
        repeat_as_twin(pair.iloc[:0])
    for bad in (np.nan, 0.0):  # a second without a launch: no ratio, no level
        broken = pair.copy()
        broken.loc[7, schema.ENERGY_B_J] = bad
        with pytest.raises(ValueError, match="finite and positive"):
            repeat_as_twin(broken)
