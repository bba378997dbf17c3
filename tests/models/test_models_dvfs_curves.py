"""Curve targets of the DVFS parameter predictor (models/dvfs_curves.py) and weighted eq. 1-2 fits."""

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.dvfs_curves import (
    curve_clocks,
    curve_targets,
    params_from_curves,
    reference_pair,
)
from powermodels.models.dvfs_fit import fit_power, fit_time
from powermodels.models.dvfs_params import DVFSParams
from powermodels.models.dvfs_targets import kernel_parameters

VK = {"voltage_knee_mhz": 900.0, "voltage_slope_per_ghz": 0.5}
CLOCKS = np.array([[fc, fm] for fm in (5000.0, 6500.0) for fc in (705.0, 945.0, 1215.0, 1500.0, 1710.0)])
KERNELS = {
    "compute:a": DVFSParams(40.0, 20.0, 0.004, 0.05, 1e-4, 0.5, 2.0, **VK),
    "memory:b": DVFSParams(60.0, 10.0, 0.008, 0.02, 2e-4, 9.0, 0.8, **VK),
}


def _sweep(kernels=KERNELS, clocks=CLOCKS):
    rows = []
    for k, prm in kernels.items():
        for fc, fm in clocks:
            rows.append({schema.KERNEL: k, schema.SM_CLOCK_MHZ: fc, schema.MEM_CLOCK_MHZ: fm,
                         schema.TIME_S: float(prm.time(fc, fm)), schema.POWER_W: float(prm.power(fc, fm))})
    return pd.DataFrame(rows)


def test_sample_weight_pulls_the_fit_through_a_point_and_is_checked():
    fc = np.array([705.0, 945.0, 1215.0, 1500.0, 1710.0])
    fm = np.full(5, 6500.0)
    t = np.array([2.0, 1.6, 1.3, 1.1, 1.2])  # the last point is off the 1/f law
    plain = DVFSParams(*np.zeros(4), *fit_time(fc, fm, t, loss="squared"))
    heavy = DVFSParams(*np.zeros(4), *fit_time(fc, fm, t, loss="squared",
                                              sample_weight=[1, 1, 1, 1, 100]))
    assert abs(heavy.time(1710.0, 6500.0) - 1.2) < abs(plain.time(1710.0, 6500.0) - 1.2)
    assert abs(heavy.time(1710.0, 6500.0) / 1.2 - 1) < 0.01
    p = np.array([80.0, 100.0, 130.0, 160.0, 200.0])
    unit = fit_power(fc, fm, p, 900.0, 0.5, sample_weight=np.ones(5))
    np.testing.assert_allclose(unit, fit_power(fc, fm, p, 900.0, 0.5))
    with pytest.raises(ValueError, match="sample_weight"):
        fit_time(fc, fm, t, sample_weight=[1, 1, -1, 1, 1])
    with pytest.raises(ValueError, match="sample_weight"):
        fit_power(fc, fm, p, 900.0, 0.5, sample_weight=[1, 1])


def test_curve_targets_are_log_ratios_to_the_reference_pair():
    runs = _sweep()
    table = kernel_parameters(runs, **VK, detect=False)
    clocks = curve_clocks(runs)
    assert clocks.shape == (10, 2) and reference_pair(clocks) == (1710.0, 6500.0)
    y = curve_targets(runs, table, clocks)
    assert y.shape == (2, 20)
    prm = KERNELS["memory:b"]
    i = list(table.index).index("memory:b")
    expect_t = np.log(prm.time(clocks[:, 0], clocks[:, 1]) / prm.time(1710.0, 6500.0))
    expect_p = np.log(prm.power(clocks[:, 0], clocks[:, 1]) / prm.power(1710.0, 6500.0))
    np.testing.assert_allclose(y[i], np.concatenate([expect_t, expect_p]), atol=1e-12)


def test_params_from_curves_round_trip_the_generating_model():
    runs = _sweep()
    table = kernel_parameters(runs, **VK, detect=False)
    clocks = curve_clocks(runs)
    y = curve_targets(runs, table, clocks)
    ref = [KERNELS[k] for k in table.index]
    got = params_from_curves(y, clocks, reference_sm_clock_mhz=1710.0, reference_mem_clock_mhz=6500.0,
                             reference_time_s=[p.time(1710.0, 6500.0) for p in ref],
                             reference_power_w=[p.power(1710.0, 6500.0) for p in ref], **VK)
    for g, r in zip(got, ref, strict=True):
        np.testing.assert_allclose(g.time(clocks[:, 0], clocks[:, 1]), r.time(clocks[:, 0], clocks[:, 1]),
                                   rtol=2e-3)
        np.testing.assert_allclose(g.power(clocks[:, 0], clocks[:, 1]),
                                   r.power(clocks[:, 0], clocks[:, 1]), rtol=2e-3)


def test_curve_errors_name_what_is_wrong():
    runs = _sweep()
    table = kernel_parameters(runs, **VK, detect=False)
    clocks = curve_clocks(runs)
    y = curve_targets(runs, table, clocks)
    kw = {"reference_mem_clock_mhz": 6500.0, "reference_time_s": 1.0, "reference_power_w": 100.0, **VK}
    with pytest.raises(ValueError, match="reference clocks 1710/6500"):
        params_from_curves(y, clocks, reference_sm_clock_mhz=1500.0, **kw)
    with pytest.raises(ValueError, match="expected 20 finite values"):
        params_from_curves(y[:, :10], clocks, reference_sm_clock_mhz=1710.0, **kw)
    sparse = pd.concat([_sweep({"a:x": KERNELS["compute:a"]}, CLOCKS[:5]),
                        _sweep({"b:y": KERNELS["memory:b"]}, CLOCKS[5:])])
    with pytest.raises(ValueError, match="at least 3 clock pairs"):
        curve_clocks(sparse)
