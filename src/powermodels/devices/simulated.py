"""SimulatedGPU: a physical ground truth plus an emulated NVML sensor.

The simulated GPU lets the harness, every protocol and every model run end to
end without a GPU, and gives tests a ground truth the real sensor never
offers. It has three layers:

1. **Workloads** (:class:`SimulatedWorkload`): how long a launch takes at
   given clocks (DSO eq. 2 or the rational fit of thesis eq. 4.5) and how
   busy it keeps the SMs and the memory.
2. **Physics** (:class:`~powermodels.devices.physics.GPUPhysics`): power from
   clocks, V(f), activity and temperature; a thermal RC; a power-cap clock
   controller. The true power lives on a 0.2 ms grid; a launch shorter than a
   grid step occupies it fractionally, so 10 µs kernels are exact in energy.
   Clocks, temperature and the power cap are updated every 1 ms.
3. **Sensor** (:mod:`~powermodels.devices.sensor_emulation`): update period,
   boxcar windows, gain/offset, mW quantisation and the exact energy counter
   of Yang Fig. 14, plus an optional 5 kHz external meter.

Time is simulated: :meth:`SimulatedGPU.now` is the simulated clock, and the
calls that advance it (:meth:`~SimulatedGPU.idle`, :meth:`~SimulatedGPU.run`,
:meth:`~SimulatedGPU.square_wave`, :meth:`~SimulatedGPU.step`) return the
simulated times of what they did. After each such call the host "wakes up"
at the next 0.2 ms grid tick (the GPU idles for the remainder), so every grid
step before :meth:`now` is final and readings never change after the fact.
Everything is deterministic under ``seed``. The state older than ``history_s``
(default 120 s of simulated time) is dropped, so a campaign of any length
holds ~50 MB; asking about dropped times raises ``ValueError``.

The time-marching core lives in :mod:`~powermodels.devices.simulated_engine`,
the workloads in :mod:`~powermodels.devices.simulated_workload` (both
re-exported here), and the sensor traces and ground truth read out of the
simulation in :mod:`~powermodels.devices.simulated_readout`.

Examples
--------
>>> from powermodels.devices.simulated import SimulatedGPU
>>> gpu = SimulatedGPU(preset="hopper", seed=0)
>>> _ = gpu.idle(1.0)
>>> on = gpu.square_wave(0.05, 0.05, periods=20)
>>> trace = gpu.trace(on[0, 0], gpu.now(), sample_period_s=1e-3, run_id="sq")
>>> round(gpu.true_energy_j(on[0, 0], gpu.now()) / (gpu.now() - on[0, 0]))  # mean true power, W
342
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import asdict, replace

import numpy as np

from ._checks import finite
from .base import Device, DeviceInfo, Reading, Settings
from .clock_probe import SimulatedClockProbe
from .physics import GPUPhysics
from .sensor_emulation import PRESETS, SensorPreset
from .simulated_engine import THROTTLE_SW_POWER_CAP, SimulationEngine
from .simulated_readout import SimulatedReadout
from .simulated_workload import EXAMPLE_WORKLOADS, SimulatedWorkload

__all__ = [
    "EXAMPLE_WORKLOADS",
    "PRESETS",
    "THROTTLE_SW_POWER_CAP",
    "GPUPhysics",
    "SensorPreset",
    "SimulatedGPU",
    "SimulatedWorkload",
]


class SimulatedGPU(SimulationEngine, SimulatedReadout, Device):
    """A simulated Hopper-class GPU with an emulated NVML power sensor.

    Parameters
    ----------
    preset : str or SensorPreset, default="hopper"
        Sensor behaviour: one of :data:`PRESETS` ("volta", "turing", "ga100",
        "hopper", "ada") or a :class:`SensorPreset`.
    seed : int, default=0
        Seeds the sensor's update phase, its read-out noise, the energy
        counter's start value and the reference meter's noise.
    reference_meter : bool, default=False
        Add a 5 kHz external meter (``reference_power_w`` in traces): the
        mean true power over each 0.2 ms sample plus 0.5 W noise.
    physics : GPUPhysics, optional
        Physical parameters; default H100-SXM-like.
    ambient_c : float, default=30
        Ambient (inlet) temperature. The GPU starts at its idle steady state.
    history_s : float or None, default=120
        Simulated seconds of history kept behind :meth:`now` before each call
        that advances time (that call's own span is always kept, however
        long); asking about older times raises ``ValueError``. Bounds memory
        in long campaigns (~230 kB per kept second). ``None`` keeps everything.
    energy_timing : (float, float), optional
        The energy counter's update period and phase (s): updates at
        ``phase + n·period``. Default: the preset's period, at a phase drawn
        from ``seed`` (a replay of a recording can pass the recording's own,
        :func:`powermodels.counter_timing.counter_timing_before`).
    """

    def __init__(self, preset="hopper", seed=0, reference_meter=False, physics=None,
                 ambient_c=30.0, history_s=120.0, energy_timing=None):
        if isinstance(preset, str):
            if preset not in PRESETS:
                raise ValueError(f"SimulatedGPU: preset must be one of {sorted(PRESETS)} or a "
                                 f"SensorPreset, got {preset!r}")
            preset = PRESETS[preset]
        elif not isinstance(preset, SensorPreset):
            raise ValueError(f"SimulatedGPU: preset must be a name or a SensorPreset, got {preset!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"SimulatedGPU: seed must be a non-negative int, got {seed!r}")
        if not isinstance(reference_meter, (bool, np.bool_)):
            raise ValueError(f"SimulatedGPU: reference_meter must be a bool, got {reference_meter!r}")
        if physics is None:
            physics = GPUPhysics()
        elif not isinstance(physics, GPUPhysics):
            raise ValueError(f"SimulatedGPU: physics must be a GPUPhysics, got {physics!r}")
        self.ambient_c = finite("SimulatedGPU: ambient_c", ambient_c, minimum=-40.0, maximum=80.0)
        # the sensor looks back up to its longest window plus an update period: keep far more
        self.history_s = None if history_s is None else finite(
            "SimulatedGPU: history_s", history_s, minimum=10.0)
        self._preset = preset
        self.seed = int(seed)
        self.reference_meter = bool(reference_meter)
        self.physics = physics
        self._lock = threading.RLock()

        rng = np.random.default_rng([self.seed, 0])
        # the firmware's update phase is fixed at boot and unknown to the user (Yang §IV-C)
        self._phase = float(rng.uniform(0.0, preset.update_period_s))
        self._energy_phase = float(math.fmod(self._phase, preset.energy_period_s))
        if energy_timing is not None:
            period, phase = (finite(f"SimulatedGPU: energy_timing {name}", value, minimum=0.0)
                             for name, value in zip(("period", "phase"), energy_timing, strict=True))
            if not period > 2.0 * preset.energy_jitter_s:
                raise ValueError(f"SimulatedGPU: energy_timing period must exceed twice the counter's jitter "
                                 f"({preset.energy_jitter_s:g} s), got {period!r}")
            preset = replace(preset, energy_period_s=period)
            self._preset = preset
            self._energy_phase = float(math.fmod(phase, period))
        # the counter counts from driver load, so it never starts at 0
        self._counter_start_j = float(np.round(rng.uniform(1e5, 1e7), 3))
        self._noise_blocks: dict[tuple[int, int], np.ndarray] = {}

        self._sm_lock: float | None = None
        self._mem_lock: float | None = None
        self._power_limit: float | None = None

        self._init_simulation()

    # ------------------------------------------------------------------
    # Device protocol
    # ------------------------------------------------------------------

    @property
    def info(self) -> DeviceInfo:
        return DeviceInfo(
            name=f"Simulated Hopper-class GPU (sensor preset '{self._preset.name}')",
            kind="simulated",
            index=0,
            uuid=f"SIM-{self._preset.name}-{self.seed}",
            driver="simulated",
            extra={"preset": asdict(self._preset), "seed": self.seed,
                   "physics": asdict(self.physics), "ambient_c": self.ambient_c,
                   "reference_meter": self.reference_meter},
        )

    @property
    def sensor(self) -> SensorPreset:
        """The :class:`SensorPreset` in use."""
        return self._preset

    def now(self) -> float:
        """The simulated clock (s)."""
        return self._tick * self._df

    def read(self) -> Reading:
        """Sensor reading at :meth:`now`."""
        with self._lock:
            t = np.array([self.now()])
            inst, avg, usage = self._sensor_at(t)
            k = self._reading_step(t)
            return Reading(
                t_s=float(t[0]),
                power_instant_w=float(inst[0]),
                power_average_w=float(avg[0]),
                power_usage_w=float(usage[0]),
                temperature_c=float(np.round(self._temp.data[k[0]])),
                sm_clock_mhz=float(self._clocks[self._fi.data[k[0]]]),
                mem_clock_mhz=float(self._fm.data[k[0]]),
                throttle_reasons=int(self._thr.data[k[0]]),
            )

    def read_energy_j(self) -> float:
        """Total-energy counter (J) at :meth:`now`: exact integral, whole mJ, last update."""
        with self._lock:
            return float(self._counter_at(np.array([self.now()]))[0])

    def supported_clocks(self) -> dict[float, list[float]]:
        clocks = [float(c) for c in self._clocks[::-1]]
        return {float(m): list(clocks) for m in self.physics.mem_clocks_mhz}

    def power_limits_w(self) -> tuple[float, float, float]:
        ph = self.physics
        return (ph.power_limit_min_w, ph.power_limit_max_w, self._limit_w())

    #: Pids of other programs "on" the simulated GPU, to exercise the other-process checks.
    other_processes: tuple = ()

    def compute_processes(self) -> list[int]:
        """This process plus :attr:`other_processes` (like NVML's compute-process list)."""
        return [os.getpid(), *self.other_processes]

    def clock_probe(self) -> SimulatedClockProbe:
        """A clock probe that reads the simulated SM clock (the clock launches progress at)."""
        return SimulatedClockProbe(self._clock_now)

    def _clock_now(self) -> tuple[float, float]:
        with self._lock:
            t = self.now()
            return t, float(self._clocks[self._fi.data[self._step_at(np.array([t]))[0]]])

    def current_settings(self) -> Settings:
        return Settings(self._sm_lock, self._mem_lock, self._power_limit)

    def _apply_sm_clock(self, mhz: float | None) -> None:
        ph = self.physics
        if mhz is not None:
            mhz = finite("sm_clock_mhz", mhz)
            if not ph.sm_clock_min_mhz - 1e-6 <= mhz <= ph.sm_clock_max_mhz + 1e-6:
                raise ValueError(f"sm_clock_mhz must lie within [{ph.sm_clock_min_mhz:g}, "
                                 f"{ph.sm_clock_max_mhz:g}] MHz, got {mhz!r}")
            mhz = float(self._clocks[self._clock_index(mhz)])
        with self._lock:
            self._align_to_step()
            self._sm_lock = mhz
            self._retarget_open_step()

    def _apply_mem_clock(self, mhz: float | None) -> None:
        if mhz is not None:
            mhz = finite("mem_clock_mhz", mhz)
            match = [m for m in self.physics.mem_clocks_mhz if abs(m - mhz) < 1.0]
            if not match:
                raise ValueError(f"mem_clock_mhz must be one of {list(self.physics.mem_clocks_mhz)}, "
                                 f"got {mhz!r}")
            mhz = float(match[0])
        with self._lock:
            self._align_to_step()
            self._mem_lock = mhz
            self._retarget_open_step()

    def _apply_power_limit(self, watts: float | None) -> None:
        ph = self.physics
        if watts is not None:
            watts = finite("power_limit_w", watts, minimum=ph.power_limit_min_w,
                            maximum=ph.power_limit_max_w)
        with self._lock:
            self._align_to_step()
            self._power_limit = watts

    def start_at_temperature(self, temperature_c) -> None:
        """Start the die at ``temperature_c`` instead of its idle steady state (before any time passed).

        A real recording starts from whatever its board did before; the
        excess over the idle steady state is put on the slowest thermal pole
        (the heatsink keeps it longest) and decays from there.
        """
        temperature_c = finite("start_at_temperature: temperature_c", temperature_c, minimum=-40.0,
                               maximum=150.0)
        with self._lock:
            if self._tick:
                raise ValueError("start_at_temperature: the simulated GPU already ran "
                                 f"({self.now():g} s); call it right after construction")
            self._poles[int(np.argmax([tau for _, tau in self.physics.poles]))] += \
                temperature_c - float(self._temp.data[0])
            self._set_step(0, int(self._fi.data[0]), float(self._fm.data[0]), temperature_c, 0)
            self._pre_power = float(self._base.data[0])

    # ------------------------------------------------------------------
    # Advancing simulated time
    # ------------------------------------------------------------------

    def idle(self, seconds):
        """Idle for ``seconds`` (rounded up to the 0.2 ms grid); returns ``(start_s, end_s)``."""
        seconds = finite("idle: seconds", seconds, minimum=0.0)
        with self._lock:
            self._forget_old()
            start = self.now()
            self._idle_to(self._tick + math.ceil(seconds / self._df - 1e-9))
            return start, self.now()

    def run(self, workload, launches=1, gap_s=0.0) -> np.ndarray:
        """Run ``launches`` launches of ``workload`` back to back, ``gap_s`` apart.

        Each launch takes ``workload.time_s`` at the clocks in force while it
        runs (a launch that spans a power-cap clock change progresses at the
        changing rate). Returns an array of shape ``(launches, 2)`` holding
        each launch's ``[start_s, end_s]`` on the simulated clock.
        """
        if not isinstance(workload, SimulatedWorkload):
            raise ValueError(f"run: workload must be a SimulatedWorkload, got {type(workload).__name__}")
        launches = self._count("run: launches", launches)
        gap_s = finite("run: gap_s", gap_s, minimum=0.0)
        with self._lock:
            self._forget_old()
            return self._execute(workload, launches, gap_s)

    def square_wave(self, on_s, off_s, periods, amplitude=1.0) -> np.ndarray:
        """A square-wave load: ``periods`` × (``on_s`` busy at ``amplitude``, ``off_s`` idle).

        The on-phase is timed (like Yang's benchmark load), so its length does
        not depend on the clock. Returns ``(periods, 2)`` of ``[on_start_s, on_end_s]``.
        """
        on_s = finite("square_wave: on_s", on_s, minimum=0.0, strict=True)
        off_s = finite("square_wave: off_s", off_s, minimum=0.0)
        periods = self._count("square_wave: periods", periods)
        amplitude = finite("square_wave: amplitude", amplitude, minimum=0.0, maximum=1.0)
        load = SimulatedWorkload("square_wave", t0_s=on_s, activity=amplitude)
        with self._lock:
            self._forget_old()
            on = self._execute(load, periods, off_s)
            # the wave ends with its last off-phase
            self._idle_to(math.ceil((on[-1, 1] + off_s) / self._df - 1e-9))
            return on

    def step(self, duration_s, amplitude=1.0):
        """A single timed load of ``duration_s`` at ``amplitude``; returns ``(start_s, end_s)``."""
        duration_s = finite("step: duration_s", duration_s, minimum=0.0, strict=True)
        amplitude = finite("step: amplitude", amplitude, minimum=0.0, maximum=1.0)
        load = SimulatedWorkload("step", t0_s=duration_s, activity=amplitude)
        with self._lock:
            self._forget_old()
            on = self._execute(load, 1, 0.0)
            return float(on[0, 0]), float(on[0, 1])

    # ------------------------------------------------------------------
    # Internals: the simulation
    # ------------------------------------------------------------------

    @staticmethod
    def _count(name: str, value) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        return int(value)
