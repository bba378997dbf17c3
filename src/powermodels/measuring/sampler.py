"""Background sampler: the device's sensor read at ≥ 1 kHz on one monotonic host clock.

Two threads share the device:

* the *fast* thread calls :meth:`Device.read` (power, temperature, clocks,
  throttle reasons; ~µs per call through NVML) every ``period_s`` and stores
  the :class:`~powermodels.devices.base.Reading` as one row of preallocated
  columns (:class:`~powermodels.measuring.ring_buffer.ChunkedColumns`) —
  nothing else, so it holds the GIL only for a few microseconds per tick
  (NVML calls go through ctypes, which releases the GIL, and CuPy launches
  release it too, so neither the kernel nor its launches wait for the
  sampler);
* the *energy* thread calls :meth:`Device.read_energy_j` (~4 ms per call on
  Hopper, DESIGN.md) on its own slower cadence, so the slow counter never
  stalls the fast readings.

:meth:`Sampler.table` merges both into the trace table (:data:`schema.TRACE_TABLE`):
one row per fast reading, ``energy_counter_j`` NaN except on the row nearest
each counter reading. The cost of a window does not depend on how long the
sampler has run: windows are found by binary search over time, old readings
are dropped a chunk at a time, and a reading takes 52 B (an hour at 2 kHz:
7.2 million readings, 374 MB; ``benchmarks/bench_sampler_hours.py``).

CUDA events are put on the same host clock by
:class:`~powermodels.devices.event_clock.EventClock` (FinGraV §IV-A), also
importable from here.
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np
import pandas as pd

from .. import schema
from ..devices.base import Device
from ..devices.event_clock import EventClock, SyncEstimate
from .ring_buffer import ChunkedColumns

__all__ = ["EventClock", "Sampler", "SyncEstimate", "readings_to_trace"]

_FAST_FIELDS = (
    schema.POWER_INSTANT_W,
    schema.POWER_AVERAGE_W,
    schema.POWER_USAGE_W,
    schema.TEMPERATURE_C,
    schema.SM_CLOCK_MHZ,
    schema.MEM_CLOCK_MHZ,
)


#: How the fast readings are stored: time and power in float64 (exact copies of
#: the driver's mW values), temperature and clocks in float32 (integers well
#: inside float32's exact range), throttle reasons as a 64-bit bit mask.
_COLUMNS = {schema.T_S: np.float64, schema.POWER_INSTANT_W: np.float64,
            schema.POWER_AVERAGE_W: np.float64, schema.POWER_USAGE_W: np.float64,
            schema.TEMPERATURE_C: np.float32, schema.SM_CLOCK_MHZ: np.float32,
            schema.MEM_CLOCK_MHZ: np.float32, schema.THROTTLE_REASONS: np.int64}
_ENERGY_COLUMNS = {schema.T_S: np.float64, schema.ENERGY_COUNTER_J: np.float64}


def readings_to_trace(readings, energy=(), run_id: str = "trace") -> pd.DataFrame:
    """Build a trace table from fast readings and ``(t_s, joules)`` counter readings.

    Parameters
    ----------
    readings : sequence of Reading
        Fast readings, in time order.
    energy : sequence of (float, float)
        Counter readings ``(t_s, energy_j)``; each is placed on the row whose
        time is nearest (rows keep their own time stamps).
    run_id : str
        Value of the ``run_id`` column.
    """
    n = len(readings)
    # field names of Reading equal the schema constants' values
    columns = {name: np.fromiter((getattr(r, name) for r in readings), dtype=float, count=n)
               for name in (schema.T_S, *_FAST_FIELDS)}
    columns[schema.THROTTLE_REASONS] = np.fromiter(
        (r.throttle_reasons for r in readings), dtype=np.int64, count=n)
    e = np.asarray(energy, dtype=float).reshape(-1, 2)
    return _columns_to_trace(columns, e[:, 0], e[:, 1], run_id)


def _columns_to_trace(columns: dict, et: np.ndarray, ej: np.ndarray, run_id: str) -> pd.DataFrame:
    """The trace table of fast-reading columns and counter readings at times ``et``."""
    t = np.asarray(columns[schema.T_S], dtype=float)
    n = t.size
    data = {schema.RUN_ID: np.full(n, run_id, dtype=object), schema.T_S: t}
    for name in _FAST_FIELDS:
        data[name] = np.asarray(columns[name], dtype=float)
    data[schema.THROTTLE_REASONS] = np.asarray(columns[schema.THROTTLE_REASONS], dtype=np.int64)
    counter = np.full(n, np.nan)
    if n and len(et):
        keep = (et >= t[0] - 1e-3) & (et <= t[-1] + 1e-3) & np.isfinite(ej)
        if keep.any():
            idx = np.clip(np.searchsorted(t, et[keep]), 1, n - 1) if n > 1 else np.zeros(keep.sum(), int)
            if n > 1:
                left = idx - 1
                idx = np.where(np.abs(t[left] - et[keep]) <= np.abs(t[idx] - et[keep]), left, idx)
            counter[idx] = ej[keep]
    data[schema.ENERGY_COUNTER_J] = counter
    table = pd.DataFrame(data)
    # two readings can share a clock tick on a coarse clock: keep the first
    dup = np.zeros(n, dtype=bool)
    dup[1:] = t[1:] == t[:-1]
    if dup.any():
        table = table.loc[~dup].reset_index(drop=True)
    return table


class Sampler:
    """Background sampler of a :class:`~powermodels.devices.base.Device`.

    Parameters
    ----------
    device : Device
        Where readings come from.
    period_s : float, default=5e-4
        Target time between fast readings (2 kHz; ≥ 1 kHz is the goal).
    energy_period_s : float, default=0.02
        Target time between energy-counter readings; ``None`` or 0 disables them.
    max_seconds : float, default=3600
        Readings older than this (behind the newest) are dropped, a chunk of
        65,536 readings at a time, so memory stays bounded in long campaigns
        (≤ 374 MB for an hour at 2 kHz, plus one chunk).

    Examples
    --------
    >>> with Sampler(device) as s:            # doctest: +SKIP
    ...     t0 = device.now(); run_kernel(); t1 = device.now()
    ...     s.wait_past(t1)
    ...     trace = s.table(t0, t1, run_id="r0")
    """

    #: Rows per chunk of the fast buffer (3.4 MB; a new chunk every ~33 s at 2 kHz).
    CHUNK_ROWS = 65536

    def __init__(self, device: Device, period_s: float = 5e-4, energy_period_s: float | None = 0.02,
                 max_seconds: float = 3600.0):
        if not period_s > 0:
            raise ValueError(f"Sampler: period_s must be > 0, got {period_s}")
        if energy_period_s is not None and energy_period_s < 0:
            raise ValueError(f"Sampler: energy_period_s must be >= 0, got {energy_period_s}")
        if not max_seconds > 0:
            raise ValueError(f"Sampler: max_seconds must be > 0, got {max_seconds}")
        self.device = device
        self.period_s = float(period_s)
        self.energy_period_s = energy_period_s
        self.max_seconds = float(max_seconds)
        # the row cap guards memory if the clock misbehaves: 1.25 × what the period allows
        cap = math.ceil(1.25 * self.max_seconds / self.period_s) if math.isfinite(self.max_seconds) else None
        self._readings = ChunkedColumns(_COLUMNS, self.CHUNK_ROWS, self.max_seconds, cap)
        self._energy = ChunkedColumns(_ENERGY_COLUMNS, 4096, self.max_seconds)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[BaseException] = []
        self.energy_supported = bool(energy_period_s)

    # -- threads -------------------------------------------------------------

    def _fast_loop(self) -> None:
        read, now, sleep = self.device.read, time.perf_counter, time.sleep
        buf, period, stop = self._readings, self.period_s, self._stop
        catch_up_s = max(10 * period, 0.1)
        next_t = now()
        try:
            while not stop.is_set():
                r = read()
                chunk = buf.current
                i = chunk.n
                t, inst, avg, usage, temp, sm, mem, thr = chunk.cols
                t[i] = r.t_s
                inst[i] = r.power_instant_w
                avg[i] = r.power_average_w
                usage[i] = r.power_usage_w
                temp[i] = r.temperature_c
                sm[i] = r.sm_clock_mhz
                mem[i] = r.mem_clock_mhz
                thr[i] = r.throttle_reasons
                chunk.n = i + 1  # publish the row only once it is complete
                if i + 1 == chunk.size:
                    buf.roll()  # a new chunk; whole old chunks dropped: O(1)
                next_t += period
                delay = next_t - now()
                if delay > 0:
                    sleep(delay)
                elif delay < -catch_up_s:  # fell far behind (suspend): do not burst
                    next_t = now()
                # a lag shorter than catch_up_s (the OS or the GIL held the thread for a few
                # ms) is made up by reading without sleeping, so the rate per second holds
        except BaseException as err:  # surfaced by stop()
            self.errors.append(err)

    def _energy_loop(self) -> None:
        dev, now = self.device, self.device.now
        try:
            while not self._stop.is_set():
                t0 = now()
                joules = dev.read_energy_j()
                t1 = now()
                if math.isnan(joules):  # no counter on this GPU: stop asking
                    self.energy_supported = False
                    return
                self._energy.append(0.5 * (t0 + t1), joules)
                self._stop.wait(self.energy_period_s)
        except BaseException as err:
            self.errors.append(err)

    def start(self) -> Sampler:
        """Start the sampling threads (idempotent)."""
        if self._threads:
            return self
        self._stop.clear()
        self._threads = [threading.Thread(target=self._fast_loop, name="powermodels-sampler", daemon=True)]
        if self.energy_period_s:
            self._threads.append(
                threading.Thread(target=self._energy_loop, name="powermodels-energy", daemon=True)
            )
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        """Stop the threads; re-raise the first error a thread met."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=5.0)
        self._threads = []
        if self.errors:
            raise RuntimeError(f"sampler thread failed: {self.errors[0]!r}") from self.errors[0]

    @property
    def running(self) -> bool:
        return bool(self._threads)

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- data ----------------------------------------------------------------

    def __len__(self) -> int:
        """Fast readings held."""
        return len(self._readings)

    def nbytes(self) -> int:
        """Bytes held by the reading buffers (allocated chunks)."""
        return self._readings.nbytes() + self._energy.nbytes()

    def wait_past(self, t_s: float, timeout_s: float = 2.0) -> None:
        """Block until a fast reading newer than ``t_s`` exists (so a table up to ``t_s`` is complete)."""
        deadline = time.perf_counter() + timeout_s
        while not self._readings.last_time() > t_s:
            if not self.running or time.perf_counter() > deadline:
                return
            time.sleep(self.period_s)
        if self.energy_supported:
            # the next counter reading after t_s, so counter-based energy can bracket the run
            while not self._energy.last_time() > t_s:
                if not self.energy_supported or time.perf_counter() > deadline:
                    return
                time.sleep(self.period_s)

    def table(self, start_s: float | None = None, end_s: float | None = None,
              run_id: str = "trace", margin_s: float = 0.0) -> pd.DataFrame:
        """Trace table of the readings in ``[start_s - margin_s, end_s + margin_s]``.

        The window is found by binary search over time: its cost is the rows
        it returns, not the readings held.
        """
        lo = -math.inf if start_s is None else start_s - margin_s
        hi = math.inf if end_s is None else end_s + margin_s
        energy = self._energy.window(lo, hi)
        columns = self._readings.window(lo, hi)
        return _columns_to_trace(columns, energy[schema.T_S], energy[schema.ENERGY_COUNTER_J], run_id)

    def rate_hz(self, start_s: float | None = None, end_s: float | None = None) -> float:
        """Achieved fast-reading rate over ``[start_s, end_s]`` (the whole buffer when None)."""
        lo = -math.inf if start_s is None else start_s
        hi = math.inf if end_s is None else end_s
        chunks, n_last, (c0, i0), (c1, i1) = self._readings.window_bounds(lo, hi)
        n = max((c1 - c0) * self._readings.chunk_size + i1 - i0, 0)
        if n < 2:
            return 0.0
        first = chunks[c0].cols[0][i0]
        # the row before the end position (in the previous chunk when it is a chunk's start)
        last = chunks[c1].cols[0][i1 - 1] if i1 else chunks[c1 - 1].cols[0][chunks[c1 - 1].n - 1]
        return (n - 1) / float(last - first)

    def clear(self) -> None:
        """Drop every reading taken so far."""
        self._readings.clear()
        self._energy.clear()
