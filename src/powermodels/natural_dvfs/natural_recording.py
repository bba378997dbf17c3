"""Record natural-DVFS calibration data as a raw recording, with the clock probed on the GPU.

The natural-DVFS path of ``powermodels calibrate`` keeps everything it measured, in the
raw recording format (:mod:`powermodels.recording`), so ``calibrate --from`` can redo the
fit without a GPU:

* ``natural``: for each workload, ``cycles`` × [pressure load for a growing time, then a
  burst of the workload] — the clocks the power-cap controller chooses while it recovers,
  with no setting changed;
* ``ladder`` (``ladder=Ladder(...)``, off by default): for each workload, steps in which one
  pressure launch and a stretch of the workload alternate every ``cycle_s`` for ``hold_s``
  (the pressure's share of each cycle stepped down the ladder), each step followed by
  ``tail_s`` of the workload alone. Under natural DVFS only a load at the power cap holds the
  clock still below the top (after a cap load the clock climbs back at ~5 GHz/s: 100–150 ms
  on the H100s and the H200 recorded), so an uncapped workload can run for a whole counter
  window at an intermediate clock only beside such a load. The alternation is far shorter
  than a counter window, both loads' launches are timed and probed, and
  :mod:`~powermodels.natural_dvfs.clock_windows` models such a *mixed* window's power as the two
  loads' shares (:mod:`~powermodels.natural_dvfs.ladder_windows`); each tail is the workload's own
  recovery through the intermediate clocks (the held-out test windows);
* ``thermal`` (``series_s > 0``): for each workload, ``cool_s`` idle, then ``series_s`` back
  to back from cool — a warm-up at the clock the workload holds, for α (thesis §4.2.1). With
  ``hot_s > 0`` (and a pressure load) each uncapped workload then runs a second series right
  after ``hot_s`` of the pressure load: the same kernel at the same clock from a heatsink the
  capped load has warmed. One warm-up is not enough on every board: on the H200s recorded
  (GPU-25027b10, GPU-1c74094b) the die reaches its level within 0.5 s and then moves only
  1–2 °C in 23 s, less than α needs at one clock.
  :func:`~powermodels.workflows.recording_calibration.calibrate_recording` pools a workload's
  thermal series at one clock, so α sees both temperatures. How much warmer the hot series
  runs is the board's: on the H200 GPU-641cf280, 25 s at the cap left it only 1–2 °C above
  the cool one (α still not identified there; ``docs/recordings.md``).

Every burst and series is cut into batches of about ``batch_s`` (one launch for kernels of
a millisecond); a clock probe (:mod:`powermodels.devices.clock_probe`) runs on the
workload's stream before the first batch and after each one, so each batch is bracketed.
The full-rate sampler trace, the energy-counter reads, the schedule and the provenance are
kept beside the launches.
"""

from __future__ import annotations

import datetime as _dt
import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .. import schema
from ..measuring.runner_base import probed_batches

__all__ = ["Ladder", "record_natural_dvfs"]


@dataclass(frozen=True)
class Ladder:
    """The ``ladder`` part's schedule (module docstring).

    Parameters
    ----------
    shares : tuple of float
        The pressure's share of each cycle's launch time, one step each (in ``(0, 1)``). High
        shares keep the mix's power near the cap, hence the clock near the pressure's own capped
        clock (1,409–1,455 MHz probed on the H100 GPU-620707cb, 5–95 %; the band starts at 1,500);
        the workload's share sets how well its own term is seen.
    hold_s : float
        Seconds each step alternates the two loads (several ~100 ms counter windows).
    tail_s : float
        Seconds of the workload alone after each step (its recovery through the band).
    cycle_s : float
        Length of one cycle: the pressure's batches (one launch at least), then the
        workload's. Below the controller's 10–20 ms clock period (H100, raw recording) it sees
        the mix rather than each load, and the clock has no time to climb in the workload's
        stretch. All turns of a step are queued in one runner call (``run_probed_alternating``):
        one call per stretch left the GPU idle ~4 ms at every switch on the H100 and H200
        recorded (2026-11-27), the loads covering only 47–61 % of each step.
    """

    shares: tuple = (0.8, 0.65, 0.5)
    hold_s: float = 1.5
    tail_s: float = 0.3
    cycle_s: float = 0.01

    def __post_init__(self):
        shares = tuple(float(x) for x in self.shares)
        if not shares or not all(0 < x < 1 for x in shares):
            raise ValueError(f"Ladder: shares must be a non-empty list of numbers in (0, 1), got {self.shares!r}")
        if not (self.hold_s > 0 and self.tail_s >= 0 and 0 < self.cycle_s <= 0.05):
            raise ValueError(f"Ladder: hold_s must be > 0, tail_s >= 0 and cycle_s in (0, 0.05] s, got "
                             f"{self.hold_s!r}, {self.tail_s!r}, {self.cycle_s!r}")
        object.__setattr__(self, "shares", shares)

    def seconds(self, workloads: int) -> float:
        """Load time of the ladder part for ``workloads`` workloads (probes and host gaps aside)."""
        return workloads * len(self.shares) * (self.hold_s + self.tail_s)

_LAUNCH_COLUMNS = (schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.BATCH, schema.START_S,
                   schema.END_S, schema.LAUNCHES, schema.TIME_S)
_TRACE_COLUMNS = (schema.T_S, schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.SM_CLOCK_MHZ,
                  schema.MEM_CLOCK_MHZ, schema.TEMPERATURE_C, schema.THROTTLE_REASONS)


def _run_probed(runner, loads, cycles: int, probe) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """The loads' probed batches in turn, ``cycles`` times, in one runner call where it can.

    ``loads``: ``(workload, config, batches, per_batch)`` each. Returns the ``(n, 3)`` array
    ``[start_s, end_s, mean time per launch]``, each batch's load (index into ``loads``) and the
    ``n + 1`` probes (``t_s`` between the batches they separate).
    """
    alternating = getattr(runner, "run_probed_alternating", None)
    if alternating is not None:  # the runner queues probes and both loads' launches without host syncs
        return alternating(loads, cycles, probe)
    return probed_batches(runner.run, loads, cycles, probe)


class _Recorder:
    """Accumulates the schedule, launches, probes and trace of one recording."""

    def __init__(self, runner, probe, batch_s: float):
        self.runner, self.probe, self.batch_s = runner, probe, batch_s
        self.phases, self.launches, self.probes, self.traces = [], [], [], []
        self.batch = 0
        self.finished = False
        self.fetched = runner.now()
        self.t0 = self.fetched

    def _entry(self, phase, workload, repeat, kind, t0, t1):
        self.phases.append({schema.RECORDING_PHASE: phase, schema.WORKLOAD: workload, schema.REPEAT: repeat,
                            schema.PHASE_KIND: kind, schema.T0_S: t0, schema.T1_S: t1})
        # fetch the trace as we go: the simulated GPU keeps a bounded history
        self.traces.append(self.runner.trace(self.fetched, t1, run_id="recording"))
        self.fetched = t1

    def fetch_rest(self):
        """Fetch the trace up to now (a stopped run: the readings after its last finished part)."""
        now = self.runner.now()
        try:
            trace = self.runner.trace(self.fetched, now, run_id="recording")
        except Exception:  # too short a stretch to sample, or the sampler is gone: the parts stand
            return
        self.traces.append(trace)
        self.fetched = now

    def idle(self, phase, seconds):
        t0, t1 = self.runner.idle(seconds)
        self._entry(phase, "-", -1, "idle", t0, t1)

    def pressure(self, phase, load, config, repeat, seconds, launch_s):
        iv = self.runner.run(load, config, max(1, math.ceil(seconds / launch_s)))
        self._entry(phase, load.name, repeat, "pressure", float(iv[0, 0]), float(iv[-1, 1]))

    def timed(self, phase, workload, config, label, repeat, kind, seconds, launch_s):
        per_batch = max(1, round(self.batch_s / launch_s))
        batches = max(1, math.ceil(seconds / (per_batch * launch_s)))
        t0, t1 = self._batches(workload, config, label, repeat, phase, batches, per_batch)
        self._entry(phase, label, repeat, kind, t0, t1)

    def _batches(self, workload, config, label, repeat, phase, batches, per_batch):
        """``batches`` probed batches appended to the launches; returns their ``(start, end)``."""
        return self._turns([(workload, config, label, batches, per_batch)], 1, repeat, phase)

    def _turns(self, loads, cycles, repeat, phase):
        """``cycles`` turns of the ``(workload, config, label, batches, per_batch)`` loads in one runner
        call, appended to the launches (each batch under its load's label); their ``(start, end)``."""
        rows, which, probes = _run_probed(self.runner, [(w, c, b, n) for w, c, _, b, n in loads], cycles, self.probe)
        n = len(rows)
        labels = np.array([label for _, _, label, _, _ in loads], dtype=object)
        per = np.array([p for *_, p in loads])
        self.launches.append(pd.DataFrame({
            schema.RECORDING_PHASE: phase, schema.WORKLOAD: labels[which], schema.REPEAT: repeat,
            schema.BATCH: np.arange(self.batch, self.batch + n), schema.START_S: rows[:, 0],
            schema.END_S: rows[:, 1], schema.LAUNCHES: per[which], schema.TIME_S: rows[:, 2]}))
        if len(probes):  # probe i sits before batch i (the last one after the last batch), under its load's name
            at = np.minimum(np.arange(len(probes)), n - 1)
            probes[schema.WORKLOAD] = labels[which[at]]
            probes[schema.BATCH] = self.batch + at
            self.probes.append(probes)
        self.batch += n
        return float(rows[0, 0]), float(rows[-1, 1])

    def ladder_step(self, item, pressure, repeat, share, ladder, t_w, t_p):
        """One ladder step: the two loads alternating for ``hold_s``, then the workload alone.

        Both loads' launches are timed and probed (the pressure under its own name), so every
        window's two shares and clock trajectory are known; the step is one ``ladder`` phase
        row under the workload's name (the tail a ``burst``). The turns are queued in one runner
        call (:meth:`_turns`): one call per turn left the GPU idle ~4 ms at every switch on the
        H100 and H200 recorded (module docstring of :mod:`powermodels.measuring.cupy_runner`'s
        ``run_probed_alternating``), the mix then drew 380–570 W, far from the cap, and the clock
        stayed at 1,900–1,980 MHz.
        """
        w, config, label = item
        p, p_config, p_label = pressure
        # both loads in probed batches of ~batch_s: a window's clock trajectory has no gap
        # longer than a batch (clock_windows' max_gap_s), whichever load runs
        per_p = max(1, round(self.batch_s / t_p))
        batches_p = max(1, round(share * ladder.cycle_s / (per_p * t_p)))
        per_batch = max(1, round(self.batch_s / t_w))
        stretch = batches_p * per_p * t_p * (1 - share) / share
        batches = max(1, round(stretch / (per_batch * t_w)))
        cycle = batches_p * per_p * t_p + batches * per_batch * t_w
        loads = [(p, p_config, p_label, batches_p, per_p), (w, config, label, batches, per_batch)]
        t0, t1 = self._turns(loads, max(1, math.ceil(ladder.hold_s / cycle)), repeat, "ladder")
        while t1 - t0 < ladder.hold_s:  # launches ran faster than timed before the step
            _, t1 = self._turns(loads, max(1, math.ceil((ladder.hold_s - (t1 - t0)) / cycle)), repeat, "ladder")
        self._entry("ladder", label, repeat, "ladder", t0, t1)
        if ladder.tail_s > 0:
            self.timed("ladder", w, config, label, repeat, "burst", ladder.tail_s, t_w)

    def save(self, folder, provenance: dict, *, stopped: str | None = None):
        """Write what is recorded so far to ``folder`` (its files replaced as one set: write_recording).

        ``stopped``: why the run ended early (kept in the provenance as ``complete: false``);
        None while it goes on or once it has finished.
        """
        from ..recording import write_recording

        done = [f"{p[schema.RECORDING_PHASE]} {p[schema.WORKLOAD]} {p[schema.PHASE_KIND]}" for p in self.phases]
        meta = {**provenance, "complete": stopped is None and self.finished, "parts_recorded": len(done)}
        if stopped is not None:
            meta["stopped"] = stopped
            meta["last_part"] = done[-1] if done else None
        return write_recording(self.recording(meta), folder)

    def recording(self, provenance: dict):
        from ..recording import Recording

        trace = pd.concat(self.traces, ignore_index=True)
        trace = trace.drop_duplicates(schema.T_S).sort_values(schema.T_S).reset_index(drop=True)
        energy = trace.loc[np.isfinite(trace[schema.ENERGY_COUNTER_J].to_numpy(float)),
                           [schema.T_S, schema.ENERGY_COUNTER_J]].reset_index(drop=True)
        cols = [c for c in _TRACE_COLUMNS if c in trace and np.isfinite(
            pd.to_numeric(trace[c], errors="coerce").to_numpy(float)).any()]
        trace = trace[cols].copy()
        if schema.THROTTLE_REASONS in trace:
            trace[schema.THROTTLE_REASONS] = trace[schema.THROTTLE_REASONS].astype(np.int64)
        probes = pd.concat(self.probes, ignore_index=True) if self.probes else None
        if probes is not None:
            probes = probes[[schema.T_S, schema.WORKLOAD, schema.BATCH, schema.PROBE_CLOCK_MHZ,
                             schema.PROBE_CYCLES, schema.PROBE_ELAPSED_NS]]
        launches = pd.concat(self.launches, ignore_index=True) if self.launches else pd.DataFrame(
            {c: pd.Series(dtype=float) for c in _LAUNCH_COLUMNS})
        return Recording(trace=trace, energy=energy, launches=launches,
                         phases=pd.DataFrame(self.phases), provenance=provenance, probes=probes)


def record_natural_dvfs(runner, items, pressure=None, *, cycles: int = 8, pressure_s: float = 1.0,
                        burst_s: float = 0.5, series_s: float = 10.0, cool_s: float = 10.0, hot_s: float = 0.0,
                        lead_idle_s: float = 1.0, batch_s: float = 1e-3, probe=True, ladder: Ladder | None = None,
                        progress: Callable[[str], None] | None = None, command: str = "", save_to=None):
    """Run the natural-DVFS protocol (see the module) and return it as a raw recording.

    Parameters
    ----------
    runner : Runner
        Where to run (its device is only read: no setting changes).
    items : list of (Workload, dict) or (Workload, dict, str)
        Workloads with their configurations (and the name the recording gives them:
        default the workload's name).
    pressure : (Workload, dict) or None
        The load run before each burst (None: bursts only).
    cycles, pressure_s, burst_s : int, float, float
        Cycle ``c`` runs the pressure for ``pressure_s · c / (cycles − 1)`` then a burst.
    series_s, cool_s : float
        Thermal part: per workload, ``cool_s`` idle then ``series_s`` back to back (0: none).
    hot_s : float, default=0
        Thermal part: then ``hot_s`` of the pressure load and the series again, for every
        workload but the pressure load itself (0: no hot series; needs ``pressure``).
    lead_idle_s : float
        Idle before the first burst (the trace's baseline).
    batch_s : float
        Launches are timed and probed in batches of about this length (at least one launch).
    probe : bool or ClockProbe
        True: the device's probe (:meth:`~powermodels.devices.base.Device.clock_probe`);
        False or a device without one: no probes (clocks then come from NVML's reading).
    ladder : Ladder, optional
        Add the ``ladder`` part (module docstring; needs ``pressure``). None: none.
    progress : callable, optional
        Called with one line per workload and part.
    command : str
        What made the recording (kept in the provenance).
    save_to : str or os.PathLike, optional
        Write the recording to this folder as it grows (after each workload's part) and, if
        the run stops early (an error, Ctrl-C, SIGTERM inside
        :func:`powermodels.termination.terminate_raises`), what it holds then, with
        ``complete: false`` and ``stopped`` in the provenance: ``calibrate --from`` reads it.
        A part that was running when the run stopped is lost (its launches are timed at its end).

    Returns
    -------
    Recording
    """
    if not (isinstance(cycles, (int, np.integer)) and cycles >= 2):
        raise ValueError(f"calibrate: cycles must be an int >= 2, got {cycles!r}")
    if not (pressure_s >= 0 and burst_s > 0 and series_s >= 0 and cool_s >= 0 and hot_s >= 0 and batch_s > 0):
        raise ValueError(f"calibrate: pressure_s, series_s, cool_s, hot_s must be >= 0 and burst_s, batch_s > 0, "
                         f"got {pressure_s}, {series_s}, {cool_s}, {hot_s}, {burst_s}, {batch_s}")
    if hot_s > 0 and (pressure is None or series_s <= 0):
        raise ValueError("calibrate: the hot series (hot_s > 0) follows the pressure load and repeats the thermal "
                         "series; give a pressure load and series_s > 0")
    if ladder is not None and not isinstance(ladder, Ladder):
        raise ValueError(f"calibrate: ladder must be a Ladder or None, got {type(ladder).__name__}")
    if ladder is not None and pressure is None:
        raise ValueError("calibrate: the ladder alternates the workload with the pressure load; give a pressure load")
    device = runner.device
    probe = device.clock_probe() if probe is True else (probe or None)
    if probe is None:
        probe = _NoProbe()
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    items = [(*item, item[0].name) if len(item) == 2 else tuple(item) for item in items]
    info = device.info
    limits = device.power_limits_w()
    clocks = [float(f) for fs in device.supported_clocks().values() for f in fs]
    provenance = {
        "gpu": info.name, "uuid": info.uuid, "driver": info.driver, "device_kind": info.kind,
        "power_limit_w": float(limits[2]) if np.isfinite(limits[2]) else None,
        "max_sm_clock_mhz": max(clocks) if clocks else None, "date": started, "settings_changed": False,
        "made_by": "powermodels calibrate (natural DVFS)", "command": command,
        "protocols": ["natural"] + (["ladder"] if ladder is not None else []) + (["thermal"] if series_s > 0 else []),
        "workloads": {label: {"workload": w.name, "config": w.config_id(config)} for w, config, label in items},
        "pressure": pressure[0].name if pressure is not None else None,
        "schedule": {"cycles": cycles, "pressure_s": pressure_s, "burst_s": burst_s, "series_s": series_s,
                     "cool_s": cool_s, "hot_s": hot_s, "batch_s": batch_s,
                     **({"ladder": asdict(ladder)} if ladder is not None else {})},
        "clock_probe": not isinstance(probe, _NoProbe),
    }
    rec = _Recorder(runner, probe, batch_s)

    def part_done(line: str) -> None:
        # between parts: the GPU is about to idle or start a new workload, so a write here
        # costs no measurement; a killed run then keeps every finished part
        if save_to is not None:
            rec.save(save_to, provenance)
        if progress:
            progress(line)

    try:
        _protocol(rec, runner, items, pressure, cycles=cycles, pressure_s=pressure_s, burst_s=burst_s,
                  series_s=series_s, cool_s=cool_s, hot_s=hot_s, lead_idle_s=lead_idle_s, ladder=ladder,
                  part_done=part_done)
    except BaseException as err:  # SIGTERM (terminate_raises), Ctrl-C, a failed launch: keep what ran
        if save_to is not None:
            try:
                rec.fetch_rest()
                rec.save(save_to, provenance, stopped=str(err) or type(err).__name__)
            except Exception as flush_err:  # never mask the error that stopped the run
                # warned as well as noted: add_note exists from Python 3.11 (the package supports 3.10,
                # where calling it would raise AttributeError here and replace the error that stopped the run)
                message = f"the partial recording could not be written to {save_to}: {flush_err}"
                warnings.warn(message, RuntimeWarning, stacklevel=2)
                if hasattr(err, "add_note"):
                    err.add_note(message)
        raise
    rec.finished = True
    if save_to is not None:
        rec.save(save_to, provenance)
    return rec.recording({**provenance, "complete": True})


def _protocol(rec, runner, items, pressure, *, cycles, pressure_s, burst_s, series_s, cool_s, hot_s, lead_idle_s,
              ladder, part_done) -> None:
    """The schedule of the module docstring; ``part_done(line)`` after each workload's part."""
    rec.idle("natural", lead_idle_s)
    p_time = runner.launch_time_s(*pressure) if pressure is not None else math.nan

    def is_pressure(item) -> bool:  # the pressure load beside itself (ladder) or after itself (hot series)
        return pressure is not None and (item[2] == pressure[0].name or item[0] is pressure[0])

    for k, (w, config, label) in enumerate(items):
        t1 = runner.launch_time_s(w, config)
        for c in range(cycles):
            seconds = pressure_s * c / (cycles - 1)
            if pressure is not None and seconds > 0:
                rec.pressure("natural", pressure[0], pressure[1], c, seconds, p_time)
            rec.timed("natural", w, config, label, c, "burst", burst_s, t1)
        part_done(f"natural DVFS {k + 1}/{len(items)}: {w.name} ({cycles} cycles)")
    if ladder is not None:
        p_item = (*pressure, pressure[0].name)
        for k, item in enumerate(items):
            if is_pressure(item):
                continue  # the pressure load beside itself is the pressure load
            t_w, t_p = runner.launch_time_s(item[0], item[1]), runner.launch_time_s(*pressure)
            for j, share in enumerate(ladder.shares):
                rec.ladder_step(item, p_item, j, share, ladder, t_w, t_p)
            part_done(f"ladder {k + 1}/{len(items)}: {item[0].name} ({len(ladder.shares)} steps beside "
                      f"{pressure[0].name})")
    if series_s > 0:
        for k, (w, config, label) in enumerate(items):
            t1 = runner.launch_time_s(w, config)
            rec.idle("thermal", cool_s)
            rec.timed("thermal", w, config, label, 0, "series", series_s, t1)
            part_done(f"thermal series {k + 1}/{len(items)}: {w.name} ({series_s:g} s after {cool_s:g} s idle)")
            if hot_s > 0 and not is_pressure((w, config, label)):
                # no idle between: the series starts on the heatsink the capped load left
                rec.pressure("thermal", pressure[0], pressure[1], 1, hot_s, p_time)
                rec.timed("thermal", w, config, label, 1, "series", series_s, t1)
                part_done(f"hot series {k + 1}/{len(items)}: {w.name} ({series_s:g} s after {hot_s:g} s of "
                          f"{pressure[0].name})")


class _NoProbe:
    """Stands in where no probe can run: records nothing."""

    def enqueue(self, stream=None) -> int:
        return -1

    def collect(self) -> pd.DataFrame:
        return pd.DataFrame(columns=[schema.PROBE_CYCLES, schema.PROBE_ELAPSED_NS, schema.PROBE_CLOCK_MHZ])
