"""How close any smooth twin can come to a real warm-up series: the real seconds' own scatter (no GPU).

The warm-up row scores a twin by its worst second against the real series
(:func:`powermodels.twin.compare.compare_recordings`, target 1 %). A real series is
not smooth: under the power cap the controller swings each second's energy by a
few tenths of a per cent, launches are counted per second, and a stray host stall
spikes one second. A twin that had the real series' exact trend would still miss its
worst second by that scatter, so a miss is only the twin's fault above it.

:func:`warmup_floor` reads the real recording alone: the worst second, from
``from_s`` on, of the real energy per launch against its own least-squares
polynomial trend over the same seconds (``degree=1``: a straight line). The trend
is fitted to those very seconds, so the figure is a floor on what a twin can reach,
not a target. Over the 44 raw H200 recordings of sessions 17–25 (42 boards; real) it
was 0.26–1.35 % (median 0.50 %) for the capped bf16 GEMM, 0.10–2.00 % (median 0.32 %)
for the fp32 GEMM, 0.17–1.32 % (0.31 %) for the triad and 0.08–3.44 % (0.16 %) for the
FMA loop (docs/twin-sessions.md, session 25).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from . import schema
from .recording import Recording
from .twin import metrics

__all__ = ["warmup_floor", "warmup_floors"]


def warmup_floor(rec: Recording, workload: str, *, from_s: float = 2.0, degree: int = 1,
                 seconds: int = 25) -> float:
    """The worst second of a real warm-up series against its own smooth trend, in per cent.

    Parameters
    ----------
    rec : Recording
        A recording with a ``series`` entry of ``workload`` (real, or a twin's).
    workload : str
        The workload whose series is read.
    from_s : float, default=2.0
        The first whole second at or after it is the first one scored, as the
        warm-up row's ``from_s`` (a board-calibrated twin reads the first second).
    degree : int, default=1
        Degree of the least-squares polynomial trend (0: the series' mean).
    seconds : int, default=25
        Seconds of the series read, as the warm-up row.

    Returns
    -------
    float
        ``max |trend / real - 1|`` over the scored seconds, in per cent.

    Raises
    ------
    ValueError
        When the recording has no series of ``workload``, or fewer scored seconds
        than ``degree + 2`` (a trend through every point says nothing).
    """
    if degree < 0:
        raise ValueError(f"warmup_floor: degree must be 0 or more, got {degree}")
    energy = metrics.warmup_energy_per_launch(rec, workload, seconds)
    second = energy["second"].to_numpy(float)
    real = energy[schema.ENERGY_J].to_numpy(float)
    scored = second >= np.ceil(from_s - 1e-9)
    if scored.sum() < degree + 2:
        raise ValueError(f"warmup_floor: {rec.name}'s {workload} series has {int(scored.sum())} whole seconds from "
                         f"second {from_s:g} on; a degree-{degree} trend needs {degree + 2} or more")
    trend = np.polyval(np.polyfit(second[scored], real[scored], degree), second[scored])
    return float(100.0 * np.max(np.abs(trend / real[scored] - 1.0)))


def warmup_floors(recordings: Iterable[Recording], *, from_s: float = 2.0, degree: int = 1) -> pd.DataFrame:
    """:func:`warmup_floor` of every series of every recording: one row per board, recording and workload.

    Workloads without a ``series`` entry long enough are left out.
    """
    rows = []
    for rec in recordings:
        for workload in rec.workloads:
            if rec.phase_rows(kind="series", workload=workload).empty:
                continue
            try:
                floor = warmup_floor(rec, workload, from_s=from_s, degree=degree)
            except ValueError:
                continue
            rows.append({schema.DEVICE_UUID: rec.board, schema.RECORDING_NAME: rec.name,
                         schema.WORKLOAD: workload, schema.WARMUP_FLOOR_PCT: floor})
    return pd.DataFrame(rows, columns=[schema.DEVICE_UUID, schema.RECORDING_NAME, schema.WORKLOAD,
                                       schema.WARMUP_FLOOR_PCT])
