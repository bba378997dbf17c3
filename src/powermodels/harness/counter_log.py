"""Energy-counter readings kept over time, and what they bound about the energy at any instant.

The total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``) is the exact
integral of the GPU's power, but it is *published* only at its updates (~100 ms
apart on Hopper, with jitter) and one read costs ~4 ms (DESIGN.md). So the
energy at an arbitrary host instant ``t`` is never read directly; it is
bracketed by counter values:

* a read that *ended* at or before ``t + delay`` returned a value published
  before then, so ``E(t) >=`` that value (the **lower** bound);
* a value that first appears after a read which *started* at or after
  ``t + delay`` was published after ``t + delay``, so ``E(t) <=`` that value
  (the **upper** bound);
* between the two, ``E(t)`` is estimated by linear interpolation between the
  observed updates, each placed at the middle of the pair of reads that saw
  it change (an update's instant jitters on real GPUs, so every update is
  bracketed on its own rather than fitted to a regular grid).

The bounds hold whatever the power did; the interpolation is exact when the
power is constant over the update interval that contains ``t``.

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
from dataclasses import dataclass

import numpy as np

from .. import schema

__all__ = ["CounterLog", "EnergyBounds", "PolledCounterLog", "SimulatedCounterLog",
           "anchored_energy", "energy_bounds", "extrapolated_energy", "open_counter_log",
           "steady_power"]


@dataclass(frozen=True)
class EnergyBounds:
    """What the counter reads say about the cumulative energy ``E(t)`` at one instant (J).

    ``lower <= E(t) <= upper`` always holds (NaN/inf where no read bounds it);
    ``estimate`` interpolates between the observed updates and lies inside.
    """

    lower: float
    upper: float
    estimate: float


def _changes(t0: np.ndarray, t1: np.ndarray, joules: np.ndarray):
    """Indices of reads that saw a new value, and the estimated publication instants."""
    new = np.flatnonzero(joules[1:] > joules[:-1]) + 1
    mid = 0.5 * (t0 + t1)
    return new, 0.5 * (mid[new - 1] + mid[new])


def energy_bounds(t0, t1, joules, t: float, delay_s: float = 0.0) -> EnergyBounds:
    """Bound and estimate the counter's energy at instant ``t`` from reads ``(t0, t1, joules)``.

    Parameters
    ----------
    t0, t1 : array of float
        Host times at which each read started and ended (equal for an instant read).
    joules : array of float
        The values read, non-decreasing.
    t : float
        The instant on the same host clock.
    delay_s : float, default=0
        Lag of the counter: a value published at ``u`` holds the energy up to
        ``u - delay_s`` (0 on the simulated presets; unknown and small on Hopper).

    Returns
    -------
    EnergyBounds
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    tau = t + delay_s
    before = t1 <= tau
    lower = float(joules[before].max()) if before.any() else -math.inf
    new, when = _changes(t0, t1, joules)
    after = t0[new - 1] >= tau  # the read before the change started after tau
    upper = float(joules[new][after].min()) if after.any() else math.inf
    estimate = math.nan
    knots_t, knots_j = when - delay_s, joules[new]
    if knots_t.size >= 2 and knots_t[0] <= t <= knots_t[-1]:
        estimate = float(np.interp(t, knots_t, knots_j))
        estimate = min(max(estimate, lower), upper)
    return EnergyBounds(lower, upper, estimate)


def anchored_energy(t0, t1, joules, t: float, side: str, power_w: float,
                    delay_s: float = 0.0) -> tuple[float, float]:
    """``E(t)`` from the nearest update on ``side`` of ``t`` when the GPU drew ``power_w`` in between.

    For a window with the GPU idle just before its start (``side="before"``)
    or just after its end (``side="after"``): ``E(t) = c + P·(t − u)`` with
    ``(u, c)`` the last update published before ``t`` (or the first after).
    The only unknown left is the update instant, known to its bracket
    (half-width ``h``), so the 1-σ error is ``P·h/√3`` — far below the
    interpolation's when the power changes at ``t``.

    Returns
    -------
    (estimate, sigma) : tuple of float
        NaN when no update on that side was observed.
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    if side not in ("before", "after"):
        raise ValueError(f"anchored_energy: side must be 'before' or 'after', got {side!r}")
    tau = t + delay_s
    new, when = _changes(t0, t1, joules)
    lo, hi = t0[new - 1], t1[new]
    pick = np.flatnonzero(hi <= tau) if side == "before" else np.flatnonzero(lo >= tau)
    if pick.size == 0:
        return math.nan, math.nan
    k = pick[-1] if side == "before" else pick[0]
    u = when[k] - delay_s
    half = 0.5 * (hi[k] - lo[k])
    return float(joules[new][k] + power_w * (t - u)), float(power_w * half / math.sqrt(3.0))


def steady_power(t0, t1, joules, start: float, end: float,
                 delay_s: float = 0.0) -> tuple[float, float, int]:
    """Mean power between the first and last counter updates published inside ``[start, end]``.

    For a steady load (back-to-back launches of one kernel) this is the
    window's mean power without interpolating across its edges: only the two
    updates' instants are uncertain, each to half its bracket ``h``, so the
    1-σ error is ``P·hypot(h_a, h_b)/√3/(u_b − u_a)`` (as the ``counter``
    protocol takes it).

    Returns
    -------
    (power_w, sigma_w, updates) : tuple
        NaN power with fewer than two updates inside.
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    new, when = _changes(t0, t1, joules)
    lo, hi = t0[new - 1], t1[new]
    inside = np.flatnonzero((lo >= start + delay_s) & (hi <= end + delay_s))
    if inside.size < 2:
        return math.nan, math.nan, int(inside.size)
    a, b = inside[0], inside[-1]
    span = when[b] - when[a]
    power = (joules[new][b] - joules[new][a]) / span
    half = np.hypot(0.5 * (hi[a] - lo[a]), 0.5 * (hi[b] - lo[b]))
    return float(power), float(power * half / math.sqrt(3.0) / span), int(inside.size)


def extrapolated_energy(t0, t1, joules, t: float, delay_s: float = 0.0) -> tuple[float, float]:
    """``E(t)`` after the last observed update: its interval's power carried forward (no waiting).

    ``E(t) = c_k + P_k·(t − u_k)`` with ``P_k`` the mean power between the
    last two updates ``u_{k−1} < u_k <= t``; the 1-σ error is taken as
    ``P_k·(t − u_k)/√3`` (the power since the last update is unknown).

    Returns
    -------
    (estimate, sigma) : tuple of float
        NaN when fewer than two updates were observed before ``t``.
    """
    t0, t1, joules = (np.asarray(a, dtype=float) for a in (t0, t1, joules))
    new, when = _changes(t0, t1, joules)
    u = when - delay_s
    k = np.flatnonzero(u <= t)
    if k.size < 2:
        return math.nan, math.nan
    a, b = k[-2], k[-1]
    power = (joules[new][b] - joules[new][a]) / (u[b] - u[a])
    span = t - u[b]
    return float(joules[new][b] + power * span), float(power * span / math.sqrt(3.0))


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

    def advance(self) -> None:
        """Let time pass until the next read (sleep on a real GPU, idle the simulated one)."""
        raise NotImplementedError

    def update_period_s(self) -> float:
        """The counter's update period: the sensor preset's, or the median gap between updates seen."""
        raise NotImplementedError

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
        Reads older than this are dropped.
    """

    def __init__(self, device, read_period_s: float = 0.005, history_s: float = 600.0):
        self.device = device
        self.read_period_s = float(read_period_s)
        n = max(1000, int(history_s / max(read_period_s + 0.004, 1e-3)))
        self._reads: deque = deque(maxlen=n)
        self._fast: deque = deque(maxlen=n)
        self._stop = threading.Event()
        self._lock = threading.Lock()  # the poller appends while callers copy
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
                self._stop.wait(self.read_period_s)
        except BaseException as err:  # surfaced by the next call that needs the reads
            self._error = err

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
        _, when = _changes(t0, t1, j)
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

    def __init__(self, gpu):
        self.device = gpu
        self.step_s = float(gpu.sensor.energy_read_s)
        self.has_counter = math.isfinite(float(gpu.read_energy_j()))

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
