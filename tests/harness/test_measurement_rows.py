"""The issue-26 measurement rows: HGMMA per arrive group and irregular DRAM accesses.

Their SASS loop ratios (with nvcc and cuobjdump), their path through the simulated calibration,
the fixed-operand table without them, and the CV that decides whether they are used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.instruction_energy.calibration import calibrate_instructions, prediction_table
from powermodels.instruction_energy.diagnostics import with_operand_variants
from powermodels.instruction_energy.selection import cross_validate_instruction_models
from powermodels.microbench import sass
from powermodels.microbench.catalog import (
    HOPPER_MICROBENCHMARKS,
    MEASUREMENT_ROWS,
    TOGGLING_ONLY,
    Microbenchmark,
)
from powermodels.microbench.simulated import SimulatedInstructionBackend
from powermodels.models import InstructionEnergyModel

HGMMA, ARRIVE, DEPBAR = "HGMMA.64x64x16.F32", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE"
GROUPS = MEASUREMENT_ROWS["hgmma groups"]
IRREGULAR = MEASUREMENT_ROWS["irregular memory"]
TOOLS = all(sass.find_tool(t) for t in ("nvcc", "cuobjdump", "nvdisasm"))


@pytest.fixture(scope="module")
def loops(tmp_path_factory):
    """Loop counts of every measurement row and of ``hgmma_f32_rand`` (nvcc 13.0 here)."""
    if not TOOLS:
        pytest.skip("nvcc/cuobjdump not available")
    out, texts = tmp_path_factory.mktemp("cubins"), {}
    counts = {}
    for name in ("hgmma_f32_rand", *GROUPS, *IRREGULAR):
        m = HOPPER_MICROBENCHMARKS[name]
        if m.source not in texts:
            texts[m.source] = sass.disassemble(
                sass.compile_cubin(m.path, out / f"{m.path.stem}.cubin", arch=m.arch))
        counts[name] = sass.loop_opcode_counts(texts[m.source], m.kernel, m.targets[0])
    return counts


def test_hgmma_group_kernels_have_the_catalogued_ratios(loops):
    for name in ("hgmma_f32_rand", *GROUPS):
        m, loop = HOPPER_MICROBENCHMARKS[name], loops[name]
        assert loop[HGMMA] == 32, (name, loop)
        want = m.per_step or (1.0, 1.0, 1.0)
        assert [loop[op] / loop[HGMMA] for op in (HGMMA, ARRIVE, DEPBAR)] == list(want), name
    # ARRIVE and DEPBAR per HGMMA: 1, 1/2, 1/4 and (1/2, 1/4): no two of the three are collinear
    ratios = np.array([[loops[n][op] / 32 for op in (ARRIVE, DEPBAR)]
                       for n in ("hgmma_f32_rand", *GROUPS)])
    assert np.linalg.matrix_rank(np.column_stack([np.ones(len(ratios)), ratios])) == 3
    # UMOV: 50 per 32 HGMMA wherever B changes every second HGMMA, far fewer when A and B
    # change together, so UMOV is not tied to HGMMA either
    assert loops["hgmma_f32_rand_g4"]["UMOV"] == loops["hgmma_f32_rand"]["UMOV"] == 50
    assert loops["hgmma_f32_rand_g4_ab"]["UMOV"] <= 4


def test_irregular_kernels_issue_one_32_bit_access_per_step(loops):
    for name in IRREGULAR:
        m, loop = HOPPER_MICROBENCHMARKS[name], loops[name]
        assert loop[m.targets[0]] == 32, (name, loop)
        wide = [op for op in loop if op.startswith(("LDG", "STG")) and op != m.targets[0]]
        assert not wide, (name, loop)
        # index arithmetic stays a few ALU instructions per access (priced by other rows)
        alu = sum(c for op, c in loop.items() if not op.startswith(("LDG", "STG")))
        assert alu / 32 < 6, (name, loop)


def test_catalog_checks_per_step_and_access():
    with pytest.raises(ValueError, match="per_step"):
        Microbenchmark("x", "a.cu", "mb_x", ("A", "B"), "INT", per_step=(1.0,))
    with pytest.raises(ValueError, match="access"):
        Microbenchmark("x", "a.cu", "mb_x", ("A",), "INT", access="diagonal")
    # toggling-only: the wgmma_groups.cu kernels, all on changing operands (no fixed-operand twin)
    assert TOGGLING_ONLY == {n for n, m in HOPPER_MICROBENCHMARKS.items() if m.source == "wgmma_groups.cu"}
    assert TOGGLING_ONLY == set(GROUPS)
    assert all(HOPPER_MICROBENCHMARKS[n].level == "DRAM" for n in IRREGULAR)


@pytest.fixture(scope="module")
def sim_table(tmp_path_factory):
    """A small simulated calibration with the measurement rows (exact energies: no noise)."""
    micro = ["nanosleep", "ffma", "iadd3", "imad", "lop3", "shf", "ldg32_dram", "ldg128_dram",
             "stg32_dram", "ldg32_l2", "hgmma_f32", "hgmma_f32_rand", *GROUPS, *IRREGULAR]
    cal = calibrate_instructions(SimulatedInstructionBackend(hopper_extras=True),
                                 tmp_path_factory.mktemp("cal"), micro=micro, say=lambda m: None)
    return cal.micro


def test_simulated_rows_carry_their_ratios_and_sectors(sim_table):
    t = sim_table.set_index(schema.WORKLOAD)
    op = schema.OPCODE_PREFIX
    g4 = t.loc["hgmma_f32_rand_g4"]
    assert g4[op + ARRIVE] / g4[op + HGMMA] == pytest.approx(0.25, rel=1e-3)
    g2x2 = t.loc["hgmma_f32_rand_g2x2"]
    assert g2x2[op + DEPBAR] / g2x2[op + HGMMA] == pytest.approx(0.25, rel=1e-3)
    assert g2x2[op + ARRIVE] / g2x2[op + HGMMA] == pytest.approx(0.5, rel=1e-3)
    # one sector per thread: 32 per warp instruction, 8x the coalesced 32-bit load's 4
    for name in ("ldg32_rand_dram", "ldg32_dram"):
        per = t.loc[name, schema.DRAM_SECTORS] / t.loc[name, op + "LDG.E"]
        assert per == pytest.approx(32 if name != "ldg32_dram" else 4, rel=0.02), name


def test_group_rows_make_arrive_and_depbar_identifiable(sim_table):
    table = prediction_table(with_operand_variants(sim_table, "toggling"))
    with_rows = InstructionEnergyModel().fit(table)
    without = InstructionEnergyModel().fit(table[~table[schema.WORKLOAD].isin(GROUPS)])
    for op in (ARRIVE, DEPBAR):
        assert not without.identifiable_[op]  # 1 : 1 : 1 with HGMMA in every other row
        assert with_rows.identifiable_[op]
        assert with_rows.energies_[op] == pytest.approx(100e-12, abs=5e-12)  # the preset's
    assert with_rows.energies_[HGMMA] == pytest.approx(6000e-12, rel=0.01)


def test_fixed_operand_table_leaves_out_the_toggling_only_rows(sim_table):
    fixed = set(with_operand_variants(sim_table, "fixed")[schema.WORKLOAD])
    assert not fixed & (set(GROUPS) | {"hgmma_f32_rand"})
    assert set(IRREGULAR) <= fixed  # fixed or not, the memory rows stand
    toggling = set(with_operand_variants(sim_table, "toggling")[schema.WORKLOAD])
    assert set(GROUPS) <= toggling and "hgmma_f32" not in toggling


def test_cv_scores_held_back_rows_on_the_same_microbenchmarks(sim_table):
    micro = with_operand_variants(sim_table, "toggling")
    cv = cross_validate_instruction_models(micro, {"default": {}}, row_groups=MEASUREMENT_ROWS)
    cv = cv.set_index("candidate")
    assert set(cv.index) == {"default", "default, without hgmma groups",
                             "default, without irregular memory",
                             "default, without hgmma groups and irregular memory"}
    assert cv["n"].nunique() == 1  # every variant scored on the same left-out rows
    assert cv.loc["default, without hgmma groups", "held_back"] == GROUPS
    # by hand: a held-back row is predicted by the fit without all of them
    table = prediction_table(micro)
    names = table[schema.WORKLOAD].to_numpy()
    keep = ~np.isin(names, GROUPS)
    model = InstructionEnergyModel().fit(table[keep].reset_index(drop=True))
    errs = []
    for i in np.flatnonzero(names != "nanosleep"):
        fit = model if not keep[i] else InstructionEnergyModel().fit(
            table[keep & (np.arange(len(table)) != i)].reset_index(drop=True))
        errs.append(abs(fit.predict(table.iloc[[i]])[0] / table[schema.ENERGY_J].iloc[i] - 1))
    assert cv.loc["default, without hgmma groups", "cv_mape_pct"] == pytest.approx(
        100 * np.mean(errs))
    # the group rows predict each other and the 1 : 1 : 1 row; without them the ridge's equal
    # split misprices every one of them
    assert cv.loc["default", "cv_mape_pct"] < cv.loc["default, without hgmma groups", "cv_mape_pct"]


def test_cv_without_row_groups_is_unchanged(sim_table):
    micro = with_operand_variants(sim_table, "toggling")
    plain = cross_validate_instruction_models(micro, {"default": {}})
    assert list(plain["candidate"]) == ["default"] and plain["held_back"].iloc[0] == ()
    grouped = cross_validate_instruction_models(micro, {"default": {}},
                                                row_groups=MEASUREMENT_ROWS).set_index("candidate")
    assert grouped.loc["default", "cv_mape_pct"] == pytest.approx(plain["cv_mape_pct"].iloc[0],
                                                                  rel=1e-12)
    pd.testing.assert_series_equal(
        cross_validate_instruction_models(micro, {"default": {}}, row_groups={"none": ("x",)})
        .iloc[0].drop("params"), plain.iloc[0].drop("params"))
