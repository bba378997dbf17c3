"""The SM clock of an energy window where no probe can run: NVML's reading as a sensor.

Inside someone else's code (a whole program, an :class:`~powermodels.meter.EnergyMeter` window
around a training step) no clock probe can run on the workload's stream, so the window's clock
comes from NVML's SM-clock reading. That reading is a sensor like the power readings
(:mod:`powermodels.sensor.clock_reading`): it publishes a value every update period (~100 ms on
an H100), and each value describes the clock over a window that ended a delay before. So the
values that describe a window ``[start, end]`` are those published in ``[start + delay,
end + delay + window + period]``, not the ones read between ``start`` and ``end``.

:func:`clock_reading_model` gives the device's model: the simulated GPU's from its sensor preset;
on a real GPU the update period measured from the reading's own changes (else the counter's
period, with which the H100's reading updates in step), and delay + window bounded together by
one period (:func:`~powermodels.sensor.clock_reading.uncharacterised_clock_reading`: a run has no
reference clock to characterise the reading against). :func:`window_clock` gives the window its
clock (the time-weighted mean of those values), their range and whether every value that can
describe the window's end had been published when it was measured.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import schema
from ..sensor.clock_reading import ClockReadingSensor, held_mean, uncharacterised_clock_reading

__all__ = ["WindowClock", "clock_reading_model", "wait_for_clock", "window_clock"]

#: readings before the window that still count when measuring the update period (s)
_PERIOD_LOOKBACK_S = 5.0


@dataclass(frozen=True)
class WindowClock:
    """A window's SM clock from NVML's reading, modelled as a sensor.

    Attributes
    ----------
    clock_mhz : float
        Time-weighted mean of the reading over the values that describe the window's instants
        (published within ``[start + delay, end + delay + window]``).
    low_mhz, high_mhz : float
        Lowest and highest value that can describe the window: also the value held before that
        span and the next one published up to one period after it (NaN without readings).
    sensor : ClockReadingSensor
        The reading's model used (period, delay, window).
    covered : bool
        Every value that can describe the window's end had been published (the log reached
        ``end + sensor.horizon_s``).
    """

    clock_mhz: float
    low_mhz: float
    high_mhz: float
    sensor: ClockReadingSensor
    covered: bool


def clock_reading_model(log, device, readings_t_s, readings_mhz) -> ClockReadingSensor:
    """The SM-clock reading's sensor model for ``device``.

    Parameters
    ----------
    log : CounterLog
        The meter's log (its counter period is the fallback update period).
    device : Device
        A simulated GPU's sensor preset gives its reading's period and delay exactly (live
        readings when the preset has no clock period); any other device's reading is
        :func:`~powermodels.sensor.clock_reading.uncharacterised_clock_reading`.
    readings_t_s, readings_mhz : array-like
        The reading around the window (its changes give the update period).

    Returns
    -------
    ClockReadingSensor
        Period, delay and window (not scored against a reference: ``updates_scored`` 0).
    """
    preset = getattr(device, "sensor", None)
    if preset is not None and hasattr(preset, "clock_period_s"):
        nan = math.nan
        if preset.clock_period_s is None:  # the simulated reading shows the present clock
            return ClockReadingSensor(0.0, 0.0, 0.0, nan, nan, nan, 0)
        return ClockReadingSensor(float(preset.clock_period_s), float(preset.clock_delay_s), 0.0, nan, nan, nan, 0)
    period = log.update_period_s()
    return uncharacterised_clock_reading(readings_t_s, readings_mhz,
                                         default_period_s=period if math.isfinite(period) and period > 0 else 0.1)


def _readings(log, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    c = log.conditions(max(lo, log.history_start()), hi)
    t, f = c[schema.T_S], c[schema.SM_CLOCK_MHZ]
    ok = np.isfinite(t) & np.isfinite(f)
    return t[ok], f[ok]


def window_clock(log, device, start: float, end: float, held=None) -> WindowClock:
    """The clock of ``[start, end]`` from the readings whose values describe it.

    Parameters
    ----------
    log : CounterLog
        The meter's log of readings.
    device : Device
        Whose reading it is (:func:`clock_reading_model`).
    start, end : float
        The window on the log's host clock, seconds.
    held : HeldWindow, optional
        The window's :class:`~powermodels.measuring.counter_log.HeldWindow`: what left the
        log's history during a long window (its clock range and time-weighted integral).

    Returns
    -------
    WindowClock
        The clock, its range, the sensor model used and whether the readings were complete.
    """
    t, f = _readings(log, min(start, end - _PERIOD_LOOKBACK_S), math.inf)
    sensor = clock_reading_model(log, device, t, f)
    since = start if held is None else max(start, held.summarised_until)
    lo = max(start + sensor.delay_s, since)
    hi = end + sensor.horizon_s
    covered = bool(t.size) and float(t[-1]) >= hi
    inside = (t > lo) & (t <= hi)
    before = np.flatnonzero(t <= lo)
    values = f[inside] if not before.size else np.append(f[before[-1]], f[inside])
    weight = sum_ = 0.0
    if values.size:  # the readings held from one poll to the next, over the span seen so far
        # the mean over the values that describe the window's instants (published within
        # [start + delay, end + delay + window]); the range also takes the next value (+ period)
        first = max(lo, float(t[0]))
        stop = max(min(end + sensor.delay_s + sensor.window_s, float(t[-1])), first)
        weight = max(stop - first, 1e-9)
        sum_ = float(held_mean(t, f, first, stop)) * weight
    lows, highs = list(values), list(values)
    if held is not None and since > start and held.clock_s > 0:
        sum_ += held.clock_mhz_s
        weight += held.clock_s
        lows.append(held.clock_min)
        highs.append(held.clock_max)
    lows = [x for x in lows if math.isfinite(x)]
    highs = [x for x in highs if math.isfinite(x)]
    return WindowClock(clock_mhz=sum_ / weight if weight > 0 else math.nan,
                       low_mhz=min(lows) if lows else math.nan, high_mhz=max(highs) if highs else math.nan,
                       sensor=sensor, covered=covered)


def wait_for_clock(log, device, end: float, timeout_s: float) -> None:
    """Let the log run on until every reading that can describe ``end`` is published (≤ ``timeout_s``).

    Parameters
    ----------
    log : CounterLog
        The meter's log; advanced (polled) until ``end`` + the reading's horizon.
    device : Device
        Whose reading it is (:func:`clock_reading_model`).
    end : float
        The window's end on the log's host clock, seconds.
    timeout_s : float
        Longest wait after ``end``.

    Returns
    -------
    None
    """
    t, f = _readings(log, end - _PERIOD_LOOKBACK_S, math.inf)
    horizon = end + clock_reading_model(log, device, t, f).horizon_s
    waited = 0
    while log.now() < horizon and log.now() - end <= timeout_s and waited < 10_000:
        log.advance()
        waited += 1
