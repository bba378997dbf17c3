"""How well the capped starts recorded on a board pin its overshoot and settling: the resolution of issue 27's row.

Issue 27 asks the twin's power-cap overshoot and settling time within 25 % of the real board's. The real figure
is the median of the starts recorded on the board (:func:`powermodels.twin.metrics.cap_starts`), and one capped
start is one draw of a wide spread: where the ~100 ms counter updates fall against the start and the
controller's ±50–100 W swings move a start's overshoot by more than ±25 % (docs/twin.md, session 12). So the
row has a resolution of its own, which this module measures from real starts alone:

* :func:`median_ceiling` — a *perfect* twin reads the board's true median; the recording reads the median of
  its ``n`` starts. How often is that within the tolerance? (a bootstrap over the board's own starts);
* :func:`joint_ceiling` — the same for both rows at once, as the issue scores them;
* :func:`ceiling_by_starts` — the same for any number of starts, from every board's starts pooled after each
  is divided by its board's median (boards assumed to differ in scale only);
* :func:`pooled_guess` — the best board-blind twin: each board against the median of every *other* board's
  starts (leave one board out);
* :func:`between_boards` — is there a difference between boards at all (Kruskal–Wallis), and what share of
  the starts' variance lies between boards (one-way random effects)?

Everything here reads real recordings; no simulation runs.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from scipy import stats

from . import schema
from .recording import Recording
from .twin import metrics

#: the columns of :func:`powermodels.twin.metrics.cap_starts` whose median issue 27 scores
SCORED = (schema.OVERSHOOT_W, schema.SETTLING_S)


def board_starts(recordings: Iterable[Recording], workload: str | None = None) -> pd.DataFrame:
    """Every capped start of ``recordings``, one row each, with the board's UUID and the workload.

    Parameters
    ----------
    recordings : iterable of Recording
        Recordings with a trace and at least one power-capped series (e.g. ``--parts capstarts``).
        Several recordings of one board pool by UUID.
    workload : str, optional
        The capped workload to read; by default each recording's first capped series.

    Returns
    -------
    pandas.DataFrame
        :func:`~powermodels.twin.metrics.cap_starts`'s columns, plus ``device_uuid``, ``workload`` and
        ``recording``.

    Raises
    ------
    ValueError
        If a recording has no power-capped series (or not ``workload``'s), or no UUID.
    """
    frames = []
    for rec in recordings:
        series = set(rec.phase_rows(kind="series")[schema.WORKLOAD])
        if workload is not None and workload not in series:
            raise ValueError(f"{rec.name}: no series of {workload!r} (its series: {sorted(series)})")
        capped = metrics.capped_series(rec, None if workload is None else [workload])
        if not capped:
            what = f"no power-capped series of {workload!r}" if workload else "no power-capped series"
            raise ValueError(f"{rec.name}: {what}; record one with benchmarks/gpu_raw_recording.py --parts capstarts")
        uuid = rec.provenance.get("uuid")
        if not uuid:
            raise ValueError(f"{rec.name}: provenance.json names no board UUID, so its starts cannot be pooled by board")
        frames.append(metrics.cap_starts(rec, capped[0]).assign(
            **{schema.DEVICE_UUID: str(uuid), schema.WORKLOAD: capped[0], schema.RECORDING_NAME: rec.name}))
    if not frames:
        raise ValueError("no recordings given")
    return pd.concat(frames, ignore_index=True)


def relative_error(column: str, real, twin) -> float:
    """The twin's figure against the real one as issue 27 scores it (twin / real − 1).

    The settling time goes through :func:`~powermodels.twin.metrics.settling_error` (both floored at the
    window's 0.1 s step: a start that never leaves the band reads 0 s).
    """
    if column == schema.SETTLING_S:
        return metrics.settling_error(real, twin)
    if column != schema.OVERSHOOT_W:
        raise ValueError(f"column must be one of {SCORED}, not {column!r}")
    return float(twin) / float(real) - 1.0 if real != 0 else np.inf


def _check(starts: pd.DataFrame, column: str, tolerance: float | None = None) -> None:
    if column not in SCORED:
        raise ValueError(f"column must be one of {SCORED}, not {column!r}")
    missing = {schema.DEVICE_UUID, column} - set(starts.columns)
    if missing:
        raise ValueError(f"starts lack the column(s) {sorted(missing)}; build them with board_starts")
    if tolerance is not None and not tolerance > 0:
        raise ValueError(f"tolerance must be positive, not {tolerance!r}")


def _within(column: str, real: np.ndarray, twin: float, tolerance: float) -> np.ndarray:
    return np.array([abs(relative_error(column, r, twin)) <= tolerance for r in real])


def _bootstrap(group: pd.DataFrame, columns, draws: int, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """A board's starts of ``columns``, their medians and ``draws`` resamples' medians: ``(n, k)``, ``(k,)``, ``(draws, k)``.

    Each resample draws the board's starts whole, with replacement (a start with a NaN is left out); None for a
    board with fewer than two starts.
    """
    values = group[list(columns)].dropna().to_numpy(float)
    if len(values) < 2:
        return None
    picks = rng.integers(0, len(values), size=(draws, len(values)))
    return values, np.median(values, axis=0), np.median(values[picks], axis=1)


def median_ceiling(starts: pd.DataFrame, column: str = schema.OVERSHOOT_W, *, tolerance: float = 0.25,
                   draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per board: how often a perfect twin would meet the row on a recording of this many starts.

    The perfect twin reads the board's median (estimated by the median of all its starts); the recording
    reads the median of ``n`` starts, here ``n`` drawn with replacement from the board's starts (bootstrap).
    With few starts the bootstrap under-states the spread a little, so the ceiling is if anything optimistic.

    Parameters
    ----------
    starts : pandas.DataFrame
        :func:`board_starts`'s rows.
    column : {"overshoot_w", "settling_s"}
    tolerance : float
        Issue 27's 25 %.
    draws : int
        Bootstrap resamples per board.
    seed : int

    Returns
    -------
    pandas.DataFrame
        One row per board: ``device_uuid``, ``starts``, ``median``, ``ceiling`` (the share of resamples within
        the tolerance), ``q25`` and ``q75`` of the board's starts.
    """
    _check(starts, column, tolerance)
    rng = np.random.default_rng(seed)
    rows = []
    for uuid, group in starts.groupby(schema.DEVICE_UUID, sort=False):
        drawn = _bootstrap(group, [column], draws, rng)
        if drawn is None:
            continue
        values, (median,), resampled = drawn
        rows.append({schema.DEVICE_UUID: uuid, schema.START_COUNT: len(values), schema.BOARD_MEDIAN: float(median),
                     schema.PERFECT_TWIN_CHANCE: float(_within(column, resampled[:, 0], median, tolerance).mean()),
                     schema.START_Q25: float(np.quantile(values, 0.25)),
                     schema.START_Q75: float(np.quantile(values, 0.75))})
    return pd.DataFrame(rows)


def joint_ceiling(starts: pd.DataFrame, *, tolerance: float = 0.25, draws: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Per board: how often a perfect twin would meet the overshoot *and* the settling row at once.

    As :func:`median_ceiling`, with each resample's starts drawn whole (both figures of one start together),
    so that the two rows' dependence is kept.

    Returns
    -------
    pandas.DataFrame
        ``device_uuid``, ``starts`` and ``ceiling``.
    """
    for column in SCORED:
        _check(starts, column, tolerance)
    rng = np.random.default_rng(seed)
    rows = []
    for uuid, group in starts.groupby(schema.DEVICE_UUID, sort=False):
        drawn = _bootstrap(group, SCORED, draws, rng)
        if drawn is None:
            continue
        values, medians, resampled = drawn
        met = np.logical_and.reduce([_within(column, resampled[:, k], float(medians[k]), tolerance)
                                     for k, column in enumerate(SCORED)])
        rows.append({schema.DEVICE_UUID: uuid, schema.START_COUNT: len(values),
                     schema.PERFECT_TWIN_CHANCE: float(met.mean())})
    return pd.DataFrame(rows)


def ceiling_by_starts(starts: pd.DataFrame, column: str = schema.OVERSHOOT_W, counts=(3, 5, 7, 10, 20, 40), *,
                      tolerance: float = 0.25, draws: int = 4000, seed: int = 0) -> pd.DataFrame:
    """The perfect twin's chance against a recording of ``n`` starts, for each ``n`` in ``counts``.

    Every start is divided by its board's median (boards with at least 3 starts and a positive median), and the
    ratios of all boards form one pool: a recording of ``n`` starts is ``n`` draws from it, its median scored
    against 1. This assumes boards differ in scale only (their spreads in proportion to their medians). For the
    settling time the 0.1 s floor of :func:`relative_error` then applies to the ratio, i.e. at a tenth of the
    board's median (~0.11 s on H200s, whose medians are ~1.1 s): close to the floor in seconds.

    Returns
    -------
    pandas.DataFrame
        ``starts`` (n) and ``ceiling`` (the share of simulated recordings within the tolerance), plus the
        number of boards and starts pooled.
    """
    _check(starts, column, tolerance)
    ratios = []
    for _, group in starts.groupby(schema.DEVICE_UUID, sort=False):
        values = group[column].dropna().to_numpy(float)
        median = float(np.median(values)) if len(values) else 0.0
        if len(values) >= 3 and median > 0:
            ratios.append(values / median)
    if not ratios:
        raise ValueError(f"no board has 3 or more starts with a positive median {column}")
    pool = np.concatenate(ratios)
    rng = np.random.default_rng(seed)
    rows = []
    for n in counts:
        if int(n) < 1:
            raise ValueError(f"counts must be positive, not {n!r}")
        medians = np.median(rng.choice(pool, size=(draws, int(n)), replace=True), axis=1)
        rows.append({schema.START_COUNT: int(n),
                     schema.PERFECT_TWIN_CHANCE: float(_within(column, medians, 1.0, tolerance).mean()),
                     schema.BOARDS_POOLED: len(ratios), schema.STARTS_POOLED: len(pool)})
    return pd.DataFrame(rows)


def pooled_guess(starts: pd.DataFrame, column: str = schema.OVERSHOOT_W, *, tolerance: float = 0.25) -> pd.DataFrame:
    """Per board: the median of every other board's starts (the best board-blind constant), scored as a twin.

    Returns
    -------
    pandas.DataFrame
        ``device_uuid``, ``starts``, ``median`` (the board's), ``others_median``, ``error`` (the guess against
        the board, :func:`relative_error`) and ``within``.
    """
    _check(starts, column, tolerance)
    rows = []
    for uuid, group in starts.groupby(schema.DEVICE_UUID, sort=False):
        others = starts.loc[starts[schema.DEVICE_UUID] != uuid, column].dropna()
        if others.empty:
            continue
        real, guess = float(group[column].median()), float(others.median())
        error = relative_error(column, real, guess)
        rows.append({schema.DEVICE_UUID: uuid, schema.START_COUNT: int(group[column].notna().sum()),
                     schema.BOARD_MEDIAN: real, schema.OTHER_BOARDS_MEDIAN: guess, schema.CHECK_ERROR: error,
                     schema.CHECK_WITHIN: abs(error) <= tolerance})
    return pd.DataFrame(rows)


def between_boards(starts: pd.DataFrame, column: str = schema.OVERSHOOT_W) -> dict:
    """Do the boards' starts differ at all? Kruskal–Wallis over boards, and the between-board share of variance.

    The share is the one-way random-effects intra-class correlation, ``(MSB − MSW) / (MSB + (n₀ − 1) MSW)``
    with ``n₀`` the ANOVA's effective group size, floored at 0: 0 means the boards' medians differ no more
    than their own starts do, 1 that every start of a board reads the same.

    Returns
    -------
    dict
        ``boards``, ``starts``, ``kruskal_h``, ``kruskal_p`` and ``between_share``.
    """
    _check(starts, column)
    groups = [g[column].dropna().to_numpy(float) for _, g in starts.groupby(schema.DEVICE_UUID, sort=False)]
    groups = [g for g in groups if len(g) >= 2]
    if len(groups) < 2:
        raise ValueError("between_boards needs at least two boards with two or more starts each")
    if np.ptp(np.concatenate(groups)) == 0:
        h, p = 0.0, 1.0  # every start reads the same: no difference to test
    else:
        h, p = stats.kruskal(*groups)
    sizes = np.array([len(g) for g in groups], float)
    total, k = sizes.sum(), len(groups)
    grand = np.concatenate(groups).mean()
    msb = sum(n * (g.mean() - grand) ** 2 for n, g in zip(sizes, groups, strict=True)) / (k - 1)
    msw = sum(((g - g.mean()) ** 2).sum() for g in groups) / (total - k)
    n0 = (total - (sizes ** 2).sum() / total) / (k - 1)
    denominator = msb + (n0 - 1) * msw
    share = max(0.0, (msb - msw) / denominator) if denominator > 0 else 0.0
    return {"boards": k, "starts": int(total), "kruskal_h": float(h), "kruskal_p": float(p),
            "between_share": float(share)}
