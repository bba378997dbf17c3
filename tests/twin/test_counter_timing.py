"""The energy counter's update timing read from a recording and replayed (powermodels.counter_timing)."""

import argparse

import numpy as np
import pytest

from powermodels import energy_counter, schema
from powermodels.counter_timing import counter_timing_before, first_series_start
from powermodels.devices.simulated import SimulatedGPU
from powermodels.twin.preset import TwinPreset
from powermodels.twin.replay import replay

from .test_twin_board import board, schedule

#: a long idle before the series: ~120 counter updates to fit on
LONG = (("thermal", "-", -1, "idle", 0.0, 14.0), ("thermal", "gemm", 0, "series", 14.0, 17.0),
        ("thermal", "-", -1, "idle", 17.0, 19.0))
#: the board's own counter: 1 % slower than the preset's and at a phase no seed of the twin is asked to give
PERIOD, PHASE = 0.101, 0.0437


def updates(rec) -> np.ndarray:
    lo, hi, _ = energy_counter.counter_updates(rec.energy)
    return 0.5 * (lo + hi)


@pytest.fixture
def recorded(monkeypatch):
    """A replay of LONG whose counter runs on PERIOD and PHASE (a board's own, not the preset's)."""
    build = TwinPreset.gpu

    def on_the_boards_counter(self, **kwargs):
        return build(self, **{**kwargs, "energy_timing": (PERIOD, PHASE)})

    with monkeypatch.context() as patched:
        patched.setattr(TwinPreset, "gpu", on_the_boards_counter)
        return replay(schedule(LONG), board(), seed=4, poll_s=1e-3, start_temperature_c=40.0)


def test_the_period_and_phase_are_read_before_the_first_series(recorded):
    timing = counter_timing_before(recorded)
    assert timing["period_s"] == pytest.approx(PERIOD, rel=1e-4)
    assert timing["phase_s"] == pytest.approx(PHASE, abs=2e-3)
    assert timing["before_s"] == first_series_start(recorded) == 14.0
    assert timing["updates"] >= 100 and timing["residual_s"] < 3e-3
    # nothing at or after the series' start is read: a counter that stops there reads the same
    en = recorded.energy
    cut = recorded.__class__(recorded.trace, en.loc[en[schema.T_S] < 14.0], recorded.launches, recorded.phases,
                             recorded.provenance)
    assert counter_timing_before(cut) == timing
    with pytest.raises(ValueError, match="100 or more are needed"):
        counter_timing_before(recorded, before_s=5.0)


def test_a_replay_on_the_recorded_timing_updates_when_the_board_did(recorded):
    seeded = replay(recorded, board(), seed=0, poll_s=1e-3)
    timed = replay(recorded, board(), seed=0, poll_s=1e-3, counter_timing="recorded")
    real = updates(recorded)

    def nearest_gap(twin):  # how far each of the twin's updates around the series lies from the board's
        inside = updates(twin)[(updates(twin) > 13.5) & (updates(twin) < 17.5)]
        return np.abs(inside[:, None] - real[None, :]).min(axis=1)

    assert nearest_gap(timed).max() < 3e-3
    assert nearest_gap(seeded).max() > 5e-3  # the seed's phase is another
    assert timed.provenance["counter_timing"]["source"].startswith("recorded")
    assert seeded.provenance["counter_timing"] == {"source": "seed"}


def test_bad_timing_is_one_clear_error(recorded):
    with pytest.raises(ValueError, match="counter_timing must be 'seed' or 'recorded'"):
        replay(recorded, board(), counter_timing="board")
    with pytest.raises(ValueError, match="needs a recording as the schedule"):
        replay(schedule(LONG), board(), counter_timing="recorded")
    with pytest.raises(ValueError, match="energy_timing period must exceed"):
        SimulatedGPU(energy_timing=(0.0, 0.01))
    with pytest.raises(ValueError, match="energy_timing phase must be"):
        SimulatedGPU(energy_timing=(0.1, float("nan")))


def test_twin_compare_takes_the_recordings_timing_where_it_can_and_says_so(recorded, tmp_path):
    from powermodels.counter_timing import resolve_counter_timing
    from powermodels.twin.compare import twin_compare

    table = twin_compare(recorded, board(), tmp_path / "auto", cap_seeds=(0,), counter_timing="auto")
    notes = " ".join(table.attrs["not_compared"])
    assert "energy counter: the recording's, every 101.0" in notes
    twin = (tmp_path / "auto" / "twin" / "provenance.json").read_text()
    assert '"source": "recorded' in twin
    # a recording with too few updates before its first series: auto keeps the seed's phase and says why;
    # recorded refuses
    short = replay(schedule(), board(), seed=1, poll_s=1e-3, start_temperature_c=40.0)
    assert resolve_counter_timing(short, "auto")[0] == "seed"
    assert "100 or more are needed" in resolve_counter_timing(short, "auto")[1]
    with pytest.raises(ValueError, match="100 or more are needed"):
        resolve_counter_timing(short, "recorded")
    with pytest.raises(ValueError, match="counter_timing must be one of auto, recorded, seed"):
        resolve_counter_timing(recorded, "phase")
    assert resolve_counter_timing(recorded, "seed")[0] == "seed"


def test_the_seeds_phase_is_the_default_again(recorded, tmp_path):
    # session 33: the recording's timing lost its deciding test on four never-seen boards, so twin_compare and the
    # command replay at the seed's phase unless told otherwise
    import inspect

    from powermodels.commands.twin_compare import add_arguments
    from powermodels.twin.compare import twin_compare

    assert inspect.signature(twin_compare).parameters["counter_timing"].default == "seed"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["REC", "--preset", "h200-raw", "--out", "OUT"]).counter_timing == "seed"
    table = twin_compare(recorded, board(), tmp_path / "default", cap_seeds=(0,))
    assert "at the seed's phase (counter_timing='seed')" in " ".join(table.attrs["not_compared"])
    assert '"source": "seed"' in (tmp_path / "default" / "twin" / "provenance.json").read_text()
