"""The ``counter`` protocol on the simulated GPU: every preset, alignment, uncertainty, fallback.

The simulated counter is exact (whole mJ) and, with ``energy_jitter_s``, its
updates move off a strict grid like the real ones, so the only error left is
where the window's ends are placed between two counter reads (4 ms apart):
within 1 % of the simulated truth, and inside the row's stated uncertainty.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.simulated import PRESETS, SimulatedGPU
from powermodels.measuring.protocols import PROTOCOLS, default_protocol, make_protocol
from powermodels.measuring.protocols.counter import (
    Counter,
    aligned_window,
    counter_updates,
    launches_inside,
)
from powermodels.measuring.runner import SimulatedRunner


def _preset(name, jitter=True):
    p = PRESETS[name]
    return dataclasses.replace(p, energy_jitter_s=0.2 * p.energy_period_s) if jitter else p


def _runner(preset="hopper", seed=0, jitter=True):
    return SimulatedRunner(SimulatedGPU(preset=_preset(preset, jitter), seed=seed))


def _err(row):
    return row[schema.ENERGY_J] / row[schema.REFERENCE_ENERGY_J] - 1.0


@pytest.mark.parametrize("preset", sorted(PRESETS))
@pytest.mark.parametrize("kernel", ["fp32", "stream_triad"])
def test_every_preset_within_1_percent_of_the_truth_in_under_a_second(preset, kernel):
    runner = _runner(preset, seed=3)
    first = make_protocol("counter").measure(runner, kernel).row  # learns α (≤ 10 s warm-up), caches it
    assert first[schema.ALPHA_SOURCE] == "learned" and abs(_err(first)) < 0.01
    runner.idle(0.5)
    t0 = runner.now()
    m = make_protocol("counter").measure(runner, kernel)
    row = m.row
    assert runner.now() - t0 <= 1.0  # simulated device time: the wall time on a GPU, once α is known
    assert row[schema.PROTOCOL] == "counter"
    assert abs(_err(row)) < 0.01
    sigma = row[schema.ENERGY_UNCERTAINTY_J]
    assert 0 < sigma < 0.01 * row[schema.ENERGY_J]
    assert abs(row[schema.ENERGY_J] - row[schema.REFERENCE_ENERGY_J]) <= 3 * sigma + 1e-12
    schema.validate_run_table(m.run_table(), required=[schema.REFERENCE_ENERGY_J])
    schema.validate_trace_table(m.trace)
    assert row[schema.LAUNCHES] == len(m.launches)
    assert row[schema.POWER_W] == pytest.approx(row[schema.ENERGY_J] / row[schema.TIME_S])


def test_window_between_a_cold_start_and_a_power_change_is_aligned_to_the_update():
    """Idle, then 0.6 s of fp32, then 0.6 s of stream_copy (far less power), back to back.

    The window for the fp32 launches must stop at the last counter update
    before the switch and start at the first after the load began: placed
    one update (100 ms) late it would charge ~100 ms of stream_copy's
    power to fp32 launches, one update early ~100 ms of idle — either is
    several percent off, while the aligned window is within 0.5 %.
    """
    runner = _runner("hopper", seed=5)
    runner.idle(0.7)
    a = runner.run("fp32", None, int(0.6 / runner.launch_time_s("fp32", None)))
    b = runner.run("stream_copy", None, int(0.6 / runner.launch_time_s("stream_copy", None)))
    runner.idle(0.2)
    trace = runner.trace(a[0, 0] - 0.5, b[-1, 1] + 0.1)
    w = aligned_window(trace, a, a[0, 0], a[-1, 1])
    assert w is not None and w.updates >= 3
    inner = (a[:, 0] >= w.start_s) & (a[:, 1] <= w.end_s)
    truth = runner.reference_energy_j(a[inner]) / inner.sum()
    assert abs(w.energy_per_launch_j / truth - 1) < 0.005
    # the estimated update instants are those of the counter: within half a bracket of a change
    lo, hi, _ = counter_updates(trace)
    gpu = runner.gpu
    for t_est, half in ((w.start_s, w.start_half_s), (w.end_s, w.end_half_s)):
        before = gpu._counter_at(np.array([t_est - half - 1e-9]))[0]
        after = gpu._counter_at(np.array([t_est + half]))[0]
        assert after > before  # the update really lies inside the bracket
    # counter values paired with the neighbouring update's instant (off by one) are far off
    mids = 0.5 * (lo + hi)
    k = int(np.flatnonzero(np.isclose(mids, w.start_s))[0])
    j = int(np.flatnonzero(np.isclose(mids, w.end_s))[0])
    _, _, joules = counter_updates(trace)
    n = launches_inside(a, mids[k], mids[j])
    for k2, j2 in ((k - 1, j), (k, j + 1), (k + 1, j), (k, j - 1)):
        assert abs((joules[j2] - joules[k2]) / n / truth - 1) > 0.05


def test_counter_updates_brackets_and_bad_counters():
    trace = pd.DataFrame({
        schema.T_S: [0.0, 0.001, 0.004, 0.005, 0.008, 0.012, 0.016],
        schema.ENERGY_COUNTER_J: [10.0, np.nan, 10.0, np.nan, 10.5, 10.5, 11.0],
    })
    lo, hi, joules = counter_updates(trace)
    np.testing.assert_allclose(lo, [0.004, 0.012])
    np.testing.assert_allclose(hi, [0.008, 0.016])
    np.testing.assert_allclose(joules, [10.5, 11.0])
    with pytest.raises(ValueError, match="decreased"):
        counter_updates(trace.assign(**{schema.ENERGY_COUNTER_J: [10.0, np.nan, 9.0, np.nan, 9.0, 9.0, 9.0]}))
    with pytest.raises(ValueError, match="energy_counter_j"):
        counter_updates(trace.drop(columns=[schema.ENERGY_COUNTER_J]))


def test_launches_inside_counts_fractions_at_the_edges():
    iv = np.array([[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0]])
    assert launches_inside(iv, 0.5, 3.25) == pytest.approx(0.5 + 1 + 1 + 0.25)
    assert launches_inside(iv, 5.0, 6.0) == 0.0


def test_uncertainty_grows_with_the_bracket_and_the_quantum():
    from powermodels.measuring.protocols.counter import CounterWindow

    w = CounterWindow(0.0, 1.0, 0.002, 0.002, 300.0, 1000.0, 10, 1e-3)
    wide = dataclasses.replace(w, start_half_s=0.02, end_half_s=0.02)
    assert w.uncertainty_j == pytest.approx(0.3 * math.hypot(0.002, 0.002) / math.sqrt(3), rel=1e-3)
    assert wide.uncertainty_j > 9 * w.uncertainty_j
    assert w.power_w == 300.0 and w.energy_per_launch_j == 0.3


def test_short_and_long_launches_10us_to_100ms():
    from powermodels.devices.simulated import SimulatedWorkload

    class Twin:  # anything the simulated runner can run: a workload with a twin
        def __init__(self, t):
            self.w = SimulatedWorkload(f"t{t}", core_work=t * 1980.0, activity=0.9, mem_activity=0.1)

    for t in (1e-5, 0.1):
        runner = _runner("hopper", seed=7)
        twin = Twin(t).w
        runner._workload = lambda workload, config, _w=twin: _w  # the runner's hook for twins
        Counter().measure(runner, "fp32")  # the first measurement learns α
        runner.idle(0.3)
        t0 = runner.now()
        m = Counter().measure(runner, "fp32")
        assert abs(_err(m.row)) < 0.01, t
        assert runner.now() - t0 <= 1.0 + 1e-9
        assert m.row[schema.TIME_S] == pytest.approx(t, rel=1e-6)


def test_a_given_alpha_moves_the_figure_at_the_reference_temperature_not_the_raw_energy():
    base = make_protocol("counter", alpha_w_per_c=0.9).measure(_runner(seed=2), "sgemm").row
    warm = make_protocol("counter", alpha_w_per_c=0.9, alpha_uncertainty_w_per_c=0.1,
                         reference_temperature_c=base[schema.TEMPERATURE_C] + 10).measure(_runner(seed=2), "sgemm").row
    assert warm[schema.ENERGY_J] == pytest.approx(base[schema.ENERGY_J], rel=1e-9)  # the raw figure stays
    assert warm[schema.POWER_AT_REF_W] == pytest.approx(base[schema.POWER_W] + 9.0, rel=1e-9)
    assert warm[schema.ENERGY_AT_REF_J] == pytest.approx(warm[schema.POWER_AT_REF_W] * warm[schema.TIME_S], rel=1e-9)
    assert warm[schema.ALPHA_SOURCE] == "given" and warm[schema.REFERENCE_TEMPERATURE_C] == pytest.approx(
        base[schema.TEMPERATURE_C] + 10)
    # α's uncertainty over 10 °C is carried: t·|ΔT|·σα at least
    assert warm[schema.ENERGY_AT_REF_UNCERTAINTY_J] >= warm[schema.TIME_S] * 10 * 0.1 * 0.999


def test_every_row_states_its_thermal_state():
    row = make_protocol("counter").measure(_runner(seed=5), "sgemm").row
    for key in (schema.TEMPERATURE_START_C, schema.TEMPERATURE_END_C, schema.ENERGY_AT_REF_J,
                schema.POWER_AT_REF_W, schema.REFERENCE_TEMPERATURE_C, schema.CORRECTION_ALPHA_W_PER_C,
                schema.ALPHA_UNCERTAINTY_W_PER_C):
        assert np.isfinite(row[key]), key
    assert row[schema.ALPHA_SOURCE] == "learned" and row[schema.ALPHA_REGIME] == "fixed_clock"
    assert row[schema.TEMPERATURE_START_C] <= row[schema.TEMPERATURE_C] <= row[schema.TEMPERATURE_END_C]
    assert (row[schema.TRANSIENT], row[schema.SETTLE_S], row[schema.LAUNCH_BOUND]) == (False, 0.0, False)
    assert row[schema.LAUNCH_MODE] == "back_to_back"
    schema.validate_run_table(pd.DataFrame([row]))


@pytest.mark.parametrize("params, match", [
    ({"window_s": 0}, "window_s"),
    ({"min_updates": 0}, "min_updates"),
    ({"settle_s": -1}, "settle_s"),
    ({"reference_temperature_c": "hot"}, "reference_temperature_c"),
    ({"reference_temperature_c": 400}, "reference_temperature_c"),
    ({"alpha_w_per_c": math.nan}, "alpha"),
    ({"alpha_source": "guess"}, "alpha_source"),
    ({"launch": "eager"}, "launch"),
    ({"max_settle_s": -1}, "max_settle_s"),
    ({"learn_alpha": "yes"}, "learn_alpha"),
])
def test_bad_parameters_are_named(params, match):
    with pytest.raises(ValueError, match=match):
        make_protocol("counter", **params).measure(_runner(), "fp32")


class _NoCounterRunner(SimulatedRunner):
    """A simulated GPU whose driver reports no total-energy counter."""

    def __init__(self):
        super().__init__(SimulatedGPU(seed=1))
        self.gpu.read_energy_j = lambda: math.nan

    def trace(self, start_s, end_s, run_id="run"):
        return super().trace(start_s, end_s, run_id).assign(**{schema.ENERGY_COUNTER_J: np.nan})


def test_no_counter_falls_back_to_good_practice_with_a_warning():
    with pytest.warns(RuntimeWarning, match="no energy counter"):
        m = make_protocol("counter").measure(_NoCounterRunner(), "fp32")
    assert m.row[schema.PROTOCOL] == "good_practice"
    assert abs(_err(m.row)) < 0.04
    with pytest.warns(RuntimeWarning, match=r"good_practice.*ignoring \['window_s'\]"):
        p = default_protocol(_NoCounterRunner(), window_s=0.5, trials=2)
    assert p.name == "good_practice" and p.trials == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = default_protocol(_runner(), window_s=0.5)
    assert p.name == "counter" and p.window_s == 0.5
    assert PROTOCOLS["counter"] is Counter


def test_a_real_runners_counter_reads_are_sped_up_during_the_run_and_restored():
    import types

    runner = _runner(seed=4)
    runner.sampler = types.SimpleNamespace(energy_period_s=0.02)  # as CupyRunner's Sampler
    seen = []
    trace = runner.trace

    def spy(*a, **k):
        seen.append(runner.sampler.energy_period_s)
        return trace(*a, **k)

    runner.trace = spy
    Counter(counter_read_s=0.003, alpha_w_per_c=0.9).measure(runner, "fp32")
    assert seen and set(seen) == {0.003}
    assert runner.sampler.energy_period_s == 0.02


def test_measure_command_uses_the_counter_protocol_by_default(capsys):
    from powermodels.cli import main

    assert main(["measure", "--device", "simulated", "--kernel", "stream_copy"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith("protocol counter")
