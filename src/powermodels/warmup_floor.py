"""How close a smooth twin can come to a real warm-up series: the real seconds' own scatter (no GPU).

The warm-up row scores a twin by its worst second against the real series
(:func:`powermodels.twin.compare.compare_recordings`, target 1 %). A real series is
not smooth: under the power cap the controller swings each second's energy by a
few tenths of a per cent, launches are counted per second, and a stray host stall
spikes one second. A twin whose seconds follow a smooth curve misses the worst
second by about that scatter.

:func:`warmup_floor` reads the real recording alone: the smallest worst-second
error, from ``from_s`` on, that any twin whose energy per launch lies on a
polynomial of the given degree in time can reach (``degree=2``: a parabola, which
follows a 23 s warm-up's curvature), solved exactly as a linear programme (the
minimax fit of the relative error). It is a floor for twins on such a polynomial
only: one on another curve (an exponential), or one that tracked the real seconds'
swings, could do better. Over the 44 raw H200
recordings of 42 boards (sessions 6–25; real) its medians were 0.39 % for the capped
bf16 GEMM and 0.12–0.23 % for the uncapped workloads, and 3 of 176 series were over
1 % (docs/twin-sessions.md, session 25).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy.optimize import linprog

from . import schema
from .recording import Recording
from .twin import metrics

__all__ = ["DEFAULT_DEGREE", "SeriesTooShortError", "minimax_fit", "warmup_floor", "warmup_floors"]

#: a parabola in time: follows a warm-up's curvature over 23 s, not its second-to-second swings
DEFAULT_DEGREE = 2


class SeriesTooShortError(ValueError):
    """A series with fewer scored seconds than the polynomial needs (``degree + 2``)."""


def minimax_fit(t: np.ndarray, y: np.ndarray, degree: int) -> tuple[np.ndarray, float]:
    """The polynomial of degree ≤ ``degree`` with the least ``max |p(t) / y - 1|`` (a linear programme).

    Variables are the polynomial's coefficients and the bound ``e``; each point gives
    ``-e ≤ p(t)/y - 1 ≤ e``. Time is centred and scaled to [-1, 1] so the programme is
    well conditioned.

    Returns
    -------
    values : ndarray
        The fitted polynomial at ``t``.
    error : float
        Its worst relative error ``max |values / y - 1|`` (a fraction), the least any
        polynomial of that degree reaches.
    """
    span = max(float(np.ptp(t)), 1e-12)
    x = 2.0 * (t - t.min()) / span - 1.0
    vander = np.vander(x, degree + 1)
    basis = vander / y[:, None]                            # p(t)/y, one row per point
    ones = np.ones((len(y), 1))
    a_ub = np.vstack([np.hstack([basis, -ones]), np.hstack([-basis, -ones])])
    b_ub = np.concatenate([np.ones(len(y)), -np.ones(len(y))])
    cost = np.zeros(degree + 2)
    cost[-1] = 1.0
    result = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * (degree + 1) + [(0, None)],
                     method="highs")
    if not result.success:  # pragma: no cover - a bounded feasible programme always solves
        raise ValueError(f"warmup_floor: the minimax fit failed ({result.message})")
    return vander @ result.x[:-1], float(result.x[-1])


def warmup_floor(rec: Recording, workload: str, *, from_s: float = 2.0, degree: int = DEFAULT_DEGREE,
                 seconds: int = 25) -> float:
    """The smallest worst-second error a twin on a polynomial can reach on a real warm-up series, in per cent.

    Parameters
    ----------
    rec : Recording
        A recording with a ``series`` entry of ``workload`` (real, or a twin's); the
        first such entry is read, as the warm-up row reads it.
    workload : str
        The workload whose series is read.
    from_s : float, default=2.0
        The first whole second at or after it is the first one scored, as the
        warm-up row's ``from_s`` (a board-calibrated twin reads the first second).
    degree : int, default=2
        Degree of the polynomial in time the twin's seconds are taken to lie on
        (0: a constant, 1: a line).
    seconds : int, default=25
        Seconds of the series read, as the warm-up row.

    Returns
    -------
    float
        ``min over p of max |p(s) / real(s) - 1|`` over the scored seconds, in per cent.

    Raises
    ------
    SeriesTooShortError
        When there are fewer scored seconds than ``degree + 2`` (a polynomial
        through every point says nothing).
    ValueError
        When the recording has no series of ``workload``, or a scored second has no
        launch or no finite positive energy per launch.
    """
    if degree < 0:
        raise ValueError(f"warmup_floor: degree must be 0 or more, got {degree}")
    energy = metrics.warmup_energy_per_launch(rec, workload, seconds)
    second = energy[schema.SECOND].to_numpy(float)
    real = energy[schema.ENERGY_J].to_numpy(float)
    scored = second >= np.ceil(from_s - 1e-9)
    if scored.sum() < degree + 2:
        raise SeriesTooShortError(f"warmup_floor: {rec.name}'s {workload} series has {int(scored.sum())} whole "
                                  f"seconds from second {from_s:g} on; a degree-{degree} polynomial needs "
                                  f"{degree + 2} or more")
    # a second without a launch reads a huge but finite energy per launch: its count says so
    launched = energy[schema.LAUNCHES].to_numpy(float)[scored]
    if not np.all(np.isfinite(real[scored]) & (real[scored] > 0) & (launched > 0)):
        raise ValueError(f"warmup_floor: {rec.name}'s {workload} series has seconds without a launch or without "
                         "a positive energy per launch (a stalled counter)")
    return 100.0 * minimax_fit(second[scored], real[scored], degree)[1]


def warmup_floors(recordings: Iterable[Recording], *, from_s: float = 2.0,
                  degree: int = DEFAULT_DEGREE) -> pd.DataFrame:
    """:func:`warmup_floor` of each workload's first series in every recording.

    Parameters
    ----------
    recordings : iterable of Recording
        Real (or twin) recordings.
    from_s, degree : float, int
        As :func:`warmup_floor`.

    Returns
    -------
    DataFrame
        One row per recording and workload: the board (its UUID, else the recording's
        name: :attr:`~powermodels.recording.Recording.board`), the recording's name, the
        workload and the floor in per cent. A workload whose series is too short for the
        degree is left out; any other problem raises.
    """
    if degree < 0:
        raise ValueError(f"warmup_floor: degree must be 0 or more, got {degree}")
    rows = []
    for rec in recordings:
        for workload in rec.workloads:
            if rec.phase_rows(kind="series", workload=workload).empty:
                continue
            try:
                floor = warmup_floor(rec, workload, from_s=from_s, degree=degree)
            except SeriesTooShortError:
                continue
            rows.append({schema.DEVICE_UUID: rec.board, schema.RECORDING_NAME: rec.name,
                         schema.WORKLOAD: workload, schema.WARMUP_FLOOR_PCT: floor})
    return pd.DataFrame(rows, columns=[schema.DEVICE_UUID, schema.RECORDING_NAME, schema.WORKLOAD,
                                       schema.WARMUP_FLOOR_PCT])
