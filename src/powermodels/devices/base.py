"""The device protocol and the restoring settings guard.

A *device* is where sensor readings come from: the real GPU through NVML
(:mod:`powermodels.devices.nvml`) or the simulated GPU
(:mod:`powermodels.devices.simulated`). Both expose the same small surface,
:class:`Device`, so the harness and the sensor code never care which it is.

Clock and power-limit changes exist only inside :meth:`Device.settings_guard`,
a context manager that restores the previous state on normal exit, on any
exception, on ``KeyboardInterrupt``, at interpreter exit and on ``SIGTERM`` /
``SIGHUP``, and that refuses to touch anything unless the caller passes
``allow_changes=True``. On a real GPU it first writes the previous settings
to a journal (:mod:`powermodels.devices.journal`), so that after ``SIGKILL``
the next guard on that GPU, or ``powermodels restore``, puts them back.
The guards open in this process, the exit and signal handlers that restore
them, and the recovery from the journal live in
:mod:`powermodels.devices.settings_restore`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import warnings
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

# the registry of open guards, the exit/signal handlers and the journal recovery (settings_restore.py);
# RestoreError and recover_left_settings are imported here too so their old paths keep working
from .settings_restore import (
    APPLY_ORDER,
    RestoreError,
    add_open_guard,
    journal_of,
    next_guard_number,
    note_journaled,
    open_guards,
    put_back,
    recover_from_journal,
    recover_left_settings,
    release_signal_handlers_if_unchanged,
    remove_open_guard,
)

__all__ = [
    "NOT_AVAILABLE",
    "Device",
    "DeviceInfo",
    "Reading",
    "RestoreError",
    "Settings",
    "SettingsBusy",
    "SettingsChangeRefused",
    "SettingsGuard",
    "recover_left_settings",
]

#: Value of a reading the GPU does not support (never an exception).
NOT_AVAILABLE = math.nan


@dataclass(frozen=True)
class Reading:
    """One reading of the fast sensor quantities, stamped on the host clock.

    Every field other than ``t_s`` is ``NOT_AVAILABLE`` (NaN) when the
    device does not offer it. ``throttle_reasons`` is 0 when unknown.
    """

    t_s: float
    power_instant_w: float = NOT_AVAILABLE
    power_average_w: float = NOT_AVAILABLE
    power_usage_w: float = NOT_AVAILABLE
    temperature_c: float = NOT_AVAILABLE
    sm_clock_mhz: float = NOT_AVAILABLE
    mem_clock_mhz: float = NOT_AVAILABLE
    throttle_reasons: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class DeviceInfo:
    """What a device is: recorded with every dataset and calibration."""

    name: str
    kind: str  # "nvml" or "simulated"
    index: int = 0
    uuid: str = ""
    driver: str = ""
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """Clock and power-limit state. ``None`` means "the default (unlocked)"."""

    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_limit_w: float | None = None


def on_device_gpu(method):
    """Run ``method`` of an object holding a :class:`Device` (``self.device``) inside
    ``self.device.cuda_device()``, so its kernels run on the GPU whose sensor is read.

    Selected per call, not once: CUDA's current device belongs to the calling host
    thread (a Dask worker measures in its pool's threads, not the one that opened the
    device); the caller's device is restored afterwards.
    """

    @functools.wraps(method)
    def on_gpu(self, *args, **kwargs):
        with self.device.cuda_device():
            return method(self, *args, **kwargs)

    return on_gpu


class SettingsChangeRefused(PermissionError):
    """Raised when a settings change is attempted without the explicit opt-in."""


class SettingsBusy(RuntimeError):
    """Another running process holds changed settings on this GPU."""


class Device(ABC):
    """A GPU whose sensor can be read, and whose settings can be changed under guard.

    Subclasses implement the readers and the three low-level setters
    (``_apply_sm_clock``, ``_apply_mem_clock``, ``_apply_power_limit``); the
    guard logic that restores state lives here, once, for every device.
    """

    #: Seconds between retries of a failing restore.
    restore_retry_delay_s: float = 0.05
    #: Attempts of a failing restore before it is reported.
    restore_attempts: int = 3

    @property
    @abstractmethod
    def info(self) -> DeviceInfo:
        """Name, kind, index, uuid and driver."""

    @abstractmethod
    def now(self) -> float:
        """The device's monotonic host clock, in seconds."""

    @abstractmethod
    def read(self) -> Reading:
        """Power (instant, average, usage), temperature, clocks, throttle reasons."""

    @abstractmethod
    def read_energy_j(self) -> float:
        """Total-energy counter in joules (slow on Hopper: ~4 ms a call)."""

    @abstractmethod
    def supported_clocks(self) -> dict[float, list[float]]:
        """Supported SM clocks (MHz, descending) for each memory clock (MHz)."""

    @abstractmethod
    def power_limits_w(self) -> tuple[float, float, float]:
        """(minimum, maximum, current) power limit in watts; NaN if unknown."""

    @abstractmethod
    def current_settings(self) -> Settings:
        """The settings in force now (what a guard will restore)."""

    @abstractmethod
    def _apply_sm_clock(self, mhz: float | None) -> None:
        """Lock the SM clock to ``mhz``, or reset it to default when ``None``."""

    @abstractmethod
    def _apply_mem_clock(self, mhz: float | None) -> None:
        """Lock the memory clock to ``mhz``, or reset it to default when ``None``."""

    @abstractmethod
    def _apply_power_limit(self, watts: float | None) -> None:
        """Set the power limit to ``watts``, or to the default when ``None``."""

    def settings_guard(
        self,
        *,
        sm_clock_mhz: float | None = None,
        mem_clock_mhz: float | None = None,
        power_limit_w: float | None = None,
        allow_changes: bool = False,
    ) -> SettingsGuard:
        """Change clocks / power limit for the duration of a ``with`` block.

        Parameters
        ----------
        sm_clock_mhz, mem_clock_mhz, power_limit_w : float or None
            Values to apply; ``None`` leaves that setting alone.
        allow_changes : bool, default=False
            Explicit opt-in. Without it the guard refuses to change anything.

        Returns
        -------
        SettingsGuard
            A context manager; the previous settings come back on exit.
        """
        return SettingsGuard(
            self,
            Settings(sm_clock_mhz, mem_clock_mhz, power_limit_w),
            allow_changes=allow_changes,
        )

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (NVML shutdown); restores any guard still active."""

    def compute_processes(self) -> list[int] | None:
        """Pids of the compute processes on the GPU; None when the device cannot tell."""
        return None

    def clock_probe(self):
        """An on-GPU SM-clock probe (:class:`~powermodels.devices.clock_probe.ClockProbe`).

        None where no probe can run (no CUDA runtime, or the device cannot run kernels);
        the clock then comes from the NVML reading, a slow sensor.
        """
        return None

    def cuda_device(self):
        """Context in which CuPy's current device (that of the calling thread) is this GPU;
        nothing is selected where the device runs no CUDA kernels."""
        return contextlib.nullcontext()


class SettingsGuard:
    """Context manager that applies settings and always restores the previous ones.

    Changes are applied one at a time (power limit, memory clock, SM clock);
    if one fails, the ones already applied are undone before the error is
    re-raised. On exit — normal, exception, ``KeyboardInterrupt`` or
    interpreter exit — each changed setting is restored, retrying a failing
    restore ``device.restore_attempts`` times. A restore that still fails is
    raised as :class:`RestoreError` after a clean body, or reported as a
    warning (and attached as a note) when the body already raised, so the
    original error is never masked.
    """

    def __init__(self, device: Device, target: Settings, *, allow_changes: bool = False):
        self.device = device
        self.target = target
        self.allow_changes = allow_changes
        self.previous: Settings | None = None
        self.applied: list[str] = []
        self.restore_failures: list[str] = []
        self._guard_id = f"{os.getpid()}-{id(self):x}-{next_guard_number()}"
        self._journal = None
        self._in_flight: str | None = None

    def __enter__(self) -> SettingsGuard:
        wanted = [(k, m) for k, m in APPLY_ORDER if getattr(self.target, k) is not None]
        if wanted and not self.allow_changes:
            raise SettingsChangeRefused(
                f"{self.device.info.name}: refusing to change {', '.join(k for k, _ in wanted)} "
                "without allow_changes=True (clock and power-limit changes are opt-in)"
            )
        journal = journal_of(self.device)
        if journal is None:
            self.previous = self._previous()
        else:
            with journal.locked():
                for message in recover_from_journal(self.device, journal):
                    warnings.warn(message, RuntimeWarning, stacklevel=2)
                if wanted:
                    others = [e for e in journal.entries() if e.pid != os.getpid()]
                    if others:
                        raise SettingsBusy(
                            f"{self.device.info.name}: settings held by another powermodels process, "
                            f"{others[0].describe()}; wait for it to finish (a killed one is cleaned "
                            "up by the next guard or `powermodels restore`)"
                        )
                self.previous = self._previous()
                if wanted:  # before any change: SIGKILL from here on leaves a record
                    from .journal import Entry

                    journal.add(Entry.mine(self._guard_id, self._original(),
                                           [k for k, _ in wanted], self.device.info.name))
                    self._journal = journal
                    note_journaled(self.device)
        add_open_guard(self, changes_settings=bool(wanted))
        try:
            for key, method in wanted:
                # a signal handler restoring between the setter's return and the append
                # must still restore this one
                self._in_flight = key
                getattr(self.device, method)(getattr(self.target, key))
                self.applied.append(key)
                self._in_flight = None
        except BaseException as err:
            self._in_flight = None  # it raised: not applied
            failures = self._restore(reason="error while applying settings")
            if failures:  # report without masking the error that stopped the change
                self._report_alongside(err, failures)
            raise
        return self

    def _previous(self) -> Settings:
        """The settings now: the device's, with what an enclosing guard applied.

        NVML cannot read back a clock lock, so a nested guard would otherwise
        reset the outer guard's locked clock on exit instead of re-locking it.
        """
        now = self.device.current_settings()
        for outer in open_guards(self.device):  # oldest first: the innermost wins
            for key in outer.applied:
                now = Settings(**{**asdict(now), key: getattr(outer.target, key)})
        return now

    def _original(self) -> dict:
        """``previous`` for the journal, with what enclosing guards changed as before the outermost.

        A nested guard's entry outliving its enclosing guards (its restore or removal
        failed) must not bring back the enclosing guard's clock lock on recovery.
        """
        values = asdict(self.previous)
        seen: set[str] = set()
        for outer in open_guards(self.device):  # oldest first: the outermost change wins
            if outer is not self and outer.previous is not None:
                for key in outer.applied:
                    if key not in seen:
                        seen.add(key)
                        values[key] = getattr(outer.previous, key)
        return values

    def __exit__(self, exc_type, exc, tb) -> bool:
        failures = self._restore(reason="exit")
        if failures:
            if exc is None:
                raise RestoreError(self._failure_message(failures))
            self._report_alongside(exc, failures)
        return False

    def _failure_message(self, failures: list[str]) -> str:
        return f"{self.device.info.name}: could not restore {'; '.join(failures)}"

    def _report_alongside(self, error: BaseException, failures: list[str]) -> None:
        # A restore failed while another error is propagating: warn, and attach
        # the message to that error rather than replace it.
        message = self._failure_message(failures)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        if hasattr(error, "add_note"):
            error.add_note(message)

    def _restore(self, reason: str) -> list[str]:
        """Undo every applied change in reverse order; return what failed."""
        if not remove_open_guard(self):
            return []
        assert self.previous is not None
        values = {k: getattr(self.previous, k) for k, _ in APPLY_ORDER
                  if k in self.applied or k == self._in_flight}
        self._in_flight = None
        failures, interrupt = put_back(self.device, values, reason)
        self.applied.clear()
        self.restore_failures = failures
        if self._journal is not None and not failures:
            # restored: the record is no longer needed (a failed restore keeps it for
            # the next guard or `powermodels restore`)
            try:
                with self._journal.locked():
                    self._journal.remove([self._guard_id])
            except Exception as err:  # OSError, or filelock refusing a signal handler's re-entry
                warnings.warn(f"{self.device.info.name}: settings restored, but the journal "
                              f"entry could not be removed: {err}", RuntimeWarning, stacklevel=3)
        release_signal_handlers_if_unchanged()  # handlers stay until the restore is done and recorded
        if interrupt is not None:
            if failures and hasattr(interrupt, "add_note"):
                interrupt.add_note(self._failure_message(failures))
            raise interrupt
        return failures
