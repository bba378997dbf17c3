"""Issue 26's power target: one definition for report.md and checks.json, never a pass on zero windows.

The H100 run of 2026-11-27 (GPU-f73aad1d, natural_dvfs_ladder_f73aad1d_b) had the report's
held-out power at 2.18 % (pressure GEMM, 65 windows) and 2.77 % (sgemm, 1 window) with fp32 and the
triad unscored, while checks.json said false from the per-configuration band's 2 constant-clock
blocks (54.9 %): the rows below are that run's.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.natural_dvfs.power_target import power_target, power_target_line


def _table(rows):
    return pd.DataFrame([{schema.WORKLOAD: w, schema.BAND_LO_MHZ: 1500.0, schema.BAND_HI_MHZ: 1800.0,
                          schema.POWER_MAPE_PCT: m, schema.TEST_WINDOWS: n, schema.TRAIN_WINDOWS: 60,
                          schema.TRAIN_MIXED: 0, schema.TRAIN_BELOW_BAND: 61 if w == "pressure" else 0,
                          schema.NOTE: note} for w, m, n, note in rows])


RUN_B = [("fp32", math.nan, 0, "no kept counter window's mean clock lies in 1500–1800 MHz"),
         ("sgemm", 2.77, 1, "no training window below the band: the band is extrapolated"),
         ("triad", math.nan, 0, "no kept counter window's mean clock lies in 1500–1800 MHz"),
         ("pressure", 2.18, 65, "no training window above the band: the band is extrapolated")]


@pytest.mark.parametrize("rows, passed", [
    (RUN_B, None),                                                    # two unscored: not established
    ([("a", 2.0, 5, ""), ("b", 2.9, 3, "")], True),
    ([("a", 2.0, 5, ""), ("b", 3.1, 3, ""), ("c", math.nan, 0, "")], False),  # a miss is a miss
    ([("a", math.nan, 0, "x"), ("b", math.nan, 0, "y")], None),      # zero windows never pass
    ([("a", math.nan, 4, "only 2 training counter window(s) (< 6)")], None),  # windows but no fit
    ([], None),
])
def test_power_target(rows, passed):
    target = power_target(_table(rows) if rows else pd.DataFrame())
    assert target["passed"] is passed
    assert all(v["test_windows"] > 0 for v in target["scored"].values())
    assert set(target["scored"]) | set(target["unscored"]) == {r[0] for r in rows}


def test_the_line_counts_windows_and_names_the_unscored():
    line = power_target_line(power_target(_table(RUN_B)))
    assert "not established (2 of 4 workload(s) scored)" in line
    assert "pressure 2.18 % on 65 window(s)" in line and "sgemm 2.77 % on 1 window(s)" in line
    assert line.endswith("Not scored (no test window): fp32, triad.")


def test_checks_json_and_the_report_read_the_same_target(tmp_path):
    """Fails before power_target: checks() scored the per-configuration band's power columns
    (2 constant-clock blocks, 54.9 %: false) while the report showed the held-out windows."""
    module = load_benchmark("gpu_natural_dvfs")
    validation = pd.DataFrame([{"group": "pressure", "band_lo_mhz": 1527.0, "band_hi_mhz": 1680.0, "test_rows": 2445,
                                "time_mape_selected_pct": 0.41, "time_form_cv": "dso", "time_mape_rational_pct": 1.8,
                                "time_mape_dso_pct": 0.41, "power_test_rows": 2, "power_mape_pct": 54.9}])
    cal = SimpleNamespace(validation=validation, temperature=None,
                          identifiability=pd.DataFrame({"group": [], "quantity": [], "reason": [], "identified": []}))
    launches = pd.DataFrame({schema.WORKLOAD: ["fp32"], schema.SM_CLOCK_MHZ: [1980.0], schema.TIME_S: [1e-3]})
    run = SimpleNamespace(calibration=cal, launches=launches, power_clock=_table(RUN_B))
    out = module.checks(run, 1980.0)
    assert out["targets"]["power_mape_le_3pct"] is None
    assert out["power_band"]["scored"]["pressure"] == pytest.approx(
        {"mape_pct": 2.18, "test_windows": 65, "train_windows": 60, "train_mixed": 0, "train_below_band": 61,
         "note": RUN_B[3][3]})
    assert sorted(out["power_band"]["unscored"]) == ["fp32", "triad"]
    assert np.isclose(out["power_band"]["band_mhz"], [1500, 1800]).all()
    # the time target follows the same rule: fp32 without a batch in its band is not a pass
    assert out["targets"]["time_mape_le_2pct_every_workload"] is True
    validation = pd.concat([validation, pd.DataFrame([{"group": "fp32", "band_lo_mhz": np.nan, "band_hi_mhz": np.nan,
                                                       "test_rows": 0, "time_mape_selected_pct": np.nan}])])
    out = module.checks(SimpleNamespace(calibration=SimpleNamespace(**{**vars(cal), "validation": validation}),
                                        launches=launches, power_clock=_table(RUN_B)), 1980.0)
    assert out["time_band_unscored"] == ["fp32"]
    assert out["targets"]["time_mape_le_2pct_every_workload"] is None
