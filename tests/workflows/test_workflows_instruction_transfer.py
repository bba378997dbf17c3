"""Wattchmen §6 transfer between two simulated GPUs with affinely related tables."""

from __future__ import annotations

import numpy as np
import pytest

from powermodels.io import load_calibration, read_metadata
from powermodels.microbench.catalog import MICROBENCHMARKS
from powermodels.microbench.simulated import SimulatedInstructionBackend
from powermodels.models.instruction_transfer import affine_transfer
from powermodels.instruction_energy.calibration import calibrate_instructions, prediction_table
from powermodels.instruction_energy.transfer import (
    compare_transfer,
    transfer_calibration,
    transfer_subset,
)


def _quiet(_msg):
    pass


@pytest.fixture(scope="module")
def gpus(tmp_path_factory):
    a = calibrate_instructions(SimulatedInstructionBackend("sim-hopper-a", noise=0.01, seed=1),
                               tmp_path_factory.mktemp("a"), say=_quiet)
    b = calibrate_instructions(SimulatedInstructionBackend("sim-hopper-b", noise=0.01, seed=2),
                               tmp_path_factory.mktemp("b"), workloads=["sim"], say=_quiet)
    return a, b


def test_subset_is_ten_percent_plus_the_static_benchmark():
    names = list(MICROBENCHMARKS)
    sub = transfer_subset(names, 0.1, seed=4)
    assert "nanosleep" in sub and len(sub) == round(0.1 * (len(names) - 1)) + 1
    assert sub == [n for n in names if n in sub]  # registry order
    assert transfer_subset(names, 0.1, seed=4) == sub
    assert transfer_subset(names, 0.1, seed=5) != sub
    with pytest.raises(ValueError, match="fraction"):
        transfer_subset(names, 0.0)


def test_transferred_table_is_close_to_a_full_fit_and_far_better_than_the_reference(gpus):
    a, b = gpus
    table = compare_transfer(a.model, b.micro, b.workloads, fraction=0.1, seeds=range(6))
    mape = dict(zip(table["table"], table["mape_pct"], strict=True))
    transferred, full, as_is = (mape["transferred (10% subsets)"], mape["full fit on the new GPU"],
                                mape["reference table as is"])
    assert full < 4.0
    assert transferred < full + 2.0
    assert as_is > 3 * transferred  # B's energies are 0.8·A + 40 pJ: the A table is off by ~15 %
    assert table.loc[0, "microbenchmarks"] == 7 and table.loc[0, "se_pct"] > 0


def test_both_line_fits_recover_the_presets_slope(gpus):
    a, b = gpus
    rows = affine_transfer(a.model, prediction_table(b.micro), fraction=0.1, random_state=0)
    assert rows.transfer_["slope"] == pytest.approx(0.8, abs=0.05)
    assert rows.transfer_["method"] == "rows" and rows.transfer_["n_rows"] == 6
    lit = affine_transfer(a.model, prediction_table(b.micro), method="energies")
    assert lit.transfer_["slope"] == pytest.approx(0.8, abs=0.1)
    with pytest.raises(ValueError, match="method"):
        affine_transfer(a.model, prediction_table(b.micro), method="median")


def test_transfer_calibration_measures_only_the_subset(gpus, tmp_path):
    a, b = gpus
    res = transfer_calibration(a.out / "instructions.pmcal",
                               SimulatedInstructionBackend("sim-hopper-b", noise=0.01, seed=3),
                               tmp_path, workloads=["sim"], say=_quiet)
    assert len(res.record["micro"]) == 7 and len(res.micro) == 7
    assert res.summary["extended_mape_pct"] < 6.0
    meta = read_metadata(tmp_path / "instructions.pmcal")
    assert "transfer" in str(meta)
    model = load_calibration(tmp_path / "instructions.pmcal")
    np.testing.assert_allclose(model.predict(prediction_table(b.workloads)),
                               res.model.predict(prediction_table(b.workloads)))
    # the static power is the new GPU's (its NANOSLEEP), not the reference's
    assert res.model.static_power_w_ == pytest.approx(b.model.static_power_w_, rel=0.03)
