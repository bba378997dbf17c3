"""What puts a GPU's settings back when a guard cannot: open guards, exit and signal handlers, journal.

:class:`~powermodels.devices.base.SettingsGuard` restores its own settings on
exit. This module keeps the registry of the guards open in this process
(:func:`open_guards`) and restores them where the guard's own ``__exit__``
never runs: at interpreter exit (:func:`restore_all_open_guards`), on
``SIGTERM`` / ``SIGHUP`` while settings are changed, and when a device is
closed. After ``SIGKILL`` nothing here runs; the settings journal
(:mod:`powermodels.devices.journal`) then lets the next guard, or
``powermodels restore``, put back what the dead process left
(:func:`recover_left_settings`). A forked child forgets its parent's guards.
"""

from __future__ import annotations

import atexit
import itertools
import os
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Device, SettingsGuard

__all__ = [
    "APPLY_ORDER",
    "RestoreError",
    "add_open_guard",
    "journal_of",
    "next_guard_number",
    "note_journaled",
    "open_guards",
    "put_back",
    "recover_from_journal",
    "recover_left_settings",
    "release_signal_handlers_if_unchanged",
    "remove_open_guard",
    "restore_all_open_guards",
]


class RestoreError(RuntimeError):
    """Raised (or warned) when the previous settings could not be restored."""


#: The settings a guard changes, in the order it applies them (restored in reverse).
APPLY_ORDER = (
    ("power_limit_w", "_apply_power_limit"),
    ("mem_clock_mhz", "_apply_mem_clock"),
    ("sm_clock_mhz", "_apply_sm_clock"),
)

_active_guards: list[SettingsGuard] = []
# Re-entrant: a SIGTERM handler restores (and takes this lock) in the main
# thread, possibly while that thread was inside a guard holding it.
_active_lock = threading.RLock()
_guard_ids = itertools.count()


# ------------------------------------------------------------ the open guards
# Public so that SettingsGuard (base.py) and NVMLDevice.close (nvml.py) use the registry
# without reaching into its private list and lock.


def open_guards(device: Device | None = None) -> list[SettingsGuard]:
    """The guards entered and not yet restored, oldest first (only ``device``'s when given)."""
    with _active_lock:
        return [g for g in _active_guards if device is None or g.device is device]


def add_open_guard(guard: SettingsGuard, *, changes_settings: bool) -> None:
    """Record ``guard`` as open; while one that changes settings is open, SIGTERM/SIGHUP restore it."""
    with _active_lock:
        _active_guards.append(guard)
        if changes_settings:
            _install_signal_handlers()


def remove_open_guard(guard: SettingsGuard) -> bool:
    """Forget ``guard`` (it is being restored); False when it was not open (restored already)."""
    with _active_lock:
        if guard not in _active_guards:
            return False
        _active_guards.remove(guard)
        return True


def release_signal_handlers_if_unchanged() -> None:
    """Put the previous SIGTERM/SIGHUP handlers back once no open guard holds a change."""
    with _active_lock:  # handlers stay until the restore is done and recorded
        if not any(g.applied for g in _active_guards):
            _uninstall_signal_handlers()


def note_journaled(device: Device) -> None:
    """Remember that this process wrote journal entries for ``device`` (a signal recovers them)."""
    if device not in _journaled_devices:
        _journaled_devices.append(device)


def next_guard_number() -> int:
    """A number no other guard of this process has (part of a journal entry's id)."""
    return next(_guard_ids)


def restore_all_open_guards(reason: str = "interpreter exit") -> None:
    """Restore every open guard, newest first; what fails is said on stderr (nobody is left to catch it)."""
    # Interpreter exit with a guard still open (e.g. a generator never closed,
    # sys.exit from a thread): put the device back before NVML goes away.
    for guard in reversed(list(_active_guards)):
        failures = guard._restore(reason=reason)
        if failures:  # nobody is left to catch an exception: say it on stderr
            print(guard._failure_message(failures), file=sys.stderr)


atexit.register(restore_all_open_guards)


def _forget_guards_in_child() -> None:
    # A forked child (a multiprocessing.Pool worker, whose terminate() sends SIGTERM) inherits
    # the parent's open guards and our handler; those settings are the parent's to restore:
    # the child's signal or exit must not reset them while the parent still measures.
    _active_guards.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_guards_in_child)

# ----------------------------------------------------------- SIGTERM / SIGHUP
# A batch scheduler ends a job with SIGTERM (then SIGKILL); a closed terminal
# sends SIGHUP. Neither runs atexit, so while a guard holds changed settings
# the main thread handles them: restore every guard, then do what the signal
# would have done (the previous handler, or die by the signal).
_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))
_previous_handlers: dict[int, object] = {}
_journaled_devices: list[Device] = []  # devices this process wrote journal entries for


def _on_signal(signum, frame) -> None:
    name = signal.Signals(signum).name
    # read before restoring: the last guard's restore uninstalls us and forgets it
    previous = _previous_handlers.get(signum, signal.SIG_DFL)
    restore_all_open_guards(reason=name)
    # a guard that was restoring when the signal came is no longer active: its
    # journal entry (kept until its restore finishes) says what to put back
    for device in list(_journaled_devices):
        try:
            recover_left_settings(device)
        except Exception as err:  # the journal keeps it for the next guard
            print(f"{device.info.name}: {err}", file=sys.stderr)
    _previous_handlers.pop(signum, None)
    if signal.getsignal(signum) is _on_signal:
        signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    if callable(previous):
        previous(signum, frame)
        return
    if previous == signal.SIG_IGN:
        return
    # SIG_DFL (or a handler set from C): die by the signal, as without us
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _install_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # Python handles signals in the main thread only; the journal still covers us
    for signum in _SIGNALS:
        current = signal.getsignal(signum)
        if current is _on_signal or current == signal.SIG_IGN:
            continue  # installed already, or the process ignores it (nohup): leave it
        _previous_handlers[signum] = current
        signal.signal(signum, _on_signal)


def _uninstall_signal_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in list(_previous_handlers):
        if signal.getsignal(signum) is _on_signal:  # nobody chained onto ours since
            signal.signal(signum, _previous_handlers.pop(signum) or signal.SIG_DFL)


# -------------------------------------------------------------------- journal


def journal_of(device: Device):
    """The device's settings journal, or None where settings die with the process (simulated)."""
    flag = getattr(device, "journal_settings", None)
    if flag is None:
        flag = device.info.kind == "nvml"
    if not flag:
        return None
    from .journal import Journal

    info = device.info
    return Journal(info.uuid or f"{info.kind}-{info.index}")


def put_back(device: Device, values: dict, reason: str) -> tuple[list[str], BaseException | None]:
    """Apply ``values`` (setting -> value) in restore order, retrying each; (failures, interrupt)."""
    failures = []
    interrupt: BaseException | None = None
    for key, method in reversed(APPLY_ORDER):
        if key not in values:
            continue
        value = values[key]
        last_error: BaseException | None = None
        for attempt in range(device.restore_attempts):
            try:
                getattr(device, method)(value)
                last_error = None
                break
            except Exception as err:  # retried, then reported
                last_error = err
                if attempt + 1 < device.restore_attempts:
                    time.sleep(device.restore_retry_delay_s)
            except BaseException as err:  # Ctrl-C mid-restore: finish restoring, then re-raise
                interrupt = interrupt or err
                last_error = err
        if last_error is not None:
            failures.append(
                f"{key} to {value!r} after {device.restore_attempts} attempts "
                f"({reason}): {last_error}"
            )
    return failures, interrupt


def recover_from_journal(device: Device, journal) -> list[str]:
    """Restore what dead processes left in ``journal`` (held locked); messages of what was done."""
    with _active_lock:
        mine = {g._guard_id for g in _active_guards}
    pid = os.getpid()
    left = [e for e in journal.entries()
            if not (e.pid == pid and e.guard_id in mine) and not (e.pid != pid and e.alive())]
    if not left:
        return []
    from .journal import original_settings

    values = original_settings(left)
    with _active_lock:  # a guard of ours still open keeps what it applied (innermost wins)
        for guard in _active_guards:
            if guard.device is device:
                for key in guard.applied:
                    if key in values:
                        values[key] = getattr(guard.target, key)
    who = ", ".join(e.describe() for e in left)
    failures, interrupt = put_back(device, values, reason=f"left by {who}")
    if interrupt is not None:
        raise interrupt
    if failures:
        raise RestoreError(
            f"{device.info.name}: could not restore the settings left by {who}: {'; '.join(failures)}"
        )
    journal.remove(e.guard_id for e in left)
    done = ", ".join(f"{k}={'default' if v is None else v}" for k, v in values.items())
    return [f"{device.info.name}: restored {done} left by {who}"]


def recover_left_settings(device: Device) -> list[str]:
    """Put back the settings a killed process left changed on ``device``.

    Reads the device's journal; entries whose process is gone (SIGKILL, a
    crash, a reboot of another host) are restored to the settings they
    recorded, oldest first, and removed. Entries of running processes are
    left alone. Every guard calls this on entry; ``powermodels restore``
    calls it for every GPU with a journal.

    Returns
    -------
    list of str
        One line per restore done (empty when there was nothing to do).

    Raises
    ------
    RestoreError
        A left-behind setting could not be restored (the entry is kept).
    """
    journal = journal_of(device)
    if journal is None:
        return []
    with journal.locked():
        return recover_from_journal(device, journal)
