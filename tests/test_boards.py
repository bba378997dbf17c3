"""powermodels.boards: per-board medians, the spread between boards, and a normalisation onto one board."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import boards, schema

DATA = Path(__file__).resolve().parents[1] / "datasets" / "h200x2"
A, B, C = "GPU-a", "GPU-b", "GPU-c"


def synthetic(gain=None, offset_w=None, noise=0.002, repeats=5, configs=6, seed=0, temperature=None):
    """Run rows of ``configs`` configurations on boards with ``P_board = gain·P + offset``."""
    gain = gain or {A: 1.0, B: 1.03}
    offset_w = offset_w or {b: 0.0 for b in gain}
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(configs):
        power, time = 300.0 + 40.0 * i, 1e-3 * (1 + i)
        for board in gain:
            for r in range(repeats):
                p = (gain[board] * power + offset_w[board]) * (1 + noise * rng.standard_normal())
                t = (temperature or {}).get(board, 50.0)
                rows.append({schema.KERNEL: "k", schema.CONFIG: f"c{i}", schema.DEVICE_UUID: board,
                             schema.REPEAT: r, schema.POWER_W: p, schema.TIME_S: time, schema.ENERGY_J: p * time,
                             schema.TEMPERATURE_C: t})
    return pd.DataFrame(rows)


def test_per_board_medians_and_their_uncertainty():
    runs = synthetic(noise=0.01, repeats=9)
    table = boards.per_board(runs)
    assert len(table) == 12 and set(table[schema.N_SAMPLES]) == {9}
    row = table[(table[schema.CONFIG] == "c0") & (table[schema.DEVICE_UUID] == B)].iloc[0]
    assert row[schema.ENERGY_J] == pytest.approx(1.03 * 300 * 1e-3, rel=0.02)
    # √(π/2)·s/√n with s ≈ 1 % of the energy: ~0.4 %
    assert 0.002 < row[schema.ENERGY_UNCERTAINTY_J] / row[schema.ENERGY_J] < 0.008
    # a protocol's own row uncertainty counts where it is larger than the scatter
    runs[schema.ENERGY_UNCERTAINTY_J] = 0.3 * runs[schema.ENERGY_J]
    row = boards.per_board(runs).iloc[0]
    assert row[schema.ENERGY_UNCERTAINTY_J] == pytest.approx(0.1 * row[schema.ENERGY_J], rel=0.05)


def test_spread_is_reported_and_warned_only_when_significant():
    with pytest.warns(boards.BoardSpreadWarning, match="6 of 6 configurations"):
        spread = boards.board_spread(synthetic())
    assert (spread[schema.N_BOARDS] == 2).all()
    assert spread[schema.BOARD_SPREAD_PCT].to_numpy() == pytest.approx(3.0 * 2 / 2.03, abs=0.3)
    assert spread[schema.BOARD_SPREAD_SIGNIFICANT].all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # the same boards within noise: no warning
        quiet = boards.board_spread(synthetic(gain={A: 1.0, B: 1.0005}, noise=0.01))
    assert not quiet[schema.BOARD_SPREAD_SIGNIFICANT].any()
    # a configuration measured on one board only is not in the spread table
    one = synthetic()
    one = one[~((one[schema.CONFIG] == "c0") & (one[schema.DEVICE_UUID] == B))]
    assert "c0" not in set(boards.board_spread(one, warn=False)[schema.CONFIG])


def test_scale_and_affine_fits_recover_the_boards():
    runs = synthetic(gain={A: 1.0, B: 1.04, C: 0.97}, noise=0.0005)
    fit = boards.fit_board_normalisation(runs, ["c0", "c1", "c2"])
    assert fit.reference == A and fit.gain[B] == pytest.approx(1.04, rel=1e-3) and fit.gain[C] == pytest.approx(0.97, rel=1e-3)
    normalised = fit.apply(runs)
    held = normalised[normalised[schema.CONFIG] == "c5"].groupby(schema.DEVICE_UUID)[schema.NORMALISED_ENERGY_J].median()
    assert held.to_numpy() == pytest.approx(held[A], rel=2e-3)
    affine = boards.fit_board_normalisation(synthetic(offset_w={A: 0.0, B: 12.0}, gain={A: 1.0, B: 1.01}, noise=0.0),
                                            model="affine")
    assert affine.gain[B] == pytest.approx(1.01) and affine.offset_w[B] == pytest.approx(12.0)
    assert boards.BoardNormalisation.from_dict(affine.as_dict()) == affine


def test_normalisation_errors_name_the_problem():
    runs = synthetic(gain={A: 1.0, B: 1.02, C: 1.0})
    with pytest.raises(ValueError, match="model must be one of"):
        boards.fit_board_normalisation(runs, model="quadratic")
    with pytest.raises(ValueError, match=r"probe configuration\(s\) \['nope'\]"):
        boards.fit_board_normalisation(runs, ["nope"])
    lonely = runs[~((runs[schema.DEVICE_UUID] == C) & (runs[schema.CONFIG] != "c0"))]
    with pytest.raises(ValueError, match="board 'GPU-c' shares 1 probe configuration"):
        boards.fit_board_normalisation(lonely, model="affine")
    fit = boards.fit_board_normalisation(runs[runs[schema.DEVICE_UUID] != C])
    with pytest.raises(ValueError, match=r"no factor for board\(s\) \['GPU-c'\]"):
        fit.apply(runs)
    with pytest.raises(ValueError, match="lacks"):
        boards.per_board(runs.drop(columns=[schema.DEVICE_UUID]))


def test_leave_one_config_out_residuals_are_small_for_a_pure_gain():
    result = boards.leave_one_config_out(synthetic(noise=0.001))
    assert len(result) == 6 and set(result[schema.HELD_OUT_CONFIG]) == {f"c{i}" for i in range(6)}
    assert result[schema.BOARD_SPREAD_PCT].abs().min() > 2.5          # before: ~3 %
    assert result[schema.RESIDUAL_PCT].abs().max() < 0.3              # after, on configurations not fitted
    with pytest.raises(ValueError, match="needs ≥ 2 configurations"):
        boards.leave_one_config_out(synthetic(configs=1))


def test_temperature_explains_a_spread_it_caused():
    # the hotter board draws 0.25 %/°C × 4 °C = 1 % more; nothing else differs
    runs = synthetic(gain={A: 1.0, B: 1.01}, noise=0.0, temperature={A: 50.0, B: 54.0})
    with pytest.warns(boards.BoardSpreadWarning):
        assert boards.board_spread(runs)[schema.BOARD_SPREAD_PCT].median() == pytest.approx(0.995, abs=0.01)
    adjusted = boards.temperature_adjusted(runs, 0.0025)
    left = boards.board_spread(adjusted, energy=schema.ENERGY_AT_REF_J, warn=False)
    assert left[schema.BOARD_SPREAD_PCT].max() < 0.01
    assert (adjusted[schema.ALPHA_SOURCE] == "given").all()
    assert (boards.temperature_adjusted(runs)[schema.ALPHA_SOURCE] == "assumed").all()


def test_within_board_temperature_slope():
    runs = synthetic(noise=0.0)
    rng = np.random.default_rng(1)
    runs[schema.TEMPERATURE_C] = 50 + 5 * rng.random(len(runs))
    runs[schema.ENERGY_J] *= np.exp(0.004 * (runs[schema.TEMPERATURE_C] - 50))
    assert boards.within_board_temperature_slope(runs) == pytest.approx(0.004, rel=1e-6)
    runs[schema.TEMPERATURE_C] = 50.0
    with pytest.raises(ValueError, match="no temperature varies"):
        boards.within_board_temperature_slope(runs)


def test_the_two_h200_boards():
    """Real 2 × H200 data (datasets/h200x2, 2026-11-24): 4 SGEMM configurations × 3 repeats on each board."""
    runs = pd.read_parquet(DATA / "per_gpu_runs_h200x2.parquet")
    with pytest.warns(boards.BoardSpreadWarning, match="2 of 4"):
        spread = boards.board_spread(runs)
    assert spread[schema.BOARD_SPREAD_PCT].between(2.4, 4.0).all()
    assert (spread[schema.BOARD_TEMPERATURE_SPREAD_C] > 2).all()      # the higher-energy board runs hotter
    loo = boards.leave_one_config_out(runs)
    assert loo[schema.BOARD_SPREAD_PCT].abs().median() > 3.0
    assert loo[schema.RESIDUAL_PCT].abs().median() < 0.6               # 0.50 %: see docs/scale-out.md
    # every held-out residual lies within 2σ of its own comparison's uncertainty
    assert (loo[schema.RESIDUAL_PCT].abs() < 2 * loo[schema.BOARD_SPREAD_UNCERTAINTY_PCT]).all()
