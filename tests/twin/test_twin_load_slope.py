"""The loads' own temperature slope μ (GPUPhysics.dynamic_per_c): physics, controller and fit."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.twin import load_preset
from powermodels.twin.fit import fit_twin
from powermodels.twin.fit_power import fit_leakage
from powermodels.twin.replay import replay

from .test_twin import known_preset, schedule


def test_a_load_warms_faster_than_the_idle_board():
    ph = GPUPhysics(dynamic_per_c=0.003)
    f, fm = 1980.0, 2619.0
    idle = ph.power_w(f, fm, 61.0) - ph.power_w(f, fm, 60.0)
    load = ph.power_w(f, fm, 61.0, 0.4, 0.1) - ph.power_w(f, fm, 60.0, 0.4, 0.1)
    above_idle_at_ref = ph.power_w(f, fm, ph.t_ref_c, 0.4, 0.1) - ph.power_w(f, fm, ph.t_ref_c)
    assert idle == pytest.approx(ph.leakage_slope_w_per_c(f))
    assert load == pytest.approx(idle + 0.003 * above_idle_at_ref)
    # μ = 0 is the thesis' model: one slope loaded and idle
    flat = GPUPhysics()
    assert flat.power_w(f, fm, 61.0, 0.4) - flat.power_w(f, fm, 60.0, 0.4) == pytest.approx(
        flat.leakage_slope_w_per_c(f))
    with pytest.raises(ValueError, match="dynamic_per_c"):
        GPUPhysics(dynamic_per_c=-0.001)


def test_presets_before_session_10_load_with_one_slope():
    for name in ("h100-sxm", "h100-sxm-session8", "h200-raw", "h200"):
        assert load_preset(name).physics.dynamic_per_c == 0.0
    # the opt-in preset: h100-sxm's power stage refitted with μ, everything else h100-sxm's
    slope, base = load_preset("h100-sxm-load-slope"), load_preset("h100-sxm")
    assert 0.002 < slope.physics.dynamic_per_c < 0.005
    assert slope.physics.thermal_poles == base.physics.thermal_poles and slope.sensor == base.sensor
    assert slope.physics.clock_recovery_mhz_per_s == base.physics.clock_recovery_mhz_per_s
    assert slope.provenance["power_refit"]["of"] == "h100-sxm"


def _series_schedule() -> pd.DataFrame:
    """The natural part of test_twin's schedule (the sensors and clock need it), then three series from idle."""
    natural = schedule()
    natural = natural.loc[natural[schema.RECORDING_PHASE] == "natural"]
    rows = list(natural.itertuples(index=False, name=None))
    t = float(natural[schema.T1_S].max())
    rows.append(("thermal", "-", -1, "idle", t, t + 6.0))
    t += 6.0
    for rep, w in enumerate(("gemm", "fma", "gemm")):
        rows.append(("thermal", w, rep, "series", t, t + 12.0))
        rows.append(("thermal", "-", -1, "idle", t + 12.0, t + 22.0))
        t += 22.0
    return pd.DataFrame(rows, columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                       schema.T0_S, schema.T1_S])


@pytest.fixture(scope="module")
def warmed():
    """Twin recordings of series from idle with μ = 0.004/°C and with μ = 0 (the same otherwise)."""
    base = known_preset()
    out = {}
    for mu in (0.004, 0.0):
        p = replace(base, physics=replace(base.physics, dynamic_per_c=mu))
        out[mu] = replay(_series_schedule(), p, seed=1, poll_s=2e-3, start_temperature_c=35.0)
    return base, out


def test_fit_recovers_the_loads_slope(warmed):
    base, recs = warmed
    fits = {mu: fit_twin(rec, name="refit", clock_workload="fma", search_cap_gains=False, dynamic_per_c="fit",
                         workload_times={"bf16": {"t_fast_s": 1.5e-3, "clock_share": 1.0}})
            for mu, rec in recs.items()}
    assert fits[0.004].physics.dynamic_per_c == pytest.approx(0.004, abs=0.0015)
    assert fits[0.0].physics.dynamic_per_c <= 0.0015
    # the idle board's slope stays the leakage's, whichever μ the loads have
    true_alpha = base.physics.leakage_slope_w_per_c(1980.0)
    for fit in fits.values():
        assert fit.fit["leakage"]["alpha_w_per_c"] == pytest.approx(true_alpha, rel=0.35)
    # by default (opt-in μ) the fit is the one before session 10: one slope, and the loads' is missed
    one = fit_twin(recs[0.004], name="refit", clock_workload="fma", search_cap_gains=False,
                   workload_times={"bf16": {"t_fast_s": 1.5e-3, "clock_share": 1.0}})
    assert one.physics.dynamic_per_c == 0.0 and one.fit["leakage"]["rmse_w"] > fits[0.004].fit["leakage"]["rmse_w"]


def test_fit_leakage_splits_idle_and_load_slopes():
    rng = np.random.default_rng(0)
    temps = np.concatenate([rng.uniform(35, 50, 300), rng.uniform(50, 70, 300)])
    work = np.array(["idle"] * 300 + ["gemm"] * 300)
    alpha, mu, idle_ref, load_ref = 0.8, 0.003, 110.0, 500.0
    power = idle_ref + alpha * (temps - 25.0) + np.where(work == "gemm", load_ref * (1 + mu * (temps - 25.0)), 0.0)
    iv = pd.DataFrame({schema.SM_CLOCK_MHZ: 1980.0, schema.WORKLOAD: work, schema.PHASE_KIND: "series",
                       schema.SINCE_S: 1.0, "die_c": temps, schema.POWER_W: power + rng.normal(0, 0.5, 600)})
    iv.loc[iv[schema.WORKLOAD] == "idle", schema.PHASE_KIND] = "idle"
    report = {}
    a, m, p_idle, loads = fit_leakage(iv, 1980.0, report)
    assert a == pytest.approx(alpha, abs=0.05) and m == pytest.approx(mu, abs=2e-4)
    assert p_idle == pytest.approx(idle_ref, abs=1.0) and loads["gemm"] == pytest.approx(load_ref, rel=0.01)
    assert report["leakage"]["load_slope_w_per_c"]["gemm"] == pytest.approx(alpha + mu * load_ref, rel=0.05)
    a0, m0, *_ = fit_leakage(iv, 1980.0, {}, mu=0.0)
    assert m0 == 0.0 and a0 > alpha + 0.3  # one pooled slope takes part of the loads' into α


def test_capped_load_holds_the_limit_with_the_loads_slope():
    """The controller predicts with the same θ as the engine: a hot capped load is not run above the limit."""
    p = known_preset()
    p = replace(p, physics=replace(p.physics, dynamic_per_c=0.01, cap_window_s=0.0, clock_period_s=0.0))
    sched = pd.DataFrame([("natural", "bf16", 0, "pressure", 0.0, 3.0), ("natural", "fma", 0, "burst", 3.0, 3.3)],
                         columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                  schema.T0_S, schema.T1_S])
    rec = replay(sched, p, seed=0, poll_s=2e-3, start_temperature_c=75.0)
    t = rec.energy[schema.T_S].to_numpy(float)
    e = rec.energy[schema.ENERGY_COUNTER_J].to_numpy(float)
    sel = (t > 0.5) & (t < 2.9)
    mean_w = (e[sel][-1] - e[sel][0]) / (t[sel][-1] - t[sel][0])
    assert mean_w <= p.physics.power_limit_w + 2.0
    assert mean_w > p.physics.power_limit_w - 40.0
