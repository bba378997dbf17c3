"""Power-cap settling as the real H100 controller behaves (issue 19, session 5).

Real data: the capped bf16 GEMM's 25–30 s continuous loads from idle on three H100 boards
(``datasets/h100-2026-11-25-session5/raw_recording_620707cb``, ``…/natural_dvfs/recording`` on
GPU-0b4f1a7f, ``datasets/h100/thermal_2026-11-25`` on GPU-14ab84a0), replayed as the counter
protocol runs them: a 0.65 s measuring run, then 0.5 s pieces while the controller is judged.
"""

import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.thermal.spans import cap_held, capped_row_window, extend_until_settled

LIMIT_W = 700.0
REPO = Path(__file__).resolve().parents[2]


def _bf16_series(datasets, which):
    """(trace, launches, load start) of the capped bf16 GEMM's continuous load in a real recording."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    from cap_settling_real import bf16_series

    return bf16_series(datasets, which)


BOARDS = ["620707cb", "0b4f1a7f", "14ab84a0"]


def _replay(trace, iv, start, first_s=0.65, piece_s=0.5):
    shown = {"end": start + first_s}

    def run_more():
        lo = shown["end"]
        shown["end"] += piece_s
        return iv[(iv[:, 0] >= lo) & (iv[:, 0] < shown["end"])]

    return iv[(iv[:, 0] >= start) & (iv[:, 0] < start + first_s)], run_more, lambda e: trace[trace[schema.T_S] <= e]


@pytest.mark.parametrize("board", BOARDS)
def test_real_capped_load_settles_within_the_bound_from_any_start(datasets, board):
    """Started at 0.3 … 17.8 s of the load (cold to hot), every replay settles within 5 s and its row
    window reads the limit ± 2 %. The earlier rule (no trend above 0.5 % over 100 ms spans) took up to
    5 s, left 2 of 36 replays on 620707cb transient, and reported a "settled" row at 680.7 W on
    14ab84a0 (``benchmarks/cap_settling_real.py``)."""
    trace, iv, s0 = _bf16_series(datasets, board)
    for offset in np.arange(0.3, 18.0, 0.5):
        start = s0 + offset
        first, run_more, trace_until = _replay(trace, iv, start)
        out, tr, settle, transient = extend_until_settled(run_more, trace_until, first, start, power_limit_w=LIMIT_W)
        assert not transient, f"{board}: transient from {offset:.1f} s"
        assert settle <= 5.0
        _, power = capped_row_window(tr, out, start, float(out[-1, 1]))
        assert abs(power / LIMIT_W - 1) <= 0.02, f"{board} from {offset:.1f} s: row at {power:.1f} W"


def test_a_settled_capped_row_reports_the_window_that_was_judged(datasets):
    """Session 5, GPU-0b4f1a7f, hot row: settled after 0.516 s yet 724.8 W under a 700 W limit — the rule
    judged the last 1 s of 100 ms spans while the row reported its last 0.65 s. Whatever the load,
    a row that says settled has its own window at the limit."""
    trace, iv, s0 = _bf16_series(datasets, "620707cb")
    for offset in np.arange(0.3, 18.0, 0.5):
        start = s0 + offset
        end = start + 1.15
        window, power = capped_row_window(trace, iv, start, end)
        assert window is not None and window.end_s - window.start_s >= 0.8
        held = cap_held(trace, iv, start, end, LIMIT_W)
        assert held == (abs(power / LIMIT_W - 1) <= 0.02)


def test_a_flat_load_above_the_limit_or_too_short_is_not_held():
    t = np.arange(0.0, 3.0, 0.1) + 0.05
    for power_w, ok in ((760.0, False), (704.0, True)):
        trace = pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: power_w * t})
        iv = np.column_stack([np.arange(0, 3.0, 1e-3), np.arange(0, 3.0, 1e-3) + 1e-3])
        assert cap_held(trace, iv, 0.0, 3.0, LIMIT_W) is ok
        assert not cap_held(trace, iv, 0.0, 0.5, LIMIT_W)      # half a window cannot tell
        assert cap_held(trace, iv, 0.0, 3.0, None)              # no limit: flat over two windows
    ramp = pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: 700 * t + 40 * t**2})
    assert not cap_held(ramp, iv, 0.0, 3.0, None)


def test_cap_rule_bounds_are_parameters():
    """The window and tolerance are parameters of the rule, not constants in the loop."""
    import inspect

    params = inspect.signature(extend_until_settled).parameters
    assert params["window_s"].default == 1.0 and params["tolerance"].default == 0.02
    assert params["max_settle_s"].default == 5.0
    assert math.isclose(inspect.signature(cap_held).parameters["tolerance"].default, 0.02)
