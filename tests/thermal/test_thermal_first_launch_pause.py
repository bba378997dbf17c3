"""A host pause inside the one launch that decides the batching must not turn a µs kernel host-paced.

The counter protocol, the 12 s reference and the α warm-up time one launch first
and batch launches shorter than 200 µs into CUDA graphs. One launch is two CUDA
events around one host call; a pause of the host between them (the garbage
collector, another thread holding the GIL) lengthens it, never shortens it. On the
real H200 GPU-0a8f0427 (datasets/h200-2026-11-27/thermal_0a8f0427) the 12 s
reference of a 21 µs CuPy add ran without graphs: 25.7 µs per launch (the host's
pace), 356.5 W against its graph rows' 395–398 W, 9.2 % more energy per launch.
Here the simulated runner's host takes 25.7 µs per call and pauses 5 ms inside
every single-launch call (simulated: tests the code only).
"""

from __future__ import annotations

import numpy as np
import pytest

from powermodels import schema
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.alpha_warmup import learn_alpha
from powermodels.measuring.protocols import make_protocol
from powermodels.measuring.reference import reference_energy
from powermodels.measuring.runner import SimulatedRunner
from powermodels.workloads import CallableWorkload, SimulatedTwin

HOST_CALL_S = 25.7e-6


class PausingRunner(SimulatedRunner):
    """The host pauses ``pause_s`` between the two events of every single-launch call (the GPU idles)."""

    def __init__(self, pause_s: float, seed: int = 0):
        super().__init__(SimulatedGPU(seed=seed), host_call_s=HOST_CALL_S)
        self.pause_s = pause_s

    def run(self, workload, config=None, launches=1, gap_s=0.0):
        if launches != 1 or self.pause_s <= 0:
            return super().run(workload, config, launches, gap_s)
        t0 = self.gpu.now()
        self.gpu.idle(self.pause_s)
        iv = np.array(super().run(workload, config, 1, gap_s), dtype=float)
        iv[0, 0] = t0  # the first event fired before the pause
        return iv


def add():
    return CallableWorkload(lambda: None, simulated=SimulatedTwin(time_s=21e-6, activity=0.3, mem_activity=0.6),
                            name="add_21us")


def test_the_pause_is_real_in_the_fake():
    iv = PausingRunner(5e-3).run(add(), None, 1)
    assert iv[0, 1] - iv[0, 0] > 5e-3


@pytest.mark.parametrize("pause_s", [0.0, 5e-3])
def test_the_reference_batches_a_short_kernel_after_a_paused_first_launch(pause_s):
    clean = reference_energy(PausingRunner(0.0), add(), duration_s=3.0, skip_s=1.0)
    ref = reference_energy(PausingRunner(pause_s), add(), duration_s=3.0, skip_s=1.0)
    assert clean.launch_mode == "graph"
    assert ref.launch_mode == "graph"
    assert ref.energy_j == pytest.approx(clean.energy_j, rel=0.005)


@pytest.mark.parametrize("pause_s", [0.0, 5e-3])
def test_the_counter_row_batches_a_short_kernel_after_a_paused_first_launch(pause_s):
    row = make_protocol("counter", alpha_w_per_c=1.0).measure(PausingRunner(pause_s), add()).row
    assert row[schema.LAUNCH_MODE] == "graph" and not row[schema.LAUNCH_BOUND]
    assert row[schema.TIME_S] == pytest.approx(21e-6, rel=0.02)


def test_the_warmup_batches_a_short_kernel_after_a_paused_first_launch():
    clean = learn_alpha(PausingRunner(0.0), add(), max_s=3.0, min_s=2.0).spans
    paused = learn_alpha(PausingRunner(5e-3), add(), max_s=3.0, min_s=2.0).spans
    # the spans α is fitted on: the kernel's energy, not the host's pace (the GPU idling in its gaps)
    assert len(paused) >= 5
    assert paused[schema.ENERGY_J].median() == pytest.approx(clean[schema.ENERGY_J].median(), rel=0.01)


def test_the_warmup_decides_its_launch_mode_before_it_starts():
    """Fails before: after a paused first launch (206 µs) the first 1 s chunk ran as called (4,800 host-paced
    launches, ~120 ms) and only then as graphs. Now a 50 ms probe (~240 launches) decides the mode first."""
    warm = learn_alpha(PausingRunner(1.85e-4), add(), max_s=3.0, min_s=2.0, skip_s=0.0)
    iv = warm.launches
    gap = np.r_[iv[1:, 0] - iv[:-1, 1], 0.0] > 1e-6   # the host's time between two launches
    as_called = gap[1:] & gap[:-1]   # graphs leave a gap only between two graphs, never after two launches in a row
    assert 0 < as_called.sum() < 300
    assert iv[np.flatnonzero(as_called).max() + 1, 1] <= warm.spans[schema.START_S].min()


def test_a_long_kernel_still_runs_one_launch_per_call():
    long = CallableWorkload(lambda: None, simulated=SimulatedTwin(time_s=2e-3, activity=0.9), name="long")
    ref = reference_energy(PausingRunner(5e-3), long, duration_s=3.0, skip_s=1.0)
    assert ref.launch_mode == "back_to_back"


def test_rebatch_takes_the_shorter_of_the_first_launch_and_the_median():
    from powermodels.measuring.graphs import rebatch

    short = np.column_stack([np.arange(100) * 21e-6, (np.arange(100) + 1) * 21e-6])
    assert rebatch(1, 5e-3, short) == round(2e-3 / 21e-6)    # a paused first launch: graphs after all
    assert rebatch(1, 5e-3, 2e-3 + short * 100) == 1         # 2.1 ms launches: one call each
    assert rebatch(8, 5e-3, short) == 8                      # batched already: unchanged
    assert rebatch(1, 5e-3, np.empty((0, 2))) == 1
