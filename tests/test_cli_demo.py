"""``powermodels demo``: sensor vs truth on the simulated GPU; reduced and crash-free on a real one."""

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
    import powermodels.devices as devices

    fake = _FakeGPU(fail=fail)
    monkeypatch.setattr(devices, "open_device", lambda kind, index=0, **kw: fake)
    monkeypatch.setattr(demo.time, "sleep", lambda s: None)
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "using the NVIDIA GPU through NVML: Fake H200" in out
    assert "powermodels measure" in out and "--device simulated" in out
    if fail:
        assert "could not read the sensor" in out
    else:
        assert "120.0 W" in out
    assert fake.closed


def test_demo_rejects_a_negative_seed(capsys):
    assert cli.main(["demo", "--device", "simulated", "--seed", "-2"]) == 1
    assert "--seed" in capsys.readouterr().err
