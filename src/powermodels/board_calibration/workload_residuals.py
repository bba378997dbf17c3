"""What each workload draws beyond the board's core and memory factors, and a preset moved to the median board's.

``calibrate_board(..., scale="domains")`` gives a board one factor for the core's
dynamic power and one for the memory's (DSO eq. 1, ``P = A + Bc·a + Bm·m``:
the two domains are separate terms). With three
uncapped workloads (a compute-bound FMA loop, an fp32 GEMM, a memory-bound
triad) and two factors, one degree of freedom is left over: how far each
workload's own first second lies from the two factors' least-squares line.
Where the median board's residual lies away from 1, and the board the preset
was fitted to reads it too, it is a property of the *preset's* workload
activities rather than of the boards. On the nine recordings the H200 part
presets were pooled from, the FMA loop's residual is 0.994–1.030 with a median
board of 1.011 (dynamic power; 1.009 on the preset's own board), and the fp32
GEMM's median is 0.998. On 24 H200 boards outside that pool, the
part presets' twin read the FMA loop's warm-up below its fp32 GEMM's on 20 (median
−1.1 points; docs/twin.md, session 20).

:func:`workload_residuals` reads those residuals, one row per recording and
workload. :func:`with_workload_residuals` scales each workload's activity by the
median board's residual. It is read from the pool's recordings only, and its
validation is the replay of boards left out of the pool.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd

from .. import schema
from ..twin.preset import TwinPreset, load_preset
from .calibrate import calibrate_board
from .parts import part_preset
from .pooled import workloads_at_median_board

__all__ = ["with_workload_residuals", "workload_residuals"]


def workload_residuals(presets, recordings) -> pd.DataFrame:
    """Each same-kernel uncapped workload's first-second dynamic power over its board's two factors.

    Parameters
    ----------
    presets : TwinPreset, str or sequence of str
        The preset each recording is calibrated against; several names pick,
        per recording, the one pooled over its board's part number
        (:func:`~powermodels.board_calibration.parts.part_preset`).
    recordings : iterable of Recording
        Raw recordings with a compute-bound and a memory-bound uncapped series
        (:func:`~powermodels.board_calibration.calibrate.calibrate_board`'s
        ``scale="domains"`` needs both).

    Returns
    -------
    DataFrame
        One row per recording, workload and series read: ``DEVICE_UUID``,
        ``RECORDING_NAME``, ``WORKLOAD`` and ``WORKLOAD_RESIDUAL`` (the real
        dynamic power over ``core_scale·core_w + memory_scale·memory_w``;
        1 means the two factors explain it).

    Raises
    ------
    ValueError
        If no recording is given, or one cannot be calibrated by domains.
    """
    # loaded once, not per recording: part_preset takes loaded presets as well as names
    candidates = [load_preset(p) for p in presets] if isinstance(presets, (list, tuple)) else None
    single = load_preset(presets) if candidates is None else None
    rows = []
    for rec in recordings:
        twin = part_preset(rec, candidates) if candidates is not None else single
        report = calibrate_board(twin, rec, scale="domains").fit["board_calibration"]
        core, memory = report["core_scale"], report["memory_scale"]
        for workload, series in report["series"].items():
            if not series["same_kernel"]:  # another kernel under this name: its power is not the preset's workload's
                continue
            for real, zero, core_w, memory_w in zip(series["real_w"], series["zero_activity_w"], series["core_w"],
                                                    series["memory_w"], strict=True):
                rows.append({schema.DEVICE_UUID: report["uuid"], schema.RECORDING_NAME: rec.name,
                             schema.WORKLOAD: workload,
                             schema.WORKLOAD_RESIDUAL: (real - zero) / (core * core_w + memory * memory_w)})
    if not rows:
        raise ValueError("workload_residuals: no recording with a same-kernel uncapped series was given")
    return pd.DataFrame(rows)


def with_workload_residuals(preset, residuals: pd.DataFrame, *, name: str | None = None) -> TwinPreset:
    """``preset`` with each workload's activity times the median board's residual (:func:`workload_residuals`).

    Parameters
    ----------
    preset : TwinPreset or str
        The preset to move (its workloads' core and memory activity both scale).
    residuals : DataFrame
        :func:`workload_residuals` of the pool's boards (leave out the boards a
        validation replays). A board counts once: the median of its own rows,
        then the median over boards.
    name : str, optional
        The new preset's name (default ``<preset>+workload-residuals``).

    Returns
    -------
    TwinPreset
        Its ``fit["workload_residuals"]`` and provenance hold each workload's
        ratio and the boards behind it; workloads without a residual are kept.
    """
    twin = load_preset(preset)
    if residuals is None or not len(residuals):
        raise ValueError("with_workload_residuals: no residuals to apply")
    workloads, ratios = workloads_at_median_board(twin.workloads, residuals, schema.WORKLOAD_RESIDUAL)
    report = {"boards": sorted(residuals[schema.DEVICE_UUID].unique()),
              "statistic": "median over boards of each board's median", "ratio": ratios}
    return replace(twin, name=name or f"{twin.name}+workload-residuals", workloads=workloads,
                   provenance={**twin.provenance, "workload_residuals": report},
                   fit={**twin.fit, "workload_residuals": report})
