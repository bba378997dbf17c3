"""DSO DVFS models, optimiser and parameter predictor (models/dvfs*.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.dvfs import (
    DVFSEnergyModel,
    DVFSParams,
    DVFSPowerModel,
    DVFSTimeModel,
    fit_voltage_curve,
)
from powermodels.models.dvfs_optimizer import clock_pairs, eta_for_slowdown, optimize_clocks
from powermodels.models.dvfs_predictor import DVFSParameterPredictor, kernel_parameters

CORES = np.arange(600.0, 1981.0, 60.0)
MEMS = np.array([2201.0, 3201.0])
CLOCKS = {m: list(CORES) for m in MEMS}
TRUE = DVFSParams(p0_w=60.0, kappa_w=40.0, gamma_w_per_mhz=0.01, c_w_per_mhz=0.06,
                  t0_s=2e-4, alpha_s_mhz=4.0, beta_s_mhz=3.0,
                  voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8)


POSITIONS = {"clock_column": 0, "memory_clock_column": 1}  # X = column_stack([core, memory])


def grid():
    pairs = clock_pairs(CLOCKS)
    return pairs[:, 0], pairs[:, 1]


def test_power_model_recovers_eq1():
    fc, fm = grid()
    X = np.column_stack([fc, fm])
    m = DVFSPowerModel(**POSITIONS, voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8).fit(X, TRUE.power(fc, fm))
    np.testing.assert_allclose(m.coef_, [60.0, 40.0, 0.01, 0.06], rtol=1e-6)
    # knee and slope chosen by least squares when not given
    auto = DVFSPowerModel(**POSITIONS).fit(X, TRUE.power(fc, fm))
    np.testing.assert_allclose(auto.predict(X), TRUE.power(fc, fm), rtol=2e-2)


def test_time_model_finds_the_ridge():
    fc, fm = grid()
    rng = np.random.default_rng(0)
    t = TRUE.time(fc, fm) * (1 + 0.002 * rng.standard_normal(fc.size))
    m = DVFSTimeModel(**POSITIONS).fit(np.column_stack([fc, fm]), t)
    assert m.alpha_ == pytest.approx(4.0, rel=0.02)
    assert m.beta_ == pytest.approx(3.0, rel=0.02)
    assert m.params_.ridge_core_mhz(2201.0) == pytest.approx(0.75 * 2201.0, rel=0.03)


def test_time_model_compute_bound_sets_alpha_zero():
    p = DVFSParams(t0_s=1e-3, alpha_s_mhz=0.0, beta_s_mhz=2.0)
    fc, fm = grid()
    m = DVFSTimeModel(**POSITIONS).fit(np.column_stack([fc, fm]), p.time(fc, fm))
    assert m.alpha_ == pytest.approx(0.0, abs=1e-9)
    assert m.t0_ == pytest.approx(1e-3, rel=1e-6)


def test_column_names_and_positions():
    fc, fm = grid()
    df = pd.DataFrame({"x": 1.0, schema.MEM_CLOCK_MHZ: fm, schema.SM_CLOCK_MHZ: fc})
    by_name = DVFSTimeModel(schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ).fit(df, TRUE.time(fc, fm))
    by_pos = DVFSTimeModel(2, 1).fit(df.to_numpy(), TRUE.time(fc, fm))
    np.testing.assert_allclose(by_name.predict(df), by_pos.predict(df.to_numpy()))
    with pytest.raises(ValueError, match="column 'nope' \\(clock_column\\) is missing"):
        DVFSTimeModel("nope", schema.MEM_CLOCK_MHZ).fit(df, TRUE.time(fc, fm))
    defaults = DVFSTimeModel().fit(df, TRUE.time(fc, fm))  # the schema names are the defaults
    np.testing.assert_allclose(defaults.predict(df), by_name.predict(df))


def test_bad_clocks_are_refused():
    X = np.array([[1000.0, 3201.0], [0.0, 3201.0], [1200.0, 3201.0]])
    with pytest.raises(ValueError, match=r"column 0 \(clock_column\) has a clock of 0 MHz"):
        DVFSPowerModel(**POSITIONS).fit(X, [1.0, 2.0, 3.0])
    X[1] = [1100.0, -5.0]  # sklearn's wording for negative input, naming the column
    with pytest.raises(ValueError, match=r"^Negative values in data: column 1 \(memory_clock_column\) has -5"):
        DVFSTimeModel(**POSITIONS).fit(X, [1.0, 2.0, 3.0])


def test_energy_model_is_power_times_time():
    fc, fm = grid()
    X = np.column_stack([fc, fm])
    y = np.column_stack([TRUE.time(fc, fm), TRUE.power(fc, fm)])
    m = DVFSEnergyModel(**POSITIONS, voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8).fit(X, y)
    np.testing.assert_allclose(m.predict(X), m.predict_time(X) * m.predict_power(X))
    np.testing.assert_allclose(m.predict(X), TRUE.energy(fc, fm), rtol=0.02)
    with pytest.raises(ValueError, match="2 columns"):
        m.fit(X, y[:, 0])


def test_shares_round_trip():
    ref = {"f_core_mhz": 1980.0, "f_mem_mhz": 3201.0, "time_s": 1e-3, "power_w": 300.0}
    s = TRUE.to_shares(*ref.values())
    assert s[:4].sum() == pytest.approx(TRUE.power(1980.0, 3201.0) / 300.0)
    back = DVFSParams.from_shares(s, **ref, voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8)
    np.testing.assert_allclose(back.as_series(), TRUE.as_series(), rtol=1e-12)


def random_params(rng, negative=False):
    sign = -1.0 if negative else 1.0
    return DVFSParams(p0_w=rng.uniform(20, 100), kappa_w=sign * rng.uniform(0, 80),
                      gamma_w_per_mhz=rng.uniform(0, 0.02), c_w_per_mhz=rng.uniform(0.005, 0.1),
                      t0_s=rng.uniform(0, 1e-3), alpha_s_mhz=rng.uniform(0, 6),
                      beta_s_mhz=rng.uniform(0.5, 4), voltage_knee_mhz=rng.uniform(600, 1500),
                      voltage_slope_per_ghz=rng.uniform(0, 1.5))


def test_theorem1_matches_brute_force():
    rng = np.random.default_rng(1)
    reduced = 0
    for _ in range(60):
        p = random_params(rng)
        eta = rng.uniform(0, 1)
        fast = optimize_clocks(p, CLOCKS, eta=eta, p_max_w=700.0, method="theorem1")
        slow = optimize_clocks(p, CLOCKS, eta=eta, p_max_w=700.0, method="brute_force")
        assert fast.method == "theorem1"
        assert fast.cost == pytest.approx(slow.cost, rel=1e-12)
        assert fast.n_evaluated <= slow.n_evaluated == len(clock_pairs(CLOCKS))
        reduced += fast.n_evaluated < slow.n_evaluated
    assert reduced > 10  # the reduction actually prunes pairs


def test_negative_coefficients_fall_back_to_brute_force():
    p = random_params(np.random.default_rng(2), negative=True)
    assert optimize_clocks(p, CLOCKS, eta=0.5, p_max_w=700.0).method == "brute_force"


def test_eta_extremes_and_slowdown_limit():
    fastest = optimize_clocks(TRUE, CLOCKS, eta=0.0, p_max_w=700.0)
    assert fastest.slowdown == pytest.approx(0.0, abs=1e-12)
    greenest = optimize_clocks(TRUE, CLOCKS, eta=1.0, p_max_w=700.0)
    energies = TRUE.energy(*grid())
    assert greenest.energy_j == pytest.approx(energies.min())
    assert greenest.energy_saving > 0
    limited = eta_for_slowdown(TRUE, CLOCKS, max_slowdown=0.05, p_max_w=700.0)
    assert limited.slowdown <= 0.05
    assert 0 <= limited.energy_saving <= greenest.energy_saving + 1e-12
    looser = eta_for_slowdown(TRUE, CLOCKS, max_slowdown=0.5, p_max_w=700.0)
    assert looser.energy_saving >= limited.energy_saving


def test_optimizer_input_errors():
    with pytest.raises(ValueError, match="eta"):
        optimize_clocks(TRUE, CLOCKS, eta=1.5, p_max_w=700.0)
    with pytest.raises(ValueError, match="p_max_w"):
        optimize_clocks(TRUE, CLOCKS, eta=0.5, p_max_w=0.0)
    with pytest.raises(ValueError, match="clocks"):
        optimize_clocks(TRUE, [[1000.0, -1.0]], eta=0.5, p_max_w=700.0)


def synthetic_runs(rng, n_kernels):
    """Kernels whose DVFS shape depends on two features."""
    rows, feats = [], {}
    fc, fm = grid()
    for k in range(n_kernels):
        mem, act = rng.uniform(0, 1, 2)
        p = DVFSParams(p0_w=60.0, kappa_w=20.0, gamma_w_per_mhz=0.01 * mem,
                       c_w_per_mhz=0.02 + 0.06 * act, t0_s=1e-5,
                       alpha_s_mhz=3.0 * mem, beta_s_mhz=1.0 + act, voltage_knee_mhz=1200.0,
                       voltage_slope_per_ghz=0.8)
        name = f"k{k}"
        feats[name] = {schema.FEAT_DRAM_ACTIVE: mem, schema.FEAT_FP32_ACTIVE: act}
        rows.append(pd.DataFrame({schema.KERNEL: name, schema.SM_CLOCK_MHZ: fc,
                                  schema.MEM_CLOCK_MHZ: fm, schema.TIME_S: p.time(fc, fm),
                                  schema.POWER_W: p.power(fc, fm)}))
    return pd.concat(rows, ignore_index=True), pd.DataFrame.from_dict(feats, orient="index")


def test_kernel_parameters_and_predictor_on_synthetic_data():
    rng = np.random.default_rng(3)
    runs, feats = synthetic_runs(rng, 80)
    knee, slope = fit_voltage_curve(runs[schema.SM_CLOCK_MHZ], runs[schema.MEM_CLOCK_MHZ],
                                    runs[schema.POWER_W], runs[schema.KERNEL],
                                    knees=[1000.0, 1200.0, 1400.0], slopes=(0.4, 0.8, 1.6))
    assert (knee, slope) == (1200.0, 0.8)
    vkw = {"voltage_knee_mhz": knee, "voltage_slope_per_ghz": slope}
    table = kernel_parameters(runs, **vkw)
    assert set(schema.DVFS_SHARES) <= set(table.columns)
    train, test = table.index[:60], table.index[60:]
    pred = DVFSParameterPredictor(hidden_layer_sizes=(32,), param_grid={"learning_rate_init": [1e-2]},
                                  max_iter=400, random_state=0)
    pred.fit(feats.loc[train], table.loc[train, list(schema.DVFS_SHARES)])
    assert pred.best_params_ == {"learning_rate_init": 1e-2}
    ref = {"reference_sm_clock_mhz": table.loc[test, schema.SM_CLOCK_MHZ],
           "reference_mem_clock_mhz": table.loc[test, schema.MEM_CLOCK_MHZ],
           "reference_time_s": table.loc[test, schema.DVFS_REFERENCE_TIME_S],
           "reference_power_w": table.loc[test, schema.DVFS_REFERENCE_POWER_W]}
    models = pred.predict_params(feats.loc[test], **vkw, **ref)
    errs = []
    for k, m in zip(test, models, strict=True):
        g = runs[runs[schema.KERNEL] == k]
        t_pred = m.time(g[schema.SM_CLOCK_MHZ], g[schema.MEM_CLOCK_MHZ])
        errs.append(np.mean(np.abs(t_pred / g[schema.TIME_S] - 1)))
    assert np.mean(errs) < 0.05
    # the predicted model feeds the optimiser
    assert optimize_clocks(models[0], CLOCKS, eta=0.8, p_max_w=700.0).slowdown >= 0


@pytest.mark.shared_data
def test_rtx8000_per_application_fit(shared_data):
    from powermodels.microbench.profiling import read_nv_dvfs_benchmark

    real = read_nv_dvfs_benchmark(shared_data / "nv-dvfs-benchmark-rtx8000" / "rtx8000-dvfs-real.csv")
    assert real[schema.KERNEL].nunique() == 20
    table = kernel_parameters(real, voltage_knee_mhz=705.0, voltage_slope_per_ghz=3.0)
    errs_t, errs_p = [], []
    for k, row in table.iterrows():
        p = DVFSParams.from_values(row, voltage_knee_mhz=705.0, voltage_slope_per_ghz=3.0)
        g = real[real[schema.KERNEL] == k]
        fc, fm = g[schema.SM_CLOCK_MHZ], g[schema.MEM_CLOCK_MHZ]
        errs_t.append(np.mean(np.abs(p.time(fc, fm) / g[schema.TIME_S] - 1)))
        errs_p.append(np.mean(np.abs(p.power(fc, fm) / g[schema.POWER_W] - 1)))
    # DSO §IV-D: fitted models within ~2 % on average
    assert np.mean(errs_t) < 0.02
    assert np.mean(errs_p) < 0.02
