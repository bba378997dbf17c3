"""``powermodels calibrate``: the thesis calibration measured end to end on the user's GPU.

Two ways to make the GPU run at several clocks:

* **locked clocks** (``allow_clock_changes=True``, for the user's own machine): inside the
  restoring :meth:`~powermodels.devices.base.Device.settings_guard`, one point per workload and
  clock (thesis §4.1/§4.5), then a thermal ramp at one fixed clock after an idle spell (§4.6);
* **natural DVFS** (the default; the only way on a GPU whose settings must not change): a
  *pressure load* — by default a tensor-core-heavy GEMM, which holds a Hopper GPU at its software
  power cap and makes its controller lower the SM clock (1110–1980 MHz on an H100, clock-event
  reason 0x4) — runs before each burst of the workload; the workload's launches then run at the
  clocks the controller chose while it recovers. Each launch's clock is read from the trace, so
  time vs clock is fitted per launch; power vs clock from the sensor updates whose window lay
  inside the workload's launches. What this cannot identify (e.g. the power curve of a kernel
  whose launches all ran at one clock) is reported as such, not fitted
  (:mod:`powermodels.workflows.calibration_fit`).

The measured tables, the fitted :class:`~powermodels.workflows.calibration_fit.Calibration` and a
calibration file (:func:`save`) come out; :mod:`powermodels.workflows.calibration_apply` corrects
later measurements with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import schema
from ..harness.protocols import _launches_for, counter_power_w, sensor_updates
from ..harness.runner import Runner, make_runner
from .calibration_fit import Calibration, fit_calibration

__all__ = ["CalibrationRun", "calibrate", "collect_locked_clocks", "collect_natural_dvfs",
           "default_pressure_workload", "save"]


@dataclass
class CalibrationRun:
    """What :func:`calibrate` measured and fitted.

    Attributes
    ----------
    points : DataFrame
        Sweep and ramp points (locked clocks); empty on the natural path.
    launches : DataFrame
        Natural-DVFS launches (time, clock, temperature per launch); empty on the locked path.
    samples : DataFrame
        Natural-DVFS power samples (one per sensor update inside the workload's launches).
    calibration : Calibration
        The fitted models and what they could identify.
    device : dict
        Name, UUID and driver of the device measured.
    """

    points: pd.DataFrame
    launches: pd.DataFrame
    samples: pd.DataFrame
    calibration: Calibration
    device: dict


# --------------------------------------------------------------------------
# Measuring.
# --------------------------------------------------------------------------


def _workload(obj):
    from ..harness.workloads import as_workload

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


def _mean_between(t: np.ndarray, v: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and range of ``v`` sampled at sorted ``t`` over each ``[start, end]`` (NaN if empty).

    Found by time search (cumulative sums), linear in the trace, whatever the number of windows.
    """
    ok = np.isfinite(v)
    t, v = t[ok], v[ok]
    lo = np.searchsorted(t, start, side="left")
    hi = np.searchsorted(t, end, side="right")
    csum = np.concatenate([[0.0], np.cumsum(v)])
    n = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n > 0, (csum[hi] - csum[lo]) / np.maximum(n, 1), np.nan)
    # the nearest earlier sample stands for a window with none inside (launch shorter than a period)
    nearest = np.clip(lo - 1, 0, max(t.size - 1, 0))
    if t.size:
        mean = np.where(n > 0, mean, v[nearest])
    spread = np.full(start.shape, np.nan)
    for i in np.flatnonzero(n > 1):  # only launches with several samples have a range
        seg = v[lo[i]:hi[i]]
        spread[i] = seg.max() - seg.min()
    return mean, spread


def _point(runner: Runner, workload, config: dict, seconds: float, warmup_s: float) -> dict:
    t1 = runner.launch_time_s(workload, config)
    if warmup_s > 0:
        runner.run(workload, config, _launches_for(warmup_s, t1))
    iv = runner.run(workload, config, _launches_for(seconds, t1))
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


def _power_column(trace: pd.DataFrame) -> str | None:
    for column in (schema.POWER_INSTANT_W, schema.POWER_USAGE_W):
        if column in trace and np.isfinite(trace[column].to_numpy(float)).any():
            return column
    return None


def collect_natural_dvfs(runner: Runner, workloads, pressure=None, *, cycles: int = 8,
                         pressure_s: float = 1.0, burst_s: float = 0.5,
                         progress: Callable[[str], None] | None = None
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Natural DVFS: bursts of each workload after a pressure load of growing length.

    Cycle ``c`` of ``cycles`` runs the pressure load for ``pressure_s · c / (cycles − 1)``
    (the first cycle none, so the workload's own clock is in the data), then the workload for
    ``burst_s``. Nothing is changed on the device.

    Returns
    -------
    launches : DataFrame
        One row per workload launch: time, the mean SM/memory clock and temperature the trace
        shows during it, and ``clock_range_mhz`` (the clock moved within the launch).
    samples : DataFrame
        One row per sensor update whose window (Yang §IV-C: ``[u − delay − window, u − delay]``)
        lay inside a burst: power and the mean clock and temperature over that window.
    """
    items = _items(workloads)
    if not (isinstance(cycles, (int, np.integer)) and cycles >= 2):
        raise ValueError(f"calibrate: cycles must be an int >= 2, got {cycles!r}")
    if not (pressure_s >= 0 and burst_s > 0):
        raise ValueError(f"calibrate: pressure_s must be >= 0 and burst_s > 0, got {pressure_s}, {burst_s}")
    pressure_w = _workload(pressure) if pressure is not None else None
    p_cfg = pressure_w.validate_config(pressure_w.parse_config(None)) if pressure_w else None
    p_time = runner.launch_time_s(pressure_w, p_cfg) if pressure_w else math.nan
    sensor = runner.sensor
    launch_rows, sample_rows = [], []
    for k, (w, config) in enumerate(items):
        t1 = runner.launch_time_s(w, config)
        for c in range(cycles):
            seconds = pressure_s * c / (cycles - 1)
            if pressure_w is not None and seconds > 0:
                runner.run(pressure_w, p_cfg, _launches_for(seconds, p_time))
            iv = runner.run(w, config, _launches_for(burst_s, t1))
            start, end = float(iv[0, 0]), float(iv[-1, 1])
            trace = runner.trace(start, end + sensor.delay_s + sensor.update_period_s, run_id="calibrate")
            t = trace[schema.T_S].to_numpy(float)
            clock, spread = _mean_between(t, trace[schema.SM_CLOCK_MHZ].to_numpy(float), iv[:, 0], iv[:, 1])
            mem, _ = _mean_between(t, trace[schema.MEM_CLOCK_MHZ].to_numpy(float), iv[:, 0], iv[:, 1])
            temp, _ = _mean_between(t, trace[schema.TEMPERATURE_C].to_numpy(float), iv[:, 0], iv[:, 1])
            base = {schema.KERNEL: w.name, schema.CONFIG: w.config_id(config),
                    schema.CALIBRATION_PHASE: "natural", schema.REPEAT: c}
            launch_rows.append(pd.DataFrame({**base, schema.START_S: iv[:, 0], schema.END_S: iv[:, 1],
                                             schema.TIME_S: iv[:, 1] - iv[:, 0], schema.SM_CLOCK_MHZ: clock,
                                             schema.MEM_CLOCK_MHZ: mem, schema.TEMPERATURE_C: temp,
                                             schema.CLOCK_RANGE_MHZ: spread}))
            column = _power_column(trace)
            if column is None:
                continue
            window = sensor.instant_window_s if column == schema.POWER_INSTANT_W else sensor.average_window_s
            u, p = sensor_updates(trace, column)
            w1 = u - sensor.delay_s
            w0 = w1 - window
            inside = (w0 >= start) & (w1 <= end)
            if inside.any():
                f_w, _ = _mean_between(t, trace[schema.SM_CLOCK_MHZ].to_numpy(float), w0[inside], w1[inside])
                temp_w, _ = _mean_between(t, trace[schema.TEMPERATURE_C].to_numpy(float), w0[inside], w1[inside])
                sample_rows.append(pd.DataFrame({**base, schema.T_S: u[inside], schema.POWER_W: p[inside],
                                                 schema.SM_CLOCK_MHZ: f_w, schema.TEMPERATURE_C: temp_w}))
        if progress:
            progress(f"natural DVFS {k + 1}/{len(items)}: {w.name} ({cycles} cycles)")
    launches = pd.concat(launch_rows, ignore_index=True)
    samples = (pd.concat(sample_rows, ignore_index=True) if sample_rows else
               pd.DataFrame(columns=[schema.KERNEL, schema.CONFIG, schema.CALIBRATION_PHASE, schema.REPEAT,
                                     schema.T_S, schema.POWER_W, schema.SM_CLOCK_MHZ, schema.TEMPERATURE_C]))
    return launches, samples


def default_pressure_workload() -> object:
    """The tensor-core pressure load: a bf16 GEMM (PyTorch, else CuPy), or its simulated twin.

    On a Hopper GPU a large bf16 GEMM holds the software power cap, so the controller lowers
    the SM clock; the simulated twin draws full core and memory activity.
    """
    from ..harness.workloads.pressure import pressure_gemm

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
    v.check_integer("calibrate: n_clocks", n_clocks, minimum=2)
    v.check_integer("calibrate: cycles", cycles, minimum=2)
    v.check_number("calibrate: pressure_s", pressure_s, minimum=0)
    v.check_number("calibrate: burst_s", burst_s, above=0)
    v.check_number("calibrate: point_s", point_s, above=0)
    if reference_clock_mhz is not None:
        v.check_number("calibrate: reference_clock_mhz", reference_clock_mhz, above=0)
    if reference_temperature_c is not None:
        v.check_number("calibrate: reference_temperature_c", reference_temperature_c,
                       minimum=-40, maximum=150)
    v.check_number("calibrate: min_span_mhz", min_span_mhz, minimum=0)


def calibrate(workloads, device="auto", *, allow_clock_changes: bool = False,
              clocks: Sequence[float] | None = None, n_clocks: int = 8, pressure="default",
              cycles: int = 8, pressure_s: float = 1.0, burst_s: float = 0.5, point_s: float = 1.0,
              reference_clock_mhz: float | None = None, reference_temperature_c: float | None = None,
              min_span_mhz: float = 150.0, progress: Callable[[str], None] | None = None,
              runner: Runner | None = None) -> CalibrationRun:
    """Measure and fit the thesis calibration for ``workloads`` on ``device``.

    Parameters
    ----------
    workloads : workload or list
        Registry kernel names, user workloads (:func:`powermodels.harness.workloads.as_workload`)
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
    cycles, pressure_s, burst_s : int, float, float
        Natural DVFS schedule (:func:`collect_natural_dvfs`).
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
        points = pd.DataFrame()
        launches = samples = None
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
            launches, samples = collect_natural_dvfs(runner, workloads, load, cycles=cycles,
                                                     pressure_s=pressure_s, burst_s=burst_s, progress=progress)
        calibration = fit_calibration(points if len(points) else None, launches, samples,
                                      reference_clock_mhz=reference_clock_mhz,
                                      reference_temperature_c=reference_temperature_c, min_span_mhz=min_span_mhz)
        info = dev.info
        return CalibrationRun(points=points, launches=launches if launches is not None else pd.DataFrame(),
                              samples=samples if samples is not None else pd.DataFrame(),
                              calibration=calibration,
                              device={"device": info.name, "uuid": getattr(info, "uuid", None),
                                      "driver": getattr(info, "driver", None), "device_kind": info.kind})
    finally:
        if own:
            runner.close()


def save(run: CalibrationRun, path) -> object:
    """Write ``run``'s calibration file (:func:`powermodels.io.save_calibration`) and return its path."""
    from ..io import save_calibration

    meta = {**run.calibration.metadata(), **run.device, "schema": None,
            "workloads": sorted(set(run.calibration.identifiability[schema.GROUP]) - {"(all)"})}
    return save_calibration(run.calibration.models(), path, meta)
