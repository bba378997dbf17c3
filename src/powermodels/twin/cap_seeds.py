"""The capped start's rows over several sensor phases: the twin's overshoot and settling as a median.

A capped series' overshoot (first-second mean above the settled power) and
settling time (:func:`~powermodels.twin.metrics.cap_overshoot`) are read
from the energy counter interpolated between its ~100 ms updates, while the
power swings by ±50–100 W around the limit. Where the counter's updates
fall against the load's start and the controller's swings moves both
numbers: replayed with six sensor seeds (the counter's phase and noise; the
physics unchanged), ``h100-sxm``'s bf16 series on the schedule of the
held-out H100 GPU-f73aad1d read 10.3–27.1 W and 2.2–5.5 s (docs/twin.md,
session 10) — a spread wider than the issue's ±25 %. One replay is one draw
of that spread; :func:`cap_rows_over_seeds` replays each capped series (and
the idle just before it) with several seeds and scores the median, with
the range beside it. The real recording is one draw too. Where it has
one start, its value is compared as it is; where it has several (a
``capstarts`` recording: ``gpu_raw_recording.py --parts capstarts``),
every start is replayed with every seed and the median over the real
starts is compared with the median over the twin's starts and seeds, the
real range beside it. Ten real starts from idle on one H100 read
0.2–24.0 W and 0.0–5.6 s (docs/twin.md, session 12): a single start does
not measure the board's controller to ±25 %.

The segment starts from the twin's own state (its temperature reading in
the full replay at the segment's start) and the replay's ambient, so
nothing of the real recording enters but its schedule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..recording import Recording
from . import metrics
from .replay import replay

__all__ = ["CAP_SEEDS", "LEAD_IDLE_S", "TAIL_S", "cap_rows_over_seeds", "capped_series_seeds", "replay_capped_start"]

#: sensor seeds a capped series is replayed with by default
CAP_SEEDS = (0, 1, 2, 3, 4)
#: seconds of the idle entry before the series that each segment replays (the 1 s window fills with idle)
LEAD_IDLE_S = 3.0
#: seconds of the entry after the series that each segment replays too: the settled power is the
#: counter's energy up to the series' end, which the counter publishes only at its next update
TAIL_S = 1.0


def _segment(real: Recording, workload: str, entry: int = 0) -> pd.DataFrame:
    """The ``entry``-th capped ``series`` of ``workload``, the last ``LEAD_IDLE_S`` of the entry before it
    and the first ``TAIL_S`` of the entry after it.

    Without the tail (sessions 10–11) the replay stopped at the series' end, before the counter's
    next update, and the settled power (from 5 s to the end) read the last ~0.1 s at the idle
    board's: on a twin-made recording, 685 W instead of the full replay's 690.6 W, and an
    overshoot of 31.0 instead of 25.4 W (``tests/twin/test_twin_cap_seeds.py``).
    """
    ph = real.phases.reset_index(drop=True)
    i = metrics.series_entries(real, workload)[entry]
    rows = ph.iloc[max(i - 1, 0):i + 2].copy()
    t0, t1 = float(ph[schema.T0_S].iloc[i]), float(ph[schema.T1_S].iloc[i])
    rows[schema.T0_S] = rows[schema.T0_S].clip(lower=t0 - LEAD_IDLE_S)
    rows[schema.T1_S] = rows[schema.T1_S].clip(upper=t1 + TAIL_S)
    return rows.loc[rows[schema.T1_S] > rows[schema.T0_S]].reset_index(drop=True)


def capped_series_seeds(real: Recording, twin: Recording, preset, workload: str, *, seeds=CAP_SEEDS,
                        ambient: pd.DataFrame | None = None, entries=None) -> pd.DataFrame:
    """``workload``'s capped starts on the twin, once per sensor seed.

    Parameters
    ----------
    real : Recording
        The recording whose schedule is replayed.
    twin : Recording
        The twin's full replay of it (its temperature at the segment's start
        starts each segment).
    preset : TwinPreset
        The preset as replayed (already adapted to the recording).
    workload : str
        A capped series' workload.
    seeds : sequence of int
        Sensor seeds.
    ambient : pandas.DataFrame, optional
        The replay's ambient profile (as given to :func:`~powermodels.twin.replay.replay`).
    entries : sequence of int, optional
        Which of the workload's ``series`` entries (:func:`~powermodels.twin.metrics.series_entries`)
        to replay; default every one.

    Returns
    -------
    pandas.DataFrame
        One row per entry and seed: ``entry``, ``seed`` and the
        :func:`~powermodels.twin.metrics.cap_overshoot` fields.
    """
    if entries is None:
        entries = range(len(metrics.series_entries(real, workload)))
    rows = []
    for entry in entries:
        for seed in seeds:
            rec = replay_capped_start(real, twin, preset, workload, entry, seed=seed, ambient=ambient)
            rows.append({"entry": int(entry), "seed": int(seed), **metrics.cap_overshoot(rec, workload)})
    return pd.DataFrame(rows)


def replay_capped_start(real: Recording, twin: Recording, preset, workload: str, entry: int = 0, *, seed: int = 0,
                        ambient: pd.DataFrame | None = None) -> Recording:
    """One capped start of ``real`` replayed alone on ``preset``: the twin's recording of that segment.

    The segment is the ``entry``-th capped ``series`` of ``workload`` with the last
    :data:`LEAD_IDLE_S` of the entry before it and the first :data:`TAIL_S` of the
    entry after it, polled every 2 ms. It starts at ``twin``'s temperature reading
    at the segment's start (the full replay's, or the real recording's own when a
    fit reads its own recording); ``ambient`` as for
    :func:`~powermodels.twin.replay.replay`. Its one ``series`` entry is the start
    (``entry=0`` of :func:`~powermodels.twin.metrics.cap_overshoot` on the result).
    """
    seg = _segment(real, workload, entry)
    start = float(seg[schema.T0_S].iloc[0])
    temp = float(metrics.reading_series(twin, schema.TEMPERATURE_C, [start])[0]) if twin.has_trace else None
    return replay(seg, preset, seed=int(seed), poll_s=2e-3, start_temperature_c=temp, ambient=ambient)


def cap_rows_over_seeds(real: Recording, runs: dict, target: float) -> list[dict]:
    """The cap overshoot and settling rows with the twin's median over seeds (and its range) per workload.

    Parameters
    ----------
    real : Recording
    runs : dict
        ``{workload: capped_series_seeds(...)}``.
    target : float
        The rows' tolerance (relative).

    Returns
    -------
    list of dict
        Rows of :func:`~powermodels.twin.compare.compare_recordings`' table.
    """
    rows = []
    for w, d in runs.items():
        entries = sorted(set(d["entry"])) if "entry" in d else [0]
        starts = metrics.cap_starts(real, w)
        starts = starts.loc[starts["entry"].isin(entries)]
        n_seeds = len(d) // max(len(entries), 1)
        for metric, key in (("cap overshoot: first-second mean above settled", schema.OVERSHOOT_W),
                            ("cap settling time (1 s mean within 1 %)", schema.SETTLING_S)):
            b = float(np.median(d[key]))
            a = float(np.median(starts[key]))
            err = metrics.settling_error(a, b) if key == schema.SETTLING_S else b / a - 1.0
            unit = "W" if key == schema.OVERSHOOT_W else "s"
            twin_text = (f"twin: median of {n_seeds} sensor seeds" if len(entries) == 1
                         else f"twin: median of {len(entries)} starts × {n_seeds} sensor seeds")
            real_text = ("" if len(entries) == 1 else
                         f"; real: median of {len(entries)} starts, "
                         f"{float(starts[key].min()):.1f} to {float(starts[key].max()):.1f}")
            rows.append({schema.CHECK_METRIC: metric, schema.WORKLOAD: w, schema.CHECK_REAL: a, schema.CHECK_TWIN: b,
                         schema.CHECK_ERROR: err, schema.CHECK_TARGET: target,
                         schema.CHECK_UNIT: f"{unit} (relative error; {twin_text}, "
                                 f"{float(d[key].min()):.1f} to {float(d[key].max()):.1f}{real_text})",
                         schema.CHECK_WITHIN: bool(abs(err) <= target)})
    return rows
