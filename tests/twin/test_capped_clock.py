"""The settled clock under the power cap: fitted from a long capped series, and pooled over boards (twin-made boards)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_calibration import board_levels, pooled_preset
from powermodels.devices.simulated import SimulatedWorkload
from powermodels.twin.fit_controller import fit_capped_clock, scaled_core, settled_capped_series
from powermodels.twin.preset import TwinWorkload
from powermodels.twin.replay import replay

from .test_twin_board import board
from .test_twin_board import schedule as board_schedule

#: boards whose capped load needs this much more core power than the preset's at the same uncapped power
CAP_SCALES = {"GPU-a": 1.0, "GPU-b": 1.06, "GPU-c": 1.12}


def capped_board():
    """``board()`` with a load (activity 1) that the power limit caps, at a clock well above the V(f) knee."""
    b = board()
    bf16 = TwinWorkload(SimulatedWorkload("bf16", core_work=1.5e-3 * 1980, activity=1.0, mem_activity=0.5), 0.0, 1)
    # the windowed-mean controller of the raw presets (h200-raw's gains): the settled clock is where it holds the mean
    physics = replace(b.physics, power_limit_w=650.0, cap_window_s=1.0, cap_proportional=10.0, cap_headroom_w=36.0,
                      cap_offset_w=-3.0, clock_period_s=0.015)
    return replace(b, physics=physics, workloads={**b.workloads, "bf16": bf16})


def schedule() -> pd.DataFrame:
    """An uncapped gemm series, then 10 s of the capped load (its settled part from 13 s)."""
    return board_schedule((("thermal", "-", -1, "idle", 0.0, 5.0), ("thermal", "gemm", 0, "series", 5.0, 8.0),
                           ("thermal", "-", -1, "idle", 8.0, 11.0), ("thermal", "bf16", 0, "series", 11.0, 21.0),
                           ("thermal", "-", -1, "idle", 21.0, 23.0)))


def settled_clock(rec) -> float:
    t = rec.trace
    inside = t.loc[(t[schema.T_S] >= 13.0) & (t[schema.T_S] <= 21.0), schema.SM_CLOCK_MHZ]
    return float(inside.mean())


@pytest.fixture(scope="module")
def recordings():
    recs = []
    for seed, (uuid, k) in enumerate(CAP_SCALES.items()):
        rec = replay(schedule(), scaled_core(capped_board(), k), seed=seed, poll_s=2e-3, start_temperature_c=40.0)
        rec.provenance["uuid"] = uuid
        recs.append(rec)
    return recs


def test_the_series_runs_capped_and_the_boards_settle_apart(recordings):
    assert settled_capped_series(recordings[0]) == [(11.0, 21.0)]
    clocks = [settled_clock(r) for r in recordings]
    assert clocks[0] > clocks[1] + 10 > clocks[2] + 20  # more core power at the cap: a lower clock


def test_settled_window_recovers_the_core_scale(recordings):
    report = {}
    fitted = fit_capped_clock(capped_board(), recordings[1], window="settled", report=report)
    assert report["capped_clock"]["window"] == "settled"
    assert report["capped_clock"]["core_scale"] == pytest.approx(1.06, abs=0.02)
    again = replay(schedule(), fitted, seed=5, poll_s=2e-3, start_temperature_c=40.0)
    assert settled_clock(again) == pytest.approx(settled_clock(recordings[1]), abs=6.0)
    # the uncapped load's power is kept: its activity took the core's factor back
    gemm = fitted.workloads["gemm"].workload
    assert gemm.activity * fitted.physics.core_w_per_ghz == pytest.approx(0.45 * 230.0, rel=1e-9)


def test_settled_falls_back_to_the_spans_without_a_long_capped_series():
    short = schedule()
    short.loc[3, schema.T1_S] = 15.0  # a 4 s capped series: no settled part after SETTLE_S + 3 s
    rec = replay(short, scaled_core(capped_board(), 1.06), seed=2, poll_s=2e-3, start_temperature_c=40.0)
    assert settled_capped_series(rec) == []
    preset, report = capped_board(), {}
    # no pressure entry either: nothing capped to match, the preset comes back as it was
    assert fit_capped_clock(preset, rec, window="settled", report=report) is preset and report == {}
    with pytest.raises(ValueError, match="window"):
        fit_capped_clock(capped_board(), rec, window="middle")


def test_board_levels_read_the_cap_scale_and_the_pool_takes_the_median(recordings):
    levels = board_levels(capped_board(), recordings, thermal=False, cap=True)
    per = levels.drop_duplicates(schema.RECORDING_NAME).set_index(schema.DEVICE_UUID)[schema.CAP_CORE_SCALE]
    assert per.to_dict() == pytest.approx(CAP_SCALES, abs=0.02)
    pooled = pooled_preset(capped_board(), levels, thermal=False)
    assert pooled.fit["pooled_boards"]["cap_boards"] == 3
    assert pooled.physics.core_w_per_ghz == pytest.approx(230.0 * per["GPU-b"]
                                                          * pooled.fit["pooled_boards"]["dynamic_scale"], rel=1e-9)
    replayed = replay(schedule(), pooled, seed=7, poll_s=2e-3, start_temperature_c=40.0)
    assert settled_clock(replayed) == pytest.approx(settled_clock(recordings[1]), abs=6.0)
    # without the column the pool leaves the capped clock alone, as before
    plain = pooled_preset(capped_board(), levels.drop(columns=[schema.CAP_CORE_SCALE]), thermal=False)
    assert "cap_boards" not in plain.fit["pooled_boards"]
    assert np.isclose(plain.physics.core_w_per_ghz, 230.0 * plain.fit["pooled_boards"]["dynamic_scale"])


def test_fit_twin_and_its_controller_fit_take_the_settled_window(recordings):
    from powermodels.twin.fit import fit_twin
    from powermodels.twin.fit_cap_choice import fit_cap_controller

    report = {}
    fitted = fit_cap_controller(capped_board(), recordings[2], controller="step", capped_clock="settled",
                                report=report)
    assert report["capped_clock"]["window"] == "settled"
    assert fitted.physics.core_w_per_ghz / 230.0 == pytest.approx(1.12, abs=0.03)
    with pytest.raises(ValueError, match="capped_clock"):
        fit_twin([], capped_clock="middle")  # refused before any work
