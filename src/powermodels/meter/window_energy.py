"""Measuring one energy window out of the meter's counter log: :class:`WindowMeasurement` and its functions.

The measuring half of :class:`powermodels.meter.EnergyMeter` (which keeps the
window bookkeeping: names, threads, syncs, holding the reads around each
start). Given a window's two ends on the host clock and the
:class:`~powermodels.measuring.counter_log.PolledCounterLog` that polled the GPU,
:func:`measure_window` brackets each end by the counter's updates (or, without
a counter, :func:`integrate_window` integrates the power readings) and
:func:`window_result` adds the clocks, temperatures and clock events seen.
How and how well a window is measured is told in :mod:`powermodels.meter`.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field, replace

import numpy as np

from .. import schema
from ..devices.clock_probe import CLOCK_STEP_MHZ

__all__ = ["POWER_GAIN_ERROR", "WindowMeasurement", "integrate_window", "measure_window", "window_result", "with_thermal"]

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
        Range of the SM-clock readings whose values describe the window (NVML's reading as a
        sensor: those published from ``start + delay`` to ``end + delay + window + period``,
        :mod:`powermodels.meter.window_clock`) and the hottest temperature seen (NaN when unknown).
    notes : tuple of str
        What was warned about this window.
    temperature_start_c, temperature_end_c, temperature_mean_c : float
        The first and last temperature reading in the window and their mean (NaN when unknown; a
        window longer than the log's history starts at the oldest reading kept).
    thermal : dict
        The window's figures at a reference temperature and the α used (schema columns:
        ``energy_at_ref_j``, ``alpha_source`` ...; :func:`~powermodels.thermal.row.window_thermal_fields`),
        empty when the device could not say which board it is.
    sm_clock_mhz : float
        The window's SM clock: the time-weighted mean of those readings (no probe runs inside
        someone else's code).
    clock_reading : ClockReadingSensor or None
        The reading's sensor model used (update period, delay, window).
    clock_covered : bool
        Every reading that can describe the window's end had been published when it was measured
        (``end_window(..., wait_clock=True)`` waits for them).
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
    temperature_start_c: float = math.nan
    temperature_end_c: float = math.nan
    temperature_mean_c: float = math.nan
    thermal: dict = field(default_factory=dict)
    sm_clock_mhz: float = math.nan
    clock_reading: object = None
    clock_covered: bool = True

    def as_row(self) -> dict:
        """The window as run-table columns (energy and power of the whole window)."""
        return {schema.TIME_S: self.time_s, schema.ENERGY_J: self.energy_j,
                schema.POWER_W: self.power_w, schema.ENERGY_UNCERTAINTY_J: self.uncertainty_j,
                schema.START_S: self.start_s, schema.END_S: self.end_s,
                schema.THROTTLE_REASONS: int(self.throttle_reasons),
                schema.SM_CLOCK_MHZ: self.clock_mhz,
                # no probe runs inside someone else's code: NVML's reading, a lagging ~100 ms sensor
                # that can show a clock one step off for seconds (docs/recordings.md), modelled as
                # a sensor (period, delay + window) whose values describing the window are used
                schema.CLOCK_SOURCE: "nvml",
                schema.CLOCK_READING_PERIOD_S: getattr(self.clock_reading, "update_period_s", math.nan),
                schema.CLOCK_READING_LAG_S: (self.clock_reading.delay_s + self.clock_reading.window_s
                                             if self.clock_reading is not None else math.nan),
                schema.CLOCK_RANGE_MHZ: self.sm_clock_max_mhz - self.sm_clock_min_mhz,
                schema.CLOCK_UNCERTAINTY_MHZ: 0.5 * (self.sm_clock_max_mhz - self.sm_clock_min_mhz) + CLOCK_STEP_MHZ,
                # the row's temperature is the window's mean (what eq. 4.7 moves from), as a callable's
                schema.TEMPERATURE_C: self.temperature_mean_c if math.isfinite(self.temperature_mean_c)
                else self.temperature_max_c,
                schema.TEMPERATURE_START_C: self.temperature_start_c, schema.TEMPERATURE_END_C: self.temperature_end_c,
                **self.thermal}

    @property
    def clock_mhz(self) -> float:
        """The window's SM clock (the readings' mean; the middle of their range for an older result)."""
        if math.isfinite(self.sm_clock_mhz):
            return self.sm_clock_mhz
        return 0.5 * (self.sm_clock_min_mhz + self.sm_clock_max_mhz)


def measure_window(log, name: str, start: float, end: float, *, delay_s: float, wait_timeout_s: float,
                   idle_power_w=None, wait: bool = True, steady: bool = False, held=None,
                   device=None, simulated: bool = False, wait_clock: bool = False) -> WindowMeasurement:
    """Measure window ``name`` from ``start`` to ``end`` (host clock) out of the counter log ``log``.

    What :meth:`powermodels.meter.EnergyMeter.end_window` does once the window is
    closed; its parameters are that method's (``delay_s``/``wait_timeout_s`` the
    meter's, ``held`` what ``log.hold`` kept at the start, ``device``/``simulated``
    for a GPU without a counter and for the clock reading's model, ``wait_clock`` to wait
    until every clock reading that can describe the end is published). See
    :mod:`powermodels.meter` for the method.
    """
    if wait_clock:
        from .window_clock import wait_for_clock

        wait_for_clock(log, device, end, wait_timeout_s)
    if not log.has_counter:
        return integrate_window(log, device, simulated, name, start, end, held)
    from ..measuring.counter_log import anchored_energy, energy_bounds, merge_reads

    period = log.update_period_s()
    margin = 3.0 * (period if math.isfinite(period) else 0.1)
    # the reads bracketing the start were kept however long ago it was (HeldWindow);
    # those of the end are recent. In between nothing is needed (the counter is cumulative).
    first = log.start_reads(held)
    waited = 0
    while True:  # the history may move on while we wait: its start is asked each time
        lo_t = max(end - margin, log.history_start())
        t0, t1, j = merge_reads(first, log.reads(lo_t, math.inf))
        b = energy_bounds(t0, t1, j, start, delay_s)
        e = energy_bounds(t0, t1, j, end, delay_s)
        if (math.isfinite(e.upper) and math.isfinite(e.estimate)) or not wait:
            break
        if (log.now() - end) > wait_timeout_s or waited > 10_000:
            break
        log.advance()
        waited += 1
    notes = []
    energy = e.estimate - b.estimate
    bounds = (max(e.lower - b.upper, 0.0), e.upper - b.lower)
    sigma = math.hypot(b.upper - b.lower, e.upper - e.lower) / math.sqrt(12.0)
    if not wait and not math.isfinite(e.estimate):
        from ..measuring.counter_log import extrapolated_energy

        ee, se = extrapolated_energy(t0, t1, j, end, delay_s)
        eb, sb = b.estimate, (b.upper - b.lower) / math.sqrt(12.0)
        if not math.isfinite(eb):  # no update since the start either: both ends carried forward
            eb, sb = extrapolated_energy(t0, t1, j, start, delay_s)
            sb = 0.0  # the same carried power at both ends: only the end's unseen span counts
        energy = ee - eb
        sigma = math.hypot(sb, se)
    if steady:
        from ..measuring.counter_log import steady_power

        power, sigma_p, updates = steady_power(t0, t1, j, start, end, delay_s)
        if math.isfinite(power):
            energy = min(max(power * (end - start), bounds[0]), bounds[1])
            sigma = sigma_p * (end - start)
        else:
            notes.append(f"steady=True needs two counter updates inside the window, saw {updates}: "
                         "interpolated at its edges instead")
    if idle_power_w is not None:
        eb, sb = anchored_energy(t0, t1, j, start, "before", idle_power_w, delay_s)
        ee, se = anchored_energy(t0, t1, j, end, "after", idle_power_w, delay_s)
        if math.isfinite(eb) and math.isfinite(ee):
            # clipped into the hard bounds: an anchor can only be wrong if the GPU was not idle
            energy = min(max(ee - eb, bounds[0]), bounds[1])
            sigma = math.hypot(sb, se)
    if not (math.isfinite(energy) and math.isfinite(sigma)):
        notes.append("fewer than two counter updates seen before the window's end (wait=False "
                     "extrapolates from them)" if not wait else
                     f"the counter did not bracket the window within {wait_timeout_s:g} s "
                     "(no update seen before its start or after its end)")
    time_s = end - start
    short = math.isfinite(period) and time_s < period
    if short:
        notes.append(f"window {name!r} ({time_s * 1e3:.3g} ms) is shorter than the counter's update "
                     f"period ({period * 1e3:.3g} ms): its energy is the surrounding updates' power × "
                     f"its time, uncertainty ± {sigma:.3g} J")
    return window_result(log, name, start, end, energy, sigma, bounds, "energy_counter", period, short,
                        notes, held, device)

def integrate_window(log, device, simulated: bool, name: str, start: float, end: float,
                     held=None) -> WindowMeasurement:
    """Without a counter: the power readings held between updates, integrated over the window."""
    sensor = getattr(device, "sensor", None)
    period = float(sensor.update_period_s) if sensor is not None else 0.1
    if not simulated:
        import time

        time.sleep(0.02)  # one more fast reading after the end
    # what left the log's history during a long window was integrated as it left (HeldWindow)
    since = start if held is None else max(start, held.summarised_until)
    before_j = 0.0 if since == start else held.power_j
    c = log.conditions(max(since - period, log.history_start()), end + period)
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
    return window_result(log, name, start, end, energy, sigma, (math.nan, math.nan), "power_integration",
                        period, short, notes, held, device)

def window_result(log, name, start, end, energy, sigma, bounds, method, period, short, notes,
                  held=None, device=None) -> WindowMeasurement:
    """The :class:`WindowMeasurement` of an energy, with the clocks, temperatures and clock events seen.

    The clock is NVML's reading modelled as a sensor (:func:`~powermodels.meter.window_clock.window_clock`).
    """
    from .window_clock import window_clock

    since = start if held is None else max(start, held.summarised_until)
    c = log.conditions(max(since, log.history_start()), end)
    clock = window_clock(log, device if device is not None else getattr(log, "device", None), start, end, held)
    temps = c[schema.TEMPERATURE_C][np.isfinite(c[schema.TEMPERATURE_C])]
    ends = (float(temps[0]), float(temps[-1]), float(np.mean(temps))) if temps.size else (math.nan,) * 3
    thr = int(np.bitwise_or.reduce(c[schema.THROTTLE_REASONS])) if c[schema.THROTTLE_REASONS].size else 0
    if held is not None and since > start:  # folded in as they left the log's history
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
        sm_clock_min_mhz=clock.low_mhz, sm_clock_max_mhz=clock.high_mhz, sm_clock_mhz=clock.clock_mhz,
        clock_reading=clock.sensor, clock_covered=clock.covered,
        temperature_max_c=float(temps.max()) if temps.size else math.nan,
        notes=tuple(notes), temperature_start_c=ends[0], temperature_end_c=ends[1], temperature_mean_c=ends[2])


def with_thermal(result: WindowMeasurement, device, *, alpha=None, reference_temperature_c: float | None = None,
                 cache_dir=None, board=None) -> WindowMeasurement:
    """``result`` with its figures at a reference temperature (:attr:`WindowMeasurement.thermal`).

    α as :func:`~powermodels.thermal.row.window_alpha` gives it for the device's board (``alpha``
    given, the board's pooled α, or the assumption; ``board``: the α cache's entries for this GPU,
    read once by the caller); nothing is added for a device without a UUID or a window without an energy.
    """
    from ..thermal.row import window_alpha, window_thermal_fields
    from ..thermal.spans import POWER_CAP_BITS

    info = getattr(device, "info", None)
    if info is None or not (math.isfinite(result.energy_j) and result.time_s > 0 and result.energy_j > 0):
        return result
    clock = result.clock_mhz
    est = window_alpha(uuid=info.uuid or f"{info.kind}-{info.index}", driver=info.driver, power_w=result.power_w,
                       sm_clock_mhz=clock, capped=bool(result.throttle_reasons & POWER_CAP_BITS), given=alpha,
                       cache_dir=cache_dir, board=board)
    temperature = result.temperature_mean_c if math.isfinite(result.temperature_mean_c) else result.temperature_max_c
    fields = window_thermal_fields(energy_j=result.energy_j, time_s=result.time_s, temperature_c=temperature,
                                   alpha=est, reference_temperature_c=reference_temperature_c,
                                   energy_uncertainty_j=result.uncertainty_j)
    return replace(result, thermal=fields)
