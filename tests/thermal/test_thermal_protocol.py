"""The counter protocol's thermal state on the simulated GPU: launch modes, the power cap, the CLI."""

import numpy as np
import pytest

from powermodels import schema
from powermodels.measuring.protocols import make_protocol
from powermodels.measuring.runner import make_runner
from powermodels.workloads import CallableWorkload, SimulatedTwin


def small(name="small"):
    """A ~6 µs elementwise call (issue 19: 5.8 µs graph-batched, 10.6 µs as called on the H100)."""
    return CallableWorkload(lambda: None, simulated=SimulatedTwin(time_s=6e-6, activity=0.3, mem_activity=0.6),
                            name=name)


def test_graph_and_as_called_differ_by_the_hosts_gaps_and_the_row_says_which():
    w = small()
    with make_runner("simulated", host_call_s=10.6e-6) as runner:
        counter = make_protocol("counter", alpha_w_per_c=1.0)
        graph = counter.measure(runner, w).row
        called = make_protocol("counter", alpha_w_per_c=1.0, launch="as-called").measure(runner, w).row
    assert graph[schema.LAUNCH_MODE] == "graph" and not graph[schema.LAUNCH_BOUND]
    assert graph[schema.TIME_S] == pytest.approx(6e-6, rel=0.02)
    assert called[schema.LAUNCH_MODE] == "as_called" and called[schema.LAUNCH_BOUND]
    assert called[schema.TIME_S] == pytest.approx(10.6e-6, rel=0.02)
    # the idle GPU in the host's gaps is charged to each call: more energy per call, less power
    assert called[schema.ENERGY_J] > 1.1 * graph[schema.ENERGY_J]
    assert called[schema.POWER_W] < graph[schema.POWER_W]


def test_a_long_kernel_is_never_launch_bound_as_called():
    w = CallableWorkload(lambda: None, simulated=SimulatedTwin(time_s=2e-3, activity=0.9), name="long")
    with make_runner("simulated", host_call_s=10.6e-6) as runner:
        row = make_protocol("counter", alpha_w_per_c=1.0, launch="as_called").measure(runner, w).row
    assert row[schema.LAUNCH_MODE] == "as_called" and not row[schema.LAUNCH_BOUND]


@pytest.fixture
def capped_twin():
    """The twin fitted to the real H100 (issue 27): its cap controller overshoots from idle."""
    from powermodels.twin.preset import load_preset

    gpu = load_preset("h100-sxm").gpu(seed=0)
    runner = make_runner(gpu)
    yield runner
    runner.close()


def bf16():
    return CallableWorkload(lambda: None, simulated=SimulatedTwin(time_s=2 * 8192**3 / 650e12, activity=1.0,
                                                                  mem_activity=0.8), name="bf16")


def test_a_capped_workload_waits_for_the_controller_or_says_transient(capped_twin):
    capped_twin.idle(30.0)
    row = make_protocol("counter", alpha_w_per_c=0.0).measure(capped_twin, bf16()).row
    assert row[schema.THROTTLE_POWER_CAP_FRACTION] > 0.5
    assert row[schema.SETTLE_S] > 0 or row[schema.TRANSIENT]
    capped_twin.idle(30.0)
    short = make_protocol("counter", alpha_w_per_c=0.0, max_settle_s=0.0).measure(capped_twin, bf16()).row
    assert short[schema.SETTLE_S] == 0.0 and short[schema.TRANSIENT]


def test_capped_energy_does_not_depend_on_starting_cold(capped_twin):
    w = bf16()
    capped_twin.idle(30.0)
    cold = make_protocol("counter", alpha_w_per_c=0.0).measure(capped_twin, w).row
    capped_twin.run(w, None, int(20.0 / w.simulated().time_s(1400.0, 2619.0)))
    hot = make_protocol("counter", alpha_w_per_c=0.0).measure(capped_twin, w).row
    raw_cold = make_protocol("counter", alpha_w_per_c=0.0, max_settle_s=0.0)
    capped_twin.idle(30.0)
    unsettled = raw_cold.measure(capped_twin, w).row
    gap = abs(cold[schema.ENERGY_J] / hot[schema.ENERGY_J] - 1)
    assert gap < abs(unsettled[schema.ENERGY_J] / hot[schema.ENERGY_J] - 1)
    assert gap < 0.02


def test_cli_ref_temperature_and_launch(capsys):
    from powermodels.cli import main

    assert main(["measure", "--device", "simulated", "--kernel", "sgemm", "--ref-temperature", "55"]) == 0
    out = capsys.readouterr().out
    assert "energy_at_ref_j" in out and "at 55.0 °C" in out and "learned" in out
    with pytest.raises(SystemExit) as stop:
        main(["measure", "--device", "simulated", "--kernel", "sgemm", "--ref-temperature", "warm"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--ref-temperature" in err and "'warm'" in err
    with pytest.raises(SystemExit):
        main(["measure", "--device", "simulated", "--kernel", "sgemm", "--ref-temperature", "nan"])
    assert "not a die temperature" in capsys.readouterr().err
    assert main(["measure", "--device", "simulated", "--kernel", "sgemm", "--protocol", "naive",
                 "--ref-temperature", "50"]) != 0
    assert "only the counter protocol" in capsys.readouterr().err


def test_reference_temperature_parameter_is_checked_before_measuring():
    with make_runner("simulated") as runner:
        t0 = runner.now()
        with pytest.raises(ValueError, match="reference_temperature_c"):
            make_protocol("counter", reference_temperature_c=float("inf")).measure(runner, "sgemm")
        assert runner.now() == t0
        assert np.isfinite(make_protocol("counter", learn_alpha=False, alpha_w_per_c=0.5)
                           .measure(runner, "sgemm").row[schema.ENERGY_AT_REF_J])
