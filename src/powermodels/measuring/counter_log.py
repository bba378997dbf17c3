"""Energy-counter readings kept over time, and what they bound about the energy at any instant.

The total-energy counter is published only at its updates (~100 ms apart on
Hopper) and one read costs ~4 ms, so the energy at an arbitrary host instant is
never read directly: it is bracketed by the reads around it
(:mod:`~powermodels.sensor.counter_bounds`, whose functions are named here too). A log keeps those
reads, and the condition readings beside them, for as long as a window needs.

Two logs provide the reads: :class:`PolledCounterLog` polls a real device on
a background thread (the counter on its own ~5 ms cadence, the cheap fast
readings — clocks, temperature, throttle reasons — alongside), and
:class:`SimulatedCounterLog` replays what such a poller would have read on
the :class:`~powermodels.devices.simulated.SimulatedGPU`, whose clock only
moves when work is run (waiting for an update idles the simulated GPU).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque

import numpy as np

from .. import schema
from ..sensor.counter_bounds import (
    EnergyBounds,
    anchored_energy,
    counter_changes,
    energy_bounds,
    extrapolated_energy,
    merge_reads,
    steady_power,
)

__all__ = ["CounterLog", "EnergyBounds", "PolledCounterLog", "SimulatedCounterLog",
           "anchored_energy", "energy_bounds", "extrapolated_energy", "open_counter_log",
           "steady_power"]


class HeldWindow:
    """What a log keeps for one open window after its history has moved on.

    A log keeps a bounded history (``history_s``). So that a window of any
    length keeps its energy, the counter reads that bracket the window's
    start (``[lo, hi]``) are copied here before they leave the history, and
    the condition readings that leave it after the start are folded into a
    summary (clock range, hottest temperature, throttle reasons and the
    zero-order-hold integral of the power readings) up to ``summarised_until``.
    The window's end is bracketed by reads still in the history. Memory per
    open window: the reads of ``hi - lo`` seconds, whatever its length.
    """

    def __init__(self, start: float, lo: float, hi: float):
        self.start, self.lo, self.hi = float(start), float(lo), float(hi)
        self.reads: list[tuple[float, float, float]] = []
        self.reads_complete = False  # every read of [lo, hi] is in self.reads
        self.summarised_until = -math.inf
        self.clock_min = math.inf
        self.clock_max = -math.inf
        self.temperature_max = -math.inf
        self.throttle = 0
        self.power_j = 0.0  # ∫ power readings (held until the next) over [start, summarised_until]
        self.power_readings = 0
        self.clock_mhz_s = 0.0  # ∫ SM-clock readings (held until the next) over [start, summarised_until]
        self.clock_s = 0.0      # the seconds that integral covers (readings that were finite)

    def absorb_reads(self, rows) -> None:
        """Keep the reads among ``rows`` ``(t0, t1, joules)`` that overlap ``[lo, hi]``."""
        self.reads.extend(r for r in rows if r[1] >= self.lo and r[0] <= self.hi)

    def absorb_conditions(self, t, power, clock, temperature, throttle, until: float) -> None:
        """Fold readings at ``t`` (each held until the next, the last until ``until``) into the summary."""
        t = np.asarray(t, dtype=float)
        keep = t >= self.start
        if keep.any():
            for name, values, op in (("clock_min", clock, np.nanmin), ("clock_max", clock, np.nanmax),
                                     ("temperature_max", temperature, np.nanmax)):
                v = np.asarray(values, dtype=float)[keep]
                if np.isfinite(v).any():
                    pick = min if name == "clock_min" else max
                    setattr(self, name, pick(getattr(self, name), float(op(v))))
            self.throttle |= int(np.bitwise_or.reduce(np.asarray(throttle, dtype=np.int64)[keep]))
        p = np.asarray(power, dtype=float)
        if t.size:
            edges = np.clip(np.append(t, max(until, t[-1])), self.start, max(until, self.start))
            ok = np.isfinite(p)
            self.power_j += float(np.sum(p[ok] * np.diff(edges)[ok]))
            self.power_readings += int(np.count_nonzero(ok & (t >= self.start)))
            f = np.asarray(clock, dtype=float)
            held = np.isfinite(f)
            self.clock_mhz_s += float(np.sum(f[held] * np.diff(edges)[held]))
            self.clock_s += float(np.sum(np.diff(edges)[held]))
        self.summarised_until = max(self.summarised_until, float(until))


class CounterLog:
    """Counter reads and condition readings of one device, on the device's host clock."""

    device = None
    has_counter: bool = True

    def now(self) -> float:
        return self.device.now()

    def reads(self, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Counter reads ``(t0, t1, joules)`` overlapping ``[lo, hi]``, in time order."""
        raise NotImplementedError

    def conditions(self, lo: float, hi: float) -> dict:
        """Fast readings over ``[lo, hi]`` as columns (``t_s``, power, clocks, ...)."""
        raise NotImplementedError

    def history_start(self) -> float:
        """The oldest instant the log can still answer about."""
        raise NotImplementedError

    def advance(self) -> None:
        """Let time pass until the next read (sleep on a real GPU, idle the simulated one)."""
        raise NotImplementedError

    def update_period_s(self) -> float:
        """The counter's update period: the sensor preset's, or the median gap between updates seen."""
        raise NotImplementedError

    def hold(self, start: float, margin_s: float) -> HeldWindow:
        """Keep what a window opened at ``start`` needs beyond the history, until :meth:`release`."""
        held = HeldWindow(start, start - margin_s, start + margin_s)
        with self._held_lock:
            self._held.append(held)
        return held

    def release(self, held: HeldWindow) -> None:
        """Stop keeping ``held`` (its window ended or was cancelled)."""
        with self._held_lock:
            if held in self._held:
                self._held.remove(held)

    def start_reads(self, held: HeldWindow):
        """The reads bracketing ``held``'s start: those kept, and those still in the history."""
        lo = max(held.lo, self.history_start())
        live = self.reads(lo, held.hi) if lo < held.hi else (np.zeros(0),) * 3
        kept = np.asarray(held.reads, dtype=float).reshape(-1, 3)
        return merge_reads((kept[:, 0], kept[:, 1], kept[:, 2]), live)

    def close(self) -> None:
        """Stop polling."""


class PolledCounterLog(CounterLog):
    """A background thread polling a real device's counter (~5 ms cadence) and fast readings.

    Parameters
    ----------
    device : Device
        An opened device (NVML).
    read_period_s : float, default=0.005
        Pause between counter reads (a read itself takes ~4 ms on Hopper),
        so an update is bracketed to within ~10 ms.
    history_s : float, default=600
        Reads older than this (on the device's clock) are dropped; at most
        ``history_s / 2 ms`` reads are kept whatever the cadence (memory).
        What an open window needs beyond it is kept (:meth:`hold`).
    """

    def __init__(self, device, read_period_s: float = 0.005, history_s: float = 600.0):
        self.device = device
        self.read_period_s = float(read_period_s)
        self.history_s = float(history_s)
        self._max_rows = max(1000, int(self.history_s / 0.002))
        self._reads: deque = deque()
        self._fast: deque = deque()
        self._held: list[HeldWindow] = []
        self._held_lock = self._lock = threading.Lock()  # the poller appends while callers copy
        self._stop = threading.Event()
        self._error: BaseException | None = None
        first = float(device.read_energy_j())
        self.has_counter = math.isfinite(first)
        self._thread = threading.Thread(target=self._loop, name="powermodels-meter", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        dev, now = self.device, self.device.now
        try:
            while not self._stop.is_set():
                if self.has_counter:
                    a = now()
                    joules = float(dev.read_energy_j())
                    b = now()
                    with self._lock:
                        self._reads.append((a, b, joules))
                reading = dev.read()  # ~µs through NVML: clocks, temperature, throttling
                with self._lock:
                    self._fast.append(reading)
                    self._forget(reading.t_s - self.history_s)
                self._stop.wait(self.read_period_s)
        except BaseException as err:  # surfaced by the next call that needs the reads
            self._error = err

    def _forget(self, cutoff: float) -> None:
        """Drop what is older than ``cutoff`` (or past the row cap), keeping what open windows need."""
        gone = []
        while self._reads and (self._reads[0][1] < cutoff or len(self._reads) > self._max_rows):
            gone.append(self._reads.popleft())
        fast = []
        while len(self._fast) > 1 and (self._fast[0].t_s < cutoff or len(self._fast) > self._max_rows):
            fast.append(self._fast.popleft())
        if not self._held or not (gone or fast):
            return
        until = self._fast[0].t_s
        cols = [np.array([getattr(r, n) for r in fast], dtype=float) for n in
                (schema.T_S, schema.POWER_INSTANT_W, schema.SM_CLOCK_MHZ, schema.TEMPERATURE_C)]
        if fast and not np.isfinite(cols[1]).any():
            cols[1] = np.array([r.power_usage_w for r in fast], dtype=float)
        thr = np.array([r.throttle_reasons for r in fast], dtype=np.int64)
        for held in self._held:
            held.absorb_reads(gone)
            if fast:
                held.absorb_conditions(cols[0], cols[1], cols[2], cols[3], thr, until)

    def history_start(self) -> float:
        with self._lock:
            return self._reads[0][0] if self._reads else -math.inf

    def _check(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"energy meter: polling the device failed: {self._error!r}") from self._error

    def reads(self, lo, hi):
        self._check()
        with self._lock:
            rows = list(self._reads)  # appended in time order: bisect, not a scan of the whole history
        i0 = bisect.bisect_left(rows, lo, key=lambda r: r[1])
        i1 = bisect.bisect_right(rows, hi, key=lambda r: r[0])
        arr = np.asarray(rows[i0:i1], dtype=float).reshape(-1, 3)
        return arr[:, 0], arr[:, 1], arr[:, 2]

    def conditions(self, lo, hi):
        self._check()
        with self._lock:
            fast = list(self._fast)
        rows = fast[bisect.bisect_left(fast, lo, key=lambda r: r.t_s):
                    bisect.bisect_right(fast, hi, key=lambda r: r.t_s)]
        names = (schema.T_S, schema.POWER_INSTANT_W, schema.POWER_USAGE_W, schema.SM_CLOCK_MHZ,
                 schema.TEMPERATURE_C)
        out = {n: np.array([getattr(r, n) for r in rows], dtype=float) for n in names}
        out[schema.THROTTLE_REASONS] = np.array([r.throttle_reasons for r in rows], dtype=np.int64)
        return out

    def advance(self) -> None:
        self._check()
        time.sleep(self.read_period_s)

    def update_period_s(self) -> float:
        t0, t1, j = self.reads(self.now() - 5.0, math.inf)  # the last few seconds' updates
        if j.size < 3:
            return math.nan
        _, when = counter_changes(t0, t1, j)
        return float(np.median(np.diff(when))) if when.size >= 2 else math.nan

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)


class SimulatedCounterLog(CounterLog):
    """What a poller would have read on a SimulatedGPU: counter reads every ``sensor.energy_read_s``.

    The simulated clock moves only when work is run, so :meth:`advance` idles
    the GPU for one read period — as the real world goes on while a real
    meter waits for the counter's next update.
    """

    #: Seconds before an instant that the emulated sensor looks back (its windows, an update).
    LOOKBACK_S = 2.0

    def __init__(self, gpu):
        self.device = gpu
        self.step_s = float(gpu.sensor.energy_read_s)
        self.has_counter = math.isfinite(float(gpu.read_energy_j()))
        self._held: list[HeldWindow] = []
        self._held_lock = threading.Lock()
        self._listening = False

    def hold(self, start: float, margin_s: float) -> HeldWindow:
        held = super().hold(start, margin_s)
        if not self._listening:
            self.device.add_history_listener(self._before_forget)
            self._listening = True
        return held

    def _before_forget(self, t_from: float, t_to: float) -> None:
        """The GPU is about to drop its state before ``t_to``: copy what open windows need first."""
        with self._held_lock:
            held = list(self._held)
        # everything up to LOOKBACK_S before now is summarised (the GPU keeps history_s >= 10 s),
        # so the next call starts well inside the kept history
        safe = self.device.now() - self.LOOKBACK_S
        for w in held:
            if not w.reads_complete and w.hi <= safe:
                t0, t1, j = self.reads(w.lo, w.hi)
                w.absorb_reads(list(zip(t0, t1, j)))
                w.reads_complete = True
            a = max(w.start, w.summarised_until)
            if safe - a > 2 * self.step_s:
                c = self.conditions(a, safe)
                power = c[schema.POWER_INSTANT_W]
                if not np.isfinite(power).any():
                    power = c[schema.POWER_USAGE_W]
                w.absorb_conditions(c[schema.T_S], power, c[schema.SM_CLOCK_MHZ],
                                    c[schema.TEMPERATURE_C], c[schema.THROTTLE_REASONS], safe)

    def history_start(self) -> float:
        return self.device.history_start_s() + self.LOOKBACK_S

    def close(self) -> None:
        if self._listening:
            self.device.remove_history_listener(self._before_forget)
            self._listening = False

    def _trace(self, lo, hi):
        q = self.step_s
        k0 = math.ceil(max(lo, -10.0) / q - 1e-9)  # before 0 the simulated GPU idled
        k1 = math.floor(min(hi, self.device.now()) / q + 1e-9)
        if k1 - k0 < 1:
            return None
        return self.device.trace(k0 * q, k1 * q, sample_period_s=q, run_id="meter")

    def reads(self, lo, hi):
        trace = self._trace(lo, hi)
        if trace is None:
            empty = np.zeros(0)
            return empty, empty, empty
        trace = trace[np.isfinite(trace[schema.ENERGY_COUNTER_J])]
        t = trace[schema.T_S].to_numpy(dtype=float)
        return t, t, trace[schema.ENERGY_COUNTER_J].to_numpy(dtype=float)

    def conditions(self, lo, hi):
        trace = self._trace(lo, hi)
        names = (schema.T_S, schema.POWER_INSTANT_W, schema.POWER_USAGE_W, schema.SM_CLOCK_MHZ,
                 schema.TEMPERATURE_C)
        if trace is None:
            out = {n: np.zeros(0) for n in names}
            out[schema.THROTTLE_REASONS] = np.zeros(0, dtype=np.int64)
            return out
        out = {n: trace[n].to_numpy(dtype=float) for n in names}
        out[schema.THROTTLE_REASONS] = trace[schema.THROTTLE_REASONS].to_numpy(dtype=np.int64)
        return out

    def advance(self) -> None:
        # the reads lie on their own grid whatever the step: a quarter period keeps the loop short
        self.device.idle(max(self.step_s, 0.25 * float(self.device.sensor.energy_period_s)))

    def update_period_s(self) -> float:
        return float(self.device.sensor.energy_period_s)


def open_counter_log(device) -> CounterLog:
    """The log for ``device``: replayed on the simulated GPU, polled on a real one."""
    if getattr(device.info, "kind", "") == "simulated":
        return SimulatedCounterLog(device)
    return PolledCounterLog(device)
