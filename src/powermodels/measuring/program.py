"""External programs as workloads: whole-program energy, time and mean power from the energy counter.

``powermodels measure -- ./app args`` and ``measure_program(ProgramWorkload([...]))``
run a program several times with idle gaps between and measure each run with
:class:`~powermodels.meter.EnergyMeter` around the process: the counter is
read on a background thread, the energy at the process's start and exit is
bracketed by the counter updates around those instants and interpolated
between them (see :mod:`powermodels.measuring.counter_log`), and the idle gap
before each run gives the idle power (the baseline). A program that exits
with a non-zero code is an error naming the code (``check=False`` records it
instead); so is one stopped at its duration bound (``timeout_s``, an hour by
default: :data:`~powermodels.workloads.program.DEFAULT_TIMEOUT_S`; with
``check=False`` its row has ``timed_out`` set); a program that is not found is
a one-line error before anything runs.

On the simulated GPU the process still really runs (e.g. ``python -c ...``);
its simulated twin's load is put on the simulated GPU over the program's wall
time (:meth:`ProgramWorkload.apply_twin`), so CI exercises the whole path.

What the numbers include: everything the GPU drew while the process lived —
its start-up (CUDA context creation, module loading), host-side phases with
the GPU idle, and its exit. ``idle_power_w`` and ``energy_above_idle_j`` let
you separate the GPU's baseline from what the program added.
"""

from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass

import pandas as pd

from .. import schema
from ..workloads.program import ProgramFailed, ProgramWorkload

__all__ = ["ProgramFailed", "ProgramMeasurement", "ProgramWorkload", "measure_program", "program_reference"]


@dataclass
class ProgramMeasurement:
    """Runs of one program: the run table (one row per repeat) and the optional kernel breakdown."""

    table: pd.DataFrame
    kernels: pd.DataFrame | None = None

    def _median(self, column: str) -> float:
        ok = self.table[schema.EXIT_CODE] == 0
        if schema.TIMED_OUT in self.table:  # a program may exit 0 on the SIGTERM that stopped it
            # only a run marked True was stopped; NaN (a table from before the column) was not
            ok &= ~self.table[schema.TIMED_OUT].eq(True)
        return float(self.table.loc[ok, column].median()) if ok.any() else math.nan

    @property
    def energy_j(self) -> float:
        """Median whole-program energy over the successful runs (J)."""
        return self._median(schema.ENERGY_J)

    @property
    def time_s(self) -> float:
        return self._median(schema.TIME_S)

    @property
    def power_w(self) -> float:
        return self._median(schema.POWER_W)


def _row(workload, device, repeat, run, idle, done, wall) -> dict:
    row = {
        schema.KERNEL: workload.name, schema.CONFIG: "", schema.COMMAND: workload.command,
        schema.DEVICE: device.info.name, schema.DEVICE_UUID: device.info.uuid,
        schema.HOST: socket.gethostname(), schema.PROTOCOL: "program", schema.REPEAT: repeat,
        schema.LAUNCHES: 1, schema.EXIT_CODE: int(done.returncode),
        schema.TIMED_OUT: done.timed_out, schema.WALL_S: wall,
    }
    row.update(run.as_row())
    idle_w = idle.power_w if idle is not None else math.nan
    row[schema.IDLE_POWER_W] = idle_w
    row[schema.ENERGY_ABOVE_IDLE_J] = run.energy_j - idle_w * run.time_s if math.isfinite(idle_w) else math.nan
    return row


def measure_program(workload, device="auto", *, repeats: int = 3, idle_s: float = 2.0,
                    check: bool = True, ncu: bool | str = False, progress=None) -> ProgramMeasurement:
    """Measure a program's whole-run energy, time and mean power, ``repeats`` times with idle gaps.

    Parameters
    ----------
    workload : ProgramWorkload or list of str
        The program (an argv list becomes a :class:`ProgramWorkload`).
    device : {"auto", "nvml", "simulated"} or Device, default="auto"
        Where the energy comes from.
    repeats : int, default=3
        Runs of the program.
    idle_s : float, default=2
        Idle gap before each run; its energy gives ``idle_power_w`` (≥ a few
        counter updates, so ≥ 0.5 s).
    check : bool, default=True
        A non-zero exit code, or a run stopped at the workload's
        ``timeout_s``, raises :class:`ProgramFailed` naming it; with False
        the run is recorded with its ``exit_code`` (and ``timed_out``).
    ncu : bool or str, default=False
        After the energy runs, run the program once more under
        ``ncu --clock-control none`` for a per-kernel time breakdown
        (:mod:`powermodels.microbench.program_kernels`; ncu slows and
        serialises the program, so that run is not measured). A string is
        the ncu executable to use (default: found on PATH or in the CUDA folders).
    progress : callable, optional
        Called with a one-line message after each run.

    Returns
    -------
    ProgramMeasurement
        ``table``: run-table rows (``time_s`` is the program's wall time,
        ``energy_j`` its whole energy, ``exit_code``, ``timed_out``, ``idle_power_w``,
        ``energy_above_idle_j``); ``kernels`` with ``ncu=True``.
    """
    from ..meter import EnergyMeter

    if not isinstance(workload, ProgramWorkload):
        workload = ProgramWorkload(workload)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"measure_program: repeats must be an int >= 1, got {repeats!r}")
    if not (isinstance(idle_s, (int, float)) and math.isfinite(idle_s) and idle_s >= 0):
        raise ValueError(f"measure_program: idle_s must be a number >= 0, got {idle_s!r}")
    meter = EnergyMeter(device, sync=None)
    dev = meter.device
    if meter.simulated:
        workload.check_twin()  # no twin: fail before running anything
    rows = []
    try:
        for repeat in range(repeats):
            idle = None
            if idle_s > 0:
                meter.begin_window("idle")
                if meter.simulated:
                    dev.idle(idle_s)
                else:
                    time.sleep(idle_s)
                idle = meter.end_window("idle")
            wall0 = time.perf_counter()
            meter.begin_window("program")
            try:
                done = workload.run_once(check=check)
            except BaseException:
                meter.cancel_window("program")
                raise
            if meter.simulated:  # the twin's load for the program's real wall time
                workload.apply_twin(dev, time.perf_counter() - wall0)
            # the GPU idled (at the power just measured) up to the start and idles after the exit
            # the clock comes from NVML's reading (no probe runs inside a program), modelled as a
            # sensor: wait for the values published after the exit that still describe the run
            run = meter.end_window("program", idle_power_w=None if idle is None else idle.power_w,
                                   wait_clock=True)
            rows.append(_row(workload, dev, repeat, run, idle, done, time.perf_counter() - wall0))
            if progress is not None:
                stopped = f" (stopped at its {workload.timeout_s:g} s bound)" if done.timed_out else ""
                progress(f"run {repeat + 1}/{repeats}: {run.energy_j:.4g} J in {run.time_s:.3g} s "
                         f"({run.power_w:.1f} W), exit code {done.returncode}{stopped}")
    finally:
        meter.close()
    table = pd.DataFrame(rows)
    schema.validate_run_table(table)
    kernels = None
    if ncu:
        from ..microbench.program_kernels import kernel_breakdown

        kernels = kernel_breakdown(workload, ncu=ncu if isinstance(ncu, str) else None)
    return ProgramMeasurement(table, kernels)


def program_reference(workload, device="auto", *, duration_s: float = 12.0, skip_s: float = 2.0) -> dict:
    """The reference method for a program: runs back to back for ``duration_s``, counter from ``skip_s``.

    The program runs again and again (at least twice) until ``duration_s``
    have passed; the energy per run is the total-energy counter's difference
    between the first update ``skip_s`` after the first start and the last
    update before the last exit, divided by the runs inside that window (runs
    cut by its edges count the fraction of their time inside), exactly as
    :func:`powermodels.measuring.reference.reference_energy` does for kernels.
    It reads the counter through the :class:`~powermodels.measuring.sampler.Sampler`
    and :func:`~powermodels.measuring.protocols.launches.aligned_window`, not
    through :class:`~powermodels.meter.EnergyMeter`, so it checks
    :func:`measure_program` by an independent path. The gaps between runs
    (process start-up on the host) are charged to the runs.

    Returns
    -------
    dict
        ``energy_j`` and ``uncertainty_j`` per run, ``power_w``, ``runs``
        (inside the window), ``window_s``, ``truth_energy_j`` (simulated GPU: the
        true energy per run over the window; NaN on a real GPU), ``wall_s``.
    """
    from ..devices import Device, open_device

    if not isinstance(workload, ProgramWorkload):
        workload = ProgramWorkload(workload)
    if not (math.isfinite(duration_s) and math.isfinite(skip_s) and 0 <= skip_s < duration_s):
        raise ValueError(f"program_reference: need 0 <= skip_s < duration_s, got {skip_s}, {duration_s}")
    dev = device if isinstance(device, Device) else open_device(device)
    try:
        return _program_reference(workload, dev, duration_s, skip_s)
    finally:
        if dev is not device:  # opened here from a kind: close it (NVML shutdown)
            dev.close()


def _program_reference(workload, dev, duration_s: float, skip_s: float) -> dict:
    """:func:`program_reference` on an opened device."""
    import numpy as np

    from .protocols.launches import aligned_window
    from .sampler import Sampler

    simulated = dev.info.kind == "simulated"
    if simulated:
        workload.check_twin()  # no twin: fail before running anything
    wall0 = time.perf_counter()
    sampler = None if simulated else Sampler(dev, energy_period_s=0.002).start()
    intervals = []
    try:
        begin = dev.now()
        while not intervals or len(intervals) < 2 or dev.now() - begin < duration_s:
            a = dev.now()
            w0 = time.perf_counter()
            workload.run_once(check=True)
            if simulated:
                workload.apply_twin(dev, time.perf_counter() - w0)
            intervals.append((a, dev.now()))
        end = dev.now()
        if simulated:
            dev.idle(0.3)  # the counter's next updates, as a real sampler would wait for them
            trace = dev.trace(begin - 0.3, dev.now(), sample_period_s=2e-3, run_id="program_reference")
        else:
            time.sleep(0.3)
            sampler.wait_past(end + 0.25)
            trace = sampler.table(begin - 0.3, end + 0.3, run_id="program_reference")
    finally:
        if sampler is not None:
            sampler.stop()
    iv = np.asarray(intervals, dtype=float)
    window = aligned_window(trace, iv, begin + skip_s, end)
    if window is None:
        raise RuntimeError(f"program_reference: fewer than two counter updates between {skip_s} s and "
                           f"{end - begin:.2f} s")
    truth = math.nan
    if simulated:
        truth = dev.true_energy_j(window.start_s, window.end_s) / window.launches
    return {"energy_j": window.energy_per_launch_j, "uncertainty_j": window.uncertainty_j,
            "power_w": window.power_w, "runs": window.launches, "window_s": window.end_s - window.start_s,
            "truth_energy_j": truth, "wall_s": time.perf_counter() - wall0}
