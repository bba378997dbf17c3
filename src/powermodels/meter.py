"""Zeus-style energy windows around any code region: :class:`EnergyMeter`.

>>> meter = EnergyMeter()                          # doctest: +SKIP
>>> meter.begin_window("step")                     # doctest: +SKIP
>>> train_step()                                   # doctest: +SKIP
>>> m = meter.end_window("step")                   # doctest: +SKIP
>>> m.energy_j, m.time_s, m.power_w, m.uncertainty_j   # doctest: +SKIP

or ``with meter.window("step") as w: ...`` and read ``w.result`` afterwards.

How a window is measured
------------------------
Where the GPU has a total-energy counter (Volta and newer), the meter polls
it on a background thread (:class:`~powermodels.measuring.counter_log.PolledCounterLog`:
a read every ~5 ms, a read costs ~4 ms on Hopper) and takes the energy at the
window's two ends from the reads around them
(:func:`~powermodels.measuring.counter_log.energy_bounds`):

* the counter is exact but published only at its updates (~100 ms apart on
  Hopper), so the energy at an arbitrary instant is *bounded* by the values
  published just before and just after it, and *estimated* by linear
  interpolation between the two updates' instants;
* ``end_window`` therefore waits for the first update after the window's end
  (up to one update period plus a read, ~0.1 s on Hopper) so that the end is
  bracketed; ``begin_window`` returns at once (the reads before it are
  already in the log). ``end_window(name, wait=False)`` returns at once too
  (a window per training step should not stall the loop) and extrapolates
  the end at the last update interval's power, with a larger uncertainty;
* ``end_window(name, steady=True)``, for a load that is the same all through
  the window (back-to-back launches of one kernel), takes the power between
  the first and last updates *inside* the window times its time: nothing is
  interpolated across the edges, only the two updates' instants are uncertain;
* ``energy_bounds_j`` holds whatever the power did inside the two edge
  updates; ``uncertainty_j`` is the 1-σ width that follows when the energy
  at each end is taken as uniform within its bounding update (per end:
  that update's energy / √12).

What a window shorter than the update period can and cannot give
-----------------------------------------------------------------
A window is resolved only as finely as the counter's updates. For a window
much longer than the update period the two edge updates are a small share
of the energy (a 10 s window at constant power on Hopper: ~0.4 % 1-σ). For a
window shorter than one update period the counter holds no value published
*inside* it: the energy then is the power of the update interval(s) around
it times the window's time — right for a steady load (a training step in a
loop), blind to what this window did differently from its neighbours.
``uncertainty_j`` grows to about one update's energy (``P × 0.1 s`` on
Hopper, i.e. larger than the window's own energy), ``short`` is set on the
result and a warning says so. Measure many repetitions in one window instead.

Windows of any length, and threads
----------------------------------
The meter keeps a bounded history of reads (10 minutes on a real GPU, the
simulated GPU's ``history_s``). A window's energy needs only the reads that
bracket its two ends (the counter is cumulative), so the reads around each
open window's start are kept aside as they leave the history, and the
clocks, temperatures and throttle reasons that leave it are folded into the
window's summary: a window of an hour costs the same memory as one of a
second and keeps its energy.

One meter may be used from several threads. Window names are shared by all
of them: ``begin_window`` of a name that is open (or being opened) in any
thread raises ``ValueError`` naming the thread that holds it, and of two
``end_window`` calls of one name the first measures the window and the
other raises ``ValueError`` (no window of that name is open). For a window
per thread, put the thread in the name.

Without an energy counter the meter integrates the power readings; their
boxcar window covers only part of each update on some GPUs (25 ms of 100 ms
on Hopper, Yang §IV-C) and carries the sensor's gain error (±5 %, Yang
§IV-B), which the uncertainty includes.

The simulated GPU's clock moves only when work is run: drive it with
``gpu.run(...)`` / ``gpu.idle(...)`` between ``begin_window`` and
``end_window``; ``end_window`` idles it until the next counter update, as
time passes on a real GPU while the meter waits (not with ``wait=False``).
"""

from __future__ import annotations

import math
import sys
import threading
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from . import schema
from .devices.clock_probe import CLOCK_STEP_MHZ

__all__ = ["EnergyMeter", "WindowMeasurement"]

#: Yang §IV-B: the power readings' gain error is within about ±5 % (Fig. 9).
POWER_GAIN_ERROR = 0.05


@dataclass(frozen=True)
class WindowMeasurement:
    """Energy, time and power of one window, and what could spoil them.

    Attributes
    ----------
    name : str
        The window's name.
    start_s, end_s : float
        Its ends on the device's host clock.
    time_s : float
        ``end_s - start_s``.
    energy_j : float
        Best estimate of the GPU's energy over the window.
    power_w : float
        ``energy_j / time_s``.
    uncertainty_j : float
        1-σ uncertainty of ``energy_j`` (see the module docstring).
    energy_bounds_j : tuple of float
        Hard bounds on the energy from the counter (``(nan, nan)`` without one).
    method : {"energy_counter", "power_integration"}
        Where the energy came from.
    update_period_s : float
        The counter's (or power reading's) update period used.
    short : bool
        The window is shorter than one update period (see the module docstring).
    throttle_reasons : int
        NVML clock-event reasons seen during the window, OR-ed (0 when none or unknown).
    sm_clock_min_mhz, sm_clock_max_mhz, temperature_max_c : float
        Range of the SM clock and the hottest temperature seen (NaN when unknown).
    notes : tuple of str
        What was warned about this window.
    """

    name: str
    start_s: float
    end_s: float
    time_s: float
    energy_j: float
    power_w: float
    uncertainty_j: float
    energy_bounds_j: tuple = (math.nan, math.nan)
    method: str = "energy_counter"
    update_period_s: float = math.nan
    short: bool = False
    throttle_reasons: int = 0
    sm_clock_min_mhz: float = math.nan
    sm_clock_max_mhz: float = math.nan
    temperature_max_c: float = math.nan
    notes: tuple = field(default_factory=tuple)

    def as_row(self) -> dict:
        """The window as run-table columns (energy and power of the whole window)."""
        return {schema.TIME_S: self.time_s, schema.ENERGY_J: self.energy_j,
                schema.POWER_W: self.power_w, schema.ENERGY_UNCERTAINTY_J: self.uncertainty_j,
                schema.START_S: self.start_s, schema.END_S: self.end_s,
                schema.THROTTLE_REASONS: int(self.throttle_reasons),
                schema.SM_CLOCK_MHZ: 0.5 * (self.sm_clock_min_mhz + self.sm_clock_max_mhz),
                # no probe runs inside someone else's code: NVML's reading, a lagging ~100 ms sensor
                # that can show a clock one step off for seconds (docs/recordings.md)
                schema.CLOCK_SOURCE: "nvml",
                schema.CLOCK_RANGE_MHZ: self.sm_clock_max_mhz - self.sm_clock_min_mhz,
                schema.CLOCK_UNCERTAINTY_MHZ: 0.5 * (self.sm_clock_max_mhz - self.sm_clock_min_mhz) + CLOCK_STEP_MHZ,
                schema.TEMPERATURE_C: self.temperature_max_c}


@dataclass
class _OpenWindow:
    """An open window: its start (None while ``begin_window`` is still syncing), what the log keeps."""

    thread: str
    start: float | None = None
    held: object = None


class _Handle:
    """What ``with meter.window(name) as w`` binds: ``w.result`` once the block has ended."""

    def __init__(self, name: str):
        self.name = name
        self.result: WindowMeasurement | None = None


def _open(device, index: int = 0):
    from .devices import Device, open_device

    if isinstance(device, Device):
        return device, False
    if isinstance(device, str):
        return open_device(device, index=index), True
    raise ValueError(f"EnergyMeter: device must be 'auto', 'nvml', 'simulated' or a Device, got {device!r}")


def _auto_sync():
    """A device synchronize for the frameworks already imported (torch, cupy), or None."""
    syncs = []
    torch = sys.modules.get("torch")
    if torch is not None and getattr(torch, "cuda", None) is not None and torch.cuda.is_initialized():
        syncs.append(torch.cuda.synchronize)
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        syncs.append(lambda: cupy.cuda.Device().synchronize())
    if not syncs:
        return None
    return lambda: [s() for s in syncs]


class EnergyMeter:
    """Measure the GPU energy of named code regions (windows), Zeus style.

    Parameters
    ----------
    device : {"auto", "nvml", "simulated"} or Device, default="auto"
        Where readings come from ("auto": NVML when a GPU is present, else the
        simulated GPU, said on stderr).
    index : int, default=0
        Which GPU, when ``device`` is a kind (one meter per GPU).
    sync : "auto", callable or None, default="auto"
        Called at both ends of a window so queued GPU work is inside it:
        "auto" synchronizes PyTorch and CuPy when they are imported; None
        measures exactly the host instants of the calls.
    delay_s : float, default=0
        Counter lag (a value published at ``u`` covers energy up to ``u - delay_s``).
    wait_timeout_s : float, default=2
        Longest ``end_window`` waits for the counter update after the window.

    See the module docstring for what a window can and cannot resolve.
    """

    def __init__(self, device="auto", *, index: int = 0, sync="auto", delay_s: float = 0.0,
                 wait_timeout_s: float = 2.0):
        from .measuring.counter_log import open_counter_log

        if not (sync is None or sync == "auto" or callable(sync)):
            raise ValueError(f"EnergyMeter: sync must be 'auto', a callable or None, got {sync!r}")
        if not (isinstance(delay_s, (int, float)) and math.isfinite(delay_s) and delay_s >= 0):
            raise ValueError(f"EnergyMeter: delay_s must be a finite number >= 0, got {delay_s!r}")
        self.device, self._owns = _open(device, index)
        self.simulated = self.device.info.kind == "simulated"
        self._sync_mode = None if self.simulated else sync
        self.delay_s = float(delay_s)
        self.wait_timeout_s = float(wait_timeout_s)
        self._log = open_counter_log(self.device)
        self._windows: dict[str, _OpenWindow] = {}
        self._lock = threading.Lock()
        if not self.simulated and self._log.has_counter:
            self._wait_first_update()

    # -- windows ------------------------------------------------------------

    def begin_window(self, name: str) -> None:
        """Open window ``name`` now (after a sync); windows may nest and overlap by name.

        Window names are shared by every thread using this meter: opening a
        name that is open — in any thread, or still being opened by another —
        is a ``ValueError`` naming the thread that holds it. For one window
        per thread, put the thread in the name (``f"step-{threading.get_ident()}"``).
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"begin_window: name must be a non-empty string, got {name!r}")
        record = _OpenWindow(threading.current_thread().name)
        with self._lock:  # the name is reserved before the sync, which may release the GIL
            if name in self._windows:
                raise ValueError(f"begin_window: window {name!r} is already open "
                                 f"(begun by thread {self._windows[name].thread!r})")
            self._windows[name] = record
        try:
            self._synchronize()
            start = self.device.now()
            held = self._log.hold(start, self._bracket_s())
        except BaseException:
            with self._lock:
                self._windows.pop(name, None)
            raise
        with self._lock:
            record.held = held
            record.start = start

    def end_window(self, name: str, *, wait: bool = True, steady: bool = False,
                   idle_power_w: float | None = None) -> WindowMeasurement:
        """Close window ``name`` and measure it (waits for the counter's next update, ~0.1 s).

        Of two threads ending the same window at once, one measures it and
        the other gets the ``ValueError`` of a window that is not open. The
        window is closed even when measuring it raises.

        Parameters
        ----------
        name : str
            A window begun with :meth:`begin_window`.
        wait : bool, default=True
            Wait for the counter's first update after the window's end (up to
            one update period plus a read), so the end is bracketed. With
            False the call returns at once — for a window per training step,
            where a 0.1 s stall per step would cost more than it tells — and
            the end is extrapolated at the last update interval's power
            (:func:`~powermodels.measuring.counter_log.extrapolated_energy`):
            the upper bound is then unknown (``inf``) and the uncertainty
            includes the unseen time since the last update.
        steady : bool, default=False
            Only when the load is the same all through the window (back-to-back
            launches of one kernel, as Kernel Tuner's continuous benchmark): the
            power is taken between the first and last counter updates inside
            the window and multiplied by its time, so nothing is interpolated
            across its edges (:func:`~powermodels.measuring.counter_log.steady_power`);
            needs two updates inside (a window of ≥ ~2 update periods), else the
            default estimate is used and a note says so.
        idle_power_w : float, optional
            Only when the GPU idled at this power from the update before the
            window's start to the start, and from its end to the update after
            (as around a whole program run): each end is then anchored to the
            update outside the window instead of interpolated across the
            load change, which leaves only the update instants' brackets as
            error (:func:`~powermodels.measuring.counter_log.anchored_energy`).
        """
        if idle_power_w is not None and not (isinstance(idle_power_w, (int, float))
                                             and math.isfinite(idle_power_w) and idle_power_w >= 0):
            raise ValueError(f"end_window: idle_power_w must be a finite number >= 0, got {idle_power_w!r}")
        with self._lock:  # claimed here: a second end_window of this name gets the ValueError below
            record = self._windows.get(name)
            if record is None:
                open_ = sorted(self._windows)
                raise ValueError(f"end_window: no window named {name!r} is open "
                                 f"(open: {open_ if open_ else 'none'})")
            if record.start is None:
                raise ValueError(f"end_window: window {name!r} is still being opened by thread "
                                 f"{record.thread!r}")
            del self._windows[name]
        try:
            self._synchronize()
            end = self.device.now()
            return self._measure(name, record.start, end, idle_power_w, wait, steady, record.held)
        finally:
            self._log.release(record.held)

    def cancel_window(self, name: str) -> None:
        """Forget open window ``name`` without measuring it."""
        with self._lock:
            record = self._windows.get(name)
            if record is None or record.start is None:
                raise ValueError(f"cancel_window: no window named {name!r} is open")
            del self._windows[name]
        self._log.release(record.held)

    @contextmanager
    def window(self, name: str, *, wait: bool = True):
        """``with meter.window(name) as w:`` — ``w.result`` holds the measurement after the block.

        A block that raises cancels the window (the error propagates, nothing
        is measured). ``wait`` as in :meth:`end_window`.
        """
        handle = _Handle(name)
        self.begin_window(name)
        try:
            yield handle
        except BaseException:
            self.cancel_window(name)
            raise
        handle.result = self.end_window(name, wait=wait)

    @property
    def open_windows(self) -> list[str]:
        """Names of the windows begun and not yet ended."""
        with self._lock:
            return sorted(self._windows)

    def close(self) -> None:
        """Stop the background polling (and close the device if the meter opened it)."""
        self._log.close()
        if self._owns:
            self.device.close()

    def __enter__(self) -> EnergyMeter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- measuring ----------------------------------------------------------

    def _synchronize(self) -> None:
        # "auto" is resolved at every call: PyTorch or CuPy may be imported after the meter
        sync = _auto_sync() if self._sync_mode == "auto" else self._sync_mode
        if sync is not None:
            sync()

    def _bracket_s(self) -> float:
        """How far around a window's start the counter reads are kept (three update periods)."""
        period = self._log.update_period_s() if self._log.has_counter else math.nan
        return 3.0 * period if math.isfinite(period) and period > 0 else 1.0

    def _wait_first_update(self) -> None:
        # a window's start interpolates from the update before it; wait=False extrapolates
        # from the last two: have two updates in the log before the first window
        import time

        deadline = time.monotonic() + self.wait_timeout_s
        while time.monotonic() < deadline:
            _, _, j = self._log.reads(-math.inf, math.inf)
            if j.size >= 3 and np.count_nonzero(j[1:] > j[:-1]) >= 2:
                return
            self._log.advance()

    def _measure(self, name: str, start: float, end: float, idle_power_w=None,
                 wait: bool = True, steady: bool = False, held=None) -> WindowMeasurement:
        if not self._log.has_counter:
            return self._integrate(name, start, end, held)
        from .measuring.counter_log import anchored_energy, energy_bounds, merge_reads

        period = self._log.update_period_s()
        margin = 3.0 * (period if math.isfinite(period) else 0.1)
        # the reads bracketing the start were kept however long ago it was (HeldWindow);
        # those of the end are recent. In between nothing is needed (the counter is cumulative).
        first = self._log.start_reads(held)
        waited = 0
        while True:  # the history may move on while we wait: its start is asked each time
            lo_t = max(end - margin, self._log.history_start())
            t0, t1, j = merge_reads(first, self._log.reads(lo_t, math.inf))
            b = energy_bounds(t0, t1, j, start, self.delay_s)
            e = energy_bounds(t0, t1, j, end, self.delay_s)
            if (math.isfinite(e.upper) and math.isfinite(e.estimate)) or not wait:
                break
            if (self._log.now() - end) > self.wait_timeout_s or waited > 10_000:
                break
            self._log.advance()
            waited += 1
        notes = []
        energy = e.estimate - b.estimate
        bounds = (max(e.lower - b.upper, 0.0), e.upper - b.lower)
        sigma = math.hypot(b.upper - b.lower, e.upper - e.lower) / math.sqrt(12.0)
        if not wait and not math.isfinite(e.estimate):
            from .measuring.counter_log import extrapolated_energy

            ee, se = extrapolated_energy(t0, t1, j, end, self.delay_s)
            eb, sb = b.estimate, (b.upper - b.lower) / math.sqrt(12.0)
            if not math.isfinite(eb):  # no update since the start either: both ends carried forward
                eb, sb = extrapolated_energy(t0, t1, j, start, self.delay_s)
                sb = 0.0  # the same carried power at both ends: only the end's unseen span counts
            energy = ee - eb
            sigma = math.hypot(sb, se)
        if steady:
            from .measuring.counter_log import steady_power

            power, sigma_p, updates = steady_power(t0, t1, j, start, end, self.delay_s)
            if math.isfinite(power):
                energy = min(max(power * (end - start), bounds[0]), bounds[1])
                sigma = sigma_p * (end - start)
            else:
                notes.append(f"steady=True needs two counter updates inside the window, saw {updates}: "
                             "interpolated at its edges instead")
        if idle_power_w is not None:
            eb, sb = anchored_energy(t0, t1, j, start, "before", idle_power_w, self.delay_s)
            ee, se = anchored_energy(t0, t1, j, end, "after", idle_power_w, self.delay_s)
            if math.isfinite(eb) and math.isfinite(ee):
                # clipped into the hard bounds: an anchor can only be wrong if the GPU was not idle
                energy = min(max(ee - eb, bounds[0]), bounds[1])
                sigma = math.hypot(sb, se)
        if not (math.isfinite(energy) and math.isfinite(sigma)):
            notes.append("fewer than two counter updates seen before the window's end (wait=False "
                         "extrapolates from them)" if not wait else
                         f"the counter did not bracket the window within {self.wait_timeout_s:g} s "
                         "(no update seen before its start or after its end)")
        time_s = end - start
        short = math.isfinite(period) and time_s < period
        if short:
            notes.append(f"window {name!r} ({time_s * 1e3:.3g} ms) is shorter than the counter's update "
                         f"period ({period * 1e3:.3g} ms): its energy is the surrounding updates' power × "
                         f"its time, uncertainty ± {sigma:.3g} J")
        return self._result(name, start, end, energy, sigma, bounds, "energy_counter", period, short,
                            notes, held)

    def _integrate(self, name: str, start: float, end: float, held=None) -> WindowMeasurement:
        """Without a counter: the power readings held between updates, integrated over the window."""
        sensor = getattr(self.device, "sensor", None)
        period = float(sensor.update_period_s) if sensor is not None else 0.1
        if not self.simulated:
            import time

            time.sleep(0.02)  # one more fast reading after the end
        # what left the log's history during a long window was integrated as it left (HeldWindow)
        since = start if held is None else max(start, held.summarised_until)
        before_j = 0.0 if since == start else held.power_j
        c = self._log.conditions(max(since - period, self._log.history_start()), end + period)
        t = c[schema.T_S]
        p = c[schema.POWER_INSTANT_W]
        if not np.isfinite(p).any():
            p = c[schema.POWER_USAGE_W]
        ok = np.isfinite(p)
        t, p = t[ok], p[ok]
        notes = ["no energy counter on this GPU: power readings integrated (their window may cover "
                 "only part of each update, and their gain error is within ±5 %)"]
        if t.size < 2:
            energy = sigma = math.nan
            notes.append("fewer than two power readings around the window")
        else:
            # a reading holds until the next one (zero-order hold), clipped to the window
            edges = np.clip(np.append(t, max(t[-1], end)), since, end)
            energy = before_j + float(np.sum(p * np.diff(edges)))
            power = energy / (end - start) if end > start else float(np.mean(p))
            sigma = math.hypot(POWER_GAIN_ERROR * energy, power * period)
        warnings.warn(notes[0], RuntimeWarning, stacklevel=3)
        short = (end - start) < period
        return self._result(name, start, end, energy, sigma, (math.nan, math.nan), "power_integration",
                            period, short, notes, held)

    def _result(self, name, start, end, energy, sigma, bounds, method, period, short, notes, held=None):
        since = start if held is None else max(start, held.summarised_until)
        c = self._log.conditions(max(since, self._log.history_start()), end)
        clocks = c[schema.SM_CLOCK_MHZ][np.isfinite(c[schema.SM_CLOCK_MHZ])]
        temps = c[schema.TEMPERATURE_C][np.isfinite(c[schema.TEMPERATURE_C])]
        thr = int(np.bitwise_or.reduce(c[schema.THROTTLE_REASONS])) if c[schema.THROTTLE_REASONS].size else 0
        if held is not None and since > start:  # folded in as they left the log's history
            clocks = np.append(clocks, [x for x in (held.clock_min, held.clock_max) if math.isfinite(x)])
            if math.isfinite(held.temperature_max):
                temps = np.append(temps, held.temperature_max)
            thr |= held.throttle
        for note in notes[1 if method == "power_integration" else 0:]:
            warnings.warn(note, RuntimeWarning, stacklevel=4)
        if thr:  # recorded, not warned: a power-capped GEMM is a normal state, not a faulty window
            notes.append(f"clock-event reasons 0x{thr:x} during the window (power cap / thermal)")
        time_s = end - start
        return WindowMeasurement(
            name=name, start_s=start, end_s=end, time_s=time_s, energy_j=float(energy),
            power_w=float(energy / time_s) if time_s > 0 else math.nan, uncertainty_j=float(sigma),
            energy_bounds_j=tuple(float(x) for x in bounds), method=method,
            update_period_s=float(period), short=bool(short), throttle_reasons=thr,
            sm_clock_min_mhz=float(clocks.min()) if clocks.size else math.nan,
            sm_clock_max_mhz=float(clocks.max()) if clocks.size else math.nan,
            temperature_max_c=float(temps.max()) if temps.size else math.nan,
            notes=tuple(notes))
