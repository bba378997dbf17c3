"""The device protocol and the restoring settings guard.

A *device* is where sensor readings come from: the real GPU through NVML
(:mod:`powermodels.devices.nvml`) or the simulated GPU
(:mod:`powermodels.devices.simulated`). Both expose the same small surface,
:class:`Device`, so the harness and the sensor code never care which it is.

Clock and power-limit changes exist only inside :meth:`Device.settings_guard`,
a context manager that restores the previous state on normal exit, on any
exception, on ``KeyboardInterrupt`` and at interpreter exit, and that refuses
to touch anything unless the caller passes ``allow_changes=True``.
"""

from __future__ import annotations

import atexit
import math
import sys
import threading
import time
import warnings
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field

__all__ = [
    "NOT_AVAILABLE",
    "Device",
    "DeviceInfo",
    "Reading",
    "RestoreError",
    "Settings",
    "SettingsChangeRefused",
    "SettingsGuard",
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


class SettingsChangeRefused(PermissionError):
    """Raised when a settings change is attempted without the explicit opt-in."""


class RestoreError(RuntimeError):
    """Raised (or warned) when the previous settings could not be restored."""


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


_APPLY_ORDER = (
    ("power_limit_w", "_apply_power_limit"),
    ("mem_clock_mhz", "_apply_mem_clock"),
    ("sm_clock_mhz", "_apply_sm_clock"),
)

_active_guards: list[SettingsGuard] = []
_active_lock = threading.Lock()


def _restore_all_at_exit() -> None:
    # Interpreter exit with a guard still open (e.g. a generator never closed,
    # sys.exit from a thread): put the device back before NVML goes away.
    for guard in reversed(list(_active_guards)):
        failures = guard._restore(reason="interpreter exit")
        if failures:  # nobody is left to catch an exception: say it on stderr
            print(guard._failure_message(failures), file=sys.stderr)


atexit.register(_restore_all_at_exit)


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

    def __enter__(self) -> SettingsGuard:
        wanted = [(k, m) for k, m in _APPLY_ORDER if getattr(self.target, k) is not None]
        if wanted and not self.allow_changes:
            raise SettingsChangeRefused(
                f"{self.device.info.name}: refusing to change {', '.join(k for k, _ in wanted)} "
                "without allow_changes=True (clock and power-limit changes are opt-in)"
            )
        self.previous = self.device.current_settings()
        with _active_lock:
            _active_guards.append(self)
        try:
            for key, method in wanted:
                getattr(self.device, method)(getattr(self.target, key))
                self.applied.append(key)
        except BaseException as err:
            failures = self._restore(reason="error while applying settings")
            if failures:  # report without masking the error that stopped the change
                self._report_alongside(err, failures)
            raise
        return self

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
        with _active_lock:
            if self not in _active_guards:
                return []
            _active_guards.remove(self)
        assert self.previous is not None
        failures = []
        interrupt: BaseException | None = None
        for key, method in reversed(_APPLY_ORDER):
            if key not in self.applied:
                continue
            value = getattr(self.previous, key)
            last_error: BaseException | None = None
            for attempt in range(self.device.restore_attempts):
                try:
                    getattr(self.device, method)(value)
                    last_error = None
                    break
                except Exception as err:  # retried, then reported
                    last_error = err
                    if attempt + 1 < self.device.restore_attempts:
                        time.sleep(self.device.restore_retry_delay_s)
                except BaseException as err:  # Ctrl-C mid-restore: finish restoring, then re-raise
                    interrupt = interrupt or err
                    last_error = err
            if last_error is not None:
                failures.append(
                    f"{key} to {value!r} after {self.device.restore_attempts} attempts "
                    f"({reason}): {last_error}"
                )
        self.applied.clear()
        self.restore_failures = failures
        if interrupt is not None:
            if failures and hasattr(interrupt, "add_note"):
                interrupt.add_note(self._failure_message(failures))
            raise interrupt
        return failures
