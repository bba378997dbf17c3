"""When a recording's energy counter updated: its period and phase, read before the first series, for a replay.

NVML's total-energy counter publishes a new value every ~100 ms at a phase fixed when the driver loaded (Yang
§IV-C). A per-second energy reading interpolates the counter between its updates, so where an update falls against
a load's start moves energy across the second's edge: on GPU-b55f945c (session 28) the board's counter updated
1.7 ms after the fp32 GEMM's series began and the twin's (its phase drawn from the replay's seed) 29 ms after, and
the twin's second 0 read ~1.3 % low from that alone. A replay of a recording can run its twin's counter on the
recording's own update instants, as it runs the recording's schedule and ambient.

:func:`counter_timing_before` fits ``update time = phase + index × period`` to the counter updates the recording's
reads saw before a time (a raw recording's first series: the series' updates are not read), each update placed at the
middle of the bracket in which it was seen (:func:`powermodels.energy_counter.counter_updates`). Only the update
instants are read, no energy value.
"""

from __future__ import annotations

import numpy as np

from . import energy_counter, schema
from .recording import Recording

__all__ = ["COUNTER_TIMINGS", "MIN_UPDATES", "counter_timing_before", "first_series_start", "resolve_counter_timing"]

#: fewer counter updates than this before the cut cannot pin a period to the microsecond (~10 s at 100 ms)
MIN_UPDATES = 100


def first_series_start(rec: Recording) -> float:
    """The first ``series`` entry's start (s), or the recording's end without one."""
    series = rec.phase_rows(kind="series")
    return float(series[schema.T0_S].min()) if len(series) else float(rec.phases[schema.T1_S].max())


def counter_timing_before(rec: Recording, before_s: float | None = None) -> dict:
    """The energy counter's update period and phase, fitted to its updates seen before ``before_s``.

    Parameters
    ----------
    rec : Recording
        A recording whose ``energy`` table holds the counter's reads.
    before_s : float, optional
        Only updates whose bracket ends before this are read; default the first series' start
        (:func:`first_series_start`).

    Returns
    -------
    dict
        ``period_s``, ``phase_s`` (in ``[0, period_s)``: updates at ``phase_s + n·period_s`` on the recording's
        clock), ``updates`` (how many were fitted), ``residual_s`` (their root-mean-square distance from the line)
        and ``before_s``.

    Raises
    ------
    ValueError
        When fewer than :data:`MIN_UPDATES` updates were seen before ``before_s``.
    """
    cut = first_series_start(rec) if before_s is None else float(before_s)
    lo, hi, _ = energy_counter.counter_updates(rec.energy)
    keep = hi < cut
    times = 0.5 * (lo[keep] + hi[keep])  # the update lies in (lo, hi]: its middle is the unbiased guess
    if times.size < MIN_UPDATES:
        raise ValueError(f"counter_timing_before: {rec.name} shows {times.size} energy-counter updates before "
                         f"{cut:.1f} s; {MIN_UPDATES} or more are needed to fit the counter's period")
    step = float(np.median(np.diff(times)))
    # each gap counts its own updates (a missed one leaves two steps): a median step rounded to the reads' grid
    # would drift a whole index within ~100 updates if it were divided into the total time instead
    index = np.concatenate([[0.0], np.cumsum(np.maximum(np.round(np.diff(times) / step), 1.0))])
    period, intercept = np.polyfit(index, times, 1)
    residual = times - (intercept + period * index)
    return {"period_s": float(period), "phase_s": float(np.mod(intercept, period)), "updates": int(times.size),
            "residual_s": float(np.sqrt(np.mean(residual ** 2))), "before_s": cut}


#: ``twin_compare``'s counter timings: the recording's where it can be read, the recording's, the seed's
COUNTER_TIMINGS = ("auto", "recorded", "seed")


def resolve_counter_timing(real: Recording, counter_timing: str) -> tuple[str, str]:
    """``replay``'s ``counter_timing`` for ``real`` (``"auto"`` resolved) and a note saying what was used.

    Raises
    ------
    ValueError
        On an unknown ``counter_timing``, or ``"recorded"`` where the recording shows too few counter updates
        before its first series (:func:`~powermodels.counter_timing.counter_timing_before`).
    """
    if counter_timing not in COUNTER_TIMINGS:
        raise ValueError(f"counter_timing must be one of {', '.join(COUNTER_TIMINGS)}, "
                         f"got {counter_timing!r}")
    if counter_timing == "seed":
        return "seed", "energy counter: the preset's period at the seed's phase (counter_timing='seed')"
    try:
        timing = counter_timing_before(real)
    except ValueError as err:
        if counter_timing == "recorded":
            raise
        return "seed", f"energy counter: the preset's period at the seed's phase ({err})"
    return "recorded", (f"energy counter: the recording's, every {timing['period_s'] * 1e3:.4f} ms at phase "
                        f"{timing['phase_s'] * 1e3:.1f} ms, fitted to its {timing['updates']} updates before "
                        f"{timing['before_s']:.1f} s (their rms {timing['residual_s'] * 1e3:.1f} ms)")
