"""SettingsGuard on NVMLDevice over the fake pynvml: restore on every fault path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from powermodels.devices import settings_restore
from powermodels.devices.base import RestoreError, SettingsChangeRefused

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"

SET_SM = "nvmlDeviceSetGpuLockedClocks"
RESET_SM = "nvmlDeviceResetGpuLockedClocks"
SET_MEM = "nvmlDeviceSetMemoryLockedClocks"
RESET_MEM = "nvmlDeviceResetMemoryLockedClocks"
SET_LIMIT = "nvmlDeviceSetPowerManagementLimit"
SETTERS = (SET_SM, RESET_SM, SET_MEM, RESET_MEM, SET_LIMIT)


def setter_calls(fake):
    """(name, args without the handle) of every setter call, in order."""
    return [(name, args[1:]) for name, args in fake.calls if name in SETTERS]


def all_three(device):
    return device.settings_guard(
        sm_clock_mhz=1410, mem_clock_mhz=1593, power_limit_w=400, allow_changes=True
    )


@pytest.fixture
def gpu(nvml_device, fake_nvml):
    """The fake GPU, with a non-default power limit the guard must put back."""
    fake_nvml.gpu.power_limit_mw = 650_000
    fake_nvml.calls.clear()
    return fake_nvml.gpu


def assert_restored(gpu):
    assert gpu.sm_locked is None
    assert gpu.mem_locked is None
    assert gpu.power_limit_mw == 650_000


@pytest.fixture(autouse=True)
def no_guard_left_open():
    yield
    assert settings_restore.open_guards() == [], "a test left a guard open"


# ------------------------------------------------------------------------ refusal


def test_refused_without_opt_in_and_nothing_called(nvml_device, fake_nvml, gpu):
    with pytest.raises(SettingsChangeRefused, match="allow_changes=True"):
        with nvml_device.settings_guard(sm_clock_mhz=1410):
            pytest.fail("the body must not run")
    assert fake_nvml.calls == []  # not even a read of the current settings
    assert gpu.sm_locked is None


def test_refusal_is_a_permission_error(nvml_device, gpu):
    with pytest.raises(PermissionError):
        nvml_device.settings_guard(power_limit_w=300).__enter__()


def test_no_change_requested_needs_no_opt_in(nvml_device, fake_nvml, gpu):
    with nvml_device.settings_guard():
        pass
    assert setter_calls(fake_nvml) == []


# ------------------------------------------------------------------- normal exit


def test_applies_in_order_and_restores_in_reverse(nvml_device, fake_nvml, gpu):
    with all_three(nvml_device) as guard:
        assert gpu.sm_locked == (1410, 1410)
        assert gpu.mem_locked == (1593, 1593)
        assert gpu.power_limit_mw == 400_000
        assert guard.applied == ["power_limit_w", "mem_clock_mhz", "sm_clock_mhz"]
    assert_restored(gpu)
    assert setter_calls(fake_nvml) == [
        (SET_LIMIT, (400_000,)),
        (SET_MEM, (1593, 1593)),
        (SET_SM, (1410, 1410)),
        (RESET_SM, ()),
        (RESET_MEM, ()),
        (SET_LIMIT, (650_000,)),
    ]


def test_power_limit_none_previous_restores_default(nvml_device, fake_nvml, gpu):
    fake_nvml.unsupported("nvmlDeviceGetPowerManagementLimit")  # previous limit unknown
    with nvml_device.settings_guard(power_limit_w=400, allow_changes=True):
        assert gpu.power_limit_mw == 400_000
    assert gpu.power_limit_mw == gpu.power_limit_default_mw


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"power_limit_w": 900}, "outside"),
        ({"power_limit_w": float("nan")}, "power_limit_w"),
        ({"sm_clock_mhz": -5}, "sm_clock_mhz"),
        ({"mem_clock_mhz": float("inf")}, "mem_clock_mhz"),
    ],
)
def test_bad_values_are_value_errors_and_nothing_stays(nvml_device, fake_nvml, gpu, kwargs, match):
    with pytest.raises(ValueError, match=match):
        with nvml_device.settings_guard(power_limit_w=400, allow_changes=True) as outer:
            assert outer.applied == ["power_limit_w"]
            with nvml_device.settings_guard(**kwargs, allow_changes=True):
                pytest.fail("the body must not run")
    assert_restored(gpu)


# ------------------------------------------------------------ error mid-change


def test_nvml_error_mid_change_undoes_applied_and_reraises(nvml_device, fake_nvml, gpu):
    fake_nvml.fail_nth(SET_SM, 1, fake_nvml.NVML_ERROR_NO_PERMISSION)
    body_ran = False
    with pytest.raises(fake_nvml.NVMLError) as info:
        with all_three(nvml_device):
            body_ran = True
    assert info.value.value == fake_nvml.NVML_ERROR_NO_PERMISSION
    assert not body_ran
    assert_restored(gpu)
    # the SM clock was never applied, so it is not "restored"; the others are
    assert setter_calls(fake_nvml) == [
        (SET_LIMIT, (400_000,)),
        (SET_MEM, (1593, 1593)),
        (SET_SM, (1410, 1410)),
        (RESET_MEM, ()),
        (SET_LIMIT, (650_000,)),
    ]


def test_first_change_failing_restores_nothing(nvml_device, fake_nvml, gpu):
    fake_nvml.fail_nth(SET_LIMIT, 1)
    with pytest.raises(fake_nvml.NVMLError):
        with all_three(nvml_device):
            pass
    assert setter_calls(fake_nvml) == [(SET_LIMIT, (400_000,))]


def test_keyboard_interrupt_mid_change_undoes_applied(nvml_device, fake_nvml, gpu):
    fake_nvml.fail_nth(SET_MEM, 1, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        with all_three(nvml_device):
            pass
    assert_restored(gpu)
    assert fake_nvml.count(SET_SM) == 0


def test_failed_restore_after_failed_change_is_reported(nvml_device, fake_nvml, gpu):
    fake_nvml.fail_nth(SET_SM, 1, fake_nvml.NVML_ERROR_UNKNOWN)
    fake_nvml.fail_always(RESET_MEM, fake_nvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.warns(RuntimeWarning, match="could not restore mem_clock_mhz"):
        with pytest.raises(fake_nvml.NVMLError) as info:
            with all_three(nvml_device):
                pass
    assert info.value.value == fake_nvml.NVML_ERROR_UNKNOWN  # the original error
    assert any("mem_clock_mhz" in note for note in info.value.__notes__)
    assert fake_nvml.count(RESET_MEM) == nvml_device.restore_attempts
    assert gpu.power_limit_mw == 650_000  # the rest was still restored


# --------------------------------------------------------------- body raising


def test_exception_in_body_restores_and_propagates(nvml_device, fake_nvml, gpu):
    with pytest.raises(ZeroDivisionError):
        with all_three(nvml_device):
            1 / 0  # noqa: B018
    assert_restored(gpu)


def test_keyboard_interrupt_in_body_restores_and_propagates(nvml_device, fake_nvml, gpu):
    with pytest.raises(KeyboardInterrupt):
        with all_three(nvml_device):
            raise KeyboardInterrupt
    assert_restored(gpu)


def test_system_exit_in_body_restores(nvml_device, fake_nvml, gpu):
    with pytest.raises(SystemExit):
        with all_three(nvml_device):
            sys.exit(2)
    assert_restored(gpu)


# ------------------------------------------------------------ failing restores


def test_failing_restore_is_retried_until_it_works(nvml_device, fake_nvml, gpu):
    fake_nvml.fail_nth(RESET_SM, 1, fake_nvml.NVML_ERROR_TIMEOUT)
    fake_nvml.fail_nth(RESET_SM, 2, fake_nvml.NVML_ERROR_TIMEOUT)
    with all_three(nvml_device) as guard:
        pass
    assert fake_nvml.count(RESET_SM) == 3  # two failures, then success
    assert guard.restore_failures == []
    assert_restored(gpu)


def test_restore_that_keeps_failing_raises_after_clean_body(nvml_device, fake_nvml, gpu):
    nvml_device.restore_attempts = 4
    fake_nvml.fail_always(RESET_SM, fake_nvml.NVML_ERROR_GPU_IS_LOST)
    with pytest.raises(RestoreError, match=r"sm_clock_mhz to None after 4 attempts \(exit\)"):
        with all_three(nvml_device) as guard:
            pass
    assert fake_nvml.count(RESET_SM) == 4
    assert len(guard.restore_failures) == 1
    # one failing restore does not stop the others
    assert gpu.mem_locked is None and gpu.power_limit_mw == 650_000


def test_restore_failing_after_body_error_keeps_the_body_error(nvml_device, fake_nvml, gpu):
    with pytest.warns(RuntimeWarning, match="could not restore power_limit_w") as record:
        with pytest.raises(ValueError, match="from the body") as info:
            with nvml_device.settings_guard(power_limit_w=400, allow_changes=True):
                fake_nvml.fail_always(SET_LIMIT, fake_nvml.NVML_ERROR_UNKNOWN)
                raise ValueError("from the body")
    assert len(record) == 1
    assert any("power_limit_w to 650.0" in note for note in info.value.__notes__)
    assert fake_nvml.count(SET_LIMIT) == 1 + nvml_device.restore_attempts


def test_interrupt_during_restore_finishes_restoring_first(nvml_device, fake_nvml, gpu):
    fake_nvml.fail_nth(RESET_SM, 1, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        with all_three(nvml_device):
            pass
    assert_restored(gpu)  # the SM reset was retried, memory and limit restored too
    assert fake_nvml.count(RESET_SM) == 2


# ------------------------------------------------------------ close and exit


def test_close_restores_an_open_guard(nvml_device, fake_nvml, gpu):
    all_three(nvml_device).__enter__()
    nvml_device.close()
    assert_restored(gpu)
    assert fake_nvml.gpu.initialised == 0


def test_restore_all_at_exit_restores_open_guards(nvml_device, fake_nvml, gpu):
    guard = all_three(nvml_device).__enter__()
    assert guard in settings_restore.open_guards()
    settings_restore.restore_all_open_guards()
    assert_restored(gpu)
    calls = len(fake_nvml.calls)
    settings_restore.restore_all_open_guards()  # a guard is restored once, not twice
    guard.__exit__(None, None, None)
    assert len(fake_nvml.calls) == calls


def test_restore_all_at_exit_reports_failures_on_stderr(nvml_device, fake_nvml, gpu, capsys):
    all_three(nvml_device).__enter__()
    fake_nvml.fail_always(RESET_MEM)
    settings_restore.restore_all_open_guards()
    err = capsys.readouterr().err
    assert "could not restore mem_clock_mhz" in err and "interpreter exit" in err
    assert gpu.sm_locked is None and gpu.power_limit_mw == 650_000


EXIT_SCRIPT = """
import atexit, json, os, sys
import fake_pynvml
fake = fake_pynvml.install()
# registered before powermodels is imported, so it runs after its restore (LIFO)
atexit.register(lambda: open(os.environ["CALLS_OUT"], "w").write(
    json.dumps({"calls": fake.names(), "sm": fake.gpu.sm_locked, "mem": fake.gpu.mem_locked,
                "limit": fake.gpu.power_limit_mw})))
from powermodels.devices.nvml import NVMLDevice
fake.gpu.power_limit_mw = 650_000
device = NVMLDevice(0)
device.restore_retry_delay_s = 0.0
if os.environ["MODE"] == "restore_fails":
    fake.fail_always("nvmlDeviceResetGpuLockedClocks")
device.settings_guard(sm_clock_mhz=1410, mem_clock_mhz=1593, power_limit_w=400,
                      allow_changes=True).__enter__()
if os.environ["MODE"] == "uncaught":
    raise RuntimeError("crash with the guard open")
sys.exit(7)
"""


@pytest.mark.parametrize("mode", ["exit", "uncaught", "restore_fails"])
def test_interpreter_exit_restores_in_a_subprocess(tmp_path, mode):
    out = tmp_path / "calls.json"
    env = dict(os.environ, CALLS_OUT=str(out), MODE=mode)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(SRC), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(EXIT_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == (1 if mode == "uncaught" else 7), proc.stderr
    state = json.loads(out.read_text())
    calls = state["calls"]
    assert calls.index(SET_SM) < calls.index(RESET_SM)
    assert RESET_MEM in calls
    assert state["mem"] is None and state["limit"] == 650_000
    if mode == "restore_fails":
        assert state["sm"] == [1410, 1410]
        assert calls.count(RESET_SM) == 3
        assert "could not restore sm_clock_mhz" in proc.stderr
    else:
        assert state["sm"] is None
        assert "could not restore" not in proc.stderr
