"""Cap gains chosen on repeated capped starts (benchmarks/twin_cap_starts_fit.py), on twin-made recordings with known gains."""

from dataclasses import replace

import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.twin.replay import replay

from .test_twin import known_preset

fit_cap_gains_on_starts = load_benchmark("twin_cap_starts_fit").fit_cap_gains_on_starts

#: the board's controller: proportional only, repeating the window (a capped start that barely overshoots)
BOARD_GAINS = {"cap_proportional": 10.0, "cap_gain_per_s": 0.0, "cap_repeat": 1.0}
GRID = ((30.0, 4.0, 0.0), (10.0, 0.0, 1.0))


def _schedule(starts: int) -> pd.DataFrame:
    rows, t = [], 0.0
    for k in range(starts):
        rows += [("capstart", "-", k, "idle", t, t + 3.0), ("capstart", "bf16", k, "series", t + 3.0, t + 10.0)]
        t += 10.0
    rows.append(("capstart", "-", starts, "idle", t, t + 2.0))
    return pd.DataFrame(rows, columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                       schema.T0_S, schema.T1_S])


@pytest.fixture(scope="module")
def board_starts():
    """Three capped starts on a board whose controller is not the preset's (the 'real' one here)."""
    board = known_preset()
    board = replace(board, physics=replace(board.physics, **BOARD_GAINS))
    return replay(_schedule(3), board, seed=7, poll_s=2e-3, start_temperature_c=40.0)


def test_the_gains_of_the_board_are_chosen_over_the_presets_own(board_starts):
    preset = known_preset()  # proportional 30, integral 4, no repeat: not the board's controller
    report = {}
    fitted = fit_cap_gains_on_starts(preset, board_starts, grid=GRID, seeds=(0,), report=report)
    fit = report["cap_starts_fit"]
    assert fit["starts"] == 3 and [c["candidate"] for c in fit["candidates"]] == ["as given", "grid"]
    assert {k: getattr(fitted.physics, k) for k in BOARD_GAINS} == BOARD_GAINS
    scores = [c["score"] for c in fit["candidates"]]
    assert scores[1] < scores[0]
    # only the gains change: the rest of the preset (workloads too) is the one given
    assert fitted.physics.cap_headroom_w == preset.physics.cap_headroom_w and fitted.workloads == preset.workloads


def test_too_few_starts_or_no_capped_series_is_refused(board_starts):
    one = replay(_schedule(2), known_preset(), seed=1, poll_s=2e-3, start_temperature_c=40.0)
    with pytest.raises(ValueError, match="2 capped start"):
        fit_cap_gains_on_starts(known_preset(), one, grid=GRID, seeds=(0,))
    idle = pd.DataFrame([("capstart", "-", 0, "idle", 0.0, 3.0)],
                        columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                 schema.T0_S, schema.T1_S])
    with pytest.raises(ValueError, match="no series ran power-capped"):
        fit_cap_gains_on_starts(known_preset(), replay(idle, known_preset(), seed=1), grid=GRID, seeds=(0,))
