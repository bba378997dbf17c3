"""h100-sxm with the cap controller on its clock period: a ladder-like mix settles at the cap (docs/twin.md)."""

import numpy as np
import pytest

from powermodels.twin.preset import load_preset, with_cap_controller

PRESSURE, WORKLOAD = "torch_bf16_matmul_8192", "cupy_fp32_matmul_4096"


def run(on_period: bool, cycle, seconds=2.5, settle_s=1.0):
    """Repeat ``cycle`` (``(workload, launches)`` pairs) on h100-sxm; mean power and SM clocks after ``settle_s``."""
    preset = with_cap_controller(load_preset("h100-sxm"), "period" if on_period else "step")
    gpu = preset.gpu(seed=1, history_s=30.0)
    gpu.start_at_temperature(50.0)
    gpu.idle(0.3)
    t0 = gpu.now()
    while gpu.now() - t0 < seconds:
        for name, n in cycle:
            gpu.run(preset.workload(name).workload, launches=n)
    t1 = gpu.now()
    e = gpu._energy(np.array([t0 + settle_s, t1]))
    clocks = gpu._clocks[gpu._fi.data[gpu._step_at(np.arange(t0 + settle_s, t1, 1e-3))]]
    return float(e[1] - e[0]) / (t1 - t0 - settle_s), clocks, preset.physics.power_limit_w


#: one ~10 ms cycle: 6 bf16 GEMMs (~1.4 ms each at the capped clock) then 1 fp32 GEMM (~1.7 ms), as the
#: ladder of datasets/h100-2026-11-27 alternates them (pressure share ~0.8)
CYCLE = [(PRESSURE, 6), (WORKLOAD, 1)]


@pytest.fixture(scope="module")
def own_clocks():
    """Each load's own clock on the period controller: the bf16 GEMM's capped clock, the fp32 GEMM's."""
    return tuple(float(np.median(run(True, [(name, 20)])[1])) for name in (PRESSURE, WORKLOAD))


def test_a_ladder_mix_settles_at_the_cap_between_the_loads_own_clocks(own_clocks):
    bf16_mhz, fp32_mhz = own_clocks
    power, clocks, limit = run(True, CYCLE)
    assert power == pytest.approx(limit, rel=0.025)
    assert bf16_mhz + 45.0 < float(np.median(clocks)) < fp32_mhz - 45.0


def test_the_step_controller_sits_at_the_pressures_capped_clock(own_clocks):
    # the original controller (cap_on_period=False): what docs/twin.md's ladder section measured
    bf16_mhz, _ = own_clocks
    power, clocks, limit = run(False, CYCLE)
    assert power < limit - 40.0
    assert float(np.median(clocks)) <= bf16_mhz + 45.0


def test_the_controller_choice_changes_only_cap_on_period():
    shipped = load_preset("h100-sxm")
    assert with_cap_controller(shipped, "preset") is shipped
    assert not shipped.physics.cap_on_period  # the fitted presets keep the step controller (docs/twin.md)
    period = with_cap_controller(shipped, "period")
    assert period.physics.cap_on_period and period.physics.clock_period_s == shipped.physics.clock_period_s
    assert period.workloads == shipped.workloads
    with pytest.raises(ValueError, match="cap controller must be one of"):
        with_cap_controller(shipped, "mean")
