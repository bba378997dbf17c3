"""The power-cap controller on its clock period: a mix of loads faster than the period settles at the cap."""

import numpy as np
import pytest

from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import SimulatedGPU
from powermodels.devices.simulated_workload import SimulatedWorkload

LIMIT_W = 500.0
PERIOD_S = 0.0185  # the h100-sxm preset's clock period
#: 1 ms per launch at 1980 MHz; HEAVY alone is capped at LIMIT_W, LIGHT alone (~400 W) is not
HEAVY = SimulatedWorkload("heavy", core_work=1.98, activity=1.0, mem_activity=1.0)
LIGHT = SimulatedWorkload("light", core_work=1.98, activity=0.6, mem_activity=0.1)


def run(on_period: bool, cycle, seconds=2.0, settle_s=0.5):
    """Repeat ``cycle`` (``(workload, launches)`` pairs) for ``seconds``; mean power and SM clocks after ``settle_s``."""
    ph = GPUPhysics(clock_period_s=PERIOD_S, cap_on_period=on_period, power_limit_w=LIMIT_W)
    gpu = SimulatedGPU(physics=ph, seed=0, history_s=30.0)
    gpu.idle(0.2)
    t0 = gpu.now()
    while gpu.now() - t0 < seconds:
        for w, n in cycle:
            gpu.run(w, launches=n)
    t1 = gpu.now()
    e = gpu._energy(np.array([t0 + settle_s, t1]))
    clocks = gpu._clocks[gpu._fi.data[gpu._step_at(np.arange(t0 + settle_s, t1, 1e-3))]]
    return float(e[1] - e[0]) / (t1 - t0 - settle_s), clocks


@pytest.fixture(scope="module")
def own_clocks():
    """Each load's own clock under the cap: HEAVY's capped clock, LIGHT's (uncapped) top clock."""
    return float(np.median(run(True, [(HEAVY, 10)])[1])), float(np.median(run(True, [(LIGHT, 10)])[1]))


def test_a_mix_faster_than_the_period_settles_at_the_cap_between_the_loads_clocks(own_clocks):
    heavy_mhz, light_mhz = own_clocks
    assert heavy_mhz < light_mhz - 200.0  # the two loads' own clocks are far apart
    # a 10 ms cycle (6 ms HEAVY, 4 ms LIGHT) is shorter than the 18.5 ms clock period
    power, clocks = run(True, [(HEAVY, 6), (LIGHT, 4)])
    assert power == pytest.approx(LIMIT_W, rel=0.02)
    assert heavy_mhz + 60.0 < float(np.mean(clocks)) < light_mhz - 30.0


def test_the_step_controller_holds_the_mix_at_the_heavy_loads_capped_clock(own_clocks):
    # cap_on_period=False (the original controller): each HEAVY stretch pulls the clock down at once
    heavy_mhz, _ = own_clocks
    power, clocks = run(False, [(HEAVY, 6), (LIGHT, 4)])
    assert power < LIMIT_W - 50.0
    assert float(np.median(clocks)) <= heavy_mhz + 30.0


def test_a_single_capped_load_still_settles_at_the_cap():
    for on in (False, True):
        power, clocks = run(on, [(HEAVY, 10)])
        assert power == pytest.approx(LIMIT_W, rel=0.02)
        assert float(np.median(clocks)) < 1800.0


def test_cap_on_period_must_be_a_bool():
    with pytest.raises(ValueError, match="cap_on_period"):
        GPUPhysics(cap_on_period=1.0)
