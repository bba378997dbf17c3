"""A preset's capped workload brought to the boards' clock probes: its cycles, the capped clock and the recovery.

A preset fitted to a recording without clock probes reads its capped workload's clock from NVML, a 100 ms
sensor that lags the real clock, so it can split the capped energy per launch wrongly between cycles and
clock. ``h100-sxm``'s bf16 GEMM has ~9.5 % too few cycles per launch and a capped clock ~5 % too low; the two
errors partly cancel (five held-out H100s: −7.1 … −3.0 % at the cap; docs/twin.md, session 19).

:func:`capped_workload_levels` reads, per recording with probes, the workload's time over the preset's at
each launch's probed clock (:func:`~powermodels.twin.adapt.probed_time_ratio`) and the core factor that
gives the board's settled capped clock (:func:`~powermodels.twin.fit_controller.fit_capped_clock`).
:func:`capped_workload_preset` moves the preset to their median board, and with ``recordings`` pools the
clock's recovery rate too: a preset's rate was fitted at its own capped clock, and the recovery to the top
clock starts from there. Like :mod:`~powermodels.board_calibration.pooled`, the result is a model of no one
board: validate it on boards left out (``benchmarks/twin_h100_capped_bf16.py``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..recording import Recording
from ..twin.adapt import adapt_workloads, probed_time_ratio, time_scaled
from ..twin.ambient import ambient_at, recorded_ambient
from ..twin.fit_cap_choice import fit_recovery_by_replay
from ..twin.fit_controller import (
    capped_clock_reading,
    capped_entries_before_series,
    fit_capped_clock,
    scaled_core,
    settled_capped_series,
)
from ..twin.preset import TwinPreset, load_preset

__all__ = ["capped_clock_target", "capped_series_ambient", "capped_workload_levels", "capped_workload_preset",
           "probed_cycles_before"]


def capped_workload_levels(preset, recordings, workload: str) -> pd.DataFrame:
    """Each recording's probed time ratio of ``workload`` and its settled capped-clock core factor.

    Parameters
    ----------
    preset : TwinPreset or str
    recordings : iterable of Recording
        Raw recordings with clock probes and a capped series of ``workload`` (≥ 5 s).
    workload : str
        The capped workload.

    Returns
    -------
    DataFrame
        One row per recording: ``DEVICE_UUID``, ``RECORDING_NAME``, ``PROBED_TIME_RATIO``, ``CAP_CORE_SCALE``.

    Raises
    ------
    ValueError
        If a recording has no probes of ``workload`` beside its capped launches, or no capped series long
        enough to read the settled clock.
    """
    twin = load_preset(preset)
    rows = []
    for rec in recordings:
        _, adapted = adapt_workloads(twin, rec)
        ratio = adapted.get(workload, {}).get("probed_ratio")
        if ratio is None:
            raise ValueError(f"capped_workload_levels: {rec.name} has no clock probes of a capped {workload}")
        report = {}
        fit_capped_clock(twin, rec, window="settled", report=report)
        fitted = report.get("capped_clock", {})
        if fitted.get("window") != "settled":
            raise ValueError(f"capped_workload_levels: {rec.name} has no capped series long enough for the settled clock")
        rows.append({schema.DEVICE_UUID: rec.board, schema.RECORDING_NAME: rec.name,
                     schema.PROBED_TIME_RATIO: float(ratio), schema.CAP_CORE_SCALE: float(fitted["core_scale"])})
    if not rows:
        raise ValueError("capped_workload_levels: no recording given")
    return pd.DataFrame(rows)


def capped_workload_preset(preset, levels: pd.DataFrame, workload: str, *, recordings=(),
                           name: str | None = None) -> TwinPreset:
    """``preset`` with ``workload``'s work × the median probed ratio and the core × the median capped-clock factor.

    Parameters
    ----------
    preset : TwinPreset or str
    levels : DataFrame
        :func:`capped_workload_levels` of the boards to pool (medians over recordings).
    workload : str
    recordings : iterable of Recording, optional
        Where given, the recovery rate becomes the median over these recordings of the rate that gives each
        its real time to the top clock on the moved preset
        (:func:`~powermodels.twin.fit_cap_choice.fit_recovery_by_replay`).
    name : str, optional
        The new preset's name (default ``<preset>-capped-<workload>``).

    Returns
    -------
    TwinPreset
        With ``fit["capped_workload"]`` and the same in its provenance: the medians, the rates and the boards.
    """
    twin = load_preset(preset)
    if workload not in twin.workloads:
        raise ValueError(f"capped_workload_preset: {twin.name} has no workload {workload!r}")
    ratio = float(np.median(levels[schema.PROBED_TIME_RATIO]))
    core = float(np.median(levels[schema.CAP_CORE_SCALE]))
    moved = scaled_core(replace(twin, workloads={**twin.workloads,
                                                 workload: time_scaled(twin.workloads[workload], ratio)}), core)
    rates = [float(fit_recovery_by_replay(moved, rec, twin.provenance.get("clock_workload")).physics
                   .clock_recovery_mhz_per_s) for rec in recordings]
    if rates:
        moved = replace(moved, physics=replace(moved.physics, clock_recovery_mhz_per_s=float(np.median(rates))))
    report = {"workload": workload, "probed_time_ratio": ratio, "cap_core_scale": core,
              "recovery_rates_mhz_per_s": rates, "boards": sorted(set(levels[schema.DEVICE_UUID]))}
    return replace(moved, name=name or f"{twin.name}-capped-{workload}",
                   provenance={**twin.provenance, "capped_workload": report},
                   fit={**twin.fit, "capped_workload": report})


def probed_cycles_before(preset: TwinPreset, rec: Recording, workload: str,
                         before_s: float) -> tuple[TwinPreset, dict]:
    """``preset`` with ``workload``'s time per launch × its probed time ratio over ``rec`` before ``before_s``.

    Parameters
    ----------
    preset : TwinPreset
    rec : Recording
        A recording whose launches of ``workload`` before ``before_s`` were
        timed and clock-probed (a raw recording made with
        ``gpu_raw_recording.py --probe-pressure``).
    workload : str
        The capped workload (the recording's ``pressure`` load).
    before_s : float
        Only launches and probes that start before this time are read (the
        first series' start, so that the series stay held out).

    Returns
    -------
    (TwinPreset, dict)
        The preset and ``{"workload", "probed_time_ratio", "probed_launches",
        "probes"}`` (launches and probes of ``workload`` before ``before_s``;
        :func:`~powermodels.twin.adapt.probed_time_ratio` pairs them).

    Raises
    ------
    ValueError
        When the preset has no ``workload``, or no launch of it before
        ``before_s`` has a clock probe beside it.
    """
    if workload not in preset.workloads:
        raise ValueError(f"probed_cycles_before: {preset.name} has no workload {workload!r} (the recording's capped "
                         "pressure load)")
    launches = rec.launches.loc[(rec.launches[schema.WORKLOAD] == workload)
                                & (rec.launches[schema.START_S] < before_s)]
    probes = rec.probes  # None: a recording without probes.parquet
    if probes is not None:
        probes = probes.loc[(probes[schema.WORKLOAD] == workload) & (probes[schema.T_S] < before_s)]
    ratio = float("nan")
    if len(launches) and probes is not None and len(probes):
        ratio = probed_time_ratio(preset.workloads[workload], launches, probes, preset.physics.mem_clocks_mhz[0])
    if not np.isfinite(ratio):
        raise ValueError(f"probed_cycles_before: {rec.name} has no probed {workload} launch before its first series "
                         "(record the natural part with gpu_raw_recording.py --probe-pressure)")
    moved = replace(preset, workloads={**preset.workloads, workload: time_scaled(preset.workloads[workload], ratio)})
    return moved, {"workload": workload, "probed_time_ratio": ratio, "probed_launches": len(launches),
                   "probes": len(probes)}  # not None: the ratio is finite


def capped_clock_target(preset: TwinPreset, rec: Recording, caller: str) -> tuple[list[tuple[float, float]], float]:
    """The capped ``pressure`` entries before ``rec``'s first series and NVML's clock over them, checked.

    What a capped calibration read before the first series needs (:func:`~powermodels.board_calibration.calibrate.
    capped_clock_before_series`, :func:`~powermodels.board_calibration.capped_rate.capped_rate_before_series`).

    Parameters
    ----------
    preset : TwinPreset
    rec : Recording
    caller : str
        The calibration's name, which the errors begin with.

    Returns
    -------
    (list of (t0_s, t1_s), float)
        The entries (:func:`~powermodels.twin.fit_controller.capped_entries_before_series`) and the mean NVML
        clock reading from 1 s into each (:func:`~powermodels.twin.fit_controller.capped_clock_reading`, MHz).

    Raises
    ------
    ValueError
        When the recording has no capped ``pressure`` entry before its first series or no capped series to match,
        when the preset's cap controller has no averaging window (``cap_window_s`` 0: no settled clock to fit), or
        when the entries have no NVML clock reading.
    """
    spans = capped_entries_before_series(rec)
    if not spans or not settled_capped_series(rec):
        raise ValueError(f"{caller}: {rec.name} has no capped pressure entry of 1.5 s or more before its first "
                         "series, or no capped series to match: nothing to calibrate the capped clock on")
    if preset.physics.cap_window_s <= 0:
        raise ValueError(f"{caller}: {preset.name}'s cap controller has no averaging window (cap_window_s 0), so it "
                         "has no settled capped clock to fit")
    target = capped_clock_reading([rec] * len(spans), [a for a, _ in spans], [b - a for a, b in spans])
    if not np.isfinite(target):
        raise ValueError(f"{caller}: {rec.name} has no NVML clock reading in its capped entries")
    return spans, target


def capped_series_ambient(preset: TwinPreset, rec: Recording, caller: str) -> float:
    """The recording's ambient at its first settled capped series' start, as ``twin-compare`` replays it (°C).

    Read from the idle stretches before that moment through the preset's thermal network, each value held from its
    stretch's end on (:func:`~powermodels.twin.ambient.recorded_ambient` with ``causal=True``, the replay's
    default). A capped calibration's own replays of the series run here, not at the preset's constant ambient:
    on the H200s of session 27 that constant (38.3 °C) sat 6-9 °C above the recordings', the twin's die ran ~8 °C
    hotter and its capped series ~0.8 % slower than in the scored replay (docs/twin-sessions.md, session 27).

    Raises
    ------
    ValueError
        When the recording has no settled capped series, or no idle stretch to read the ambient from.
    """
    series = settled_capped_series(rec)
    if not series:
        raise ValueError(f"{caller}: {rec.name} has no capped series to read the ambient before")
    try:
        return float(ambient_at(recorded_ambient(rec, preset, causal=True), series[0][0]))
    except ValueError as err:
        raise ValueError(f"{caller}: the replays run at the recording's ambient: {err}") from err
