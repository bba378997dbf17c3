"""``powermodels calibrate``: the thesis calibration measured end to end on the user's GPU.

Two ways to make the GPU run at several clocks:

* **locked clocks** (``allow_clock_changes=True``, for the user's own machine): inside the
  restoring :meth:`~powermodels.devices.base.Device.settings_guard`, one point per workload and
  clock (thesis §4.1/§4.5), then a thermal ramp at one fixed clock after an idle spell (§4.6);
* **natural DVFS** (the default; the only way on a GPU whose settings must not change): a
  *pressure load* — by default a tensor-core-heavy GEMM, which holds a Hopper GPU at its software
  power cap and makes its controller lower the SM clock (1110–1980 MHz on an H100, clock-event
  reason 0x4) — runs before each burst of the workload; the workload's launches then run at the
  clocks the controller chose while it recovers, then each workload warms up from cool for α.
  Everything is kept as a raw recording (:mod:`powermodels.natural_dvfs.natural_recording`), with
  a clock probe on the GPU before and after each batch of launches, and the fit runs on that
  recording (:mod:`powermodels.workflows.recording_calibration`): only launches whose clock is
  known, power from the energy counter at constant clock. What this cannot identify (e.g. the
  power curve of a kernel whose launches all ran at one clock) is reported as such, not fitted
  (:mod:`powermodels.workflows.calibration_fit`).

The measured tables, the fitted :class:`~powermodels.workflows.calibration_fit.Calibration` and a
calibration file (:func:`save`) come out; :mod:`powermodels.workflows.calibration_apply` corrects
later measurements with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import pandas as pd

from .. import schema
from ..measuring.protocols.launches import counter_power_w, launches_for
from ..measuring.runner import Runner, make_runner
from .calibration_fit import fit_calibration
from .calibration_run import CalibrationRun

__all__ = ["CalibrationRun", "calibrate", "collect_locked_clocks", "default_pressure_workload", "save"]


# --------------------------------------------------------------------------
# Measuring.
# --------------------------------------------------------------------------


def _workload(obj):
    from ..workloads import as_workload

    return as_workload(obj)


def _items(workloads) -> list[tuple[object, dict]]:
    """``[(workload, config), ...]`` from names, workloads or ``(workload, config)`` pairs."""
    if isinstance(workloads, (str, bytes)) or callable(workloads) or not isinstance(workloads, Iterable):
        workloads = [workloads]
    items = []
    for item in workloads:
        obj, config = item if isinstance(item, tuple) else (item, None)
        w = _workload(obj)
        items.append((w, w.validate_config(w.parse_config(config))))
    if not items:
        raise ValueError("calibrate: no workloads given")
    return items


def _point(runner: Runner, workload, config: dict, seconds: float, warmup_s: float) -> dict:
    t1 = runner.launch_time_s(workload, config)
    if warmup_s > 0:
        runner.run(workload, config, launches_for(warmup_s, t1))
    iv = runner.run(workload, config, launches_for(seconds, t1))
    start, end = float(iv[0, 0]), float(iv[-1, 1])
    trace = runner.trace(start, end, run_id="calibrate")
    power = counter_power_w(trace, start, end)
    if not np.isfinite(power):  # no energy counter: mean of the readings
        for column in (schema.POWER_INSTANT_W, schema.POWER_USAGE_W, schema.POWER_AVERAGE_W):
            if column in trace and np.isfinite(trace[column].to_numpy(float)).any():
                power = float(np.nanmean(trace[column].to_numpy(float)))
                break
    time_s = float(np.mean(iv[:, 1] - iv[:, 0]))
    return {schema.KERNEL: workload.name, schema.CONFIG: workload.config_id(config),
            schema.SM_CLOCK_MHZ: float(np.nanmean(trace[schema.SM_CLOCK_MHZ])),
            schema.MEM_CLOCK_MHZ: float(np.nanmean(trace[schema.MEM_CLOCK_MHZ])),
            schema.TEMPERATURE_C: float(np.nanmean(trace[schema.TEMPERATURE_C])),
            schema.POWER_W: power, schema.TIME_S: time_s, schema.ENERGY_J: power * time_s,
            schema.LAUNCHES: len(iv)}


def collect_locked_clocks(runner: Runner, workloads, clocks: Sequence[float], *, point_s: float = 1.0,
                          warmup_s: float = 0.5, ramp_clock_mhz: float | None = None,
                          ramp_points: int = 10, cool_s: float = 30.0,
                          progress: Callable[[str], None] | None = None) -> pd.DataFrame:
    """Locked-clock sweep (thesis §4.1/§4.5) and thermal ramp (§4.6) — changes clocks.

    Every clock change happens inside ``device.settings_guard(..., allow_changes=True)``, which
    restores the previous settings on exit, on any error, on Ctrl-C and SIGTERM, and journals
    them first so a killed process is restored by the next guard or ``powermodels restore``.

    Returns
    -------
    DataFrame
        One row per point; ``phase`` is ``"sweep"`` or ``"ramp"``;
        ``sm_clock_requested_mhz`` the locked clock.
    """
    items = _items(workloads)
    clocks = [float(c) for c in clocks]
    if len(clocks) < 2:
        raise ValueError(f"calibrate: a locked-clock sweep needs at least 2 clocks, got {clocks}")
    device = runner.device
    rows = []
    for i, f in enumerate(clocks):
        with device.settings_guard(sm_clock_mhz=f, allow_changes=True):
            for w, config in items:
                rows.append({**_point(runner, w, config, point_s, warmup_s),
                             schema.CALIBRATION_PHASE: "sweep", schema.SM_CLOCK_REQUESTED_MHZ: f})
        if progress:
            progress(f"sweep {i + 1}/{len(clocks)}: {f:.0f} MHz")
    f_ramp = float(ramp_clock_mhz) if ramp_clock_mhz is not None else float(np.median(clocks))
    w, config = items[0]
    runner.idle(cool_s)
    with device.settings_guard(sm_clock_mhz=f_ramp, allow_changes=True):
        for _ in range(ramp_points):
            rows.append({**_point(runner, w, config, point_s, 0.0), schema.CALIBRATION_PHASE: "ramp",
                         schema.SM_CLOCK_REQUESTED_MHZ: f_ramp})
    if progress:
        progress(f"thermal ramp: {ramp_points} points at {f_ramp:.0f} MHz")
    return pd.DataFrame(rows)


def default_pressure_workload() -> object:
    """The tensor-core pressure load: a bf16 GEMM (PyTorch, else CuPy), or its simulated twin.

    On a Hopper GPU a large bf16 GEMM holds the software power cap, so the controller lowers
    the SM clock; the simulated twin draws full core and memory activity.
    """
    from ..workloads.pressure import pressure_gemm

    return pressure_gemm()


# --------------------------------------------------------------------------
# End to end.
# --------------------------------------------------------------------------


def _check_options(*, clocks, n_clocks, cycles, pressure_s, burst_s, point_s, reference_clock_mhz,
                   reference_temperature_c, min_span_mhz, allow_clock_changes) -> None:
    """Every option checked before anything is measured (one-line errors naming the option)."""
    from .. import validation as v

    v.check_boolean("calibrate: allow_clock_changes", allow_clock_changes)
    if clocks is not None:
        v.check_clocks("calibrate: clocks", clocks)
    # bounds: a calibration is minutes of load, not days (issue 25: every command bounded)
    v.check_integer("calibrate: n_clocks", n_clocks, minimum=2, maximum=64)
    v.check_integer("calibrate: cycles", cycles, minimum=2, maximum=1000)
    v.check_number("calibrate: pressure_s", pressure_s, minimum=0, maximum=600)
    v.check_number("calibrate: burst_s", burst_s, above=0, maximum=600)
    v.check_number("calibrate: point_s", point_s, above=0, maximum=600)
    if reference_clock_mhz is not None:
        v.check_number("calibrate: reference_clock_mhz", reference_clock_mhz, above=0)
    if reference_temperature_c is not None:
        v.check_number("calibrate: reference_temperature_c", reference_temperature_c,
                       minimum=-40, maximum=150)
    v.check_number("calibrate: min_span_mhz", min_span_mhz, minimum=0)


def calibrate(workloads, device="auto", *, allow_clock_changes: bool = False,
              clocks: Sequence[float] | None = None, n_clocks: int = 8, pressure="default",
              cycles: int = 8, pressure_s: float = 1.0, burst_s: float = 0.5, series_s: float = 10.0,
              cool_s: float = 10.0, hot_s: float = 0.0, probe: bool = True, point_s: float = 1.0,
              reference_clock_mhz: float | None = None, reference_temperature_c: float | None = None,
              min_span_mhz: float = 150.0, progress: Callable[[str], None] | None = None,
              runner: Runner | None = None, recording_dir=None, ladder=None) -> CalibrationRun:
    """Measure and fit the thesis calibration for ``workloads`` on ``device``.

    Parameters
    ----------
    workloads : workload or list
        Registry kernel names, user workloads (:func:`powermodels.workloads.as_workload`)
        or ``(workload, config)`` pairs.
    device : Device or str, default="auto"
        Where to measure.
    allow_clock_changes : bool, default=False
        Lock clocks for a sweep and a thermal ramp (your own machine only; restored by the
        guard). False: natural DVFS, nothing changed on the device.
    clocks : list of float, optional
        Locked clocks; default ``n_clocks`` supported clocks evenly spread from the lowest to
        the highest.
    pressure : workload, "default" or None
        Natural DVFS: the load run before each burst (None: the workload alone).
    cycles, pressure_s, burst_s, series_s, cool_s, hot_s : int, float, float, float, float, float
        Natural DVFS schedule (:func:`~powermodels.natural_dvfs.natural_recording.record_natural_dvfs`).
    probe : bool
        Natural DVFS: probe the SM clock on the GPU around each batch (where the device can).
    point_s : float
        Locked clocks: seconds per point.
    reference_clock_mhz, reference_temperature_c : float, optional
        Where corrections report (default: highest clock, coldest temperature seen).
    min_span_mhz : float
        Least clock span over which a curve is fitted.
    progress : callable, optional
        Called with one line per step.
    runner : Runner, optional
        Use this runner (its device) instead of opening ``device``.
    recording_dir : str or os.PathLike, optional
        Natural DVFS: write the raw recording here as it grows, and what it holds if the run
        stops early (``save_to`` of
        :func:`~powermodels.natural_dvfs.natural_recording.record_natural_dvfs`).
    ladder : Ladder, optional
        Natural DVFS: add the ladder part (the workload alternating with the pressure load, so
        it runs whole counter windows at the clock the cap holds;
        :class:`~powermodels.natural_dvfs.natural_recording.Ladder`). None: none.

    Returns
    -------
    CalibrationRun
    """
    _check_options(clocks=clocks, n_clocks=n_clocks, cycles=cycles, pressure_s=pressure_s,
                   burst_s=burst_s, point_s=point_s, reference_clock_mhz=reference_clock_mhz,
                   reference_temperature_c=reference_temperature_c, min_span_mhz=min_span_mhz,
                   allow_clock_changes=allow_clock_changes)
    own = runner is None
    runner = runner or make_runner(device)
    try:
        dev = runner.device
        if allow_clock_changes:
            if clocks is None:
                supported = sorted({float(f) for fs in dev.supported_clocks().values() for f in fs})
                if len(supported) < 2:
                    raise ValueError("calibrate: the device reports fewer than 2 supported clocks; "
                                     "pass clocks=[...]")
                idx = np.unique(np.round(np.linspace(0, len(supported) - 1, n_clocks)).astype(int))
                clocks = [supported[i] for i in idx]
            points = collect_locked_clocks(runner, workloads, clocks, point_s=point_s, progress=progress)
        else:
            load = default_pressure_workload() if isinstance(pressure, str) and pressure == "default" \
                else pressure
            return _natural(runner, workloads, load, cycles=cycles, pressure_s=pressure_s, burst_s=burst_s,
                            series_s=series_s, cool_s=cool_s, hot_s=hot_s, probe=probe, progress=progress,
                            recording_dir=recording_dir, ladder=ladder,
                            reference_clock_mhz=reference_clock_mhz,
                            reference_temperature_c=reference_temperature_c, min_span_mhz=min_span_mhz)
        calibration = fit_calibration(points, None, None,
                                      reference_clock_mhz=reference_clock_mhz,
                                      reference_temperature_c=reference_temperature_c, min_span_mhz=min_span_mhz)
        info = dev.info
        return CalibrationRun(points=points, launches=pd.DataFrame(), samples=pd.DataFrame(),
                              calibration=calibration,
                              device={"device": info.name, "uuid": getattr(info, "uuid", None),
                                      "driver": getattr(info, "driver", None), "device_kind": info.kind})
    finally:
        if own:
            runner.close()


def _natural(runner, workloads, load, *, cycles, pressure_s, burst_s, series_s, cool_s, hot_s, probe, progress,
             recording_dir, ladder,
             reference_clock_mhz, reference_temperature_c, min_span_mhz) -> CalibrationRun:
    """Natural DVFS: record (probes included), then fit on the recording."""
    from ..natural_dvfs.natural_recording import record_natural_dvfs
    from .calibration_fit import group_key
    from .recording_calibration import calibrate_recording

    items = _items(workloads)
    # the recording's workload names carry the configuration (two configs of one kernel differ)
    named = [(w, c, group_key(w.name, w.config_id(c))) for w, c in items]
    pressure = None
    if load is not None:
        p = _workload(load)
        pressure = (p, p.validate_config(p.parse_config(None)))
    recording = record_natural_dvfs(runner, named, pressure, cycles=cycles, pressure_s=pressure_s,
                                    burst_s=burst_s, series_s=series_s, cool_s=cool_s, hot_s=hot_s, probe=probe,
                                    ladder=ladder, progress=progress, save_to=recording_dir)
    run = calibrate_recording(recording, reference_clock_mhz=reference_clock_mhz,
                              reference_temperature_c=reference_temperature_c, min_span_mhz=min_span_mhz)
    run.recording = recording
    return run


def save(run: CalibrationRun, path) -> object:
    """Write ``run``'s calibration file (:func:`powermodels.io.save_calibration`) and return its path."""
    from ..io import save_calibration

    meta = {**run.calibration.metadata(), **run.device, "schema": None,
            "workloads": sorted(set(run.calibration.identifiability[schema.GROUP]) - {"(all)"})}
    return save_calibration(run.calibration.models(), path, meta)
