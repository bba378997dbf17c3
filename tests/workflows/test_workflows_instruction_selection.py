"""Choosing the instruction model's settings by leave-one-microbenchmark-out CV."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels.models import InstructionEnergyModel
from powermodels.instruction_energy.calibration import prediction_table
from powermodels.instruction_energy.selection import cross_validate_instruction_models
from powermodels.instruction_energy.transfer import compare_transfer

H100 = Path(__file__).resolve().parents[2] / "datasets" / "h100" / "wattchmen"


@pytest.fixture(scope="module")
def micro():
    return pd.read_parquet(H100 / "wattchmen_microbench.parquet")


def test_cv_leaves_out_each_benchmark_but_the_static_reference(micro):
    small = micro[micro["workload"].isin(["fadd", "ffma", "dadd", "dfma", "nanosleep", "lds32"])]
    cv = cross_validate_instruction_models(small, {"default": {}, "depth 0": {"modifier_depth": 0}})
    assert list(cv.columns) == ["candidate", "params", "cv_mape_pct", "cv_median_pct", "n",
                                "held_back"]
    assert (cv["n"] == 5).all()  # nanosleep is never left out
    assert cv["cv_mape_pct"].is_monotonic_increasing
    # the score is the leave-one-out error, recomputed by hand for one candidate
    table = prediction_table(small)
    err = [abs(InstructionEnergyModel().fit(table.drop(index=i)).predict(table.iloc[[i]])[0]
               / table["energy_j"].iloc[i] - 1)
           for i in range(len(table)) if table["workload"].iloc[i] != "nanosleep"]
    got = cv.set_index("candidate").loc["default", "cv_mape_pct"]
    assert got == pytest.approx(100 * np.mean(err))


def test_cv_refuses_too_few_benchmarks(micro):
    with pytest.raises(ValueError, match="3 or more microbenchmarks"):
        cross_validate_instruction_models(micro[micro["workload"].isin(["fadd", "nanosleep"])])


def test_compare_transfer_full_fit_uses_the_given_settings(micro):
    wl = pd.read_parquet(H100 / "wattchmen_workloads.parquet")
    ref = InstructionEnergyModel().fit(prediction_table(micro))
    a = compare_transfer(ref, micro, wl, seeds=[0])
    b = compare_transfer(ref, micro, wl, seeds=[0], model_params={"modifier_depth": 0})
    full = "full fit on the new GPU"
    assert (a.set_index("table").loc[full, "mape_pct"]
            != pytest.approx(b.set_index("table").loc[full, "mape_pct"]))


def test_cv_scores_each_candidate_with_and_without_the_power_limit(micro):
    small = micro[micro["workload"].isin(["fadd", "ffma", "dadd", "dfma", "nanosleep", "sts32",
                                          "lds32"])]
    cv = cross_validate_instruction_models(small, {"depth 0": {"modifier_depth": 0}},
                                           power_limit_w=400.0).set_index("candidate")
    assert set(cv.index) == {"depth 0", "depth 0, power limit"}
    assert cv.loc["depth 0, power limit", "params"] == {"modifier_depth": 0, "power_limit_w": 400.0}
    # by hand: the same folds, predictions held at 400 W × time
    table = prediction_table(small)
    err = []
    for i in range(len(table)):
        if table["workload"].iloc[i] == "nanosleep":
            continue
        model = InstructionEnergyModel(modifier_depth=0, power_limit_w=400.0)
        pred = model.fit(table.drop(index=i)).predict(table.iloc[[i]])[0]
        assert pred <= 400.0 * table["time_s"].iloc[i] * (1 + 1e-12)
        err.append(abs(pred / table["energy_j"].iloc[i] - 1))
    assert cv.loc["depth 0, power limit", "cv_mape_pct"] == pytest.approx(100 * np.mean(err))
    # a 400 W limit lowers some predictions (these rows draw 300-600 W), so the scores differ
    assert cv.loc["depth 0, power limit", "cv_mape_pct"] != pytest.approx(
        cv.loc["depth 0", "cv_mape_pct"])
