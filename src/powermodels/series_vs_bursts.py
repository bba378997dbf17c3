"""Does a workload draw the same power in a long series as in short bursts, at the same clock and die temperature?

The twin's power is a function of its state: the clock, the activity, the die temperature (leakage) and, through
the thermal network, nothing else (DSO eq. 1, ``c·f·V²·a`` plus a static part rising with the die). A raw recording
runs each uncapped workload twice at the top clock: in ~0.9 s ``burst`` entries of its natural part, between capped
``pressure`` entries that warm the die, and in a 25 s ``series`` of its thermal part. Where a burst and the
series ran at the same clock and die temperature, a twin draws the same power in both; a board that does not holds
some state the twin lacks (a voltage regulator's or the board's own temperature, a firmware voltage offset), and a
calibration read in one part carries that state's difference into the other.

:func:`series_against_bursts` reads it from the recording alone: the series' mean counter power over a window of
its warm seconds (3-10 s), its die and NVML clock there, and the mean power of the bursts at the same clock whose
die was within ``match_c`` of the series'. On 56 raw H200 recordings of 53 boards (sessions 6-28; real) the fp32
GEMM's series drew -1.69 ... +1.88 % against its matched bursts (median -0.01 %, standard deviation 0.66 %;
GPU-4e3a410b +1.88 %, whose fp32 warm-up rows every twin label misses by -3.6 ... -4.6 %), where 24 twins'
replays read -0.25 ... +0.20 % (0.13 %). The FMA loop's and the triad's medians (-0.94 %, -0.53 %) are near the
twins' (-0.39 %, -0.52 %: the matching window's leakage and the twin's memory warming), their spread (0.65 %, 0.62 %)
is not (0.05 %, 0.03 %). One board can move between runs: GPU-b55f945c's fp32 GEMM read +0.89 % and, 8 minutes
later, -0.41 % (docs/twin-sessions.md, session 28).

:func:`burst_levels` looks at the bursts alone, one by one: each top-clock burst's power brought to one die
temperature (the workload's median burst die, through a leakage slope), as a level relative to the recording's
median burst. :func:`level_persistence` says how far those levels spread and whether consecutive bursts share
theirs (lag-1 correlation): a state that holds for several bursts and then moves shows as a spread the twin lacks
with a positive correlation; the sensors' noise alone would give a correlation near ``-1/n``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import schema
from .energy_counter import mean_power_between_updates
from .recording import Recording
from .twin import metrics

__all__ = ["DEFAULT_MATCH_C", "burst_levels", "burst_levels_all", "lag1_correlation", "lag1_correlations",
           "level_persistence", "series_against_bursts", "series_against_bursts_all"]

#: the series' seconds read: past the first second's rise, before the die settles (where the bursts' dies lie)
SERIES_WINDOW_S = (3.0, 10.0)
#: a burst is matched to the series when their mean die readings differ by no more than this (NVML reads whole °C)
DEFAULT_MATCH_C = 1.5
#: a part ran at the top clock when its median NVML clock reading is within this of the recording's top clock
TOP_CLOCK_MARGIN_MHZ = 10.0
#: step of the grid on which the die and clock readings are averaged (a twin's trace keeps only changed readings)
GRID_S = 0.01
#: fewest top-clock bursts of one workload for a spread and a lag-1 correlation to mean anything
MIN_BURSTS_FOR_PERSISTENCE = 6
#: :func:`burst_levels`' columns, in order (the level last: computed from the others)
LEVEL_COLUMNS = (schema.RECORDING_NAME, schema.DEVICE_UUID, schema.WORKLOAD, schema.REPEAT, schema.T0_S,
                 schema.TEMPERATURE_C, schema.COUNTER_POWER_W, schema.BURST_LEVEL_PCT)


def _top_clock_mhz(trace: pd.DataFrame) -> float:
    """The top clock the board ran at: a percentile of the NVML readings, so that a stray high sample does not set it."""
    return float(np.percentile(trace[schema.SM_CLOCK_MHZ].to_numpy(float), 99))


def _levels(rec: Recording, counter, start_s: float, end_s: float) -> tuple[float, float, float]:
    """Mean counter power, mean die reading and median NVML clock over ``[start_s, end_s]``."""
    grid = np.arange(start_s, end_s, GRID_S)
    power = mean_power_between_updates(*counter, start_s, end_s)
    die = float(np.mean(metrics.reading_series(rec, schema.TEMPERATURE_C, grid)))
    clock = float(np.median(metrics.reading_series(rec, schema.SM_CLOCK_MHZ, grid)))
    return power, die, clock


def series_against_bursts(rec: Recording, workload: str, *, match_c: float = DEFAULT_MATCH_C) -> dict:
    """The power of ``workload``'s first series against its bursts at the same clock and die temperature.

    Parameters
    ----------
    rec : Recording
        A raw recording with a trace, ``burst`` entries and a ``series`` of ``workload`` (real, or a twin's).
    workload : str
        An uncapped workload (a capped one's power is the cap's, not its state's).
    match_c : float, default=1.5
        Bursts whose mean die reading lies within this of the series' are matched.

    Returns
    -------
    dict
        ``device_uuid``, ``workload``, ``temperature_c`` (the series' mean die reading over 3-10 s),
        ``series_power_w`` (its counter's mean power there), ``burst_power_w`` (the matched bursts' mean counter
        power from 0.4 s into each; NaN with none matched), ``bursts_matched`` (how many of the top-clock bursts)
        and ``series_burst_gap_pct`` (series over bursts, minus 1, in per cent; NaN with none matched).

    Raises
    ------
    ValueError
        When the recording has no trace, no burst or no series of ``workload``, a series shorter than 3 s, or a
        series that did not run at the top clock (a capped workload), or ``match_c`` is not positive.
    """
    if not match_c > 0:
        raise ValueError(f"series_against_bursts: match_c must be positive, got {match_c!r}")
    trace = rec.require_trace("the series and burst power")
    phases = rec.phases
    own = phases.loc[phases[schema.WORKLOAD] == workload]
    bursts = own.loc[own[schema.PHASE_KIND] == "burst"]
    series = own.loc[own[schema.PHASE_KIND] == "series"]
    if bursts.empty or series.empty:
        raise ValueError(f"series_against_bursts: {rec.name} has no burst or no series of {workload!r} (a raw "
                         "recording's natural and thermal parts)")
    first = series.iloc[0]
    start_s = float(first[schema.T0_S]) + SERIES_WINDOW_S[0]
    end_s = min(float(first[schema.T0_S]) + SERIES_WINDOW_S[1], float(first[schema.T1_S]))
    if end_s <= start_s:
        raise ValueError(f"series_against_bursts: {rec.name}'s {workload} series is shorter than "
                         f"{SERIES_WINDOW_S[0]:g} s")
    top = _top_clock_mhz(trace)
    counter = metrics.counter_updates(rec)
    power, die, clock = _levels(rec, counter, start_s, end_s)
    if clock < top - TOP_CLOCK_MARGIN_MHZ:
        raise ValueError(f"series_against_bursts: {rec.name}'s {workload} series ran at {clock:.0f} MHz, below the "
                         f"top clock {top:.0f} MHz (capped: its power is the cap's)")
    matched = []
    for _, burst in bursts.iterrows():
        burst_from_s = float(burst[schema.T0_S]) + metrics.BURST_SETTLE_S
        levels = _levels(rec, counter, burst_from_s, float(burst[schema.T1_S]))
        if np.isfinite(levels[0]) and levels[2] >= top - TOP_CLOCK_MARGIN_MHZ and abs(levels[1] - die) <= match_c:
            matched.append(levels[0])
    burst_power = float(np.mean(matched)) if matched else float("nan")
    return {schema.DEVICE_UUID: rec.board, schema.WORKLOAD: workload, schema.TEMPERATURE_C: die,
            schema.SERIES_POWER_W: power, schema.BURST_POWER_W: burst_power, schema.BURSTS_MATCHED: len(matched),
            schema.SERIES_BURST_GAP_PCT: 100.0 * (power / burst_power - 1.0)}


def burst_levels(rec: Recording, workload: str, *, alpha_w_per_c: float) -> pd.DataFrame:
    """Each top-clock burst of ``workload``: its power at one die temperature, relative to the recording's median.

    A burst is read from :data:`~powermodels.twin.metrics.BURST_SETTLE_S` after its start (the clock and power rise
    after a capped pressure entry) to its end: the energy counter's mean power, the mean die reading and the median
    NVML clock, as :func:`series_against_bursts` reads them. Bursts below the top clock are left out. Each burst's
    power is brought to the workload's median burst die with ``alpha_w_per_c`` (the leakage slope, W/°C; DSO eq. 1's
    static part taken as linear over the bursts' few degrees), so what is left is the burst's *level*.

    Parameters
    ----------
    rec : Recording
        A raw recording with a trace and ``burst`` entries of ``workload`` (real, or a twin's).
    workload : str
        The workload's name.
    alpha_w_per_c : float
        Leakage slope used to bring each burst to the median die, W/°C (non-negative; 0 reads the power as is).

    Returns
    -------
    DataFrame
        One row per top-clock burst in time order: ``recording``, ``device_uuid``, ``workload``, ``repeat``,
        ``t0_s``, ``temperature_c`` (its mean die), ``counter_power_w`` (as read) and ``burst_level_pct``.

    Raises
    ------
    ValueError
        ``alpha_w_per_c`` negative or not finite, or the recording has no burst of ``workload``.
    """
    if not (np.isfinite(alpha_w_per_c) and alpha_w_per_c >= 0):
        raise ValueError(f"burst_levels: alpha_w_per_c must be a finite slope >= 0 W/°C, got {alpha_w_per_c!r}")
    trace = rec.require_trace("the burst levels")
    phases = rec.phases
    bursts = phases.loc[(phases[schema.WORKLOAD] == workload) & (phases[schema.PHASE_KIND] == "burst")]
    if bursts.empty:
        raise ValueError(f"burst_levels: {rec.name} has no burst of {workload!r} (a raw recording's natural part)")
    top = _top_clock_mhz(trace)
    counter = metrics.counter_updates(rec)
    rows = []
    for _, burst in bursts.sort_values(schema.T0_S).iterrows():
        power, die, clock = _levels(rec, counter, float(burst[schema.T0_S]) + metrics.BURST_SETTLE_S,
                                    float(burst[schema.T1_S]))
        if np.isfinite(power) and clock >= top - TOP_CLOCK_MARGIN_MHZ:
            rows.append({schema.RECORDING_NAME: rec.name, schema.DEVICE_UUID: rec.board, schema.WORKLOAD: workload,
                         schema.REPEAT: int(burst[schema.REPEAT]), schema.T0_S: float(burst[schema.T0_S]),
                         schema.TEMPERATURE_C: die, schema.COUNTER_POWER_W: power})
    table = pd.DataFrame(rows, columns=list(LEVEL_COLUMNS[:-1]))
    at_median_die = table[schema.COUNTER_POWER_W] - alpha_w_per_c * (
        table[schema.TEMPERATURE_C] - table[schema.TEMPERATURE_C].median())
    table[schema.BURST_LEVEL_PCT] = 100.0 * (at_median_die / at_median_die.median() - 1.0)
    return table


def burst_levels_all(recordings, *, alpha_w_per_c: float) -> pd.DataFrame:
    """:func:`burst_levels` for every workload with bursts in each recording, one table."""
    tables = []
    for rec in recordings:
        phases = rec.phases
        for workload in dict.fromkeys(phases.loc[phases[schema.PHASE_KIND] == "burst", schema.WORKLOAD]):
            tables.append(burst_levels(rec, workload, alpha_w_per_c=alpha_w_per_c))
    return pd.concat(tables, ignore_index=True) if tables else _empty_levels()


def _empty_levels() -> pd.DataFrame:
    """The columns of :func:`burst_levels`, no rows."""
    return pd.DataFrame(columns=list(LEVEL_COLUMNS))


def level_persistence(levels: pd.DataFrame, *, min_bursts: int = MIN_BURSTS_FOR_PERSISTENCE) -> pd.DataFrame:
    """Per recording and workload: how far the burst levels spread and whether consecutive bursts share theirs.

    Parameters
    ----------
    levels : DataFrame
        :func:`burst_levels` (or :func:`burst_levels_all`) output.
    min_bursts : int, default=6
        Recordings with fewer top-clock bursts of a workload are left out.

    Returns
    -------
    DataFrame
        ``recording``, ``device_uuid``, ``workload``, ``bursts``, ``level_sd_pct`` (sample standard deviation of the
        levels) and ``level_lag1_corr`` (Pearson correlation of each burst's level with the next one's, in time
        order; for independent levels its expectation is about ``-1/bursts``; NaN for levels that do not move).
    """
    if min_bursts < 3:
        raise ValueError(f"level_persistence: min_bursts must be at least 3, got {min_bursts!r}")
    rows = []
    for (name, uuid, workload), one in levels.groupby(
            [schema.RECORDING_NAME, schema.DEVICE_UUID, schema.WORKLOAD], sort=False):
        level = one.sort_values(schema.T0_S)[schema.BURST_LEVEL_PCT].to_numpy(float)
        if level.size < min_bursts:
            continue
        rows.append({schema.RECORDING_NAME: name, schema.DEVICE_UUID: uuid, schema.WORKLOAD: workload,
                     schema.BURST_COUNT: int(level.size), schema.LEVEL_SD_PCT: float(np.std(level, ddof=1)),
                     schema.LEVEL_LAG1_CORR: lag1_correlation(level)})
    return pd.DataFrame(rows, columns=[schema.RECORDING_NAME, schema.DEVICE_UUID, schema.WORKLOAD, schema.BURST_COUNT,
                                       schema.LEVEL_SD_PCT, schema.LEVEL_LAG1_CORR])


def lag1_correlation(values) -> float:
    """Pearson correlation of each value with the next; NaN where either side does not vary (no warning)."""
    x = np.asarray(values, dtype=float)
    a, b = x[:-1], x[1:]
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(lag1_correlations(x[np.newaxis, :])[0])


def lag1_correlations(rows: np.ndarray) -> np.ndarray:
    """Pearson correlation of each value with the next, for each row of a 2-D array at once (a Monte Carlo's many
    sequences); NaN where a row's side has no spread at all (0/0, no warning)."""
    a, b = rows[:, :-1], rows[:, 1:]
    da = a - a.mean(axis=1, keepdims=True)
    db = b - b.mean(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (da * db).sum(axis=1) / np.sqrt((da * da).sum(axis=1) * (db * db).sum(axis=1))


def series_against_bursts_all(recordings, *, match_c: float = DEFAULT_MATCH_C) -> pd.DataFrame:
    """:func:`series_against_bursts` for every uncapped workload with bursts and a series in each recording.

    A workload whose series ran below the top clock (capped) or whose recording lacks a part is left out; the
    table's ``attrs["left_out"]`` says which and why.
    """
    rows, left_out = [], []
    for rec in recordings:
        phases = rec.phases
        for workload in dict.fromkeys(phases.loc[phases[schema.PHASE_KIND] == "burst", schema.WORKLOAD]):
            try:
                rows.append({schema.RECORDING_NAME: rec.name, **series_against_bursts(rec, workload, match_c=match_c)})
            except ValueError as err:
                left_out.append(str(err))
    table = pd.DataFrame(rows)
    table.attrs["left_out"] = left_out
    return table
