"""Two boards' recordings of one schedule side by side: how far apart two boards of one model are.

A twin fitted to one board is held to 1 % of another board's warm-up energy per launch and 2 °C of
its cooling (issue 27). Two H200s of one host running the raw-recording schedule at the same moment
(``datasets/h200-2026-11-28/raw_recording_ef3dd380`` and ``…_1717480a``, session 14) were themselves
0.5–1.3 % apart on average and 1.4–2.1 % at their worst second, and 2–5 °C apart in cooling: that is
the floor a board-blind twin is measured against. :func:`board_pair` gives the seconds, both as
measured and with one board's power brought to the other's die temperature (the leakage slope α,
``alpha_w_per_c``), which tells a board's own level from its cooling; :func:`cooling_pair` the
cooling after each series, each recording on its own schedule.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import schema
from .recording import Recording
from .twin.metrics import (
    capped_series,
    energy_between,
    reading_series,
    series_entries,
    warmup_energy_per_launch,
)

__all__ = ["board_pair", "board_pair_summary", "cooling_pair", "repeat_as_twin", "warmup_drift",
           "warmup_temperature_slope"]


def _series_start(rec: Recording, workload: str) -> int:
    """Index (in ``rec.phases``) of ``workload``'s first ``series`` entry."""
    entries = series_entries(rec, workload)
    if not entries:
        raise ValueError(f"recording {rec.name}: no 'series' entry of workload {workload!r}")
    return entries[0]


def _common_series(rec_a: Recording, rec_b: Recording, workloads) -> list[str]:
    if workloads is not None:
        return list(workloads)
    mine = rec_a.phase_rows(kind="series")[schema.WORKLOAD]
    theirs = set(rec_b.phase_rows(kind="series")[schema.WORKLOAD])
    names = [w for w in dict.fromkeys(mine) if w in theirs]
    if not names:
        raise ValueError(f"recordings {rec_a.name} and {rec_b.name} share no workload with a series")
    return names


def board_pair(rec_a: Recording, rec_b: Recording, *, alpha_w_per_c: float | None = None, workloads=None,
               seconds: int = 25) -> pd.DataFrame:
    """Energy per launch second by second on two boards that ran the same schedule.

    Parameters
    ----------
    rec_a, rec_b : Recording
        Raw recordings of one schedule (each second is read from each recording's own series start).
    alpha_w_per_c : float, optional
        The leakage slope (W/°C) at the top clock. Given, ``board_diff_matched_pct`` compares B's
        energy per launch with its power moved by ``α·(T_A − T_B)``: the two boards at one die
        temperature. A power-capped series is left NaN there: at the cap the power is pinned and
        the temperature moves the clock, not the power.
    workloads : iterable of str, optional
        Default: every workload with a series in both recordings.
    seconds : int, default=25

    Returns
    -------
    pandas.DataFrame
        One row per workload and second: ``workload``, ``second``, ``energy_a_j``, ``energy_b_j``,
        ``temperature_a_c``, ``temperature_b_c``, ``power_a_w``, ``board_diff_pct``,
        ``board_diff_matched_pct``.
    """
    if alpha_w_per_c is not None and not np.isfinite(alpha_w_per_c):
        raise ValueError(f"alpha_w_per_c must be a finite number (W/°C), got {alpha_w_per_c!r}")
    capped = set(capped_series(rec_a)) | set(capped_series(rec_b))
    frames = []
    for w in _common_series(rec_a, rec_b, workloads):
        a = warmup_energy_per_launch(rec_a, w, seconds)
        b = warmup_energy_per_launch(rec_b, w, seconds)
        n = min(len(a), len(b))
        if n == 0:
            raise ValueError(f"workload {w!r}: a series shorter than one second in {rec_a.name} or {rec_b.name}")
        t0 = float(rec_a.phases.reset_index(drop=True)[schema.T0_S].iloc[_series_start(rec_a, w)])
        power_a = energy_between(rec_a, t0 + np.arange(n), t0 + np.arange(n) + 1.0)
        e_a, e_b = a[schema.ENERGY_J].to_numpy()[:n], b[schema.ENERGY_J].to_numpy()[:n]
        t_a, t_b = a[schema.TEMPERATURE_C].to_numpy()[:n], b[schema.TEMPERATURE_C].to_numpy()[:n]
        diff = (e_b / e_a - 1.0) * 100.0
        if alpha_w_per_c is None or w in capped:
            matched = np.full(n, np.nan)
        else:  # B's power at A's temperature: P_B − α(T_B − T_A), the launches per second unchanged
            matched = (e_b * (1.0 - alpha_w_per_c * (t_b - t_a) / power_a) / e_a - 1.0) * 100.0
        frames.append(pd.DataFrame({schema.WORKLOAD: w, schema.SECOND: np.arange(n), schema.ENERGY_A_J: e_a,
                                    schema.ENERGY_B_J: e_b, schema.TEMPERATURE_A_C: t_a,
                                    schema.TEMPERATURE_B_C: t_b, schema.POWER_A_W: power_a,
                                    schema.BOARD_DIFF_PCT: diff, schema.BOARD_DIFF_MATCHED_PCT: matched}))
    return pd.concat(frames, ignore_index=True)


def cooling_pair(rec_a: Recording, rec_b: Recording, *, workloads=None, seconds: int = 30) -> pd.DataFrame:
    """The die temperature every second of the idle after each series, on both boards.

    Each recording is read on its own schedule: two real recordings of one schedule start and end
    their entries tens of milliseconds apart, so one's phase times on the other's trace would compare
    a cooling board with a loaded one.

    Returns
    -------
    pandas.DataFrame
        One row per workload and second (1 … ``seconds``): ``workload``, ``second``,
        ``temperature_a_c``, ``temperature_b_c``.
    """
    frames = []
    for w in _common_series(rec_a, rec_b, workloads):
        temps = []
        for rec in (rec_a, rec_b):
            ph = rec.phases.reset_index(drop=True)
            i = _series_start(rec, w) + 1
            if i >= len(ph) or ph[schema.PHASE_KIND].iloc[i] != "idle":
                raise ValueError(f"recording {rec.name}: {w!r}'s series is not followed by an idle entry")
            t0 = float(ph[schema.T0_S].iloc[i])
            n = int(min(seconds, float(ph[schema.T1_S].iloc[i]) - t0))
            temps.append(reading_series(rec, schema.TEMPERATURE_C, t0 + np.arange(1, n + 1)))
        n = min(map(len, temps))
        frames.append(pd.DataFrame({schema.WORKLOAD: w, schema.SECOND: np.arange(1, n + 1),
                                    schema.TEMPERATURE_A_C: temps[0][:n], schema.TEMPERATURE_B_C: temps[1][:n]}))
    return pd.concat(frames, ignore_index=True)


def _farthest_from_zero(values) -> float:
    """The value farthest from 0, its sign kept (a worst second); NaNs left out, NaN when none is left."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    return float(x[int(np.argmax(np.abs(x)))]) if x.size else np.nan


def board_pair_summary(pair: pd.DataFrame, cooling: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per workload: the mean and worst-second difference, as measured and at one temperature.

    Returns
    -------
    pandas.DataFrame
        ``workload``, ``mean_diff_pct``, ``worst_diff_pct``, ``mean_diff_matched_pct``,
        ``worst_diff_matched_pct``, ``mean_temperature_diff_c`` (B − A under load) and, with
        ``cooling``, ``worst_cooling_diff_c`` (B − A, the second farthest apart).
    """
    rows = []
    for w, g in pair.groupby(schema.WORKLOAD, sort=False):
        row = {schema.WORKLOAD: w, schema.MEAN_DIFF_PCT: float(g[schema.BOARD_DIFF_PCT].mean()),
               schema.WORST_DIFF_PCT: _farthest_from_zero(g[schema.BOARD_DIFF_PCT]),
               schema.MEAN_DIFF_MATCHED_PCT: float(g[schema.BOARD_DIFF_MATCHED_PCT].mean()),
               schema.WORST_DIFF_MATCHED_PCT: _farthest_from_zero(g[schema.BOARD_DIFF_MATCHED_PCT]),
               schema.MEAN_TEMPERATURE_DIFF_C: float((g[schema.TEMPERATURE_B_C]
                                                      - g[schema.TEMPERATURE_A_C]).mean())}
        if cooling is not None:
            c = cooling.loc[cooling[schema.WORKLOAD] == w]
            row[schema.WORST_COOLING_DIFF_C] = _farthest_from_zero(c[schema.TEMPERATURE_B_C]
                                                                   - c[schema.TEMPERATURE_A_C])
        rows.append(row)
    return pd.DataFrame(rows)


def warmup_drift(pair: pd.DataFrame, *, early=(2, 4), late=(20, 24)) -> pd.DataFrame:
    """Per workload: how much each board's energy per launch rises through the warm-up, and the gap at both ends.

    With a real recording as A and its twin as B, a miss present at both ends with one sign is the twin's level
    (what a board calibration reads); a gap that grows is the twin warming up more or less than the board
    (docs/twin-sessions.md, session 31).

    Parameters
    ----------
    pair : pandas.DataFrame
        :func:`board_pair`'s seconds.
    early, late : tuple of int, default (2, 4) and (20, 24)
        The seconds averaged (inclusive) at each end; 2 is the first second a calibrated twin is scored from.

    Returns
    -------
    pandas.DataFrame
        ``workload``, ``drift_a_pct`` and ``drift_b_pct`` (late mean over early mean − 1, %), ``early_diff_pct``
        and ``late_diff_pct`` (B over A − 1, each end's mean, %), ``die_rise_a_c`` and ``die_rise_b_c``.

    Raises
    ------
    ValueError
        If a workload's series has no second in either window.
    """
    rows = []
    for w, g in pair.groupby(schema.WORKLOAD, sort=False):
        seconds = g[schema.SECOND]
        first = g.loc[seconds.between(*early)]
        last = g.loc[seconds.between(*late)]
        if first.empty or last.empty:
            raise ValueError(f"warmup_drift: workload {w!r} has no second in {early} or in {late}")
        rows.append({schema.WORKLOAD: w,
                     schema.DRIFT_A_PCT: (last[schema.ENERGY_A_J].mean() / first[schema.ENERGY_A_J].mean() - 1) * 100,
                     schema.DRIFT_B_PCT: (last[schema.ENERGY_B_J].mean() / first[schema.ENERGY_B_J].mean() - 1) * 100,
                     schema.EARLY_DIFF_PCT: float(first[schema.BOARD_DIFF_PCT].mean()),
                     schema.LATE_DIFF_PCT: float(last[schema.BOARD_DIFF_PCT].mean()),
                     schema.DIE_RISE_A_C: last[schema.TEMPERATURE_A_C].mean() - first[schema.TEMPERATURE_A_C].mean(),
                     schema.DIE_RISE_B_C: last[schema.TEMPERATURE_B_C].mean() - first[schema.TEMPERATURE_B_C].mean()})
    return pd.DataFrame(rows)


def warmup_temperature_slope(pair: pd.DataFrame, *, seconds=(2, 25), min_span_c=0.5) -> pd.DataFrame:
    """Per workload: each board's energy per launch regressed on its own die temperature through the warm-up.

    With a real recording as A and its twin as B this is the warming a twin's leakage must reproduce, read the way a
    user sees it (energy per launch against NVML's die reading, second by second), not the leakage itself: the die
    reading lags the load and moves in whole degrees, so over one series the slope mixes leakage with that lag
    (docs/twin-sessions.md, session 32). Thesis eq. 4.7 is the same straight line in temperature at a fixed clock.

    Parameters
    ----------
    pair : pandas.DataFrame
        :func:`board_pair`'s seconds.
    seconds : tuple of int, default (2, 25)
        The seconds regressed (inclusive); 2 is the first second a calibrated twin is scored from.
    min_span_c : float, default 0.5
        A board whose die moved less than this over those seconds gets no slope (NaN): a straight line through
        one temperature says nothing.

    Returns
    -------
    pandas.DataFrame
        ``workload``, ``warmup_slope_a_pct_per_c`` and ``warmup_slope_b_pct_per_c`` (the fitted slope over the
        mean energy per launch, % per °C), ``die_span_a_c`` and ``die_span_b_c``.

    Raises
    ------
    ValueError
        If a workload's series has fewer than three seconds in ``seconds``.
    """
    rows = []
    for w, g in pair.groupby(schema.WORKLOAD, sort=False):
        window = g.loc[g[schema.SECOND].between(*seconds)]
        if len(window) < 3:
            raise ValueError(f"warmup_temperature_slope: workload {w!r} has {len(window)} seconds in {seconds}; "
                             "a slope needs three")
        row = {schema.WORKLOAD: w}
        for energy, die, slope, span in ((schema.ENERGY_A_J, schema.TEMPERATURE_A_C, schema.WARMUP_SLOPE_A_PCT_PER_C,
                                          schema.DIE_SPAN_A_C),
                                         (schema.ENERGY_B_J, schema.TEMPERATURE_B_C, schema.WARMUP_SLOPE_B_PCT_PER_C,
                                          schema.DIE_SPAN_B_C)):
            t = window[die].to_numpy(dtype=float)
            e = window[energy].to_numpy(dtype=float)
            row[span] = float(t.max() - t.min())
            row[slope] = (float(np.polyfit(t, e, 1)[0] / e.mean() * 100) if row[span] >= min_span_c
                          else float("nan"))
        rows.append(row)
    return pd.DataFrame(rows)


def repeat_as_twin(pair: pd.DataFrame, *, from_second: int = 2, level_second: int = 1) -> pd.DataFrame:
    """Per workload: B scored as a calibrated twin of A is, its worst second as measured and levelled.

    With one board's run as A and the same board's run minutes later as B, this is how close the board itself comes
    to issue 27's warm-up row (1 % at every second). A twin calibrated to a board is scored from second 2
    (:func:`powermodels.board_calibration.calibrate_board` reads 0.2–1.2 s of each series), so B is scored over the
    same seconds, as measured and with its energy per launch scaled so that its ``level_second`` equals A's. That
    levelling is a stand-in for a calibration, not what the calibration reads: one second's ratio carries that
    second's noise into every scored second (docs/twin-sessions.md, session 33).

    Parameters
    ----------
    pair : pandas.DataFrame
        :func:`board_pair`'s seconds (``workload``, ``second``, ``energy_a_j``, ``energy_b_j``).
    from_second : int, default=2
        First second scored (the calibrated twin's).
    level_second : int, default=1
        The second at which B is brought to A's level; it must come before ``from_second``.

    Returns
    -------
    pandas.DataFrame
        ``workload``, ``worst_scored_diff_pct`` (B over A − 1 at the scored second farthest from 0, %) and
        ``worst_scored_diff_levelled_pct`` (the same after the levelling).

    Raises
    ------
    ValueError
        If ``level_second`` is not before ``from_second``, ``pair`` lacks a column or holds no row, an energy is not
        finite and positive, or a workload lacks the level second or any scored one.
    """
    if not 0 <= level_second < from_second:
        raise ValueError(f"repeat_as_twin: level_second ({level_second}) must be before from_second "
                         f"({from_second}) and not negative")
    columns = (schema.WORKLOAD, schema.SECOND, schema.ENERGY_A_J, schema.ENERGY_B_J)
    missing = [c for c in columns if c not in pair.columns]
    if missing:
        raise ValueError(f"repeat_as_twin: pair lacks column(s) {', '.join(missing)} (board_pair's seconds)")
    if pair.empty:
        raise ValueError("repeat_as_twin: pair holds no second")
    energies = pair[[schema.ENERGY_A_J, schema.ENERGY_B_J]].to_numpy(float)
    if not (np.isfinite(energies).all() and (energies > 0).all()):
        raise ValueError("repeat_as_twin: every energy per launch must be finite and positive (a second without a "
                         "launch reads none)")

    rows = []
    for w, g in pair.groupby(schema.WORKLOAD, sort=False):
        level = g.loc[g[schema.SECOND] == level_second]
        scored = g.loc[g[schema.SECOND] >= from_second]
        if level.empty or scored.empty:
            raise ValueError(f"repeat_as_twin: workload {w!r} has no second {level_second} or none from "
                             f"{from_second} on")
        ratio = float(level[schema.ENERGY_B_J].iloc[0] / level[schema.ENERGY_A_J].iloc[0])
        e_a, e_b = scored[schema.ENERGY_A_J].to_numpy(float), scored[schema.ENERGY_B_J].to_numpy(float)
        rows.append({schema.WORKLOAD: w,
                     schema.WORST_SCORED_DIFF_PCT: _farthest_from_zero((e_b / e_a - 1.0) * 100.0),
                     schema.WORST_SCORED_DIFF_LEVELLED_PCT: _farthest_from_zero((e_b / ratio / e_a - 1.0) * 100.0)})
    return pd.DataFrame(rows)
