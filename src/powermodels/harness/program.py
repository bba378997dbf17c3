"""External programs as workloads: whole-program energy, time and mean power from the energy counter.

``powermodels measure -- ./app args`` and ``measure_program(ProgramWorkload([...]))``
run a program several times with idle gaps between and measure each run with
:class:`~powermodels.meter.EnergyMeter` around the process: the counter is
read on a background thread, the energy at the process's start and exit is
bracketed by the counter updates around those instants and interpolated
between them (see :mod:`powermodels.harness.counter_log`), and the idle gap
before each run gives the idle power (the baseline). A program that exits
with a non-zero code is an error naming the code (``check=False`` records it
instead); a program that is not found is a one-line error before anything runs.

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
import os
import shlex
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from .. import schema
from .workloads.base import Prepared, Workload

__all__ = ["ProgramFailed", "ProgramMeasurement", "ProgramWorkload", "measure_program", "program_reference"]


class ProgramFailed(ChildProcessError):
    """The program exited with a non-zero code (or timed out); an ``OSError``, one line at the CLI."""

    def __init__(self, message: str, returncode: int | None):
        super().__init__(message)
        self.returncode = returncode


def _resolve(argv0: str, cwd: str | None, env: Mapping | None) -> str:
    """The executable ``argv0`` names, or FileNotFoundError in one line."""
    if os.sep in argv0 or (os.altsep and os.altsep in argv0):
        path = argv0 if os.path.isabs(argv0) or cwd is None else os.path.join(cwd, argv0)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"program not found: {argv0!r} (no such file)")
        if not os.access(path, os.X_OK):
            raise PermissionError(f"program {argv0!r} is not executable (chmod +x, or run it through "
                                  "its interpreter)")
        return path
    search = (env or {}).get("PATH") if env is not None else None
    found = shutil.which(argv0, path=search)
    if found is None:
        raise FileNotFoundError(f"program not found: {argv0!r} is not on PATH")
    return found


class _RunProgram(Prepared):
    """One execution of the program per :meth:`launch` (timed on the host clock)."""

    timing = "synchronize"

    def __init__(self, workload: ProgramWorkload):
        self.workload = workload
        self.returncode: int | None = None

    def launch(self, stream=None) -> None:
        self.returncode = self.workload.run_once(check=True).returncode


class ProgramWorkload(Workload):
    """An external program: one execution is one run of the process to its exit.

    Parameters
    ----------
    argv : list of str
        The command and its arguments (no shell: quote nothing).
    simulated : SimulatedTwin, dict, float or None, optional
        The program's load on the simulated GPU: a
        :class:`~powermodels.harness.workloads.SimulatedTwin` (or its table,
        ``{"time_s": ..., "activity": ...}``) is the program's GPU work — it
        runs, and the GPU idles for the rest of the process's wall time; a
        dict ``{"activity": a, "mem_activity": m}`` or a number (the core
        activity, 0..1) keeps the GPU at that activity for the whole wall time.
    env : mapping, optional
        Environment of the process (default: this process's).
    cwd : path, optional
        Working folder of the process.
    timeout_s : float, optional
        Kill the program after this long (an error naming the timeout).
    name : str, optional
        The run table's ``kernel`` value (default: the program's file name).
    capture_output : bool, default=False
        Keep the program's stdout/stderr (in :attr:`last_output`) instead of
        letting it print through.
    """

    kind = "program"
    tune_params: dict  # {} per instance: a program has no tunable parameters

    def __init__(self, argv: Sequence[str], *, simulated=None, env: Mapping | None = None,
                 cwd: str | os.PathLike | None = None, timeout_s: float | None = None,
                 name: str | None = None, capture_output: bool = False):
        if isinstance(argv, str) or not isinstance(argv, Sequence) or not argv \
                or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"program: argv must be a non-empty list of strings, got {argv!r}")
        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and timeout_s > 0):
            raise ValueError(f"program: timeout_s must be a number > 0, got {timeout_s!r}")
        if cwd is not None and not os.path.isdir(cwd):
            raise FileNotFoundError(f"program: cwd {str(cwd)!r} is not a folder")
        self.argv = list(argv)
        self.env = None if env is None else {str(k): str(v) for k, v in env.items()}
        self.cwd = None if cwd is None else str(cwd)
        self.timeout_s = timeout_s
        self.capture_output = bool(capture_output)
        self.executable = _resolve(self.argv[0], self.cwd, self.env)
        self.name = name or os.path.basename(self.argv[0])
        self.activity, self.mem_activity, self.twin = _load(simulated)
        self.tune_params = {}
        self.last_output: tuple[str, str] | None = None

    @property
    def command(self) -> str:
        """The command line, shell-quoted (for tables and messages)."""
        return shlex.join(self.argv)

    def describe(self) -> str:
        return f"program {self.command!r}"

    def run_once(self, check: bool = True) -> subprocess.CompletedProcess:
        """Run the program to its exit; ProgramFailed on a non-zero code (when ``check``) or a timeout."""
        try:
            done = subprocess.run([self.executable, *self.argv[1:]], env=self.env, cwd=self.cwd,
                                  timeout=self.timeout_s, check=False, text=True,
                                  capture_output=self.capture_output)
        except subprocess.TimeoutExpired:
            raise ProgramFailed(f"program {self.command!r} did not exit within {self.timeout_s:g} s "
                                "(killed)", None) from None
        if self.capture_output:
            self.last_output = (done.stdout, done.stderr)
        if check and done.returncode != 0:
            tail = ""
            if self.capture_output and done.stderr.strip():
                tail = f": {done.stderr.strip().splitlines()[-1][:200]}"
            raise ProgramFailed(f"program {self.command!r} exited with code {done.returncode}{tail} "
                                "(check=False, or --no-check, records the code instead)", done.returncode)
        return done

    def prepare(self, config=None) -> Prepared:
        """An object whose ``launch()`` runs the program once (host-timed)."""
        self.validate_config(config or {})
        return _RunProgram(self)

    def simulated(self, config=None):
        """A twin of one run for the protocols: needs a SimulatedTwin with ``time_s``."""
        from .workloads import SimulatedTwin

        if isinstance(self.twin, SimulatedTwin):
            return self.twin.workload(self.name, {})
        return super().simulated(config)

    def check_twin(self) -> None:
        """ValueError unless the program has a twin to run on the simulated GPU."""
        if self.activity is None:
            raise ValueError(f"{self.describe()} has no simulated twin: pass simulated=<activity 0..1> "
                             "or a SimulatedTwin to run it on the simulated GPU "
                             "(CLI: --simulated-activity)")

    def apply_twin(self, gpu, wall_s: float) -> None:
        """Put one run's load on the simulated GPU, for a process that lived ``wall_s`` seconds.

        A :class:`~powermodels.harness.workloads.SimulatedTwin` with ``time_s``
        is the program's GPU work: it runs (at the clocks in force), and the
        rest of the wall time the GPU idles, as while a real program starts up
        or works on the host. A bare activity keeps the GPU at that activity
        for the whole wall time.
        """
        from ..devices.simulated import SimulatedWorkload
        from .workloads import SimulatedTwin

        self.check_twin()
        if isinstance(self.twin, SimulatedTwin):
            start = gpu.now()
            gpu.run(self.twin.workload(self.name, {}))
            rest = wall_s - (gpu.now() - start)
            if rest > 0:
                gpu.idle(rest)
            return
        gpu.run(SimulatedWorkload(name=self.name, t0_s=max(wall_s, 1e-6), activity=self.activity,
                                  mem_activity=self.mem_activity))


def _load(simulated) -> tuple[float | None, float, object]:
    """(core activity, memory activity, twin) of ``simulated``, or (None, 0, None) without one."""
    if simulated is None:
        return None, 0.0, None
    if isinstance(simulated, bool):
        raise ValueError(f"program: simulated must be an activity, a dict or a SimulatedTwin, got {simulated!r}")
    if isinstance(simulated, (int, float)):
        activity, mem = float(simulated), 0.1
    elif isinstance(simulated, Mapping) and set(simulated) <= {"activity", "mem_activity"}:
        activity, mem = float(simulated.get("activity", 0.9)), float(simulated.get("mem_activity", 0.1))
    else:
        from .workloads import SimulatedTwin

        if isinstance(simulated, Mapping):  # a campaign file's twin table (time_s, activity, ...)
            simulated = SimulatedTwin.from_dict(simulated)
        if not isinstance(simulated, SimulatedTwin):
            raise ValueError(f"program: simulated must be an activity, a dict or a SimulatedTwin, "
                             f"got {type(simulated).__name__}")
        w = simulated.workload("program", {})
        activity, mem = w.activity, w.mem_activity
    for what, v in (("activity", activity), ("mem_activity", mem)):
        if not (math.isfinite(v) and 0 <= v <= 1):
            raise ValueError(f"program: simulated {what} must be within 0..1, got {v!r}")
    return activity, mem, simulated


@dataclass
class ProgramMeasurement:
    """Runs of one program: the run table (one row per repeat) and the optional kernel breakdown."""

    table: pd.DataFrame
    kernels: pd.DataFrame | None = None

    def _median(self, column: str) -> float:
        ok = self.table[schema.EXIT_CODE] == 0
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


def _row(workload, device, repeat, run, idle, returncode, wall) -> dict:
    row = {
        schema.KERNEL: workload.name, schema.CONFIG: "", schema.COMMAND: workload.command,
        schema.DEVICE: device.info.name, schema.DEVICE_UUID: device.info.uuid,
        schema.HOST: socket.gethostname(), schema.PROTOCOL: "program", schema.REPEAT: repeat,
        schema.LAUNCHES: 1, schema.EXIT_CODE: int(returncode), schema.WALL_S: wall,
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
        A non-zero exit code raises :class:`ProgramFailed` naming it; with
        False the run is recorded with its ``exit_code``.
    ncu : bool or str, default=False
        After the energy runs, run the program once more under
        ``ncu --clock-control none`` for a per-kernel time breakdown
        (:mod:`powermodels.harness.program_kernels`; ncu slows and
        serialises the program, so that run is not measured). A string is
        the ncu executable to use (default: found on PATH or in the CUDA folders).
    progress : callable, optional
        Called with a one-line message after each run.

    Returns
    -------
    ProgramMeasurement
        ``table``: run-table rows (``time_s`` is the program's wall time,
        ``energy_j`` its whole energy, ``exit_code``, ``idle_power_w``,
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
            run = meter.end_window("program", idle_power_w=None if idle is None else idle.power_w)
            rows.append(_row(workload, dev, repeat, run, idle, done.returncode,
                             time.perf_counter() - wall0))
            if progress is not None:
                progress(f"run {repeat + 1}/{repeats}: {run.energy_j:.4g} J in {run.time_s:.3g} s "
                         f"({run.power_w:.1f} W), exit code {done.returncode}")
    finally:
        meter.close()
    table = pd.DataFrame(rows)
    schema.validate_run_table(table)
    kernels = None
    if ncu:
        from .program_kernels import kernel_breakdown

        kernels = kernel_breakdown(workload, ncu=ncu if isinstance(ncu, str) else None)
    return ProgramMeasurement(table, kernels)


def program_reference(workload, device="auto", *, duration_s: float = 12.0, skip_s: float = 2.0) -> dict:
    """The reference method for a program: runs back to back for ``duration_s``, counter from ``skip_s``.

    The program runs again and again (at least twice) until ``duration_s``
    have passed; the energy per run is the total-energy counter's difference
    between the first update ``skip_s`` after the first start and the last
    update before the last exit, divided by the runs inside that window (runs
    cut by its edges count the fraction of their time inside), exactly as
    :func:`powermodels.harness.reference.reference_energy` does for kernels.
    It reads the counter through the :class:`~powermodels.harness.sampler.Sampler`
    and :func:`~powermodels.harness.counter_protocol.aligned_window`, not
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

    from .counter_protocol import aligned_window
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
