"""The on-GPU clock probe: counts → MHz, and the simulated GPU's probe reads its clock."""

import shutil
import subprocess
import sys
import types

import numpy as np
import pytest

from powermodels import schema
from powermodels.devices.clock_probe import (
    PROBE_SOURCE,
    TIMER_TICK_NS,
    CupyClockProbe,
    clock_from_counts,
    clock_uncertainty_mhz,
)
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import EXAMPLE_WORKLOADS, SimulatedGPU


def test_counts_to_mhz_and_tick_bound():
    # 39,600 cycles in 20 µs is 1,980 MHz; one 32 ns tick over 20 µs is 0.16 %
    assert clock_from_counts(39_600, 20_000) == pytest.approx(1980.0)
    assert clock_uncertainty_mhz(39_600, 20_000) == pytest.approx(1980.0 * TIMER_TICK_NS / 20_000)
    assert np.isnan(clock_from_counts(100, 0))


def test_kernel_source_reads_both_counters_on_tick_edges():
    assert "%globaltimer" in PROBE_SOURCE and "clock64()" in PROBE_SOURCE
    assert "while (g0 == g)" in PROBE_SOURCE  # starts on a timer edge


def test_simulated_probe_reads_the_clock_launches_ran_at():
    # a 400 W board: the power-cap controller lowers the clock under fp32, so the probes
    # must follow it; where the probes before and after a launch agree, the launch's
    # time is the workload's time at that clock
    gpu = SimulatedGPU(physics=GPUPhysics(power_limit_w=400), seed=1)
    w = EXAMPLE_WORKLOADS["fp32"]
    probe = gpu.clock_probe()
    gpu.idle(0.2)
    probe.enqueue()
    intervals = []
    for _ in range(60):
        intervals.append(gpu.run(w, 1)[0])
        probe.enqueue()
    table = probe.collect()
    assert list(table.columns[:3]) == [schema.PROBE_CYCLES, schema.PROBE_ELAPSED_NS, schema.PROBE_CLOCK_MHZ]
    assert len(table) == 61 and len(probe.collect()) == 0  # collect forgets what it returned
    clocks = table[schema.PROBE_CLOCK_MHZ].to_numpy()
    assert clocks[0] == 1980.0 and clocks.min() < 1900  # the cap moved the clock
    assert np.all(table[schema.PROBE_ELAPSED_NS] % TIMER_TICK_NS == 0)  # whole ticks
    mem = gpu.read().mem_clock_mhz
    stable = clocks[:-1] == clocks[1:]
    assert stable.sum() > 30
    for (s, e), f in zip(np.array(intervals)[stable], clocks[:-1][stable]):
        assert e - s == pytest.approx(w.time_s(f, mem), rel=2e-3)
    truth = gpu.truth(intervals[0][0], gpu.now())
    assert set(np.round(clocks[1:])) <= set(np.round(truth[schema.SM_CLOCK_MHZ]))


def test_base_device_has_no_probe():
    from powermodels.devices.base import Device

    assert Device.clock_probe(object()) is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_the_probe_kernel_compiles_for_hopper_and_reads_both_counters(tmp_path):
    # the kernel runs only on a lent GPU (through CuPy's NVRTC); here nvcc checks it compiles
    # for sm_90 and that the PTX reads the global timer and the 64-bit SM cycle counter
    src = tmp_path / "probe.cu"
    src.write_text(PROBE_SOURCE)
    subprocess.run(["nvcc", "-arch=sm_90", "-ptx", "-o", str(tmp_path / "probe.ptx"), str(src)],
                   check=True, capture_output=True)
    ptx = (tmp_path / "probe.ptx").read_text()
    assert ".entry powermodels_clock_probe" in ptx
    assert "%globaltimer" in ptx and "%clock64" in ptx


class _Array:
    """Enough of a CuPy array for CupyClockProbe; every copy is logged."""

    def __init__(self, n, log):
        self.data, self.log = np.zeros(n, dtype=np.uint64), log

    @property
    def size(self):
        return self.data.size

    def __getitem__(self, key):
        out = _Array(0, self.log)
        out.data = self.data[key]
        return out

    def __setitem__(self, key, value):
        self.log.append("copy")
        self.data[key] = value.data

    def get(self):
        return self.data


def test_the_probe_buffer_grows_only_after_the_probes_in_flight_finished(monkeypatch):
    # probes run on the workload's stream; growing the buffer copies it on another stream and drops
    # the old one: without a device synchronize first, a probe still running writes into freed memory
    log = []

    class Kernel:
        def __init__(self, source, name):
            pass

        def __call__(self, grid, block, args):
            log.append("probe")

    class Stream:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    runtime = types.SimpleNamespace(deviceSynchronize=lambda: log.append("synchronize"))
    cuda = types.SimpleNamespace(get_current_stream=Stream, runtime=runtime)
    fake = types.SimpleNamespace(RawKernel=Kernel, uint64=np.uint64, cuda=cuda,
                                 zeros=lambda n, dtype=None: _Array(n, log))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    probe = CupyClockProbe(capacity=2)
    for _ in range(3):
        probe.enqueue()
    assert log == ["probe", "probe", "synchronize", "copy", "probe"]
