"""Exclusive measurement: campaign-folder and GPU locks, other processes on the GPU, throttle columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.campaigns import CampaignSpec, run_campaign
from powermodels.cli import main
from powermodels.measuring import exclusive
from powermodels.measuring.protocols import make_protocol
from powermodels.measuring.runner import make_runner

SRC = Path(__file__).resolve().parents[2] / "src"
TESTS = SRC.parent / "tests"

SPEC = {
    "kernels": {"fp32": ["nr_outer=8"]},
    "protocol": "continuous",
    "protocol_params": {"duration_s": 0.2},
    "repeats": 2,
    "device": "simulated",
    "device_kwargs": {"seed": 0},
}

@pytest.fixture
def fake_nvml(monkeypatch):
    """The fake pynvml of tests/fake_pynvml.py as ``pynvml``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_fake_loader", TESTS / "fake_pynvml.py")
    loader = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loader)
    fake = loader.load("pynvml")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.fixture
def nvml_device(fake_nvml):
    from powermodels.devices.nvml import NVMLDevice

    device = NVMLDevice(0)
    yield device
    device.close()


HOLDER = """
import os, sys, time
from powermodels.measuring.exclusive import campaign_lock
with campaign_lock(sys.argv[1]):
    open(sys.argv[2], "w").close()
    time.sleep(float(sys.argv[3]))
"""


def _hold(out, ready, seconds):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(HOLDER), str(out), str(ready),
                             str(seconds)], env=env)
    deadline = time.monotonic() + 60
    while not ready.exists():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return proc


def test_second_campaign_on_one_folder_fails_naming_the_first(tmp_path, capsys):
    out = tmp_path / "out"
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    proc = _hold(out, tmp_path / "ready", 30)
    try:
        code = main(["campaign", str(spec_file), "--out", str(out), "--no-progress"])
        err = capsys.readouterr().err
        assert code == 1
        assert f"campaign folder {str(out)!r} is in use by pid {proc.pid} on " in err
        assert len(err.strip().splitlines()) == 1
        assert not (out / "runs").exists() or not any((out / "runs").iterdir())
    finally:
        proc.kill()
        proc.wait()


def test_second_campaign_waits_for_the_first(tmp_path, capsys):
    out = tmp_path / "out"
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    proc = _hold(out, tmp_path / "ready", 0.5)
    t0 = time.monotonic()
    assert main(["campaign", str(spec_file), "--out", str(out), "--no-progress", "--wait", "60"]) == 0
    assert time.monotonic() - t0 >= 0.2  # it waited for the holder to let go
    assert proc.wait(timeout=60) == 0


def test_lock_in_process_and_released_after(tmp_path):
    with exclusive.campaign_lock(tmp_path):
        with pytest.raises(exclusive.LockBusy, match=f"pid {os.getpid()} on .* since "):
            run_campaign(SPEC, tmp_path, progress=False)
    assert len(run_campaign(SPEC, tmp_path, progress=False)) == 2
    assert not (tmp_path / ".campaign.lock.json").exists()


def test_other_process_on_the_simulated_gpu_is_flagged_on_the_rows(tmp_path):
    runner = make_runner("simulated", device_kwargs={"seed": 0})
    try:
        clean = run_campaign(SPEC, tmp_path / "clean", runner=runner, progress=False)
        assert (clean[schema.OTHER_GPU_PROCESSES] == 0).all()
        runner.device.other_processes = (4242,)
        with pytest.warns(RuntimeWarning, match=r"other process\(es\) \[4242\] on the GPU"):
            busy = run_campaign(SPEC, tmp_path / "busy", runner=runner, progress=False)
        assert (busy[schema.OTHER_GPU_PROCESSES] == 1).all()
        schema.validate_run_table(busy, required=[schema.OTHER_GPU_PROCESSES])
        with pytest.raises(exclusive.OtherProcessError, match="4242.*before the run"):
            run_campaign(dict(SPEC, exclusive=True), tmp_path / "exclusive", runner=runner,
                         progress=False)
    finally:
        runner.close()


def test_exclusive_flag_on_the_command_line(tmp_path, capsys, monkeypatch):
    from powermodels.devices.simulated import SimulatedGPU

    monkeypatch.setattr(SimulatedGPU, "other_processes", (4242,))
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(SPEC))
    assert main(["campaign", str(spec_file), "--out", str(tmp_path / "o"), "--no-progress",
                 "--exclusive"]) == 1
    assert "[4242] on the GPU before the run" in capsys.readouterr().err


def test_process_appearing_during_the_run_is_seen_after(tmp_path):
    class Device:
        info = type("I", (), {"name": "gpu"})()
        calls = 0

        def compute_processes(self):
            self.calls += 1
            return [os.getpid()] + ([77] if self.calls > 1 else [])

    with pytest.warns(RuntimeWarning, match=r"\[77\]"):
        with exclusive.measured_alone(Device()) as alone:
            pass
    assert alone[schema.OTHER_GPU_PROCESSES] == 1
    with pytest.raises(exclusive.OtherProcessError, match="not recorded"):
        with exclusive.measured_alone(Device(), exclusive=True):
            pass


def test_nvml_process_list_and_unsupported(nvml_device, fake_nvml):
    fake_nvml.gpu.processes = [(os.getpid(), 1 << 30), (999, 2 << 30)]
    assert nvml_device.compute_processes() == [os.getpid(), 999]
    with pytest.warns(RuntimeWarning):
        with exclusive.measured_alone(nvml_device) as alone:
            pass
    assert alone[schema.OTHER_GPU_PROCESSES] == 1


def test_nvml_process_list_unsupported_is_nan(nvml_device, fake_nvml):
    fake_nvml.unsupported("nvmlDeviceGetComputeRunningProcesses")
    assert nvml_device.compute_processes() is None
    with exclusive.measured_alone(nvml_device, exclusive=True) as alone:
        pass
    assert np.isnan(alone[schema.OTHER_GPU_PROCESSES])


def test_gpu_lock_per_uuid(nvml_device):
    with exclusive.gpu_lock(nvml_device):
        with pytest.raises(exclusive.GPUBusy, match=f"GPU Fake H100.*pid {os.getpid()}.*waited 0.1 s"):
            with exclusive.gpu_lock(nvml_device, wait_s=0.1):
                pass
    with exclusive.gpu_lock(nvml_device, wait_s=0.1):  # free again
        pass


def test_throttle_summary_fractions():
    trace = pd.DataFrame({schema.THROTTLE_REASONS: [0, 0x4, 0x4 | 0x20, 0x1, 0x2, 0x8, 0x40, 0]})
    s = exclusive.throttle_summary(trace)
    assert s[schema.THROTTLED_FRACTION] == 4 / 8  # idle (0x1) and a clock lock (0x2) are not slowdowns
    assert s[schema.THROTTLE_POWER_CAP_FRACTION] == 2 / 8
    assert s[schema.THROTTLE_THERMAL_FRACTION] == 2 / 8
    assert s[schema.THROTTLE_OTHER_FRACTION] == 1 / 8
    assert all(np.isnan(v) for v in exclusive.throttle_summary(pd.DataFrame({"x": [1]})).values())


def test_power_capped_run_is_marked_throttled_on_its_row():
    runner = make_runner("simulated", device_kwargs={"seed": 0})
    try:
        protocol = make_protocol("continuous", duration_s=0.3)
        free = protocol.measure(runner, "fp32", "nr_outer=16").row
        with runner.device.settings_guard(power_limit_w=200, allow_changes=True):
            capped = protocol.measure(runner, "fp32", "nr_outer=16").row
    finally:
        runner.close()
    assert free[schema.THROTTLED_FRACTION] == 0
    assert capped[schema.THROTTLE_POWER_CAP_FRACTION] > 0.5
    assert capped[schema.THROTTLED_FRACTION] >= capped[schema.THROTTLE_POWER_CAP_FRACTION]
    assert capped[schema.THROTTLE_THERMAL_FRACTION] == 0


@pytest.mark.parametrize("spec", [{}, {"repeats": 3}, {"kernels": {}}, {"kernels": {}, "workloads": []}])
def test_empty_or_meaningless_spec_is_an_error(spec):
    with pytest.raises(ValueError, match="nothing to measure"):
        CampaignSpec.from_dict(spec)


def test_empty_spec_file_on_the_command_line(tmp_path, capsys):
    spec_file = tmp_path / "spec.json"
    spec_file.write_text("{}")
    assert main(["campaign", str(spec_file), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "nothing to measure" in err and "it is empty" in err
    assert not (tmp_path / "o").exists()
