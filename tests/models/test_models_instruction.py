"""InstructionEnergyModel on synthetic systems with known per-instruction energies."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.instruction import (
    InstructionEnergyModel,
    group_opcode,
    mma_macs,
    opcode_bucket,
)

OPS = ["FADD", "FFMA", "DFMA", "IADD3", "LOP3.LUT", "BRA", "LDS", "HMMA.16816.F32"]
TRUE_E = np.array([150, 200, 600, 300, 250, 400, 900, 3000]) * 1e-12  # J per warp instruction
P_STATIC = 140.0


def _table(counts: np.ndarray, ops, energies, rng, noise=0.0, time=None, static=P_STATIC):
    n = len(counts)
    time = rng.uniform(0.01, 0.03, n) if time is None else time
    energy = time * static + counts @ energies
    energy = energy * (1 + noise * rng.standard_normal(n))
    df = pd.DataFrame({schema.WORKLOAD: [f"b{i}" for i in range(n)], schema.TIME_S: time,
                       schema.ENERGY_J: energy, schema.STATIC_POWER_W: static})
    for j, op in enumerate(ops):
        df[schema.OPCODE_PREFIX + op] = counts[:, j]
    return df


def _microbenchmarks(rng, n_per_op=2, ops=OPS):
    """Each row is dominated by one target opcode plus loop ancillaries (IADD3, BRA)."""
    rows = []
    for j in range(len(ops)):
        for _ in range(n_per_op):
            c = rng.uniform(0.0, 0.02, len(ops)) * 1e9
            c[j] = rng.uniform(0.8, 1.2) * 1e10
            c[ops.index("IADD3")] += 0.05e9
            c[ops.index("BRA")] += 0.03e9
            rows.append(c)
    return np.array(rows)


def test_exact_recovery_without_noise():
    rng = np.random.default_rng(0)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng)
    model = InstructionEnergyModel(alpha=0.0).fit(df)
    e = model.energies_.reindex(OPS).to_numpy()
    np.testing.assert_allclose(e, TRUE_E, rtol=1e-6)
    assert model.rank_ == len(OPS)
    assert model.identifiable_.all()
    assert model.relative_residual_ < 1e-8
    np.testing.assert_allclose(model.predict(df), df[schema.ENERGY_J], rtol=1e-9)
    # the default tiny ridge biases the energies by far less than 0.1 %
    default = InstructionEnergyModel().fit(df)
    np.testing.assert_allclose(default.energies_.reindex(OPS), TRUE_E, rtol=1e-3)


def test_bounded_error_with_noise_and_held_out_mixes():
    rng = np.random.default_rng(1)
    df = _table(_microbenchmarks(rng, n_per_op=4), OPS, TRUE_E, rng, noise=0.01)
    model = InstructionEnergyModel().fit(df)
    e = model.energies_.reindex(OPS).to_numpy()
    assert np.max(np.abs(e - TRUE_E) / TRUE_E) < 0.15
    # held-out "applications": dense random mixes of the same opcodes
    mixes = rng.dirichlet(np.ones(len(OPS)), size=20) * 2e10
    held = _table(mixes, OPS, TRUE_E, rng)
    ape = np.abs(model.predict(held) - held[schema.ENERGY_J]) / held[schema.ENERGY_J]
    assert ape.mean() < 0.03


def test_rank_deficiency_is_reported_and_split_evenly():
    rng = np.random.default_rng(2)
    counts = _microbenchmarks(rng)
    ops = [*OPS, "SHF.R.W.U32"]
    # SHF.R always executes alongside FFMA, one for one: the rows cannot separate them
    counts = np.column_stack([counts, counts[:, OPS.index("FFMA")]])
    energies = np.append(TRUE_E, 100e-12)
    df = _table(counts, ops, energies, rng)
    model = InstructionEnergyModel().fit(df)
    assert model.rank_ == len(ops) - 1
    flagged = set(model.energies_.index[~model.identifiable_])
    assert flagged == {"FFMA", "SHF.R.W.U32"}
    # the pair's total is right and, by the ridge term, split equally per instruction
    pair = model.energies_["FFMA"] + model.energies_["SHF.R.W.U32"]
    assert pair == pytest.approx(TRUE_E[OPS.index("FFMA")] + 100e-12, rel=1e-3)
    assert model.energies_["FFMA"] == pytest.approx(model.energies_["SHF.R.W.U32"], rel=1e-3)
    np.testing.assert_allclose(model.predict(df), df[schema.ENERGY_J], rtol=1e-4)
    # plain NNLS (alpha=0, and the bvls solver) also finishes and reports the rank
    for solver in ("nnls", "bvls"):
        plain = InstructionEnergyModel(alpha=0.0, solver=solver).fit(df)
        assert plain.rank_ == len(ops) - 1
        np.testing.assert_allclose(plain.predict(df), df[schema.ENERGY_J], rtol=1e-6)


def test_unknown_opcodes_are_grouped_or_bucketed():
    rng = np.random.default_rng(3)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng)
    ext = InstructionEnergyModel().fit(df)
    direct = InstructionEnergyModel(extension="none").fit(df)
    app = _table(np.array([[1e9, 1e9, 1e9]]), ["FSWZADD", "FFMA.FTZ", "R2UR"], np.zeros(3), rng)
    bd = ext.breakdown(app).set_index("opcode")
    fp32_mean = TRUE_E[[OPS.index("FADD"), OPS.index("FFMA")]].mean()
    int_mean = TRUE_E[[OPS.index("IADD3"), OPS.index("LOP3.LUT")]].mean()
    assert bd.loc["FSWZADD", "source"] == "bucket"
    assert bd.loc["FSWZADD", "energy_per_instruction_j"] == pytest.approx(fp32_mean, rel=1e-3)
    assert bd.loc["FFMA.FTZ", "source"] == "grouped"
    assert bd.loc["FFMA.FTZ", "energy_per_instruction_j"] == pytest.approx(TRUE_E[1], rel=1e-3)
    assert bd.loc["R2UR", "energy_per_instruction_j"] == pytest.approx(int_mean, rel=1e-3)
    assert ext.coverage(app)[0] == pytest.approx(1.0)
    assert direct.coverage(app)[0] == pytest.approx(0.0)
    static_only = app[schema.TIME_S].iloc[0] * P_STATIC
    assert direct.predict(app)[0] == pytest.approx(static_only)
    assert ext.predict(app)[0] > static_only


def test_breakdown_adds_up_to_predict():
    rng = np.random.default_rng(4)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng)
    model = InstructionEnergyModel().fit(df)
    bd = model.breakdown(df)
    per_run = bd.groupby("run")["energy_j"].sum().to_numpy()
    np.testing.assert_allclose(per_run, model.predict(df), rtol=1e-12)
    comp = model.breakdown(df, by="component")
    np.testing.assert_allclose(comp.sum(axis=1), model.predict(df), rtol=1e-12)
    assert {"STATIC", "FP32", "TENSOR", "MEM-shared"} <= set(comp.columns)
    assert set(bd[schema.WORKLOAD]) == set(df[schema.WORKLOAD])


def test_static_power_is_fitted_without_a_column():
    rng = np.random.default_rng(5)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng, time=rng.uniform(0.01, 0.05, 16))
    model = InstructionEnergyModel(alpha=0.0).fit(df.drop(columns=schema.STATIC_POWER_W))
    assert model.static_power_w_ == pytest.approx(P_STATIC, rel=1e-6)
    fixed = InstructionEnergyModel(static_power_w=100.0).fit(df)
    assert fixed.static_power_w_ == 100.0


def test_memory_levels_split_by_hit_rates_and_scaled():
    rng = np.random.default_rng(6)
    e_level = {"L1": 500e-12, "L2": 4000e-12, "DRAM": 11000e-12}
    e_wide = {"L1": 1800e-12, "L2": 16000e-12}  # LDG.E.128 never measured at DRAM
    rows, h1s, h2s, energies = [], [], [], []
    for h1, h2 in [(1, 1), (0, 1), (0, 0), (0.9, 0.5), (0.2, 0.8)]:
        for wide in (False, True):
            if wide and h2 < 1 and h1 < 0.5:
                continue
            n = rng.uniform(0.5, 1.5) * 1e9
            lop = 1.5 * n
            levels = {"L1": h1, "L2": (1 - h1) * h2, "DRAM": (1 - h1) * (1 - h2)}
            table = e_wide if wide else e_level
            dyn = lop * 250e-12 + sum(n * f * table.get(k, 0.0) for k, f in levels.items())
            rows.append([0.0, n, lop] if wide else [n, 0.0, lop])
            h1s.append(h1)
            h2s.append(h2)
            energies.append(dyn)
    counts = np.array(rows)
    ops = ["LDG.E", "LDG.E.128", "LOP3.LUT"]
    df = pd.DataFrame({schema.WORKLOAD: [f"m{i}" for i in range(len(rows))],
                       schema.TIME_S: 0.0, schema.ENERGY_J: energies,
                       schema.L1_HIT_RATE: h1s, schema.L2_HIT_RATE: h2s})
    for j, op in enumerate(ops):
        df[schema.OPCODE_PREFIX + op] = counts[:, j]
    model = InstructionEnergyModel(alpha=0.0).fit(df)
    for level, e in e_level.items():
        assert model.energies_[f"LDG.E@{level}"] == pytest.approx(e, rel=1e-6)
    # LDG.E.128 at DRAM: scaled from its L2 energy by LDG.E's DRAM/L2 ratio
    app = df.iloc[[0]].copy()
    app[schema.L1_HIT_RATE], app[schema.L2_HIT_RATE] = 0.0, 0.0
    app[schema.OPCODE_PREFIX + "LDG.E"], app[schema.OPCODE_PREFIX + "LOP3.LUT"] = 0.0, 0.0
    app[schema.OPCODE_PREFIX + "LDG.E.128"] = 1e9
    bd = model.breakdown(app).set_index("opcode")
    assert bd.loc["LDG.E.128@DRAM", "source"] == "scaled"
    expected = e_wide["L2"] * e_level["DRAM"] / e_level["L2"]
    assert bd.loc["LDG.E.128@DRAM", "energy_per_instruction_j"] == pytest.approx(expected, rel=1e-3)


def test_sector_traffic_features():
    rng = np.random.default_rng(7)
    n = 12
    ldg = rng.uniform(0.5, 1.5, n) * 1e9
    sectors = ldg * rng.choice([1.0, 4.0, 8.0, 32.0], n)  # coalescing varies the bytes moved
    dram = sectors * rng.uniform(0, 1, n)
    energy = ldg * 300e-12 + sectors * 100e-12 + dram * 200e-12
    df = pd.DataFrame({schema.WORKLOAD: [f"s{i}" for i in range(n)], schema.TIME_S: 0.0,
                       schema.ENERGY_J: energy, schema.OPCODE_PREFIX + "LDS": ldg,
                       schema.L1_SECTORS: sectors, schema.L2_SECTORS: sectors,
                       schema.DRAM_SECTORS: dram})
    model = InstructionEnergyModel(alpha=0.0).fit(df)
    assert model.energies_["SECTORS@DRAM"] == pytest.approx(200e-12, rel=1e-6)
    total_sector = model.energies_["SECTORS@L1"] + model.energies_["SECTORS@L2"]
    assert total_sector == pytest.approx(100e-12, rel=1e-6)
    assert model.coverage(df) == pytest.approx(np.ones(n))  # sectors are not instructions
    off = InstructionEnergyModel(memory_traffic=False).fit(df)
    assert not any(op.startswith("SECTORS") for op in off.energies_.index)


def test_affine_transfer_from_a_fraction_of_benchmarks():
    rng = np.random.default_rng(8)
    counts = _microbenchmarks(rng, n_per_op=3)
    ref = InstructionEnergyModel().fit(_table(counts, OPS, TRUE_E, rng))
    new_e = 0.8 * TRUE_E + 20e-12
    new = _table(counts, OPS, new_e, rng, noise=0.002)
    moved = ref.transfer(new, fraction=0.5, random_state=0)
    np.testing.assert_allclose(moved.energies_.reindex(OPS), new_e, rtol=0.1)
    assert moved.transfer_["slope"] == pytest.approx(0.8, rel=0.1)
    assert moved.transfer_["n_rows"] == 12
    app = _table(rng.dirichlet(np.ones(len(OPS)), size=10) * 2e10, OPS, new_e, rng)
    ape = np.abs(moved.predict(app) - app[schema.ENERGY_J]) / app[schema.ENERGY_J]
    assert ape.mean() < 0.05
    with pytest.raises(ValueError, match="fraction"):
        ref.transfer(new, fraction=0.0)


def test_grouping_buckets_and_mma_shapes():
    assert group_opcode("LDG.E.128.SYS") == "LDG.E.128"
    assert group_opcode("STG.E.EF.64") == "STG.E.64"
    assert group_opcode("ISETP.GE.OR") == group_opcode("ISETP.LE.AND") == "ISETP"
    assert group_opcode("LDG.E.128.SYS", modifier_depth=1) == "LDG.E"
    assert group_opcode("LDG.E.128.SYS", modifier_depth=0) == "LDG"
    assert group_opcode("LDG.E.128.SYS", rules=False) == "LDG.E.128.SYS"
    assert opcode_bucket("R2UR") == "INT"
    assert opcode_bucket("HGMMA.64x64x16.F32") == "TENSOR"
    assert opcode_bucket("LDG.E@DRAM") == "MEM-global"
    assert opcode_bucket("WHATEVER") == "MISC"
    assert mma_macs("HMMA.16816.F32") == 16 * 8 * 16
    assert mma_macs("DMMA.8x8x4") == 256
    assert mma_macs("HGMMA.64x128x16.F32") == 64 * 128 * 16 / 4
    assert mma_macs("FFMA") is None
    # modifier_depth groups the columns before the fit
    rng = np.random.default_rng(9)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng)
    df[schema.OPCODE_PREFIX + "FADD.FTZ"] = df[schema.OPCODE_PREFIX + "FADD"] * 0.5
    df[schema.ENERGY_J] += df[schema.OPCODE_PREFIX + "FADD.FTZ"] * TRUE_E[0]
    model = InstructionEnergyModel(modifier_depth=0).fit(df)
    assert "FADD.FTZ" not in model.energies_.index
    assert model.energies_["FADD"] == pytest.approx(TRUE_E[0], rel=1e-3)


def test_hgmma_scaled_from_hmma_per_mac():
    rng = np.random.default_rng(10)
    model = InstructionEnergyModel().fit(_table(_microbenchmarks(rng), OPS, TRUE_E, rng))
    app = _table(np.array([[1e6]]), ["HGMMA.64x128x16.F32"], np.zeros(1), rng)
    bd = model.breakdown(app).set_index("opcode")
    per_mac = TRUE_E[OPS.index("HMMA.16816.F32")] / 2048
    assert bd.loc["HGMMA.64x128x16.F32", "energy_per_instruction_j"] == pytest.approx(
        per_mac * 64 * 128 * 16 / 4, rel=1e-3)


def test_bad_input_names_the_column():
    rng = np.random.default_rng(11)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng)
    bad = df.copy()
    bad.loc[0, schema.OPCODE_PREFIX + "FADD"] = -1.0
    with pytest.raises(ValueError, match="op:FADD"):
        InstructionEnergyModel().fit(bad)
    with pytest.raises(ValueError, match=schema.TIME_S):
        InstructionEnergyModel().fit(df.drop(columns=schema.TIME_S))
    with pytest.raises(ValueError, match="extension"):
        InstructionEnergyModel(extension="magic").fit(df)
    with pytest.raises(ValueError, match="alpha"):
        InstructionEnergyModel(alpha=-1).fit(df)
    model = InstructionEnergyModel().fit(df)
    with pytest.raises(ValueError, match="instruction table"):
        model.predict(np.ones((2, 3)))
    with pytest.raises(ValueError, match="by"):
        model.breakdown(df, by="nothing")


def test_plain_arrays_are_opcode_columns():
    rng = np.random.default_rng(12)
    X = rng.uniform(0, 1, (30, 4))
    coef = np.array([1.0, 2.0, 0.5, 3.0])
    model = InstructionEnergyModel(alpha=0.0).fit(X, X @ coef)
    np.testing.assert_allclose(model.energies_.to_numpy(), coef, rtol=1e-8)
    assert list(model.energies_.index) == ["x0", "x1", "x2", "x3"]
    with pytest.raises(ValueError, match="Negative"):
        model.predict(-X)


def test_other_mma_shapes_scale_by_macs_not_by_name():
    rng = np.random.default_rng(13)
    ops = [*OPS, "DMMA.8x8x4"]
    energies = np.append(TRUE_E, 1000e-12)
    model = InstructionEnergyModel().fit(_table(_microbenchmarks(rng, ops=ops), ops, energies, rng))
    app = _table(np.array([[1e6]]), ["DMMA.16x8x8"], np.zeros(1), rng)
    bd = model.breakdown(app).set_index("opcode")
    assert bd.loc["DMMA.16x8x8", "source"] == "scaled"
    assert bd.loc["DMMA.16x8x8", "energy_per_instruction_j"] == pytest.approx(4000e-12, rel=1e-3)


def test_power_limit_holds_predictions_at_limit_times_time():
    rng = np.random.default_rng(11)
    df = _table(_microbenchmarks(rng), OPS, TRUE_E, rng)
    free = InstructionEnergyModel().fit(df)
    power = free.predict(df) / df[schema.TIME_S].to_numpy()
    limit = float(np.median(power))  # half the rows draw more than this by the table
    held = InstructionEnergyModel(power_limit_w=limit).fit(df)
    pd.testing.assert_series_equal(held.energies_, free.energies_)  # the fit does not change
    got = held.predict(df)
    over = power > limit
    assert over.any() and (~over).any()
    np.testing.assert_allclose(got[over], limit * df[schema.TIME_S].to_numpy()[over], rtol=1e-12)
    np.testing.assert_allclose(got[~over], free.predict(df)[~over], rtol=1e-12)
    with pytest.raises(ValueError, match="power_limit_w"):
        InstructionEnergyModel(power_limit_w=0.0).fit(df)
