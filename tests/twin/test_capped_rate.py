"""A board's settled cap power and capped launch rate, read before the first series and matched by replay (a
twin-made board whose cap offset, capped clock and cycles differ from the preset's)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_calibration import calibrated_preset, capped_rate_before_series
from powermodels.board_calibration.capped_rate import (
    carries_probed_capped_pressure,
    entries_launch_rate,
)
from powermodels.twin.adapt import time_scaled
from powermodels.twin.fit_controller import capped_entries_before_series, scaled_core
from powermodels.twin.replay import replay

from .test_capped_clock import capped_board, natural_then_series

#: the board's capped load: 4 % more core power at the cap, 2 % more cycles, a controller settling 5 W lower than the preset's -3 W
CORE, CYCLES, OFFSET_W = 1.04, 1.02, -8.0


def the_board():
    b = scaled_core(capped_board(), CORE)
    b = replace(b, workloads={**b.workloads, "bf16": time_scaled(b.workloads["bf16"], CYCLES)})
    return replace(b, physics=replace(b.physics, cap_offset_w=OFFSET_W))


def implied_clock(work, mem_mhz: float, time_s: float, ratio: float) -> float:
    """The clock at which ``work`` × ``ratio`` takes ``time_s`` (bisection: time falls with the clock)."""
    lo, hi = 300.0, 3000.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if work.time_s(mid, mem_mhz) * ratio > time_s else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.fixture(scope="module")
def board_recording():
    """The board's recording, its pressure entry timed and clock-probed as ``--probe-pressure`` records it.

    The twin runs ``pressure`` entries untimed, so the pressure's launches come from a second replay with that
    entry run as a timed one; each launch's probe reads the clock its time implies on the board's own cycles.
    """
    board = the_board()
    rec = replay(natural_then_series(), board, seed=3, poll_s=2e-3, start_temperature_c=40.0)
    timed = natural_then_series()
    timed.loc[timed[schema.PHASE_KIND] == "pressure", schema.PHASE_KIND] = "series"
    timed_rec = replay(timed, board, seed=3, poll_s=2e-3, start_temperature_c=40.0)
    la = timed_rec.launches
    pressure = la.loc[(la[schema.WORKLOAD] == "bf16") & (la[schema.START_S] < 9.0)].reset_index(drop=True)
    work, mem = capped_board().workloads["bf16"].workload, capped_board().physics.mem_clocks_mhz[0]
    clocks = [implied_clock(work, mem, t, CYCLES) for t in pressure[schema.TIME_S]]
    probes = pd.DataFrame({schema.T_S: pressure[schema.START_S] + 1e-5, schema.WORKLOAD: "bf16",
                           schema.BATCH: pressure[schema.BATCH], schema.PROBE_CLOCK_MHZ: clocks,
                           schema.PROBE_CYCLES: 40000, schema.PROBE_ELAPSED_NS: 20000})
    return replace(rec, launches=pd.concat([rec.launches, pressure], ignore_index=True), probes=probes)


@pytest.fixture(scope="module")
def fitted(board_recording):
    return capped_rate_before_series(capped_board(), board_recording)


def test_the_twin_settles_at_the_boards_power_and_runs_its_rate(board_recording, fitted):
    read = fitted.fit["board_capped_clock"]
    matched = read["power_and_rate"]
    spans = capped_entries_before_series(board_recording)
    assert matched["board_rate_per_s"] == pytest.approx(entries_launch_rate(board_recording, spans, "bf16"))
    assert abs(matched["twin_settled_w"] - matched["board_settled_w"]) <= 0.3
    assert matched["twin_rate_per_s"] == pytest.approx(matched["board_rate_per_s"], rel=1e-3)
    # the cycles start from the probes (the board's 2 % more) and the controller moved toward the board's offset
    assert read["probed_time_ratio"] == pytest.approx(CYCLES, rel=2e-3)
    assert matched["cap_offset_w"] < capped_board().physics.cap_offset_w - 2.0
    # the board's own series, which the calibration never read, run at the twin's rate within 0.5 %
    again = replay(natural_then_series(), fitted, seed=5, poll_s=2e-3, start_temperature_c=40.0)
    real_rate = entries_launch_rate(board_recording, [(20.0, 28.0)], "bf16", from_s=0.0)
    assert entries_launch_rate(again, [(20.0, 28.0)], "bf16", from_s=0.0) == pytest.approx(real_rate, rel=5e-3)


def test_the_series_stay_held_out_and_the_preset_keeps_its_ambient(board_recording, fitted):
    # what the series recorded (their launches and their energy) changes nothing
    la, en = board_recording.launches, board_recording.energy
    tampered = replace(board_recording,
                       launches=la.loc[la[schema.START_S] < 12.0].reset_index(drop=True),
                       energy=en.assign(**{schema.ENERGY_COUNTER_J: np.where(
                           en[schema.T_S] > 12.0, en[schema.ENERGY_COUNTER_J] * 1.1, en[schema.ENERGY_COUNTER_J])}))
    again = capped_rate_before_series(capped_board(), tampered)
    assert again.physics.cap_offset_w == pytest.approx(fitted.physics.cap_offset_w, rel=1e-12)
    assert again.workloads["bf16"].workload.core_work == pytest.approx(fitted.workloads["bf16"].workload.core_work,
                                                                       rel=1e-12)
    assert fitted.ambient_c == capped_board().ambient_c  # the replays ran at the recording's; the preset keeps its own
    assert np.isfinite(fitted.fit["board_capped_clock"]["power_and_rate"]["replay_ambient_c"])
    assert fitted.name == capped_board().name + "+cap-rate@" + board_recording.provenance["uuid"]
    via = calibrated_preset(capped_board(), board_recording, cap="rate")
    assert via.physics.cap_offset_w == pytest.approx(fitted.physics.cap_offset_w, rel=1e-12)


def test_a_recording_without_the_timed_pressure_or_a_capped_entry_is_refused(board_recording):
    la = board_recording.launches
    untimed = replace(board_recording, launches=la.loc[la[schema.START_S] > 9.0].reset_index(drop=True))
    with pytest.raises(ValueError, match="--probe-pressure"):
        capped_rate_before_series(capped_board(), untimed)
    schedule = natural_then_series()
    late = replay(schedule.loc[schedule[schema.PHASE_KIND] != "pressure"], capped_board(), seed=4, poll_s=2e-3,
                  start_temperature_c=40.0)
    with pytest.raises(ValueError, match=r"capped pressure entry of 1\.5 s or more"):
        capped_rate_before_series(capped_board(), late)
    windowless = replace(capped_board(), physics=replace(capped_board().physics, cap_window_s=0.0))
    with pytest.raises(ValueError, match=r"capped_rate_before_series: .* has no averaging window"):
        capped_rate_before_series(windowless, board_recording)


def test_twin_compare_calibrate_cap_rate_says_what_it_matched(board_recording, tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.recording import write_recording
    from powermodels.twin.preset import save_preset

    folder = write_recording(board_recording, tmp_path / "rec")
    preset_file = save_preset(capped_board(), tmp_path / "b.json")
    assert main(["twin-compare", str(folder), "--preset", str(preset_file), "--out", str(tmp_path / "cmp"),
                 "--calibrate-cap", "rate", "--cap-seeds", "1"]) == 0
    err = capsys.readouterr().err
    assert "capped power and rate matched before the first series" in err and "launches/s" in err
    assert "add --calibrate-cap rate" not in err  # asked for already: no suggestion
    note = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "board capped clock: core x" in note and "then power and rate matched: cap offset" in note


def test_a_probed_capped_pressure_is_recognised_without_a_replay(board_recording):
    assert carries_probed_capped_pressure(board_recording)
    assert not carries_probed_capped_pressure(replace(board_recording, probes=None))
    # probes only after the first series: not the natural part's pressure
    late = board_recording.probes.assign(**{schema.T_S: board_recording.probes[schema.T_S] + 1e3})
    assert not carries_probed_capped_pressure(replace(board_recording, probes=late))
    # no trace, so no capped series to tell
    assert not carries_probed_capped_pressure(replace(board_recording, trace=board_recording.trace.iloc[:0]))


def test_twin_compare_suggests_the_rate_calibration_on_a_probed_recording(board_recording, tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.recording import write_recording
    from powermodels.twin.preset import save_preset

    folder = write_recording(board_recording, tmp_path / "rec")
    preset_file = save_preset(capped_board(), tmp_path / "b.json")
    assert main(["twin-compare", str(folder), "--preset", str(preset_file), "--out", str(tmp_path / "cmp"),
                 "--calibrate-board", "board", "--cap-seeds", "1"]) == 0
    assert "add --calibrate-cap rate" in capsys.readouterr().err
