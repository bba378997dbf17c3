"""Each board's level against a twin preset, and the preset moved to the median of several boards.

A twin preset is fitted to one board, and boards of one model differ in their
constant power, their dynamic power and how hot they run: board-blind,
``h200-raw`` read 3.3–7.6 % low on two unseen H200s, mostly their constant
power (+12 W at idle; docs/twin.md, session 14), and two H200s of one host
ran 2.5–5.6 °C apart under one load. A user replaying a recording of a board
nobody has seen gets the fitting board's levels, which are one draw from the
boards' spread, not its middle.

:func:`board_levels` reads each board's levels from its own recordings with
the short calibrations the twin already has
(:func:`~powermodels.board_calibration.calibrate.calibrate_board`: idle power and dynamic-power
factor; :func:`~powermodels.board_calibration.thermal.calibrate_board_thermal`: the
thermal-resistance factor). :func:`pooled_preset` moves the preset to the
**median board** of those levels: a board counts once whatever its number of
recordings (the median of its own first), then the median over boards. That
is the population's middle, the best board-blind guess when the boards'
differences are a random effect around it (they are not the preset's physics:
the leakage slope, thermal time constants, controller and sensor stay the
fitted board's, read from a whole recording, not from a calibration's seconds).

Column names are in :mod:`powermodels.schema`; the levels of a board are
measurements of that board, the pooled preset is a model of none of them:
validate it on boards left out of its pool (``benchmarks/twin_pooled_boards.py``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..twin.fit_controller import fit_capped_clock, scaled_core
from ..twin.preset import TwinPreset, load_preset
from .calibrate import calibrate_board, scaled_activity, with_idle_power
from .parts import board_part_number
from .thermal import calibrate_board_thermal, scaled_resistance

__all__ = ["board_levels", "median_board", "pooled_preset", "workloads_at_median_board"]


def board_levels(preset, recordings, *, thermal: bool = True, cap: bool = False,
                 domains: bool = False) -> pd.DataFrame:
    """Each recording's board against ``preset``: idle power, dynamic factors, thermal factor.

    Parameters
    ----------
    preset : TwinPreset or str
        The preset the levels are read against.
    recordings : iterable of Recording
        Raw recordings (with a trace, an idle entry and uncapped series of the
        preset's workloads) of one or several boards; the board is the
        recording's ``provenance["uuid"]``.
    thermal : bool, default=True
        Also read the thermal-resistance factor (NaN where the readings
        before the first series do not identify it).
    cap : bool, default=False
        Also read ``CAP_CORE_SCALE``: the factor on the core coefficient of
        the board-calibrated preset (its idle power, dynamic factor and thermal
        factor) that gives the board's settled clock under the power cap
        (:func:`~powermodels.twin.fit_controller.fit_capped_clock`,
        ``window="settled"``; NaN without a capped series of ≥ 5 s). Boards
        of one model settle at different capped clocks (1 440–1 500 MHz on
        thirteen H200s, docs/twin.md, session 16), and the uncapped seconds the
        dynamic factor is read from do not say where. ~2 s of replays per
        recording.
    domains : bool, default=False
        Also read ``CORE_SCALE`` and ``MEMORY_SCALE``: the core and the memory
        dynamic-power factors apart (``calibrate_board(..., scale="domains")``;
        NaN where the recording lacks a memory-bound and a compute-bound
        series). H200 boards of two part numbers differ in memory power by
        ~30 % and in core power by ~1 % (docs/twin.md, session 17), so one
        factor for both domains cannot pool them. With ``cap`` too, the
        capped clock's factor is read against this calibration (the capped
        load's memory activity draws the board's memory factor), so pool
        such levels with ``scale="domains"``.

    Returns
    -------
    DataFrame
        One row per recording and workload read: ``DEVICE_UUID``,
        ``RECORDING_NAME`` (``name#2`` … where names repeat), ``WORKLOAD``, ``ACTIVITY_SCALE`` (that workload's
        dynamic power over the preset's, at the idle-calibrated constant
        power), and per recording ``IDLE_AT_REF_W`` (the board's idle power
        moved to the preset's reference temperature along its leakage
        slope), ``DYNAMIC_SCALE`` (the board's one factor: the median of its
        same-kernel workloads), ``THERMAL_SCALE``, ``BOARD_PART_NUMBER``
        (:func:`~powermodels.board_calibration.parts.board_part_number`), with
        ``cap`` ``CAP_CORE_SCALE`` and with ``domains`` ``CORE_SCALE`` and ``MEMORY_SCALE``.

    Raises
    ------
    ValueError
        If no recording is given, or a recording cannot be calibrated
        (:func:`~powermodels.board_calibration.calibrate.calibrate_board`'s message, which
        names it).
    """
    twin = load_preset(preset)
    ph = twin.physics
    f, fm = ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0]
    rows, seen = [], {}
    for rec in recordings:
        # recordings of one name (natural_dvfs's "recording" folders) stay apart: name#2, name#3, ...
        seen[rec.name] = seen.get(rec.name, 0) + 1
        label = rec.name if seen[rec.name] == 1 else f"{rec.name}#{seen[rec.name]}"
        cal = calibrate_board(twin, rec, scale="board")
        report = cal.fit["board_calibration"]
        k = np.nan
        if thermal:
            try:
                k = calibrate_board_thermal(twin, rec).fit["board_thermal"]["k"]
            except ValueError:  # not identified by this recording: the board's other recordings may tell
                k = np.nan
        base = {schema.DEVICE_UUID: report["uuid"], schema.RECORDING_NAME: label,
                schema.IDLE_AT_REF_W: float(cal.physics.power_w(f, fm, ph.t_ref_c)),
                schema.DYNAMIC_SCALE: float(report["dynamic_scale"]), schema.THERMAL_SCALE: float(k)}
        base[schema.BOARD_PART_NUMBER] = board_part_number(rec)
        by_domains = None
        if domains:
            by_domains = _domains_calibration(twin, rec)
            report_d = by_domains.fit["board_calibration"] if by_domains is not None else {}
            base[schema.CORE_SCALE] = float(report_d.get("core_scale", np.nan))
            base[schema.MEMORY_SCALE] = float(report_d.get("memory_scale", np.nan))
        if cap:
            # against the calibration the levels will be pooled with: the capped load's memory share
            # draws the board's memory factor under "domains"
            base[schema.CAP_CORE_SCALE] = _cap_core_scale(by_domains if by_domains is not None else cal, rec, k)
        series = report["series"]
        if not series:
            raise ValueError(f"board_levels: {rec.name} has no uncapped series of {twin.name}'s workloads "
                             f"({', '.join(twin.workloads)}) to read a dynamic power from")
        rows += [{**base, schema.WORKLOAD: w, schema.ACTIVITY_SCALE: float(r["ratio"])} for w, r in series.items()]
    if not rows:
        raise ValueError("board_levels: no recording given")
    return pd.DataFrame(rows)


def _cap_core_scale(calibrated: TwinPreset, rec, thermal_scale: float) -> float:
    """The core factor that gives ``rec``'s settled capped clock on the board-calibrated preset (NaN: no such series)."""
    if np.isfinite(thermal_scale):  # the die temperature moves the leakage, hence the capped clock
        calibrated = replace(calibrated, physics=scaled_resistance(calibrated.physics, thermal_scale))
    report = {}
    fit_capped_clock(calibrated, rec, window="settled", report=report)
    fitted = report.get("capped_clock", {})
    return float(fitted["core_scale"]) if fitted.get("window") == "settled" else float("nan")


def _domains_calibration(twin: TwinPreset, rec) -> TwinPreset | None:
    """The preset calibrated to ``rec``'s board with core and memory apart (None: the recording cannot tell them apart)."""
    try:
        return calibrate_board(twin, rec, scale="domains")
    except ValueError:  # no memory-bound beside a compute-bound series: the board's other recordings may tell
        return None


def median_board(levels: pd.DataFrame, column: str) -> tuple[float, int]:
    """The median over boards of each board's own median of ``column`` (NaN rows left out), and the boards counted."""
    per_board = levels.dropna(subset=[column]).groupby(schema.DEVICE_UUID)[column].median()
    return (float(per_board.median()) if len(per_board) else float("nan")), len(per_board)


def workloads_at_median_board(workloads: dict, levels: pd.DataFrame, column: str) -> tuple[dict, dict]:
    """``workloads`` with each one's activity times the median board's ``column`` on that workload's rows.

    Returns the moved workloads (those without rows kept) and, per workload moved, ``{"ratio", "boards"}``.
    """
    moved, report = dict(workloads), {}
    for w, rows in levels.groupby(schema.WORKLOAD):
        if w not in moved:
            continue
        ratio, n = median_board(rows, column)
        moved[w] = scaled_activity(moved[w], ratio)
        report[w] = {"ratio": ratio, "boards": n}
    return moved, report


def pooled_preset(preset, levels: pd.DataFrame, *, scale: str = "board", thermal: bool = True,
                  name: str | None = None, memory_part: str | None = None) -> TwinPreset:
    """``preset`` moved to the median board of ``levels`` (:func:`board_levels`).

    Parameters
    ----------
    preset : TwinPreset or str
        The preset the levels were read against.
    levels : DataFrame
        :func:`board_levels` of the boards to pool (leave out the board a
        validation replays).
    scale : {"board", "workload", "domains"}, default="board"
        ``"board"``: the core and memory coefficients times the median board's
        one dynamic factor (DSO eq. 1: ``P_dyn = c·f·V²·a``, a board with more
        capacitance or a higher V(f) draws more at every activity).
        ``"domains"``: the core coefficient times the median board's
        ``CORE_SCALE`` and the memory coefficient times its ``MEMORY_SCALE``
        (``board_levels(..., domains=True)``): boards whose memory differs
        (another part number) but whose cores do not.
        ``"workload"``: each workload's activity times the median board's
        factor for that workload (the preset's board may have drawn an
        atypical share on one kernel, e.g. the memory-bound triad).
    thermal : bool, default=True
        Every thermal resistance times the median board's factor (time
        constants unchanged), where at least one board's was read.
        Where ``levels`` has ``CAP_CORE_SCALE`` (``board_levels(..., cap=True)``)
        and at least one board's was read, the core coefficient is also
        multiplied by the median board's factor and the uncapped workloads'
        activities divided by it
        (:func:`~powermodels.twin.fit_controller.scaled_core`): their power is
        unchanged, and a load at the power cap settles at the median board's
        clock.
    name : str, optional
        The pooled preset's name (default ``<preset>@median-of-<n>``).
    memory_part : str, optional
        With ``scale="domains"``: take the memory factor's median over the
        boards of this part number only (``BOARD_PART_NUMBER``), everything
        else over all of ``levels``. H200 boards of two part numbers differ by
        ~30 % in memory power and not in core or idle power (docs/twin.md,
        session 17): a pool of one part's boards alone is smaller, and its
        idle and core medians noisier, for nothing.

    Returns
    -------
    TwinPreset
        The pooled preset. Its constant power is set last, so that its idle
        power at the reference temperature is the median board's; its
        ``fit["pooled_boards"]`` and provenance list the boards and the medians.

    Raises
    ------
    ValueError
        On an unknown ``scale``, empty ``levels``, or a pooled idle power that
        needs a negative constant power on this preset.
    """
    twin = load_preset(preset)
    if scale not in ("board", "workload", "domains"):
        raise ValueError(f"pooled_preset: scale must be 'board', 'workload' or 'domains', got {scale!r}")
    if memory_part is not None and scale != "domains":
        raise ValueError("pooled_preset: memory_part needs scale='domains' (the memory factor apart from the core's)")
    if levels is None or not len(levels):
        raise ValueError("pooled_preset: no board levels to pool")
    ph = twin.physics
    idle_w, n_boards = median_board(levels, schema.IDLE_AT_REF_W)
    report = {"boards": sorted(levels[schema.DEVICE_UUID].unique()),
              "part_numbers": sorted(set(levels.get(schema.BOARD_PART_NUMBER, pd.Series(dtype=str)).dropna()) - {""}),
              "recordings": sorted(levels[schema.RECORDING_NAME].unique()),
              "statistic": "median over boards of each board's median", "scale": scale, "idle_at_ref_w": idle_w,
              "t_ref_c": ph.t_ref_c}
    workloads = dict(twin.workloads)
    # the board-wide columns repeat on each workload's row: one row per recording for their medians
    per_recording = levels.drop_duplicates([schema.DEVICE_UUID, schema.RECORDING_NAME])
    if scale == "board":
        factor, _ = median_board(per_recording, schema.DYNAMIC_SCALE)
        ph = replace(ph, core_w_per_ghz=ph.core_w_per_ghz * factor, mem_w_per_ghz=ph.mem_w_per_ghz * factor)
        report["dynamic_scale"] = factor
    elif scale == "domains":
        if schema.MEMORY_SCALE not in per_recording:
            raise ValueError("pooled_preset: scale='domains' needs board_levels(..., domains=True)")
        core, n_core = median_board(per_recording, schema.CORE_SCALE)
        of_part = per_recording
        if memory_part is not None:
            if schema.BOARD_PART_NUMBER not in per_recording:
                raise ValueError("pooled_preset: memory_part needs the levels' BOARD_PART_NUMBER column")
            of_part = per_recording.loc[per_recording[schema.BOARD_PART_NUMBER] == memory_part]
        memory, n_memory = median_board(of_part, schema.MEMORY_SCALE)
        if not (n_core and n_memory):
            raise ValueError("pooled_preset: no board's core and memory factors were read (scale='domains'"
                             + (f", part number {memory_part}" if memory_part is not None else "") + ")")
        ph = replace(ph, core_w_per_ghz=ph.core_w_per_ghz * core, mem_w_per_ghz=ph.mem_w_per_ghz * memory)
        report.update(core_scale=core, memory_scale=memory, domain_boards=n_core, memory_boards=n_memory)
        if memory_part is not None:
            report["memory_part"] = memory_part
    else:
        workloads, report["activity_scale"] = workloads_at_median_board(workloads, levels, schema.ACTIVITY_SCALE)
    if thermal:
        k, n_thermal = median_board(per_recording, schema.THERMAL_SCALE)
        if n_thermal:
            ph = scaled_resistance(ph, k)
        report.update(thermal_scale=k if n_thermal else None, thermal_boards=n_thermal)
    if schema.CAP_CORE_SCALE in per_recording:
        cap_factor, n_cap = median_board(per_recording, schema.CAP_CORE_SCALE)
        if n_cap:
            moved = scaled_core(replace(twin, physics=ph, workloads=workloads), cap_factor)
            ph, workloads = moved.physics, dict(moved.workloads)
        report.update(cap_core_scale=cap_factor if n_cap else None, cap_boards=n_cap)
    ph = with_idle_power(ph, idle_w, ph.t_ref_c)  # after the scaling: the idle power has idle-activity terms
    if not ph.p0_w >= 0:
        raise ValueError(f"pooled_preset: the median idle power {idle_w:.1f} W at {ph.t_ref_c:g} °C needs a negative "
                         f"constant power on {twin.name}")
    report["p0_w"] = ph.p0_w
    return replace(twin, name=name or f"{twin.name}@median-of-{n_boards}", physics=ph, workloads=workloads,
                   provenance={**twin.provenance, "pooled_boards": report},
                   fit={**twin.fit, "pooled_boards": report})
