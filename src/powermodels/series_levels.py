"""What a raw recording's thermal series settle at: power, temperatures, clock and time per launch.

The H200 dataset READMEs list each board's levels under the thermal series (the triad's
power, the fp32 GEMM's time per launch, the die and HBM temperatures, the capped GEMM's clock) to see
how boards differ, e.g. that the H200s' memory power splits by board part number (docs/twin.md,
session 17). :func:`series_levels` reads them from the recording alone, the same way for every board,
so the table is a command's output rather than a notebook's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import schema
from .recording import Recording

#: seconds skipped at each series' start: the 1 s power average and the die are still rising there
DEFAULT_FROM_S = 5.0


def series_levels(rec: Recording, *, from_s: float = DEFAULT_FROM_S) -> pd.DataFrame:
    """Each ``series`` entry's levels from ``from_s`` seconds after its start to its end.

    Parameters
    ----------
    rec : Recording
        A raw recording with a trace (:mod:`powermodels.recording`).
    from_s : float, default=5
        Seconds skipped at each series' start.

    Returns
    -------
    pandas.DataFrame
        One row per ``series`` entry, in schedule order: ``workload``, ``t0_s`` (the entry's start),
        ``power_average_w`` (mean of the 1 s average reading over the trace's rows: a full-rate trace's
        time mean; a twin's trace keeps only the rows where a reading changed), ``temperature_c`` and
        ``memory_temperature_c`` (the highest die and HBM readings; NaN where the trace has no HBM
        reading), ``sm_clock_mhz`` (median NVML clock reading) and ``time_s`` (median kernel time per
        launch of the launches that started in the span; NaN if none did).

    Raises
    ------
    ValueError
        If the recording has no trace, no ``series`` entry, or a series shorter than ``from_s``.
    """
    trace = rec.require_trace("the series levels")
    phases = rec.phases
    series = phases.loc[phases[schema.PHASE_KIND] == "series"]
    if series.empty:
        raise ValueError("series_levels: the recording has no 'series' entry (record it with the thermal part)")
    t = trace[schema.T_S].to_numpy(float)
    launch_start = rec.launches[schema.START_S].to_numpy(float)
    rows = []
    for _, entry in series.iterrows():
        t0, t1 = float(entry[schema.T0_S]) + from_s, float(entry[schema.T1_S])
        if t1 <= t0:
            raise ValueError(f"series_levels: the {entry[schema.WORKLOAD]} series at {entry[schema.T0_S]:.1f} s "
                             f"is shorter than from_s={from_s} s")
        span = trace.loc[(t >= t0) & (t <= t1)]
        ran = rec.launches.loc[(launch_start >= t0) & (launch_start <= t1)
                               & (rec.launches[schema.WORKLOAD] == entry[schema.WORKLOAD])]
        hbm = (span[schema.MEMORY_TEMPERATURE_C].max()
               if schema.MEMORY_TEMPERATURE_C in span and span[schema.MEMORY_TEMPERATURE_C].notna().any() else np.nan)
        rows.append({schema.WORKLOAD: entry[schema.WORKLOAD], schema.T0_S: float(entry[schema.T0_S]),
                     schema.POWER_AVERAGE_W: float(span[schema.POWER_AVERAGE_W].mean()),
                     schema.TEMPERATURE_C: float(span[schema.TEMPERATURE_C].max()),
                     schema.MEMORY_TEMPERATURE_C: float(hbm),
                     schema.SM_CLOCK_MHZ: float(span[schema.SM_CLOCK_MHZ].median()),
                     schema.TIME_S: float(ran[schema.TIME_S].median()) if len(ran) else np.nan})
    return pd.DataFrame(rows)


def energy_levels_across_boards(levels: pd.DataFrame, *, alpha_w_per_c: float) -> pd.DataFrame:
    """Each board's energy per launch at one die temperature, against the median board of its part.

    Two boards of one part differ in energy per launch by their own level and by how warm they ran; a measured
    leakage slope moves each board's series power to one die temperature per workload (the boards' median), so
    what is left is the board's own level (docs/twin-sessions.md, session 31). The temperature is the series'
    highest die reading (:func:`series_levels`), the same reading on every board.

    Parameters
    ----------
    levels : pandas.DataFrame
        One row per board and workload: :func:`series_levels`' ``workload``, ``power_average_w``,
        ``temperature_c`` and ``time_s``, with ``device_uuid`` and ``board_part_number``. Rows without a time per
        launch are dropped.
    alpha_w_per_c : float
        The leakage slope, W/°C (a measured one: session 15's 1.409 W/°C on the H200s).

    Returns
    -------
    pandas.DataFrame
        The rows with ``energy_j`` (power × time per launch), ``reference_temperature_c`` (the workload's median
        die over the boards), ``energy_at_ref_j`` (the power moved there by ``alpha_w_per_c``, times the time) and
        ``part_diff_pct`` (``energy_at_ref_j`` over the median of the same part and workload − 1, %).

    Raises
    ------
    ValueError
        If ``alpha_w_per_c`` is not a finite number, or a column is missing.
    """
    if not np.isfinite(alpha_w_per_c):
        raise ValueError(f"alpha_w_per_c must be a finite number (W/°C), got {alpha_w_per_c!r}")
    needed = (schema.DEVICE_UUID, schema.BOARD_PART_NUMBER, schema.WORKLOAD, schema.POWER_AVERAGE_W,
              schema.TEMPERATURE_C, schema.TIME_S)
    missing = [c for c in needed if c not in levels]
    if missing:
        raise ValueError(f"energy_levels_across_boards: missing columns {missing}")
    out = levels.dropna(subset=[schema.TIME_S, schema.POWER_AVERAGE_W, schema.TEMPERATURE_C]).copy()
    out[schema.ENERGY_J] = out[schema.POWER_AVERAGE_W] * out[schema.TIME_S]
    out[schema.REFERENCE_TEMPERATURE_C] = out.groupby(schema.WORKLOAD)[schema.TEMPERATURE_C].transform("median")
    moved_w = out[schema.POWER_AVERAGE_W] - alpha_w_per_c * (out[schema.TEMPERATURE_C]
                                                             - out[schema.REFERENCE_TEMPERATURE_C])
    out[schema.ENERGY_AT_REF_J] = moved_w * out[schema.TIME_S]
    part_median = out.groupby([schema.BOARD_PART_NUMBER, schema.WORKLOAD])[schema.ENERGY_AT_REF_J].transform("median")
    out[schema.PART_DIFF_PCT] = (out[schema.ENERGY_AT_REF_J] / part_median - 1.0) * 100.0
    return out.reset_index(drop=True)
