"""EnergyMeter: windows on the simulated GPU against its true energy, a polled fake counter, errors."""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest

from powermodels.devices.base import Device, DeviceInfo, Reading, Settings
from powermodels.devices.simulated import EXAMPLE_WORKLOADS, SimulatedGPU
from powermodels.measuring.counter_log import anchored_energy, energy_bounds
from powermodels.meter import EnergyMeter


@pytest.fixture
def gpu():
    g = SimulatedGPU(preset="hopper", seed=2)
    g.idle(0.5)
    return g


def test_long_window_within_uncertainty_and_bounds(gpu):
    meter = EnergyMeter(gpu)
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=30)    # steady load across the window's ends
    meter.begin_window("train")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=200)   # 2 s of FMA load
    w = meter.end_window("train")
    true = gpu.true_energy_j(w.start_s, w.end_s)
    assert w.method == "energy_counter" and not w.short
    assert w.energy_bounds_j[0] <= true <= w.energy_bounds_j[1]
    assert abs(w.energy_j - true) < max(3 * w.uncertainty_j, 1e-3)
    assert abs(w.energy_j - true) / true < 0.01
    assert w.power_w == pytest.approx(w.energy_j / w.time_s)
    assert w.time_s == pytest.approx(2.0, rel=1e-3)
    assert w.sm_clock_max_mhz == 1980.0 and math.isfinite(w.temperature_max_c)


def test_idle_anchored_ends_when_the_load_starts_with_the_window(gpu):
    meter = EnergyMeter(gpu)
    with meter.window("idle") as idle:
        gpu.idle(1.0)
    meter.begin_window("plain")
    meter.begin_window("anchored")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=100)   # idle -> 1 s of load -> idle
    plain = meter.end_window("plain")
    anchored = meter.end_window("anchored", idle_power_w=idle.result.power_w)
    true = gpu.true_energy_j(anchored.start_s, anchored.end_s)
    # interpolating across the load change is off by a part of an update's extra energy...
    assert abs(plain.energy_j - true) < 3 * plain.uncertainty_j
    # ...anchoring each end to the idle update outside the window removes that
    assert abs(anchored.energy_j - true) / true < 0.002
    assert anchored.uncertainty_j < plain.uncertainty_j / 10


def test_nested_and_overlapping_windows(gpu):
    meter = EnergyMeter(gpu)
    meter.begin_window("outer")
    gpu.run(EXAMPLE_WORKLOADS["stream"], launches=100)
    meter.begin_window("inner")
    gpu.run(EXAMPLE_WORKLOADS["gemm"], launches=60)
    assert meter.open_windows == ["inner", "outer"]
    inner = meter.end_window("inner")
    outer = meter.end_window("outer")
    assert meter.open_windows == []
    for w in (inner, outer):
        true = gpu.true_energy_j(w.start_s, w.end_s)
        assert w.energy_bounds_j[0] <= true <= w.energy_bounds_j[1]
        assert abs(w.energy_j - true) < 3 * w.uncertainty_j
    assert inner.start_s > outer.start_s and inner.end_s <= outer.end_s
    assert outer.energy_j > inner.energy_j


def test_short_window_warns_and_reports_an_update_sized_uncertainty(gpu):
    meter = EnergyMeter(gpu)
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=50)    # a steady load around the window
    with pytest.warns(RuntimeWarning, match="shorter than the counter's update period"):
        with meter.window("step") as h:
            gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=2)  # 20 ms
    w = h.result
    update_energy = w.power_w * w.update_period_s
    assert w.short and w.notes
    assert w.uncertainty_j > 0.2 * update_energy           # ~ one update's energy, not the window's
    true = gpu.true_energy_j(w.start_s, w.end_s)
    assert w.energy_bounds_j[0] <= true <= w.energy_bounds_j[1]


def test_window_context_cancels_on_error(gpu):
    meter = EnergyMeter(gpu)
    with pytest.raises(KeyError), meter.window("bad"):
        raise KeyError("boom")
    assert meter.open_windows == []


def test_window_errors(gpu):
    meter = EnergyMeter(gpu)
    with pytest.raises(ValueError, match="no window named 'x' is open"):
        meter.end_window("x")
    meter.begin_window("a")
    with pytest.raises(ValueError, match="already open"):
        meter.begin_window("a")
    with pytest.raises(ValueError, match=r"open: \['a'\]"):
        meter.end_window("b")
    with pytest.raises(ValueError, match="idle_power_w"):
        meter.end_window("a", idle_power_w=-1.0)
    with pytest.raises(ValueError, match="non-empty string"):
        meter.begin_window("")
    with pytest.raises(ValueError, match="device must be"):
        EnergyMeter(3.0)


def test_bounds_hold_whatever_the_power_did():
    # reads every 4 ms of a counter updated every 100 ms; true E(t) = 300 t + 50 sin(40 t)
    truth = lambda t: 300 * t + 2 * np.sin(40 * t) + 1000.0  # noqa: E731 - derivative 300 ± 80 > 0
    t = np.arange(0.0, 2.0, 0.004)
    published = np.floor((t - 0.037) / 0.1) * 0.1 + 0.037
    c = np.floor(truth(published) * 1000) / 1000
    for x in np.linspace(0.3, 1.7, 41):
        b = energy_bounds(t, t, c, x)
        assert b.lower <= truth(x) <= b.upper
        assert b.lower <= b.estimate <= b.upper
        assert abs(b.estimate - truth(x)) < 4.5   # the sine moves E by at most 4 J off the chord
        assert b.upper - b.lower < 300 * 0.2 + 10  # at most two updates apart
    est, sigma = anchored_energy(t, t, c, 1.0, "before", 300.0)
    assert abs(est - truth(1.0)) < 3.0 and 0 < sigma < 1.0


class _CountingDevice(Device):
    """A real-time device whose counter publishes 200 W × time every 50 ms (reads take 1 ms)."""

    info = DeviceInfo(name="fake counter", kind="nvml")

    def __init__(self):
        self.t0 = time.perf_counter()

    def now(self):
        return time.perf_counter()

    def read(self):
        return Reading(t_s=self.now(), power_instant_w=200.0, sm_clock_mhz=1500.0, temperature_c=40.0,
                       throttle_reasons=4)

    def read_energy_j(self):
        time.sleep(0.001)
        elapsed = self.now() - self.t0
        return 200.0 * math.floor(elapsed / 0.05) * 0.05

    def supported_clocks(self):
        return {}

    def power_limits_w(self):
        return (math.nan, math.nan, math.nan)

    def current_settings(self):
        return Settings()

    def _apply_sm_clock(self, mhz):
        raise AssertionError("never")

    _apply_mem_clock = _apply_power_limit = _apply_sm_clock


def test_polled_counter_on_a_real_clock():
    dev = _CountingDevice()
    with EnergyMeter(dev, sync=None) as meter:
        meter.begin_window("w")
        time.sleep(0.25)
        w = meter.end_window("w")
    assert w.method == "energy_counter"
    assert w.energy_j == pytest.approx(200.0 * w.time_s, rel=0.08)
    assert w.energy_bounds_j[0] <= 200.0 * w.time_s <= w.energy_bounds_j[1]
    assert w.throttle_reasons == 4 and w.sm_clock_min_mhz == 1500.0
    assert w.update_period_s == pytest.approx(0.05, rel=0.3)


class _NoCounterGPU(SimulatedGPU):
    def read_energy_j(self):
        return math.nan


def test_without_a_counter_power_readings_are_integrated():
    gpu = _NoCounterGPU(preset="turing", seed=0)   # 100 ms window = 100 ms update: every joule seen
    gpu.idle(0.5)
    meter = EnergyMeter(gpu)
    meter.begin_window("w")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=150)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w = meter.end_window("w")
    assert any("no energy counter" in str(c.message) for c in caught)
    true = gpu.true_energy_j(w.start_s, w.end_s)
    assert w.method == "power_integration"
    assert abs(w.energy_j - true) < 2 * w.uncertainty_j
    assert math.isnan(w.energy_bounds_j[0])


def test_end_window_without_waiting_extrapolates_and_does_not_idle(gpu):
    meter = EnergyMeter(gpu)
    gpu.run(EXAMPLE_WORKLOADS["gemm"], launches=100)     # steady load before
    for _ in range(3):
        with meter.window("step", wait=False) as h:
            gpu.run(EXAMPLE_WORKLOADS["gemm"], launches=60)   # 0.3 s steps back to back
        assert gpu.now() == pytest.approx(h.result.end_s)  # no idling after the window
    w = h.result
    true = gpu.true_energy_j(w.start_s, w.end_s)
    assert math.isinf(w.energy_bounds_j[1])
    assert abs(w.energy_j - true) < 3 * w.uncertainty_j
    assert abs(w.energy_j - true) / true < 0.05


def test_meter_through_nvml_on_the_fake_pynvml(monkeypatch):
    """NVMLDevice + the polling thread on tests/fake_pynvml.py, its counter published every 50 ms at 300 W."""
    import importlib.util
    import sys
    import threading
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_fake_loader_meter", Path(__file__).parent / "fake_pynvml.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    fake = loader.load("pynvml")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    from powermodels.devices.nvml import NVMLDevice

    stop = threading.Event()
    start = time.perf_counter()

    def publish():  # the firmware: a new counter value every 50 ms
        while not stop.wait(0.05):
            fake.gpu.energy_mj = 123_456_789 + round(300_000 * (time.perf_counter() - start))

    firmware = threading.Thread(target=publish, daemon=True)
    firmware.start()
    device = NVMLDevice(0)
    try:
        with EnergyMeter(device, sync=None) as meter:
            with meter.window("w") as h:
                time.sleep(0.3)
        w = h.result
    finally:
        stop.set()
        firmware.join()
        device.close()
    assert w.method == "energy_counter"
    assert w.energy_bounds_j[0] <= 300.0 * w.time_s <= w.energy_bounds_j[1]
    assert w.energy_j == pytest.approx(300.0 * w.time_s, rel=0.1)
    assert w.sm_clock_max_mhz == 1980.0 and w.temperature_max_c == 31.0
    assert not [n for n in fake.names() if n.startswith(("nvmlDeviceSet", "nvmlDeviceReset"))]


def test_sync_is_called_at_both_ends_on_a_real_device():
    calls = []
    with EnergyMeter(_CountingDevice(), sync=lambda: calls.append(time.perf_counter())) as meter:
        meter.begin_window("w")
        with pytest.warns(RuntimeWarning, match="shorter than the counter's update period"):
            w = meter.end_window("w", wait=False)
    assert len(calls) == 2
    assert math.isfinite(w.energy_j) and w.energy_j >= 0 and math.isfinite(w.uncertainty_j)
    with pytest.raises(ValueError, match="sync must be"):
        EnergyMeter(_CountingDevice(), sync="always")


def test_steady_window_takes_the_power_between_inside_updates(gpu):
    meter = EnergyMeter(gpu)
    meter.begin_window("plain")
    meter.begin_window("steady")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=100)   # idle -> 1 s of steady load
    steady = meter.end_window("steady", steady=True)
    plain = meter.end_window("plain")
    # over the launches themselves (what a per-launch energy needs), the steady estimate is exact
    true = gpu.true_energy_j(steady.start_s, steady.start_s + 1.0)
    assert abs(steady.energy_j - true) / true < 0.002
    assert steady.uncertainty_j < plain.uncertainty_j / 5
    meter.begin_window("short")
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        short = meter.end_window("short", steady=True)
    said = " ".join(str(c.message) for c in caught)
    assert "needs two counter updates inside" in said and "shorter than the counter's update" in said
    assert short.short and math.isfinite(short.energy_j)


# ---------------------------------------------------------------- issue 25: threads, long windows


def _slow_sync(seconds=0.2):
    """A device synchronize that releases the GIL while it waits (as torch.cuda.synchronize does)."""
    return lambda: time.sleep(seconds)


def _in_threads(*calls):
    """Run ``calls`` at once in threads; each result or the exception it raised."""
    import threading

    results = [None] * len(calls)
    barrier = threading.Barrier(len(calls))

    def run(i):
        barrier.wait()
        try:
            results[i] = calls[i]()
        except Exception as err:  # noqa: BLE001 - the test looks at what was raised
            results[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_same_name_window_from_two_threads_is_a_clear_error():
    """Issue 25 #7: both begin_window("step") calls succeeded; the second silently replaced the first."""
    with EnergyMeter(_CountingDevice(), sync=_slow_sync()) as meter:
        results = _in_threads(lambda: meter.begin_window("step"), lambda: meter.begin_window("step"))
        errors = [r for r in results if isinstance(r, Exception)]
        assert len(errors) == 1 and isinstance(errors[0], ValueError)
        assert "window 'step' is already open (begun by thread" in str(errors[0])
        assert meter.open_windows == ["step"]
        meter.cancel_window("step")


def test_concurrent_end_window_measures_once_and_refuses_the_other():
    """Issue 25 #7: two concurrent end_window("step") raised a bare KeyError in one thread."""
    with EnergyMeter(_CountingDevice(), sync=_slow_sync()) as meter:
        meter.begin_window("step")
        time.sleep(0.1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            results = _in_threads(lambda: meter.end_window("step", wait=False),
                                  lambda: meter.end_window("step", wait=False))
    errors = [r for r in results if isinstance(r, Exception)]
    measured = [r for r in results if not isinstance(r, Exception)]
    assert len(measured) == 1 and measured[0].name == "step"
    assert len(errors) == 1 and type(errors[0]) is ValueError
    assert "no window named 'step' is open" in str(errors[0])
    assert meter.open_windows == []


def test_window_longer_than_the_simulated_history_keeps_its_energy():
    """Issue 25 #8: a window longer than the GPU's history raised 'older than the kept history'."""
    gpu = SimulatedGPU(preset="hopper", seed=3, history_s=10.0)
    gpu.idle(0.5)
    meter = EnergyMeter(gpu)
    gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=30)
    meter.begin_window("long")
    true, t = 0.0, gpu.now()
    for _ in range(8):  # 40 s of load in 5 s pieces; the GPU keeps 10-15 s
        gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=500)
        true += gpu.true_energy_j(t, gpu.now())
        t = gpu.now()
    w = meter.end_window("long")
    true += gpu.true_energy_j(t, w.end_s)
    assert w.time_s == pytest.approx(40.0, rel=1e-3)
    assert w.energy_bounds_j[0] <= true <= w.energy_bounds_j[1]
    assert abs(w.energy_j - true) < max(3 * w.uncertainty_j, 1e-3)
    assert w.sm_clock_max_mhz == 1980.0 and math.isfinite(w.temperature_max_c)
    assert w.temperature_max_c > 40  # the hottest instant of the whole window, not only its end
    meter.close()
    assert gpu._history_listeners == []


def test_window_longer_than_the_polled_history_keeps_its_energy():
    """Issue 25 #8: reads older than the history were dropped (by count), so long windows got NaN."""
    from powermodels.measuring.counter_log import PolledCounterLog

    dev = _CountingDevice()
    with EnergyMeter(dev, sync=None) as meter:
        meter._log.close()
        meter._log = PolledCounterLog(dev, read_period_s=0.0005, history_s=1.0)
        time.sleep(0.2)
        meter.begin_window("long")
        time.sleep(3.0)  # ~1,900 reads: three times the history
        w = meter.end_window("long")
        kept = meter._log.reads(-math.inf, math.inf)[0]
    assert kept[-1] - kept[0] < 1.2  # the history itself stays bounded in time
    assert w.energy_bounds_j[0] <= 200.0 * w.time_s <= w.energy_bounds_j[1]
    assert w.energy_j == pytest.approx(200.0 * w.time_s, rel=0.03)
    assert w.throttle_reasons == 4 and w.sm_clock_min_mhz == 1500.0


def test_window_longer_than_the_history_without_a_counter():
    gpu = _NoCounterGPU(preset="turing", seed=1, history_s=10.0)
    gpu.idle(0.5)
    meter = EnergyMeter(gpu)
    meter.begin_window("w")
    true, t = 0.0, gpu.now()
    for _ in range(6):
        gpu.run(EXAMPLE_WORKLOADS["fp32"], launches=500)
        true += gpu.true_energy_j(t, gpu.now())
        t = gpu.now()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        w = meter.end_window("w")
    true += gpu.true_energy_j(t, w.end_s)
    assert w.method == "power_integration"
    assert abs(w.energy_j - true) < 2 * w.uncertainty_j
