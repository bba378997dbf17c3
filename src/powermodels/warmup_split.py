"""Where a twin's warm-up row misses: its power, or its launches per second (no GPU).

Energy per launch is energy per second over launches per second, so second by second a twin's error on the warm-up
row (:func:`~powermodels.twin.compare.compare_recordings`) is the product of two factors::

    (1 + energy per launch error) = (1 + power error) / (1 + launch-rate error)

An uncapped series runs at the top clock, so its launch rate is the kernel's and a miss there is the power's (the
dynamic power a calibration gave it, or a die that warms differently); a series at the power cap draws the cap, so
its miss is the rate (the clock and cycles the twin runs at the cap). Over 14 H200 boards no preset saw, the
recommended calibration's FMA-loop misses were its power (−1.3 % median) and the capped bf16 GEMM's its rate
(+1.25 %) with its power (+0.6 %) partly cancelling (twin vs real; docs/twin-sessions.md, session 26).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import schema
from .recording import Recording
from .twin import metrics

__all__ = ["warmup_miss_split"]


def warmup_miss_split(real: Recording, twin: Recording, *, from_s: float = 2.0) -> pd.DataFrame:
    """One row per workload with a series in both: the twin's error at its worst second and its two factors.

    Parameters
    ----------
    real, twin : Recording
        A real raw recording and a replay of its schedule.
    from_s : float, default=2
        First second read (a calibrated twin's earlier seconds are in-sample).

    Returns
    -------
    pandas.DataFrame
        ``device_uuid`` (the real board), ``workload``, ``worst_pct`` (the energy per launch's worst second, as
        the warm-up row reads it), then over the seconds read the mean errors (%) of ``energy_per_launch_pct``,
        ``power_pct`` and ``launch_rate_pct``, and ``die_difference_c`` (twin minus real, °C).
    """
    if from_s < 0:
        raise ValueError(f"warmup_miss_split: from_s must not be negative, got {from_s!r}")
    first = int(np.ceil(from_s - 1e-9))
    rows = []
    for workload in real.phase_rows(kind="series")[schema.WORKLOAD].unique():
        if not len(twin.phase_rows(kind="series", workload=workload)):
            continue
        r, t = metrics.warmup_energy_per_launch(real, workload), metrics.warmup_energy_per_launch(twin, workload)
        n = min(len(r), len(t))
        if n <= first:
            continue
        r, t = r.iloc[first:n], t.iloc[first:n]
        if (r[schema.LAUNCHES].to_numpy(float) <= 0).any() or (t[schema.LAUNCHES].to_numpy(float) <= 0).any():
            raise ValueError(f"warmup_miss_split: {workload}'s series has a second without a launch in {real.name} "
                             "or its replay (energy per launch is undefined there)")
        energy = t[schema.ENERGY_J].to_numpy(float) / r[schema.ENERGY_J].to_numpy(float)
        rate = t[schema.LAUNCHES].to_numpy(float) / r[schema.LAUNCHES].to_numpy(float)
        error = 100.0 * (energy - 1.0)
        rows.append({schema.DEVICE_UUID: real.board, schema.WORKLOAD: workload,
                     schema.WARMUP_WORST_PCT: float(error[np.argmax(np.abs(error))]),
                     schema.ENERGY_PER_LAUNCH_ERROR_PCT: 100.0 * (float(np.mean(energy)) - 1.0),
                     schema.POWER_ERROR_PCT: 100.0 * (float(np.mean(energy * rate)) - 1.0),
                     schema.LAUNCH_RATE_ERROR_PCT: 100.0 * (float(np.mean(rate)) - 1.0),
                     schema.DIE_DIFFERENCE_C: float(np.mean(t[schema.TEMPERATURE_C].to_numpy(float)
                                                            - r[schema.TEMPERATURE_C].to_numpy(float)))})
    return pd.DataFrame(rows)

