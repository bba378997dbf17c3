"""External programs as workloads: :class:`ProgramWorkload` runs a command to its exit.

What a program's energy, time and power are, and how they are measured, is
:func:`powermodels.measuring.program.measure_program`. On the simulated GPU the
process still really runs; its twin's load is put on the simulated GPU over
the program's wall time (:meth:`ProgramWorkload.apply_twin`).

Every run is bounded: a program that has not exited after ``timeout_s``
(default :data:`DEFAULT_TIMEOUT_S`, one hour; ``None`` for no bound) is
stopped with its whole process group — SIGTERM, then SIGKILL after
:data:`KILL_GRACE_S` — so children it started (a launcher script's real
program, a data loader's workers) cannot outlive it and keep the GPU busy. It
runs in a session of its own for that; it has no controlling terminal.
"""

from __future__ import annotations

import contextlib
import locale
import math
import os
import shlex
import shutil
import signal
import subprocess
import threading
import warnings
from collections.abc import Mapping, Sequence

from .base import Prepared, Workload
from .twins import SimulatedTwin

__all__ = ["DEFAULT_TIMEOUT_S", "KILL_GRACE_S", "ProgramExit", "ProgramFailed", "ProgramWorkload"]

#: A run's bound when none is given (s): a program that never exits is stopped, not waited for forever.
DEFAULT_TIMEOUT_S = 3600.0
#: After SIGTERM, how long the program has to exit before its process group gets SIGKILL (s).
KILL_GRACE_S = 2.0


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


class ProgramExit(subprocess.CompletedProcess):
    """One finished run: a :class:`subprocess.CompletedProcess` that says whether it was stopped at its bound."""

    def __init__(self, args, returncode, stdout=None, stderr=None, *, timed_out: bool = False):
        super().__init__(args, returncode, stdout, stderr)
        self.timed_out = bool(timed_out)


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the program's process group, SIGKILL after :data:`KILL_GRACE_S`; the group is gone after."""
    if not hasattr(os, "killpg"):  # no process groups (Windows): the process alone
        proc.kill()
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)  # its own session: the group id is its pid
        except (ProcessLookupError, PermissionError):  # the whole group has exited already
            return
        if sig == signal.SIGTERM:  # a chance to exit cleanly; then SIGKILL for whatever is left (children)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(KILL_GRACE_S)


class _OutputReaders:
    """Read a program's stdout and stderr pipes on threads, so that waiting for the program never waits for them.

    ``communicate()`` reads until every writer has closed the pipe. A process
    the program started in a session of its own (``setsid``, a daemon) is
    outside its process group: it survives :func:`_stop_group`, and while it
    holds the pipe ``communicate()`` never returns. Here the program is waited
    for on its own, and its output is read until end of file or, once the
    program has exited, for at most :data:`KILL_GRACE_S` more.
    """

    def __init__(self, proc: subprocess.Popen):
        self._chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}
        self._threads = [threading.Thread(target=self._drain, args=(getattr(proc, name), self._chunks[name]),
                                          name=f"powermodels-program-{name}", daemon=True)
                         for name in ("stdout", "stderr")]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _drain(pipe, chunks: list[bytes]) -> None:
        # raw reads: whatever arrived is kept even if the reading is given up before end of file
        with pipe:
            while data := os.read(pipe.fileno(), 65536):
                chunks.append(data)

    def collect(self, command: str) -> tuple[str, str]:
        """The output read so far, as text (universal newlines, like ``text=True``); a warning if a pipe stays open."""
        for thread in self._threads:
            thread.join(KILL_GRACE_S)
        if any(thread.is_alive() for thread in self._threads):
            warnings.warn(f"program {command!r} exited, but a process it started outside its process group "
                          f"still holds its output open; the output read within {KILL_GRACE_S:g} s after the "
                          "exit is kept and the rest is not waited for", RuntimeWarning, stacklevel=3)
        encoding = locale.getpreferredencoding(False)
        return tuple(b"".join(list(self._chunks[name])).decode(encoding, errors="replace")
                     .replace("\r\n", "\n").replace("\r", "\n") for name in ("stdout", "stderr"))


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
        :class:`~powermodels.workloads.SimulatedTwin` (or its table,
        ``{"time_s": ..., "activity": ...}``) is the program's GPU work — it
        runs, and the GPU idles for the rest of the process's wall time; a
        dict ``{"activity": a, "mem_activity": m}`` or a number (the core
        activity, 0..1) keeps the GPU at that activity for the whole wall time.
    env : mapping, optional
        Environment of the process (default: this process's).
    cwd : path, optional
        Working folder of the process.
    timeout_s : float or None, default=DEFAULT_TIMEOUT_S
        Stop a run (with its process group) after this long, in seconds:
        an error naming the bound, or with ``check=False`` a run recorded
        as timed out. ``None``: no bound (a program that never exits hangs).
    name : str, optional
        The run table's ``kernel`` value (default: the program's file name).
    capture_output : bool, default=False
        Keep the program's stdout/stderr (in :attr:`last_output`) instead of
        letting it print through.
    """

    kind = "program"
    tune_params: dict  # {} per instance: a program has no tunable parameters

    def __init__(self, argv: Sequence[str], *, simulated=None, env: Mapping | None = None,
                 cwd: str | os.PathLike | None = None, timeout_s: float | None = DEFAULT_TIMEOUT_S,
                 name: str | None = None, capture_output: bool = False):
        if isinstance(argv, str) or not isinstance(argv, Sequence) or not argv \
                or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"program: argv must be a non-empty list of strings, got {argv!r}")
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or not 0 < timeout_s < math.inf):
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

    def run_once(self, check: bool = True) -> ProgramExit:
        """Run the program to its exit or its bound; ProgramFailed, when ``check``, on a non-zero code or the bound.

        A run stopped at ``timeout_s`` (its process group stopped, see the
        module) comes back with ``check=False`` as a :class:`ProgramExit`
        with ``timed_out`` set and the signal's negative return code. An
        interrupt (Ctrl-C) while it runs stops the group too, then propagates.
        """
        pipe = subprocess.PIPE if self.capture_output else None
        # a session of its own: its process group is killable as one, children included
        own_group = {"start_new_session": True} if hasattr(os, "killpg") else {}
        timed_out = False
        stdout = stderr = None
        proc = subprocess.Popen([self.executable, *self.argv[1:]], env=self.env, cwd=self.cwd,
                                stdout=pipe, stderr=pipe, **own_group)
        readers = _OutputReaders(proc) if self.capture_output else None
        try:
            proc.wait(timeout=self.timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            _stop_group(proc)
            proc.wait()
        except BaseException:  # Ctrl-C or any error here: never leave the program running
            _stop_group(proc)
            raise
        if readers is not None:
            stdout, stderr = readers.collect(self.command)
        done = ProgramExit(proc.args, proc.returncode, stdout, stderr, timed_out=timed_out)
        if self.capture_output:  # before any error: what a stopped or failed run printed says why
            self.last_output = (done.stdout, done.stderr)
        if timed_out and check:
            default = " (the default bound)" if self.timeout_s == DEFAULT_TIMEOUT_S else ""
            raise ProgramFailed(f"program {self.command!r} did not exit within {self.timeout_s:g} s{default}: "
                                "stopped with its process group (timeout_s / --timeout-s sets the bound, "
                                "'none' for no bound)", None)
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

        A :class:`~powermodels.workloads.SimulatedTwin` with ``time_s``
        is the program's GPU work: it runs (at the clocks in force), and the
        rest of the wall time the GPU idles, as while a real program starts up
        or works on the host. A bare activity keeps the GPU at that activity
        for the whole wall time.
        """
        from ..devices.simulated import SimulatedWorkload

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
