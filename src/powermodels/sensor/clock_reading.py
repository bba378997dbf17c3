"""NVML's SM-clock reading as a sensor: update period, window and delay, and a run's clock uncertainty.

The clock reading is characterised like the power readings (Yang §IV): it publishes a new
value every update period (~100 ms on an H100, in step with the power readings); each value
describes the clock over a window that ended a delay before the update. The truth it is
compared against is a *reference clock* known at many instants: on-GPU probes
(:mod:`powermodels.devices.clock_probe`) or the clock implied by a kernel whose time is
∝ 1/clock (:mod:`powermodels.natural_dvfs.launch_clocks`).

Where no probe can run (a whole program), :func:`reading_clock_uncertainty_mhz` turns the
readings around a run into the clock and its uncertainty: every reading whose window can
overlap the run is a value the clock may have had. A program's run has no reference clock to
characterise the reading against; :func:`uncharacterised_clock_reading` then measures the update
period from the reading's own changes and bounds delay + window by one update period.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ClockReadingSensor", "characterize_clock_reading", "held_mean", "reading_clock_uncertainty_mhz",
           "uncharacterised_clock_reading"]


@dataclass(frozen=True)
class ClockReadingSensor:
    """What a clock reading is, as a sensor.

    Attributes
    ----------
    update_period_s : float
        Median time between changes of the reading.
    delay_s : float
        From the end of the window a value describes to its publication.
    window_s : float
        Length of the window a value averages.
    median_error_mhz, p95_error_mhz : float
        Of the model (reference averaged over the window, delayed) against the readings at
        the updates scored; ``naive_median_error_mhz`` is the same for the reading taken as the
        clock at the moment it was read (no window, no delay).
    updates_scored : int
        Updates during clock transitions that scored the model (0: not characterised
        against a reference clock, see :func:`uncharacterised_clock_reading`).
    """

    update_period_s: float
    delay_s: float
    window_s: float
    median_error_mhz: float
    p95_error_mhz: float
    naive_median_error_mhz: float
    updates_scored: int

    @property
    def horizon_s(self) -> float:
        """How long after a run's end a published value may still describe it (delay + window + period).

        Not the lag of one value (delay + window: the ``clock_reading_lag_s`` column): the
        next update may come a whole period later.
        """
        return self.delay_s + self.window_s + self.update_period_s

    @property
    def lag_s(self) -> float:
        """Deprecated name of :attr:`horizon_s` (it is not the ``clock_reading_lag_s`` column)."""
        import warnings

        warnings.warn("ClockReadingSensor.lag_s is deprecated: use horizon_s (delay + window + period; "
                      "the clock_reading_lag_s column is delay + window)", DeprecationWarning, stacklevel=2)
        return self.horizon_s


def held_mean(ref_t: np.ndarray, ref_f: np.ndarray, t0, t1) -> np.ndarray:
    """Time-weighted mean over each ``[t0, t1]`` of a reading held from one sample to the next
    (value ``ref_f[i]`` from ``ref_t[i]``); the value at ``t0`` where the window is empty.

    The same whether the trace kept every poll or only the rows where the reading changed.
    """
    ref_t = np.asarray(ref_t, float)
    ref_f = np.asarray(ref_f, float)
    t0 = np.asarray(t0, float)
    t1 = np.asarray(t1, float)
    seg = np.diff(ref_t, append=ref_t[-1])
    cum = np.concatenate([[0.0], np.cumsum(ref_f * seg)])

    def integral(x):
        i = np.clip(np.searchsorted(ref_t, x, side="right") - 1, 0, len(ref_t) - 1)
        return cum[i] + ref_f[i] * (x - ref_t[i])
    width = np.maximum(t1 - t0, 1e-9)
    return np.where(t1 - t0 > 1e-9, (integral(t1) - integral(t0)) / width,
                    ref_f[np.clip(np.searchsorted(ref_t, t0, side="right") - 1, 0, len(ref_t) - 1)])


def _period(intervals: np.ndarray) -> float:
    """The update period from intervals between changes, most of which may span several updates.

    At a steady clock the reading repeats its value, so the changes are sparse: the shortest
    intervals (10th percentile) give the base, every interval near a whole multiple of it
    counts as that many periods (Yang §IV-A's median would return the multiple).
    """
    d = intervals[intervals > 0]
    base = float(np.percentile(d, 10))
    k = np.maximum(np.rint(d / base), 1.0)
    ok = np.abs(d / base - k) <= 0.25
    return float(d[ok].sum() / k[ok].sum()) if ok.any() else base


def characterize_clock_reading(reading_t_s, reading_mhz, ref_t_s, ref_mhz, *, max_gap_s: float = 0.01,
                               delays_s=None, windows_s=(0.0, 0.01, 0.025, 0.05, 0.1),
                               transition_mhz: float = 15.0) -> ClockReadingSensor:
    """Fit the clock reading's delay and window against a reference clock.

    Parameters
    ----------
    reading_t_s, reading_mhz : array-like
        The polled reading (a trace's ``t_s`` and ``sm_clock_mhz``).
    ref_t_s, ref_mhz : array-like
        Reference clock samples (probes, or a reference kernel's launches), sorted by time.
    max_gap_s : float
        A window is scored only where consecutive reference samples are at most this apart.
    delays_s : array-like, optional
        Delays tried (default 0 … 300 ms in 5 ms steps).
    windows_s : sequence of float
        Windows tried.
    transition_mhz : float
        Only updates whose ±300 ms neighbourhood saw the reference move by more than this
        are scored (at a steady clock every delay fits).

    Returns
    -------
    ClockReadingSensor
    """
    t = np.asarray(reading_t_s, float)
    v = np.asarray(reading_mhz, float)
    rt = np.asarray(ref_t_s, float)
    rf = np.asarray(ref_mhz, float)
    if rt.size < 10 or t.size < 3:
        raise ValueError(f"characterize_clock_reading: too few samples (reading {t.size}, reference {rt.size})")
    delays = np.arange(0.0, 0.3001, 0.005) if delays_s is None else np.asarray(delays_s, float)
    change = np.flatnonzero(np.diff(v) != 0) + 1
    u, uv = t[change], v[change]
    period = _period(np.diff(u)) if u.size > 2 else float("nan")
    # updates near a clock transition of the reference, with the reference dense around them
    lo = np.searchsorted(rt, u - 0.3)
    hi = np.searchsorted(rt, u + 0.05)
    moving = np.array([hi[i] > lo[i] and np.ptp(rf[lo[i]:hi[i]]) > transition_mhz for i in range(u.size)])
    gaps = np.diff(rt)
    big = np.concatenate([[0], np.cumsum(gaps > max_gap_s)])
    best = None
    for w in windows_s:
        for d in delays:
            t1 = u - d
            t0 = t1 - w
            a = np.clip(np.searchsorted(rt, t0, side="right") - 1, 0, rt.size - 1)
            b = np.clip(np.searchsorted(rt, t1, side="right") - 1, 0, rt.size - 1)
            dense = (t0 >= rt[0]) & (t1 <= rt[-1]) & (big[b] == big[a])
            ok = moving & dense
            if ok.sum() < 5:
                continue
            err = np.abs(held_mean(rt, rf, t0[ok], t1[ok]) - uv[ok])
            score = float(np.median(err))
            if best is None or score < best[0]:
                best = (score, float(np.percentile(err, 95)), d, w, int(ok.sum()))
    if best is None:
        raise ValueError("characterize_clock_reading: no update during a clock transition lies where the "
                         "reference is dense; record a reference kernel or probes through transitions")
    # the naive reading: the clock at the moment the reading was taken, at every poll of a scored window
    naive = np.abs(rf[np.clip(np.searchsorted(rt, u[moving], side="right") - 1, 0, rt.size - 1)] - uv[moving])
    return ClockReadingSensor(update_period_s=period, delay_s=best[2], window_s=best[3], median_error_mhz=best[0],
                              p95_error_mhz=best[1], naive_median_error_mhz=float(np.median(naive)),
                              updates_scored=best[4])


def reading_clock_uncertainty_mhz(reading_t_s, reading_mhz, start_s, end_s, sensor: ClockReadingSensor,
                                  step_mhz: float = 15.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The clock of each run ``[start, end]`` from the readings, with its uncertainty.

    The values describing the run are those published in ``[start + delay, end + delay +
    window + update period]`` (a value describes the window ending ``delay`` before it and
    holds for an update period). Returns ``(clock, low, high)``: the mean of those readings
    and their range widened by one clock step each way (on the H100 recording the reading
    showed 1,980 MHz for 20 s while a reference kernel ran one 15 MHz step slower).
    """
    t = np.asarray(reading_t_s, float)
    v = np.asarray(reading_mhz, float)
    start = np.atleast_1d(np.asarray(start_s, float))
    end = np.atleast_1d(np.asarray(end_s, float))
    a = np.clip(np.searchsorted(t, start + sensor.delay_s, side="right") - 1, 0, t.size - 1)
    b = np.clip(np.searchsorted(t, end + sensor.delay_s + sensor.window_s + sensor.update_period_s,
                                side="right") - 1, 0, t.size - 1)
    clock = np.empty(start.size)
    low = np.empty(start.size)
    high = np.empty(start.size)
    for k in range(start.size):
        seg = v[a[k]:b[k] + 1]
        clock[k] = float(np.mean(seg))
        low[k] = float(seg.min()) - step_mhz
        high[k] = float(seg.max()) + step_mhz
    return clock, low, high


def uncharacterised_clock_reading(reading_t_s=(), reading_mhz=(), *, default_period_s: float = 0.1,
                                  delay_s: float | None = None) -> ClockReadingSensor:
    """The reading's sensor model where no reference clock characterised it (a program's run).

    Parameters
    ----------
    reading_t_s, reading_mhz : array-like
        The polled reading around the run.
    default_period_s : float
        Update period where the reading changed fewer than four times (a steady clock shows
        no updates): the power readings' or the counter's period (the H100's clock reading
        updates in step with them).
    delay_s : float, optional
        A known delay (a simulated sensor's). None: delay and window are not identified
        without a reference clock and are bounded together by one update period (window =
        one period, delay 0): every value published up to two periods after the run may
        describe it. Characterised H100 readings (``docs/recordings.md``) had a delay of
        10–32 ms and no window, inside that bound.

    Returns
    -------
    ClockReadingSensor
        ``updates_scored = 0`` and NaN errors: not scored against a reference.
    """
    t = np.asarray(reading_t_s, float)
    v = np.asarray(reading_mhz, float)
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    changes = t[np.flatnonzero(np.diff(v) != 0) + 1] if v.size > 1 else t[:0]
    period = _period(np.diff(changes)) if changes.size >= 4 else float(default_period_s)
    if delay_s is None:
        delay, window = 0.0, period
    else:
        delay, window = float(delay_s), 0.0
    nan = float("nan")
    return ClockReadingSensor(update_period_s=period, delay_s=delay, window_s=window, median_error_mhz=nan,
                              p95_error_mhz=nan, naive_median_error_mhz=nan, updates_scored=0)
