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
