"""benchmarks/twin_thermal_poles.py: each recording's pole factors, and their median over boards."""

from dataclasses import replace

import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.board_calibration.thermal import scaled_resistance
from powermodels.twin.replay import replay

from .test_twin import known_preset, schedule


def test_rows_and_board_medians_of_known_boards():
    script = load_benchmark("twin_thermal_poles")
    preset = known_preset()
    rows = []
    for uuid, factors in (("GPU-a", (0.8, 1.6)), ("GPU-b", (1.0, 2.0))):
        rec = replay(schedule(), replace(preset, physics=scaled_resistance(preset.physics, factors)),
                     seed=3, poll_s=2e-3)
        rows.append(script.factors_row(replace(rec, provenance={**rec.provenance, "uuid": uuid}), preset))
    # a repeat of board a counts once in the median over boards
    rows.append({**rows[0], schema.RECORDING_NAME: "repeat"})
    table = script.pd.DataFrame(rows)
    slow = next(c for c in table if c.startswith("whole: k(τ=20"))
    assert table[slow].iloc[:2].tolist() == pytest.approx([1.6, 2.0], rel=0.12)
    medians = script.board_medians(table)
    assert medians[slow] == pytest.approx(table[slow].iloc[:2].mean())
