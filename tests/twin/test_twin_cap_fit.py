"""Fitting the power-cap controller under the period controller, and choosing it, on twin-made recordings."""

from dataclasses import replace

import pandas as pd
import pytest

from powermodels import schema
from powermodels.twin.fit import fit_twin
from powermodels.twin.fit_cap_choice import fit_cap_controller, recovery_error
from powermodels.twin.replay import replay

from .test_twin import known_preset, schedule

BF16 = {"bf16": {"t_fast_s": 1.5e-3, "clock_share": 1.0}}
#: two gain candidates (proportional, integral, repeat): the known one and a wrong one (keeps the test short)
GRID = ((10.0, 4.0, 0.0), (100.0, 4.0, 0.0))


def with_capped_series() -> pd.DataFrame:
    """tests/twin/test_twin.py's schedule and a 6 s capped series of the pressure load from idle (~47 s)."""
    s = schedule()
    t = float(s[schema.T1_S].max())
    extra = pd.DataFrame([("thermal", "bf16", 0, "series", t, t + 6.0), ("thermal", "-", -1, "idle", t + 6.0, t + 9.0)],
                         columns=s.columns)
    return pd.concat([s, extra], ignore_index=True)


def made_with(on_period: bool):
    """The known twin with the given controller (gains 10 / 4 per s, recovery 5000 MHz/s), and its recording."""
    known = known_preset()
    known = replace(known, physics=replace(known.physics, cap_on_period=on_period, cap_proportional=10.0,
                                           cap_gain_per_s=4.0, clock_recovery_delay_s=0.0))
    return known, replay(with_capped_series(), known, seed=3, poll_s=2e-3, start_temperature_c=40.0)


@pytest.fixture(scope="module")
def period_made():
    return made_with(True)


def test_fit_twin_fits_the_cap_controller_under_the_period_controller(period_made):
    known, rec = period_made
    fit = fit_twin(rec, name="refit", clock_workload="fma", workload_times=BF16, cap_controller="period")
    ph = fit.physics
    assert ph.cap_on_period and fit.fit["cap_controller"]["chosen"] == "period"
    assert ph.clock_recovery_mhz_per_s == pytest.approx(known.physics.clock_recovery_mhz_per_s, rel=0.15)
    assert ph.core_w_per_ghz == pytest.approx(known.physics.core_w_per_ghz, rel=0.1)
    # the refit twin, on the period controller, recovers from the cap as the recording did (issue: 25 %)
    assert abs(recovery_error(fit, rec, "fma")["error"]) < 0.1
    assert "period" in fit.provenance["cap_controller"]


def test_the_period_controllers_gains_and_rate_are_found_again(period_made):
    known, rec = period_made
    wrong = replace(known, physics=replace(known.physics, cap_on_period=False, cap_proportional=100.0,
                                           clock_recovery_mhz_per_s=2500.0))
    fit = fit_cap_controller(wrong, rec, controller="period", clock_workload="fma", grid=GRID)
    assert fit.physics.cap_on_period and fit.physics.cap_proportional == 10.0
    assert fit.physics.clock_recovery_mhz_per_s == pytest.approx(5000.0, rel=0.05)


@pytest.mark.parametrize("on_period", [True, False])
def test_auto_keeps_the_controller_that_made_the_recording(on_period, period_made):
    known, rec = period_made if on_period else made_with(False)
    base = fit_twin(rec, name="refit", clock_workload="fma", workload_times=BF16, search_cap_gains=False)
    report = {}
    fit = fit_cap_controller(base, rec, clock_workload="fma", grid=GRID, report=report)
    choice = report["cap_controller"]
    assert choice["scored_by"] == "issue_rows" and set(choice["fits"]) == {"step", "period"}
    assert choice["chosen"] == ("period" if on_period else "step")
    assert fit.physics.cap_on_period is on_period


def test_unknown_controller_is_refused(period_made):
    known, rec = period_made
    with pytest.raises(ValueError, match="controller must be one of"):
        fit_cap_controller(known, rec, controller="mean")
    with pytest.raises(ValueError, match="cap_controller must be one of"):
        fit_twin(rec, cap_controller="mean")


def test_the_given_controller_is_scored_beside_the_refit_and_the_better_kept(period_made):
    known, rec = period_made
    worse = replace(known, physics=replace(known.physics, clock_recovery_mhz_per_s=2000.0))
    report = {}
    fit = fit_cap_controller(worse, rec, controller="period", clock_workload="fma", grid=GRID, keep_given=True,
                             report=report)
    choice = report["cap_controller"]
    assert set(choice["fits"]) == {"period", "given"}
    scores = {n: p["score"]["issue_rows"] for n, p in choice["fits"].items()}
    assert choice["chosen"] == min(scores, key=scores.get) == "period"  # the given one recovers 2.5x too slowly
    assert fit.physics.clock_recovery_mhz_per_s == pytest.approx(5000.0, rel=0.05)


def test_shipped_presets_carry_their_controller_refit_and_the_session8_ones_still_load():
    from powermodels.twin.preset import load_preset, preset_names

    assert {"h100-sxm-session8", "h200-raw-session8"} <= set(preset_names())
    for name in ("h100-sxm", "h200-raw"):
        new, old = load_preset(name), load_preset(f"{name}-session8")
        refit = new.provenance["cap_controller_refit"]
        assert set(refit["scores"]) == {"step", "period", "given"} and old.name == f"{name}-session8"
        assert new.physics.cap_on_period is (refit["chosen"] == "period")
        assert refit["chosen"] == min(refit["scores"], key=lambda n: refit["scores"][n]["issue_rows"])
        assert new.workloads.keys() == old.workloads.keys() and new.physics.thermal_poles == old.physics.thermal_poles
    # h100-sxm: the step controller refitted (its recovery rate by replay); h200-raw kept its controller
    assert load_preset("h100-sxm").physics.clock_recovery_mhz_per_s > load_preset("h100-sxm-session8").physics.clock_recovery_mhz_per_s
    assert load_preset("h200-raw").physics == load_preset("h200-raw-session8").physics
