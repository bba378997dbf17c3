"""Restore that survives the process: the settings journal, SIGTERM/SIGHUP handlers, SIGKILL recovery.

The fake NVML keeps its GPU in a JSON file (``persist``), so a child process
that dies with locked clocks leaves them for the next process to find, as a
real GPU would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from powermodels.devices import base, journal, settings_restore

TESTS = Path(__file__).resolve().parents[1]
SRC = TESTS.parent / "src"

SET_SM = "nvmlDeviceSetGpuLockedClocks"
RESET_SM = "nvmlDeviceResetGpuLockedClocks"
SET_MEM = "nvmlDeviceSetMemoryLockedClocks"
RESET_MEM = "nvmlDeviceResetMemoryLockedClocks"
SET_LIMIT = "nvmlDeviceSetPowerManagementLimit"
BODY = "nvmlDeviceGetTemperature"  # called only by the guarded body below

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork (POSIX)")


@pytest.fixture
def gpu(fake_nvml, tmp_path):
    """The fake GPU with a non-default power limit, persisted across processes."""
    fake_nvml.gpu.power_limit_mw = 650_000
    fake_nvml.persist(tmp_path / "gpu.json")
    return fake_nvml


def original(fake) -> bool:
    fake._load_state()
    return fake.gpu.sm_locked is None and fake.gpu.mem_locked is None and \
        fake.gpu.power_limit_mw == 650_000


def journal_entries(fake):
    return journal.Journal(fake.gpu.uuid).entries()


def _device():
    from powermodels.devices.nvml import NVMLDevice

    device = NVMLDevice(0)
    device.restore_retry_delay_s = 0.0
    return device


def _guarded_run(fake, nested: bool) -> None:
    """A locked-clock measurement: the body reads the temperature."""
    device = _device()
    if nested:
        with device.settings_guard(power_limit_w=400, allow_changes=True), \
                device.settings_guard(sm_clock_mhz=1410, mem_clock_mhz=1593, allow_changes=True):
            fake.nvmlDeviceGetTemperature(device._handle, 0)
    else:
        with device.settings_guard(sm_clock_mhz=1410, mem_clock_mhz=1593, power_limit_w=400,
                                   allow_changes=True):
            fake.nvmlDeviceGetTemperature(device._handle, 0)
    device.close()


def run_child(fake, fault: tuple[str, int] | None, signum: int | None, nested: bool) -> int:
    """Fork; the child runs the guarded measurement and sends itself ``signum`` at ``fault``."""
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 0
        try:
            if fault is not None:
                fake.fail_nth(fault[0], fault[1], lambda: os.kill(os.getpid(), signum))
            _guarded_run(fake, nested)
            time.sleep(0.5)  # a signal that has not arrived yet is not a pass
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


POINTS = [  # (where, function, n-th call): every step of apply, body and restore
    ("applying the power limit", SET_LIMIT, 1),
    ("applying the memory clock", SET_MEM, 1),
    ("applying the SM clock", SET_SM, 1),
    ("in the body", BODY, 1),
    ("restoring the SM clock", RESET_SM, 1),
    ("restoring the memory clock", RESET_MEM, 1),
    ("restoring the power limit", SET_LIMIT, 2),
]
SIGNALS = [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP]
RECOVERY = ["next guard", "powermodels restore"]
PATHS = [(p, s, nested, r) for p in POINTS for s in SIGNALS for nested in (False, True)
         for r in (RECOVERY if s == signal.SIGKILL else [None])]


def _recover(fake, how: str, capsys) -> None:
    if how == "next guard":
        device = _device()
        with pytest.warns(RuntimeWarning, match="left by pid"):
            with device.settings_guard():
                pass
        device.close()
    else:
        from powermodels.cli import main

        assert main(["restore"]) == 0
        out = capsys.readouterr().out
        assert "restored" in out and "[gone]" in out


def test_every_injected_fault_path_ends_with_the_original_settings(gpu, capsys):
    """SIGKILL, SIGTERM and SIGHUP at every step of a single and a nested guard."""
    tried, restored, by_handler = 0, 0, 0
    for (where, name, n), signum, nested, how in PATHS:
        assert original(gpu), "test setup"
        code = run_child(gpu, (name, n), signum, nested)
        tried += 1
        label = f"{signal.Signals(signum).name} {where} ({'nested' if nested else 'single'} guard)"
        assert code == -signum, f"{label}: child ended with {code}"
        if signum == signal.SIGKILL:
            assert journal_entries(gpu), f"{label}: no journal entry left"
            _recover(gpu, how, capsys)
        else:  # the handler restored before the process died
            by_handler += original(gpu)
        assert original(gpu), f"{label}: settings not restored"
        assert journal_entries(gpu) == [], f"{label}: journal not cleared"
        restored += 1
    assert tried == restored == len(PATHS) == 56
    assert by_handler == 28
    print(f"fault paths: {tried} tried, {restored} restored ({by_handler} by the signal handler, "
          f"{tried - by_handler} after SIGKILL by the next guard or `powermodels restore`)")


def test_clean_run_leaves_no_journal(gpu):
    assert run_child(gpu, None, None, nested=False) == 0
    assert original(gpu) and journal_entries(gpu) == []


def test_journal_written_before_the_change(gpu):
    seen = []

    def look():
        entries = journal_entries(gpu)
        seen.append((entries[0].previous, entries[0].keys) if entries else None)

    gpu.fail_nth(SET_LIMIT, 1, look)
    _guarded_run(gpu, nested=False)
    assert seen == [({"sm_clock_mhz": None, "mem_clock_mhz": None, "power_limit_w": 650.0},
                     ["power_limit_w", "mem_clock_mhz", "sm_clock_mhz"])]
    assert journal_entries(gpu) == []


def test_nested_guards_restore_the_outer_lock(gpu):
    device = _device()
    with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
        with device.settings_guard(sm_clock_mhz=1200, power_limit_w=300, allow_changes=True):
            assert gpu.gpu.sm_locked == (1200, 1200)
            assert len(journal_entries(gpu)) == 2
        assert gpu.gpu.sm_locked == (1410, 1410)  # re-locked, not reset to default
        assert gpu.gpu.power_limit_mw == 650_000
        assert len(journal_entries(gpu)) == 1
    device.close()
    assert original(gpu) and journal_entries(gpu) == []


def test_failed_restore_keeps_the_entry_for_later(gpu, capsys):
    device = _device()
    gpu.fail_always(RESET_SM)
    with pytest.raises(base.RestoreError):
        with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
            pass
    assert gpu.gpu.sm_locked == (1410, 1410) and len(journal_entries(gpu)) == 1
    gpu.heal(RESET_SM)
    with pytest.warns(RuntimeWarning, match="left by pid"):
        with device.settings_guard():  # the next guard of the same process retries it
            pass
    device.close()
    assert original(gpu) and journal_entries(gpu) == []


def test_signal_handlers_installed_only_while_settings_are_changed(gpu):
    before = signal.getsignal(signal.SIGTERM)
    device = _device()
    with device.settings_guard():
        assert signal.getsignal(signal.SIGTERM) is before
    with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
        assert signal.getsignal(signal.SIGTERM) is settings_restore._on_signal
        assert signal.getsignal(signal.SIGHUP) is settings_restore._on_signal
    assert signal.getsignal(signal.SIGTERM) is before
    device.close()


def test_previous_python_handler_is_chained(gpu):
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda s, f: calls.append(s))
    try:
        device = _device()
        with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.01)  # let the handler run
            assert gpu.gpu.sm_locked is None  # restored by our handler first
        device.close()
        assert calls == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_restore_command_with_nothing_to_do(gpu, capsys):
    from powermodels.cli import main

    assert main(["restore"]) == 0
    assert "nothing to restore" in capsys.readouterr().out


def test_restore_command_leaves_a_running_process_alone(gpu, capsys):
    from powermodels.cli import main

    entry = journal.Entry.mine("other-1", {"sm_clock_mhz": None}, ["sm_clock_mhz"], "x")
    j = journal.Journal(gpu.gpu.uuid)
    with j.locked():
        j.add(entry)  # our own live pid, a guard id no guard of ours has: treated as left
    with j.locked():
        j._write([journal.Entry(**{**entry.__dict__, "pid": 1, "start": None})])  # alive, not us
    assert main(["restore", "--list"]) == 0
    assert "[running]" in capsys.readouterr().out
    assert main(["restore"]) == 0
    assert "left alone, still held by pid 1" in capsys.readouterr().out


SECOND = """
import os, sys, time
import fake_pynvml
fake = fake_pynvml.install()
from powermodels.devices.nvml import NVMLDevice
device = NVMLDevice(0)
with device.settings_guard(sm_clock_mhz=1200, allow_changes=True):
    open(os.environ["READY"], "w").close()
    while not os.path.exists(os.environ["GO"]):
        time.sleep(0.01)
device.close()
"""


def _spawn(tmp_path, gpu, script):
    env = dict(os.environ, FAKE_PYNVML_STATE=gpu._state_path, READY=str(tmp_path / "ready"),
               GO=str(tmp_path / "go"))
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(SRC), env.get("PYTHONPATH", "")])
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    return proc


def test_two_processes_on_one_gpu(gpu, tmp_path):
    """A second process may not change a GPU whose settings another one holds."""
    proc = _spawn(tmp_path, gpu, SECOND)
    try:
        gpu._load_state()
        assert gpu.gpu.sm_locked == (1200, 1200)
        device = _device()
        with pytest.raises(base.SettingsBusy, match=f"pid {proc.pid} on "):
            with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
                pytest.fail("must not run")
        gpu._load_state()
        assert gpu.gpu.sm_locked == (1200, 1200)  # the other process's lock untouched
        with device.settings_guard():  # reading under a guard without changes is fine
            pass
    finally:
        (tmp_path / "go").touch()
        assert proc.wait(timeout=60) == 0, proc.communicate()
    assert original(gpu) and journal_entries(gpu) == []
    with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):  # free now
        print("MID", journal_entries(gpu))
        assert gpu.gpu.sm_locked == (1410, 1410)
    device.close()
    assert original(gpu)


def test_sigterm_during_a_locked_clock_run_in_a_subprocess(gpu, tmp_path):
    """The scheduler's SIGTERM, from outside, to a real interpreter: restored, exit by the signal."""
    proc = _spawn(tmp_path, gpu, SECOND)
    gpu._load_state()
    assert gpu.gpu.sm_locked == (1200, 1200)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert original(gpu) and journal_entries(gpu) == []


def test_sigkill_then_restore_command_in_a_subprocess(gpu, tmp_path):
    proc = _spawn(tmp_path, gpu, SECOND)
    proc.kill()
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert not original(gpu) and len(journal_entries(gpu)) == 1
    env = dict(os.environ, FAKE_PYNVML_STATE=gpu._state_path)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(SRC), env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, "-c", "import fake_pynvml; fake_pynvml.install(); "
                          "from powermodels.cli import main; raise SystemExit(main(['restore']))"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "restored" in out.stdout and f"pid {proc.pid}" in out.stdout
    assert original(gpu) and journal_entries(gpu) == []


def test_state_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(journal.STATE_DIR_ENV)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert journal.state_dir() == tmp_path / "powermodels"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert journal.state_dir() == Path.home() / ".local" / "state" / "powermodels"


def _left_entry(guard_id, previous, pid=2**22 + 17):
    """An entry of a process that is gone (no such pid), as a SIGKILL leaves it."""
    entry = journal.Entry.mine(guard_id, previous, list(previous), "fake H100")
    return {**entry.__dict__, "pid": pid, "start": None}


def _write_raw(j, text):
    j.path.parent.mkdir(parents=True, exist_ok=True)
    j.path.write_text(text)


def test_restore_list_on_a_truncated_journal_changes_nothing_and_says_so(gpu, capsys):
    """Issue 25 #6: `restore --list` renamed a truncated journal, printed nothing and exited 0."""
    from powermodels.cli import main

    j = journal.Journal(gpu.gpu.uuid)
    full = json.dumps({"gpu": gpu.gpu.uuid, "entries": [_left_entry("a", {"power_limit_w": 700.0}),
                                                        _left_entry("b", {"sm_clock_mhz": None})]},
                      indent=1)
    _write_raw(j, full[: full.index('"guard_id": "b"') + 5])  # cut inside the second entry
    before = sorted(p.name for p in j.path.parent.iterdir())
    assert main(["restore", "--list"]) == 1
    out, err = capsys.readouterr()
    assert sorted(p.name for p in j.path.parent.iterdir()) == before  # nothing renamed or written
    assert "damaged JSON" in err and "1 complete entry recovered" in err and str(j.path) in err
    assert "'power_limit_w'" in out and "[gone]" in out  # the complete entry is still listed


def test_a_bad_entry_never_hides_a_good_one(gpu, capsys):
    """Issue 25 #6: one entry with an extra/bad field set aside the whole journal (a 700 W limit lost)."""
    from powermodels.cli import main

    gpu.gpu.power_limit_mw = 400_000  # what a killed run left
    gpu._save_state()
    j = journal.Journal(gpu.gpu.uuid)
    good = {**_left_entry("good", {"power_limit_w": 700.0}), "added_by_a_newer_version": 1}
    bad = {**_left_entry("bad", {"sm_clock_mhz": None}), "keys": "sm_clock_mhz"}
    _write_raw(j, json.dumps({"gpu": gpu.gpu.uuid, "entries": [bad, good]}))
    with pytest.warns(RuntimeWarning, match="entry 1 skipped: entry 'bad': field 'keys'"):
        assert [e.guard_id for e in j.entries()] == ["good"]
    assert main(["restore"]) == 1  # restored the good entry, and says the journal was damaged
    out, err = capsys.readouterr()
    gpu._load_state()
    assert gpu.gpu.power_limit_mw == 700_000
    assert "restored power_limit_w=700.0" in out
    assert "field 'keys' has a bad value 'sm_clock_mhz'" in err
    kept = journal.set_aside_journals()
    assert len(kept) == 1 and '"guard_id": "bad"' in kept[0].read_text()  # the bad one, for a person
    assert not j.path.exists()
    assert main(["restore", "--list"]) == 1  # until a person deletes the copy
    assert "kept aside" in capsys.readouterr().err


def test_a_journal_that_is_a_folder_is_reported(gpu, capsys):
    from powermodels.cli import main

    j = journal.Journal(gpu.gpu.uuid)
    j.path.mkdir(parents=True)
    assert main(["restore", "--list"]) == 1
    assert "is a folder, not a journal file" in capsys.readouterr().err
    assert j.path.is_dir()  # --list changes nothing
    device = _device()
    with pytest.warns(RuntimeWarning, match="kept as .*corrupt-"):  # the next write sets it aside, loudly
        with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
            assert journal_entries(gpu)[0].keys == ["sm_clock_mhz"]
    device.close()
    assert original(gpu) and not j.path.exists() and journal.set_aside_journals()[0].is_dir()


@pytest.mark.parametrize("text", ["", "[1, 2]", "null", '{"entries": 3}', '{"gpu": "x"', "\x00\xff"])
def test_unreadable_journals_are_errors_not_silence(gpu, capsys, text):
    from powermodels.cli import main

    j = journal.Journal(gpu.gpu.uuid)
    _write_raw(j, text)
    assert main(["restore", "--list"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(j.path) in err
    assert j.path.read_text() == text


def test_entry_validation_names_the_field():
    ok = _left_entry("x", {"sm_clock_mhz": 1410.0})
    assert journal.entry_from_dict(ok).previous == {"sm_clock_mhz": 1410.0}
    for field, value in [("pid", "12"), ("pid", True), ("previous", {"fan": 1}),
                         ("previous", {"sm_clock_mhz": float("nan")}), ("keys", ["volts"]), ("host", 3)]:
        with pytest.raises(ValueError, match=f"field '{field}' has a bad value"):
            journal.entry_from_dict({**ok, field: value})
    with pytest.raises(ValueError, match="field 'previous' is missing"):
        journal.entry_from_dict({k: v for k, v in ok.items() if k != "previous"})


def test_restore_command_reaches_every_gpu_under_cuda_visible_devices(fake_nvml, monkeypatch, capsys):
    """Inside a job that sees one GPU of two, `powermodels restore` still restores the other one.

    The journal is keyed by UUID: restore must look at every GPU NVML knows,
    not the CUDA ordinals ``CUDA_VISIBLE_DEVICES`` leaves (ordinal 1 does not exist here).
    """
    from powermodels.cli import main

    fake_nvml.add_gpus(1)
    fake_nvml.gpu.sm_locked = (1000, 1000)  # NVML GPU 0, left locked by a process now gone
    entry = journal.Entry("gone-1", 12345, "another-host", None, {"sm_clock_mhz": None},
                          ["sm_clock_mhz"], "fake")
    j = journal.Journal(fake_nvml.gpu.uuid)
    with j.locked():
        j.add(entry)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert main(["restore"]) == 0, capsys.readouterr()
    assert fake_nvml.gpu.sm_locked is None
    assert j.entries() == []
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"


def test_journal_lock_lookup_is_reentrant_for_a_signal_handler(tmp_path):
    """A SIGTERM handler that restores runs in the main thread, possibly while that thread is
    inside ``_file_lock``'s lookup: taking the lookup's lock again must not deadlock."""
    path = tmp_path / "x.lock"
    done = []

    def handler_reentry():
        done.append(journal._file_lock(path))

    with journal._locks_guard:  # the main thread, interrupted inside the lookup
        acquired = journal._locks_guard.acquire(timeout=1.0)  # what the handler does
        if acquired:
            journal._locks_guard.release()
            handler_reentry()
    assert acquired and done and done[0] is journal._file_lock(path)



def _refuse_journal_lock(guard, error: Exception) -> None:
    def refuse():
        raise error

    guard._journal.locked = refuse  # this guard's Journal object only


def test_restored_guard_survives_a_journal_lock_error(gpu):
    """Settings restored but the journal cannot be locked (filelock refuses a signal handler's
    re-entry with RuntimeError): a warning, not an exception out of the restore (or the handler),
    and the handlers come off."""
    before = signal.getsignal(signal.SIGTERM)
    device = _device()
    guard = device.settings_guard(sm_clock_mhz=1410, allow_changes=True)
    with pytest.warns(RuntimeWarning, match="journal entry could not be removed"):
        with guard:
            _refuse_journal_lock(guard, RuntimeError("lock acquired again while this thread's "
                                                     "acquire of it waits"))
    assert gpu.gpu.sm_locked is None
    assert signal.getsignal(signal.SIGTERM) is before
    device.close()


def test_stale_nested_entry_does_not_relock_the_outer_clock(gpu):
    """A nested guard's journal entry records the settings before the *outermost* change: if it
    is left behind (its removal failed) after the outer guard restored, recovering it must not
    lock the outer guard's clock again, with nobody left to undo it."""
    device = _device()
    with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
        inner = device.settings_guard(sm_clock_mhz=1200, allow_changes=True)
        with pytest.warns(RuntimeWarning, match="journal entry could not be removed"):
            with inner:
                _refuse_journal_lock(inner, OSError("journal folder gone read-only"))
        assert gpu.gpu.sm_locked == (1410, 1410)
        inner2 = device.settings_guard(sm_clock_mhz=1200, allow_changes=True)
        with pytest.warns(RuntimeWarning, match="journal entry could not be removed"):
            with inner2:
                _refuse_journal_lock(inner2, OSError("journal folder gone read-only"))
        with pytest.warns(RuntimeWarning, match="left by pid"):
            with device.settings_guard():  # recovered inside the outer guard: its lock stays
                assert gpu.gpu.sm_locked == (1410, 1410)
        assert len(journal_entries(gpu)) == 1  # the outer one
        inner3 = device.settings_guard(sm_clock_mhz=1200, allow_changes=True)
        with pytest.warns(RuntimeWarning, match="journal entry could not be removed"):
            with inner3:
                _refuse_journal_lock(inner3, OSError("journal folder gone read-only"))
    assert gpu.gpu.sm_locked is None and len(journal_entries(gpu)) == 1  # inner3's, stale
    with pytest.warns(RuntimeWarning, match="left by pid"):
        with device.settings_guard():  # a read-only guard recovers it
            pass
    assert gpu.gpu.sm_locked is None, "a read-only guard locked the clock"
    device.close()


def test_forked_child_killed_by_sigterm_leaves_the_parents_settings(gpu):
    """A worker forked inside a guard (multiprocessing.Pool; its terminate() sends SIGTERM) inherits
    the handler and the guard list: its SIGTERM must not reset the parent's clocks or drop the
    parent's journal entry while the parent still measures."""
    device = _device()
    with device.settings_guard(sm_clock_mhz=1410, allow_changes=True):
        pid = os.fork()
        if pid == 0:  # child: never return into pytest
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1.0)
            finally:
                os._exit(0)
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
        gpu._load_state()
        assert gpu.gpu.sm_locked == (1410, 1410), "the child reset the parent's locked clock"
        assert len(journal_entries(gpu)) == 1
    device.close()
    assert original(gpu) and journal_entries(gpu) == []
