"""Exclusive measurement: one campaign per folder, one measurement per GPU, nobody else on it.

Energy read from a GPU's sensor is the energy of *everything* running on the
GPU. Two ``powermodels campaign`` processes on one output folder would both
run every configuration and, on one GPU, load it at the same time: both record
wrong energies. Three guards against it:

* :func:`campaign_lock` — a file lock on the campaign folder; a second campaign
  on the same folder waits up to ``wait_s`` then fails with a message naming
  the first (pid, host, start time, command, from a lock-info file).
* :func:`gpu_lock` — a file lock per GPU UUID (in the state directory of
  :mod:`powermodels.devices.journal`), held for each measured run, so two
  campaigns on different folders take turns on one GPU.
* :func:`measured_alone` — NVML's list of compute processes on the GPU
  (``nvmlDeviceGetComputeRunningProcesses``) before and after each run; a
  process other than this one is counted on the row
  (``schema.OTHER_GPU_PROCESSES``) with a warning, or is an error with
  ``exclusive=True``. Where the GPU cannot list processes the count is NaN.
  In a container without the host's PID namespace NVML reports host pids, so
  this process itself may be counted: check before using ``exclusive``.

:func:`throttle_summary` turns the clock-event (throttle) reasons sampled with
every trace into fractions of samples on the run row, so throttled runs can
be filtered (``runs[runs.throttled_fraction == 0]``).
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import socket
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from .. import clock_events, schema

__all__ = [
    "CLOCK_EVENT_OTHER",
    "CLOCK_EVENT_POWER_CAP",
    "CLOCK_EVENT_THERMAL",
    "GPUBusy",
    "LockBusy",
    "OtherProcessError",
    "campaign_lock",
    "gpu_lock",
    "holds_campaign_lock",
    "measured_alone",
    "throttle_summary",
]

# NVML clock-event reason bits (powermodels.clock_events, one home for them)
CLOCK_EVENT_POWER_CAP = clock_events.POWER_CAP    # SwPowerCap, HwPowerBrakeSlowdown
CLOCK_EVENT_THERMAL = clock_events.THERMAL        # SwThermalSlowdown, HwThermalSlowdown
CLOCK_EVENT_OTHER = clock_events.OTHER_SLOWDOWN   # HwSlowdown, SyncBoost
_ANY = CLOCK_EVENT_POWER_CAP | CLOCK_EVENT_THERMAL | CLOCK_EVENT_OTHER


class LockBusy(OSError):
    """Another process holds the lock (its pid/host/command are in the message); like EBUSY."""


class GPUBusy(LockBusy):
    """Another process is measuring on this GPU."""


class OtherProcessError(OSError):
    """Another process ran on the GPU during an exclusive measurement."""


def _info_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".json")


def _holder(lock_path: Path) -> str:
    try:
        info = json.loads(_info_path(lock_path).read_text())
        return (f"pid {info['pid']} on {info['host']} since {info['started']} "
                f"({' '.join(info.get('argv', []))[:120]})")
    except (OSError, ValueError, KeyError, TypeError):
        return "another process (no lock information)"


@contextmanager
def _locked(lock_path: Path, wait_s: float, busy: type[LockBusy], what: str, advice: str):
    from filelock import FileLock, Timeout

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path), thread_local=False)
    try:
        lock.acquire(timeout=max(float(wait_s), 0.0))
    except Timeout:
        raise busy(f"{what} is in use by {_holder(lock_path)}"
                   + (f"; waited {wait_s:g} s" if wait_s > 0 else "") + f"; {advice}") from None
    info = _info_path(lock_path)
    try:
        tmp = info.with_name(f".{info.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({
            "pid": os.getpid(), "host": socket.gethostname(), "argv": sys.argv,
            "started": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}))
        os.replace(tmp, info)
        yield
    finally:
        info.unlink(missing_ok=True)
        lock.release()


@contextmanager
def campaign_lock(out_dir, wait_s: float = 0.0):
    """Hold the lock of a campaign folder for the ``with`` block.

    Parameters
    ----------
    out_dir : path
        The campaign folder (created).
    wait_s : float, default=0
        How long to wait for another campaign on the same folder.

    Raises
    ------
    LockBusy
        Another process holds the folder after ``wait_s``; the message names
        it (pid, host, start time, command).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    with _locked(out / ".campaign.lock", wait_s, LockBusy, f"campaign folder {str(out)!r}",
                 "wait for it to finish (powermodels campaign --wait SECONDS)"):
        yield


def holds_campaign_lock(function):
    """Decorator: call ``function(spec, out_dir, ...)`` holding ``out_dir``'s campaign lock.

    The wrapped function takes one more keyword, ``lock_wait_s`` (default 0:
    fail at once when another campaign holds the folder).
    """

    @functools.wraps(function)
    def wrapper(spec, out_dir, *args, lock_wait_s: float = 0.0, **kwargs):
        with campaign_lock(out_dir, wait_s=lock_wait_s):
            return function(spec, out_dir, *args, **kwargs)

    return wrapper


@contextmanager
def gpu_lock(device, wait_s: float = 60.0):
    """Hold the lock of ``device``'s GPU (by UUID) for the ``with`` block.

    Only real GPUs (``info.kind == "nvml"``) are locked: a simulated GPU lives
    in its process. Waits up to ``wait_s`` for another measurement.

    Raises
    ------
    GPUBusy
        Another process measured on the GPU for longer than ``wait_s``.
    """
    info = device.info
    if info.kind != "nvml":
        yield
        return
    from ..devices.journal import safe_name, state_dir

    path = state_dir() / "locks" / f"{safe_name(info.uuid or f'nvml-{info.index}')}.lock"
    with _locked(path, wait_s, GPUBusy, f"GPU {info.name} ({info.uuid or info.index})",
                 "one measurement at a time on a GPU"):
        yield


def _others(device) -> list[int] | None:
    listing = getattr(device, "compute_processes", None)
    if listing is None:
        return None
    try:
        pids = listing()
    except Exception:  # a listing that fails is "unknown", never a failed measurement
        return None
    return None if pids is None else sorted({int(p) for p in pids} - {os.getpid()})


@contextmanager
def measured_alone(device, *, exclusive: bool = False, what: str = "run"):
    """Check for other compute processes on ``device`` before and after the block.

    Yields a dict that, after the block, holds ``schema.OTHER_GPU_PROCESSES``
    (the number of other processes seen before or after; NaN when the GPU
    cannot list them) to put on the run row.

    Raises
    ------
    OtherProcessError
        With ``exclusive=True``, when another process is on the GPU (before:
        nothing is run; after: the run is not recorded).
    """
    result: dict = {schema.OTHER_GPU_PROCESSES: math.nan}
    before = _others(device)
    if before and exclusive:
        raise OtherProcessError(f"{device.info.name}: other process(es) {before} on the GPU "
                                f"before the {what}; not measuring (exclusive)")
    yield result
    after = _others(device)
    if before is None and after is None:
        return
    seen = sorted(set(before or []) | set(after or []))
    result[schema.OTHER_GPU_PROCESSES] = float(len(seen))
    if seen:
        message = (f"{device.info.name}: other process(es) {seen} on the GPU during the {what}; "
                   "its energy includes theirs")
        if exclusive:
            raise OtherProcessError(message + " (exclusive: not recorded)")
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def throttle_summary(trace: pd.DataFrame) -> dict:
    """Fractions of a trace's samples with each kind of clock-event (throttle) reason.

    Returns
    -------
    dict
        ``schema.THROTTLED_FRACTION`` (any slowdown), ``THROTTLE_POWER_CAP_FRACTION``,
        ``THROTTLE_THERMAL_FRACTION``, ``THROTTLE_OTHER_FRACTION``; NaN
        without a ``throttle_reasons`` column or samples. A GPU that does not
        report reasons reads 0 (NVML's "none").
    """
    names = (schema.THROTTLED_FRACTION, schema.THROTTLE_POWER_CAP_FRACTION,
             schema.THROTTLE_THERMAL_FRACTION, schema.THROTTLE_OTHER_FRACTION)
    if schema.THROTTLE_REASONS not in getattr(trace, "columns", ()) or len(trace) == 0:
        return dict.fromkeys(names, math.nan)
    bits = pd.to_numeric(trace[schema.THROTTLE_REASONS], errors="coerce").fillna(0)
    bits = bits.to_numpy(dtype=np.int64)
    return {name: float(np.mean((bits & mask) != 0))
            for name, mask in zip(names, (_ANY, CLOCK_EVENT_POWER_CAP, CLOCK_EVENT_THERMAL,
                                          CLOCK_EVENT_OTHER))}
