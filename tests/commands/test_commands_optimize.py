"""``powermodels optimize`` (commands/optimize.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.cli import main
from powermodels.commands.optimize import recommend
from powermodels.models.dvfs import DVFSParams

MEM_BOUND = DVFSParams(p0_w=60.0, kappa_w=30.0, gamma_w_per_mhz=0.02, c_w_per_mhz=0.08,
                       t0_s=1e-5, alpha_s_mhz=6.0, beta_s_mhz=2.0, voltage_knee_mhz=1200.0,
                       voltage_slope_per_ghz=0.8)


def sweep_table(params, name="k"):
    fc, fm = np.meshgrid(np.arange(900.0, 1981.0, 90.0), [1800.0, 2619.0])
    fc, fm = fc.ravel(), fm.ravel()
    return pd.DataFrame({schema.KERNEL: name, schema.SM_CLOCK_MHZ: fc, schema.MEM_CLOCK_MHZ: fm,
                         schema.TIME_S: params.time(fc, fm), schema.POWER_W: params.power(fc, fm)})


def test_recommend_memory_bound_kernel_lowers_core_clock():
    recs, _ = recommend(sweep_table(MEM_BOUND), max_slowdown=0.05, p_max_w=700.0,
                        voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8)
    r = recs.iloc[0]
    # ridge at fc = (β/α)·f_m = 873 MHz at 2619: no slowdown down to the lowest swept clock
    assert r[schema.SM_CLOCK_MHZ] == 900.0 and r[schema.MEM_CLOCK_MHZ] == 2619.0
    assert r["measured_slowdown"] == pytest.approx(0.0, abs=1e-9)
    assert r["measured_energy_saving"] == pytest.approx(r["predicted_energy_saving"], rel=1e-3)
    assert r["measured_energy_saving"] > 0.2


def test_cli_runs_file(tmp_path, capsys):
    path = tmp_path / "sweep.csv"
    sweep_table(MEM_BOUND).to_csv(path, index=False)
    out_csv = tmp_path / "rec.csv"
    assert main(["optimize", "--runs", str(path), "--p-max-w", "700", "--output", str(out_csv)]) == 0
    assert "predicted_energy_saving" in capsys.readouterr().out
    assert pd.read_csv(out_csv)[schema.SM_CLOCK_MHZ].iloc[0] == 900.0
    assert main(["optimize", "--runs", str(path), "--kernel", "nope"]) == 1


def test_cli_simulated(capsys):
    assert main(["optimize", "--simulated", "--workload", "fp32", "--max-slowdown", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "fp32" in out and "measured_slowdown" in out


def test_cli_features_with_saved_predictor(tmp_path, capsys):
    from powermodels.io import save_calibration
    from powermodels.models.dvfs_predictor import DVFSParameterPredictor, kernel_parameters

    rng = np.random.default_rng(0)
    runs, feats = [], {}
    for k in range(12):
        mem = rng.uniform(0, 1)
        p = DVFSParams(p0_w=60.0, kappa_w=20.0, gamma_w_per_mhz=0.01, c_w_per_mhz=0.06,
                       t0_s=1e-5, alpha_s_mhz=6.0 * mem, beta_s_mhz=2.0,
                       voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8)
        runs.append(sweep_table(p, f"k{k}"))
        feats[f"k{k}"] = {schema.FEAT_DRAM_ACTIVE: mem}
    runs = pd.concat(runs, ignore_index=True)
    table = kernel_parameters(runs, voltage_knee_mhz=1200.0, voltage_slope_per_ghz=0.8)
    X = pd.DataFrame.from_dict(feats, orient="index").loc[table.index]
    pred = DVFSParameterPredictor(hidden_layer_sizes=(8,), param_grid={}, max_iter=300,
                                  random_state=0).fit(X, table[list(schema.DVFS_SHARES)])
    cal = save_calibration(pred, tmp_path / "p.pmcal",
                           {"voltage_knee_mhz": 1200.0, "voltage_slope_per_ghz": 0.8})
    prof = X.reset_index(names=schema.KERNEL).assign(**{
        schema.SM_CLOCK_MHZ: table[schema.SM_CLOCK_MHZ].to_numpy(),
        schema.MEM_CLOCK_MHZ: table[schema.MEM_CLOCK_MHZ].to_numpy(),
        schema.TIME_S: table[schema.DVFS_REFERENCE_TIME_S].to_numpy(),
        schema.POWER_W: table[schema.DVFS_REFERENCE_POWER_W].to_numpy()})
    path = tmp_path / "feats.csv"
    prof.to_csv(path, index=False)
    out_csv = tmp_path / "rec.csv"
    assert main(["optimize", "--features", str(path), "--predictor", str(cal), "--device",
                 "simulated", "--output", str(out_csv)]) == 0
    recs = pd.read_csv(out_csv)
    assert len(recs) == 12 and (recs["predicted_slowdown"] <= 0.05 + 1e-9).all()
    assert "supported clock pairs" in capsys.readouterr().out
    # without the predictor the features path refuses
    assert main(["optimize", "--features", str(path)]) == 1


def test_cli_round_off_prints_as_zero_and_output_folder_checked(tmp_path, capsys):
    from powermodels.commands.optimize import _fmt

    assert _fmt(-1.561e-13) == "0" and _fmt(0.04762) == "0.04762"
    path = tmp_path / "sweep.csv"
    sweep_table(MEM_BOUND).to_csv(path, index=False)
    assert main(["optimize", "--runs", str(path), "--output", str(tmp_path / "no" / "rec.csv")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--output: folder" in err[0] and "does not exist" in err[0]
