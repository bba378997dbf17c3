"""``powermodels demo``: sensor vs truth on the simulated GPU; the harness demo on a real one (tested on
the simulated runner); idle readings without CuPy."""

from __future__ import annotations

import re

import pytest

from powermodels import cli
from powermodels.commands import demo
from powermodels.devices.base import Device, DeviceInfo, Reading, Settings


def _row(out: str, label: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(label))
    return re.findall(r"[-+]?\d+\.\d+|NaN|n/a", line[len(label):])


def _pct(cell: str) -> float:
    return float(cell)


def test_demo_on_the_simulated_gpu_prints_sensor_vs_truth(capsys):
    assert cli.main(["demo", "--device", "simulated", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "simulated Hopper-class GPU (sensor preset 'hopper', seed 1)" in out
    # square wave: sensor, truth, error | steady: sensor, truth, error
    inst = _row(out, "mean power, instant")
    assert len(inst) == 6
    sq_sensor, sq_truth = float(inst[0]), float(inst[1])
    assert sq_truth > 300.0 and abs(sq_sensor - sq_truth) < 0.3 * sq_truth
    counter = _row(out, "energy, counter at its own updates")
    assert abs(_pct(counter[2])) < 0.5 and abs(_pct(counter[5])) < 0.5  # the counter is exact
    bracket = _row(out, "energy, counter read at start/end")
    assert abs(_pct(bracket[2])) < 5.0 and abs(_pct(bracket[5])) < 5.0  # off by the update lag only
    naive = _row(out, "energy, naive")
    assert abs(_pct(naive[2])) > abs(_pct(counter[2]))  # aliasing costs the naive integral
    avg = _row(out, "mean power, average")
    assert _pct(avg[5]) < -5.0  # the 1 s average lags a 3 s load
    assert "low, middle and high plateaus" in out


def test_demo_auto_without_gpu_says_it_uses_the_simulated_hopper(monkeypatch, capsys):
    import powermodels.devices as devices

    monkeypatch.setattr(devices, "nvml_available", lambda index=0: False)
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "no NVIDIA GPU found: using the simulated Hopper-class GPU" in out


def test_demo_with_a_preset_without_average_field(capsys):
    assert cli.main(["demo", "--device", "simulated", "--preset", "volta"]) == 0
    out = capsys.readouterr().out
    assert _row(out, "mean power, average")[0] == "NaN"
    assert "update every 20 ms" in out


class _FakeGPU(Device):
    """Stands for an NVML device: readings only, settings untouchable."""

    def __init__(self, fail: bool = False):
        self.fail = fail
        self.t = 100.0
        self.closed = False

    @property
    def info(self):
        return DeviceInfo(name="Fake H200", kind="nvml")

    def now(self):
        self.t += 0.1
        return self.t

    def read(self):
        if self.fail:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return Reading(t_s=self.t, power_instant_w=120.0, power_average_w=118.0, power_usage_w=118.0,
                       temperature_c=31.0, sm_clock_mhz=1980.0, mem_clock_mhz=3201.0)

    def read_energy_j(self):
        return 1000.0 + 118.0 * self.t

    def supported_clocks(self):
        return {3201.0: [1980.0]}

    def power_limits_w(self):
        return (200.0, 700.0, 700.0)

    def current_settings(self):
        return Settings()

    def _apply_sm_clock(self, mhz):
        raise AssertionError("the demo must never change settings")

    _apply_mem_clock = _apply_power_limit = _apply_sm_clock

    def close(self):
        self.closed = True


@pytest.mark.parametrize("fail", [False, True])
def test_demo_on_a_real_gpu_is_reduced_and_does_not_crash(monkeypatch, capsys, fail):
    import sys

    import powermodels.devices as devices

    fake = _FakeGPU(fail=fail)
    monkeypatch.setattr(devices, "open_device", lambda kind, index=0, **kw: fake)
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)
    monkeypatch.setitem(sys.modules, "cupy", None)  # no CuPy: import cupy raises ImportError
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "using the NVIDIA GPU through NVML: Fake H200" in out
    assert "real GPU without CuPy" in out
    assert "powermodels measure" in out and "--device simulated" in out
    if fail:
        assert "could not read the sensor" in out
    else:
        assert "120.0 W" in out
    assert fake.closed


def test_demo_rejects_a_negative_seed(capsys):
    assert cli.main(["demo", "--device", "simulated", "--seed", "-2"]) == 1
    assert "--seed" in capsys.readouterr().err


# -- the harness demo (what a real GPU runs), on the simulated runner ---------------------------


class _CounterOnlyRunner:
    """A simulated runner that knows no truth, like a real GPU: the counter becomes the reference."""

    def __new__(cls, gpu):
        from powermodels.measuring.runner import SimulatedRunner

        class Runner(SimulatedRunner):
            def reference_energy_j(self, intervals):
                return float("nan")

        return Runner(gpu)


def _energy_row(out: str, label: str) -> list[str]:
    line = next(line for line in out.splitlines() if line.startswith(label))
    return re.findall(r"[-+]?\d+\.\d+|reference|n/a", line[len(label):])


def test_harness_demo_on_the_simulated_runner_compares_three_readings_with_the_truth(capsys):
    assert cli.main(["demo", "--device", "simulated", "--harness"]) == 0
    out = capsys.readouterr().out
    assert "reference: the simulated truth" in out
    naive = _energy_row(out, "energy, naive")
    average = _energy_row(out, "energy, average reading")
    counter = _energy_row(out, "energy, energy counter")
    truth = _energy_row(out, "energy, simulated truth")
    assert truth[2] == truth[5] == "reference"
    # square wave: sensor J, W, error | steady FP32: J, W, error
    assert abs(float(counter[2])) < 3.0 and abs(float(counter[5])) < 1.0
    assert abs(float(naive[2])) > 2 * abs(float(counter[2]))  # the instant reading aliases
    assert float(average[5]) < -5.0  # the 1 s average lags a 3 s load
    assert "no GPU setting was changed" in out


def test_demo_on_a_real_gpu_runs_the_harness_with_the_counter_as_reference(monkeypatch, capsys):
    import sys
    import types

    import powermodels.devices as devices
    from powermodels.devices.simulated import SimulatedGPU

    fake = _FakeGPU()
    monkeypatch.setattr(devices, "open_device", lambda kind, index=0, **kw: fake)
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    monkeypatch.setattr(demo, "_make_runner", lambda device: _CounterOnlyRunner(SimulatedGPU(seed=0)))
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "using the NVIDIA GPU through NVML: Fake H200" in out
    assert "reference: the energy counter" in out
    assert "simulated truth" not in out
    counter = _energy_row(out, "energy, energy counter")
    assert counter[2] == counter[5] == "reference"
    naive = _energy_row(out, "energy, naive")
    assert naive[2].startswith(("-", "+")) and abs(float(naive[2])) > 3.0  # square wave vs counter
    assert fake.closed


def test_demo_on_a_real_gpu_whose_harness_fails_says_why_and_exits_1(monkeypatch, capsys):
    import sys
    import types

    import powermodels.devices as devices

    fake = _FakeGPU()
    monkeypatch.setattr(devices, "open_device", lambda kind, index=0, **kw: fake)
    monkeypatch.setitem(sys.modules, "cupy", types.ModuleType("cupy"))
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)

    def broken(device):
        raise RuntimeError("CUDA_ERROR_NO_DEVICE")

    monkeypatch.setattr(demo, "_make_runner", broken)
    assert cli.main(["demo"]) == 1
    out = capsys.readouterr().out
    assert "could not start the harness (RuntimeError: CUDA_ERROR_NO_DEVICE)" in out
    assert "120.0 W" in out  # the idle readings still come
    assert fake.closed
