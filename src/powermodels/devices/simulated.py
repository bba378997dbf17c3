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
Everything is deterministic under ``seed``.

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
import threading
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .. import schema
from ._checks import finite
from .base import Device, DeviceInfo, Reading, Settings
from .physics import GPUPhysics, clock_table
from .sensor_emulation import (
    PRESETS,
    SensorPreset,
    boxcar_reading,
    energy_counter_reading,
    update_index,
)

__all__ = [
    "EXAMPLE_WORKLOADS",
    "PRESETS",
    "THROTTLE_SW_POWER_CAP",
    "GPUPhysics",
    "SensorPreset",
    "SimulatedGPU",
    "SimulatedWorkload",
]

#: NVML clock-event reason bit for software power capping (nvmlClocksEventReasonSwPowerCap).
THROTTLE_SW_POWER_CAP = 0x4


@dataclass(frozen=True)
class SimulatedWorkload:
    """What one kernel launch does to the simulated GPU.

    Parameters
    ----------
    name : str
        Workload name.
    core_work : float, default=0
        β of DSO eq. 2 in MHz·s: the core-bound time is ``core_work / f_core``.
    mem_work : float, default=0
        α of DSO eq. 2 in MHz·s: the memory-bound time is ``mem_work / f_mem``.
    t0_s : float, default=0
        Fixed time per launch (t⁰ of DSO eq. 2), independent of the clocks.
    activity : float, default=1
        Core activity 0..1 while the launch runs (scales c·f·V²).
    mem_activity : float, default=0
        Memory activity 0..1 while the launch runs (scales γ·f_mem).
    time_model : {"dso", "rational"}, default="dso"
        ``"dso"``: ``T = t0 + max(α/f_mem, β/f_core)`` (DSO eq. 2).
        ``"rational"``: ``T = a/(1 + b·f) + c/(1 + d·f)`` with ``f`` the SM
        clock in MHz and ``rational = (a, b, c, d)`` (thesis eq. 4.5).
    rational : tuple of 4 floats, optional
        Coefficients of the rational law; required for ``time_model="rational"``.
    """

    name: str = "workload"
    core_work: float = 0.0
    mem_work: float = 0.0
    t0_s: float = 0.0
    activity: float = 1.0
    mem_activity: float = 0.0
    time_model: str = "dso"
    rational: tuple | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"SimulatedWorkload: name must be a non-empty string, got {self.name!r}")
        for arg in ("core_work", "mem_work", "t0_s"):
            finite(f"SimulatedWorkload: {arg}", getattr(self, arg), minimum=0.0)
        for arg in ("activity", "mem_activity"):
            finite(f"SimulatedWorkload: {arg}", getattr(self, arg), minimum=0.0, maximum=1.0)
        if self.time_model not in ("dso", "rational"):
            raise ValueError(
                f"SimulatedWorkload: time_model must be 'dso' or 'rational', got {self.time_model!r}")
        if self.time_model == "dso":
            if self.core_work == 0 and self.mem_work == 0 and self.t0_s == 0:
                raise ValueError("SimulatedWorkload: core_work, mem_work and t0_s are all 0 "
                                 "(a launch must take time)")
        else:
            coeffs = self.rational
            if coeffs is None or len(coeffs) != 4:
                raise ValueError(f"SimulatedWorkload: rational must be (a, b, c, d) for "
                                 f"time_model='rational', got {coeffs!r}")
            for c in coeffs:
                finite("SimulatedWorkload: rational", c)
            object.__setattr__(self, "rational", tuple(float(c) for c in coeffs))

    def time_s(self, sm_clock_mhz, mem_clock_mhz):
        """Time of one launch (s) at the given clocks (MHz); arrays broadcast."""
        f = np.asarray(sm_clock_mhz, dtype=float)
        fm = np.asarray(mem_clock_mhz, dtype=float)
        if np.any(~np.isfinite(f)) or np.any(f <= 0):
            raise ValueError(f"time_s: sm_clock_mhz must be finite and > 0, got {sm_clock_mhz!r}")
        if np.any(~np.isfinite(fm)) or np.any(fm <= 0):
            raise ValueError(f"time_s: mem_clock_mhz must be finite and > 0, got {mem_clock_mhz!r}")
        if self.time_model == "dso":
            t = self.t0_s + np.maximum(self.mem_work / fm, self.core_work / f)  # DSO eq. 2
        else:
            a, b, c, d = self.rational
            t = a / (1.0 + b * f) + c / (1.0 + d * f) + 0.0 * fm  # thesis eq. 4.5
        return float(t) if np.ndim(t) == 0 else t


#: Ready-made workloads for demos and tests (Hopper-like at 1980/2619 MHz).
EXAMPLE_WORKLOADS: dict[str, SimulatedWorkload] = {
    # FMA chain: compute-bound, 10 ms per launch at 1980 MHz
    "fp32": SimulatedWorkload("fp32", core_work=19.8, t0_s=0.0, activity=1.0, mem_activity=0.02),
    # STREAM-like copy: memory-bound, 5 ms per launch at 2619 MHz
    "stream": SimulatedWorkload("stream", core_work=2.0, mem_work=13.095, activity=0.25,
                                mem_activity=1.0),
    # GEMM: compute-bound with heavy memory traffic (power-capped at 700 W once hot)
    "gemm": SimulatedWorkload("gemm", core_work=9.9, mem_work=6.0, t0_s=5e-6, activity=1.0,
                              mem_activity=0.8),
    # tiny kernel, far shorter than the 0.2 ms grid
    "tiny": SimulatedWorkload("tiny", core_work=0.0198, t0_s=0.0, activity=0.9, mem_activity=0.1),
}


class _Buffer:
    """A growable float/int array (amortised doubling)."""

    def __init__(self, dtype, capacity: int = 4096):
        self.data = np.zeros(capacity, dtype=dtype)

    def ensure(self, n: int) -> np.ndarray:
        if n > self.data.size:
            new = np.zeros(max(n, 2 * self.data.size), dtype=self.data.dtype)
            new[: self.data.size] = self.data
            self.data = new
        return self.data


class SimulatedGPU(Device):
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
    """

    #: Sample rate and noise of the optional external reference meter.
    REFERENCE_RATE_HZ = 5000.0
    REFERENCE_NOISE_W = 0.5

    def __init__(self, preset="hopper", seed=0, reference_meter=False, physics=None,
                 ambient_c=30.0):
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
        self._preset = preset
        self.seed = int(seed)
        self.reference_meter = bool(reference_meter)
        self.physics = physics
        self._lock = threading.RLock()

        rng = np.random.default_rng([self.seed, 0])
        # the firmware's update phase is fixed at boot and unknown to the user (Yang §IV-C)
        self._phase = float(rng.uniform(0.0, preset.update_period_s))
        self._energy_phase = float(math.fmod(self._phase, preset.energy_period_s))
        # the counter counts from driver load, so it never starts at 0
        self._counter_start_j = float(np.round(rng.uniform(1e5, 1e7), 3))
        self._noise_blocks: dict[tuple[int, int], np.ndarray] = {}

        ph = physics
        self._df = ph.fine_step_s
        self._r = round(ph.control_step_s / ph.fine_step_s)
        self._dc = self._df * self._r
        self._decay = math.exp(-self._dc / ph.thermal_tau_s)
        self._clocks = clock_table(ph)
        v = ph.relative_voltage(self._clocks)
        self._leak_c = (ph.leakage_w * v).tolist()
        self._core_c = (ph.core_w_per_ghz * self._clocks / 1000.0 * v * v).tolist()
        self._leak_arr = ph.leakage_w * v
        self._core_arr = ph.core_w_per_ghz * self._clocks / 1000.0 * v * v
        self._recovery_steps = max(1, int(ph.clock_recovery_mhz_per_s * self._dc / ph.sm_clock_step_mhz))

        self._sm_lock: float | None = None
        self._mem_lock: float | None = None
        self._power_limit: float | None = None

        # per control step
        self._fi = _Buffer(np.int64)        # SM clock index into self._clocks
        self._fm = _Buffer(float)           # memory clock
        self._temp = _Buffer(float)         # temperature at the step's start
        self._thr = _Buffer(np.int64)       # throttle reasons
        self._base = _Buffer(float)         # power at zero activity
        self._bc = _Buffer(float)           # W per unit core activity
        self._bm = _Buffer(float)           # W per unit memory activity
        self._core_load = _Buffer(float)    # ∫ core activity dt within the step
        self._mem_load = _Buffer(float)
        # per fine step
        self._act = _Buffer(float, 4096 * self._r)
        self._mact = _Buffer(float, 4096 * self._r)
        self._ecum = _Buffer(float, 4096 * self._r + 1)   # ∫ P dt at fine edges
        self._acum = _Buffer(float, 4096 * self._r + 1)   # ∫ core activity dt at fine edges
        self._n_cum = 0
        self._tick = 0

        fi0 = len(self._clocks) - 1
        fm0 = float(ph.mem_clocks_mhz[0])
        t0 = ph.idle_temperature_c(self.ambient_c, float(self._clocks[fi0]), fm0)
        self._set_step(0, fi0, fm0, t0, 0)
        self._pre_power = float(self._base.data[0])  # the GPU idled before t = 0

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
            k = self._step_at(t)
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

    # ------------------------------------------------------------------
    # Advancing simulated time
    # ------------------------------------------------------------------

    def idle(self, seconds):
        """Idle for ``seconds`` (rounded up to the 0.2 ms grid); returns ``(start_s, end_s)``."""
        seconds = finite("idle: seconds", seconds, minimum=0.0)
        with self._lock:
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
            on = self._execute(load, 1, 0.0)
            return float(on[0, 0]), float(on[0, 1])

    # ------------------------------------------------------------------
    # What happened: sensor traces and ground truth
    # ------------------------------------------------------------------

    def trace(self, start_s, end_s, sample_period_s=1e-3, run_id="run") -> pd.DataFrame:
        """What a background sampler would have recorded over ``[start_s, end_s]``.

        Parameters
        ----------
        start_s, end_s : float
            Interval on the simulated clock; ``end_s`` must not be after :meth:`now`.
        sample_period_s : float, default=1e-3
            Time between readings.
        run_id : str, default="run"
            Value of the ``run_id`` column.

        Returns
        -------
        pandas.DataFrame
            A trace table (:data:`powermodels.schema.TRACE_TABLE`). The energy
            counter is NaN except every ``sensor.energy_read_s`` (its reads are
            slow); ``reference_power_w`` only with ``reference_meter=True``.
        """
        start_s, end_s = self._interval("trace", start_s, end_s)
        sample_period_s = finite("trace: sample_period_s", sample_period_s, minimum=0.0, strict=True)
        if not isinstance(run_id, str):
            raise ValueError(f"trace: run_id must be a string, got {run_id!r}")
        n = math.floor((end_s - start_s) / sample_period_s + 1e-9) + 1
        if n < 2:
            raise ValueError(f"trace: sample_period_s={sample_period_s:g} leaves fewer than 2 samples "
                             f"in [{start_s:g}, {end_s:g}]")
        with self._lock:
            t = start_s + sample_period_s * np.arange(n)
            t[-1] = min(t[-1], end_s)
            inst, avg, usage = self._sensor_at(t)
            counter = np.full(n, np.nan)
            stride = max(1, round(self._preset.energy_read_s / sample_period_s))
            counter[::stride] = self._counter_at(t[::stride])
            k = self._step_at(t)
            lo = np.maximum(t - sample_period_s, 0.0)
            activity = (self._activity_integral(t) - self._activity_integral(lo)) / np.maximum(t - lo, 1e-300)
            activity[t <= 0] = 0.0
            columns = {
                schema.RUN_ID: np.full(n, run_id, dtype=object),
                schema.T_S: t,
                schema.POWER_INSTANT_W: inst,
                schema.POWER_AVERAGE_W: avg,
                schema.POWER_USAGE_W: usage,
                schema.ENERGY_COUNTER_J: counter,
                schema.TEMPERATURE_C: np.round(self._temp.data[k]),
                schema.SM_CLOCK_MHZ: self._clocks[self._fi.data[k]],
                schema.MEM_CLOCK_MHZ: self._fm.data[k].copy(),
                schema.THROTTLE_REASONS: self._thr.data[k].astype(np.int64),
            }
            if self.reference_meter:
                columns[schema.REFERENCE_POWER_W] = self._meter_at(t)
            columns[schema.LOAD_ACTIVITY] = np.clip(activity, 0.0, 1.0)
            return pd.DataFrame(columns)

    def truth(self, start_s, end_s) -> pd.DataFrame:
        """The physical ground truth on the internal 0.2 ms grid over ``[start_s, end_s]``.

        One row per grid step overlapping the interval; ``t_s`` is the step's
        start and the true power (``reference_power_w``) is constant over it.
        """
        start_s, end_s = self._interval("truth", start_s, end_s)
        with self._lock:
            self._update_cumulative()
            j0 = math.floor(max(start_s, 0.0) / self._df + 1e-9)
            j1 = max(math.ceil(end_s / self._df - 1e-9), j0 + 1)
            j1 = min(j1, self._tick)
            j = np.arange(j0, j1)
            k = j // self._r
            power = np.diff(self._ecum.data[j0 : j1 + 1]) / self._df
            return pd.DataFrame({
                schema.T_S: j * self._df,
                schema.REFERENCE_POWER_W: power,
                schema.TEMPERATURE_C: self._temp.data[k].copy(),
                schema.SM_CLOCK_MHZ: self._clocks[self._fi.data[k]],
                schema.MEM_CLOCK_MHZ: self._fm.data[k].copy(),
                schema.THROTTLE_REASONS: self._thr.data[k].astype(np.int64),
                schema.LOAD_ACTIVITY: np.clip(self._act.data[j0:j1], 0.0, 1.0),
            })

    def true_energy_j(self, start_s, end_s) -> float:
        """Exact integral of the true power over ``[start_s, end_s]`` (J)."""
        start_s, end_s = self._interval("true_energy_j", start_s, end_s, allow_empty=True)
        with self._lock:
            e = self._energy(np.array([start_s, end_s]))
            return float(e[1] - e[0])

    # ------------------------------------------------------------------
    # Internals: the simulation
    # ------------------------------------------------------------------

    @staticmethod
    def _count(name: str, value) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        return int(value)

    def _interval(self, what: str, start_s, end_s, allow_empty: bool = False) -> tuple[float, float]:
        start_s = finite(f"{what}: start_s", start_s)
        end_s = finite(f"{what}: end_s", end_s)
        if end_s < start_s or (end_s == start_s and not allow_empty):
            raise ValueError(f"{what}: end_s ({end_s:g}) must be after start_s ({start_s:g})")
        if end_s > self.now() + 1e-9:
            raise ValueError(f"{what}: end_s ({end_s:g}) is after the simulated now ({self.now():g}); "
                             "simulate that time first")
        return start_s, min(end_s, self.now())

    def _limit_w(self) -> float:
        return self.physics.power_limit_w if self._power_limit is None else self._power_limit

    def _clock_index(self, mhz: float) -> int:
        ph = self.physics
        i = round((mhz - ph.sm_clock_min_mhz) / ph.sm_clock_step_mhz)
        return min(max(i, 0), len(self._clocks) - 1)

    def _target_index(self) -> int:
        return len(self._clocks) - 1 if self._sm_lock is None else self._clock_index(self._sm_lock)

    def _mem_target(self) -> float:
        return float(self.physics.mem_clocks_mhz[0]) if self._mem_lock is None else self._mem_lock

    def _coefficients(self, fi: int, fm: float, temp: float) -> tuple[float, float, float]:
        ph = self.physics
        leak = self._leak_c[fi] * (1.0 + ph.leakage_per_c * (temp - ph.t_ref_c))
        core = self._core_c[fi]
        mem = ph.mem_w_per_ghz * fm / 1000.0
        base = ph.p0_w + leak + core * ph.idle_activity + mem * ph.mem_idle_activity
        return base, core * (1.0 - ph.idle_activity), mem * (1.0 - ph.mem_idle_activity)

    def _set_step(self, k: int, fi: int, fm: float, temp: float, thr: int) -> None:
        for buf in (self._fi, self._fm, self._temp, self._thr, self._base, self._bc, self._bm,
                    self._core_load, self._mem_load):
            buf.ensure(k + 1)
        self._fi.data[k] = fi
        self._fm.data[k] = fm
        self._temp.data[k] = temp
        self._thr.data[k] = thr
        self._base.data[k], self._bc.data[k], self._bm.data[k] = self._coefficients(fi, fm, temp)

    def _retarget_open_step(self) -> None:
        # called at a step boundary: the open step has no elapsed time yet
        k = self._tick // self._r
        self._set_step(k, self._target_index(), self._mem_target(), float(self._temp.data[k]), 0)

    def _finalize(self, k: int) -> None:
        """Step ``k`` is over: its mean power heats the die and drives the power cap."""
        ph = self.physics
        a = self._core_load.data[k] / self._dc
        m = self._mem_load.data[k] / self._dc
        power = self._base.data[k] + self._bc.data[k] * a + self._bm.data[k] * m
        temp = self._temp.data[k]
        temp_next = self.ambient_c + (temp - self.ambient_c) * self._decay \
            + ph.thermal_resistance_k_per_w * power * (1.0 - self._decay)
        fm = self._mem_target()
        target = self._target_index()
        fi_prev = int(self._fi.data[k])
        fi = target if fi_prev >= target else min(target, fi_prev + self._recovery_steps)
        # the controller predicts the next step's power from this step's activity
        leak_scale = 1.0 + ph.leakage_per_c * (temp_next - ph.t_ref_c)
        a_eff = ph.idle_activity + (1.0 - ph.idle_activity) * a
        mem = ph.mem_w_per_ghz * fm / 1000.0 * (ph.mem_idle_activity + (1.0 - ph.mem_idle_activity) * m)
        limit = self._limit_w()
        thr = 0
        if ph.p0_w + self._leak_c[fi] * leak_scale + self._core_c[fi] * a_eff + mem > limit:
            predicted = ph.p0_w + self._leak_arr * leak_scale + self._core_arr * a_eff + mem
            fi = min(fi, max(int(np.searchsorted(predicted, limit, side="right")) - 1, 0))
        if fi < target:
            thr = THROTTLE_SW_POWER_CAP
        self._set_step(k + 1, fi, fm, temp_next, thr)

    def _idle_to(self, tick: int) -> None:
        r = self._r
        while self._tick < tick:
            k = self._tick // r
            boundary = (k + 1) * r
            if tick >= boundary:
                self._tick = boundary
                self._finalize(k)
            else:
                self._tick = tick

    def _align_to_step(self) -> None:
        if self._tick % self._r:
            self._idle_to((self._tick // self._r + 1) * self._r)

    def _execute(self, w: SimulatedWorkload, launches: int, gap: float) -> np.ndarray:
        """March control steps, placing launches; returns ``(launches, 2)`` start/end times."""
        df, dc, r = self._df, self._dc, self._r
        tick0 = self._tick
        k = tick0 // r
        t = tick0 * df
        starts: list = []
        ends: list = []
        n_left = launches
        q = 0.0      # remaining work of the launch in flight (fraction)
        g = 0.0      # remaining gap before the next launch
        cache: dict[tuple[int, float], float] = {}
        while n_left > 0 or q > 0.0:
            step_end = (k + 1) * dc
            fi = int(self._fi.data[k])
            fm = float(self._fm.data[k])
            key = (fi, fm)
            tk = cache.get(key)
            if tk is None:
                tk = w.time_s(float(self._clocks[fi]), fm)
                if not (math.isfinite(tk) and tk > 0):
                    raise ValueError(f"run: workload {w.name!r} takes {tk!r} s per launch at "
                                     f"{self._clocks[fi]:g}/{fm:g} MHz (must be > 0)")
                cache[key] = tk
            busy = 0.0
            while (n_left > 0 or q > 0.0) and step_end - t > 1e-15:
                avail = step_end - t
                if q > 0.0:
                    need = q * tk
                    if need <= avail:
                        t += need
                        busy += need
                        q = 0.0
                        ends.append(t)
                        g = gap if n_left > 0 else 0.0
                    else:
                        q -= avail / tk
                        busy += avail
                        t = step_end
                elif g > 0.0:
                    if g <= avail:
                        t += g
                        g = 0.0
                    else:
                        g -= avail
                        t = step_end
                else:
                    cycle = tk + gap
                    m = min(n_left, math.floor((avail + gap) / cycle))
                    if m > 0:
                        s = t + cycle * np.arange(m)
                        starts.append(s)
                        ends.append(s + tk)
                        busy += m * tk
                        n_left -= m
                        t = float(s[-1] + tk)
                        g = gap if n_left > 0 else 0.0
                    else:
                        starts.append(t)
                        n_left -= 1
                        q = 1.0
            self._core_load.data[k] += w.activity * busy
            self._mem_load.data[k] += w.mem_activity * busy
            if step_end - t <= 1e-15:
                t = step_end
                self._finalize(k)
                k += 1
        end_tick = max(math.ceil(t / df - 1e-9), tick0)
        if end_tick == (k + 1) * r:
            self._finalize(k)
        s = np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in starts])
        e = np.concatenate([np.atleast_1d(np.asarray(x, dtype=float)) for x in ends])
        self._place(tick0, end_tick, s, e, w.activity, w.mem_activity)
        self._tick = end_tick
        return np.column_stack([s, e])

    def _place(self, tick0: int, tick1: int, s: np.ndarray, e: np.ndarray, activity: float,
               mem_activity: float) -> None:
        """Add the launches' fractional occupancy of each fine step to the activity grids."""
        if tick1 <= tick0:
            return
        edges = (tick0 + np.arange(tick1 - tick0 + 1)) * self._df
        dur = e - s
        cum = np.concatenate([[0.0], np.cumsum(dur)])
        i = np.searchsorted(s, edges, side="right") - 1
        ic = np.maximum(i, 0)
        busy = np.where(i >= 0, cum[ic] + np.clip(edges - s[ic], 0.0, dur[ic]), 0.0)
        occ = np.clip(np.diff(busy) / self._df, 0.0, 1.0)
        act = self._act.ensure(tick1)
        mact = self._mact.ensure(tick1)
        act[tick0:tick1] += activity * occ
        mact[tick0:tick1] += mem_activity * occ

    def _update_cumulative(self) -> None:
        n0, n1 = self._n_cum, self._tick
        if n1 <= n0:
            return
        ecum = self._ecum.ensure(n1 + 1)
        acum = self._acum.ensure(n1 + 1)
        act = self._act.ensure(n1)[n0:n1]
        mact = self._mact.ensure(n1)[n0:n1]
        k = np.arange(n0, n1) // self._r
        power = self._base.data[k] + self._bc.data[k] * act + self._bm.data[k] * mact
        ecum[n0 + 1 : n1 + 1] = ecum[n0] + np.cumsum(power * self._df)
        acum[n0 + 1 : n1 + 1] = acum[n0] + np.cumsum(act * self._df)
        self._n_cum = n1

    def _interp_cumulative(self, buf: _Buffer, t: np.ndarray, before: float) -> np.ndarray:
        self._update_cumulative()
        cum = buf.data
        t = np.asarray(t, dtype=float)
        n = self._tick
        if n == 0:
            return np.where(t < 0, before * t, 0.0)
        x = np.clip(t, 0.0, n * self._df) / self._df
        j = np.clip(np.floor(x).astype(np.int64), 0, n - 1)
        frac = x - j
        value = cum[j] + frac * (cum[j + 1] - cum[j])
        return np.where(t < 0, before * t, value)

    def _energy(self, t) -> np.ndarray:
        """∫₀ᵗ P dt (J); before 0 the GPU idled at its initial power."""
        return self._interp_cumulative(self._ecum, t, self._pre_power)

    def _activity_integral(self, t) -> np.ndarray:
        return self._interp_cumulative(self._acum, t, 0.0)

    def _step_at(self, t: np.ndarray) -> np.ndarray:
        k = np.floor(np.asarray(t, dtype=float) / self._dc + 1e-9).astype(np.int64)
        return np.clip(k, 0, self._tick // self._r)

    def _noise(self, stream: int, idx: np.ndarray) -> np.ndarray:
        """Standard-normal draw per integer index, reproducible whatever the query order."""
        idx = np.asarray(idx, dtype=np.int64) + (1 << 40)
        block = 1 << 12
        out = np.empty(idx.shape, dtype=float)
        blocks = idx // block
        for b in np.unique(blocks):
            key = (stream, int(b))
            draws = self._noise_blocks.get(key)
            if draws is None:
                if len(self._noise_blocks) > 4096:
                    self._noise_blocks.clear()
                draws = np.random.default_rng([self.seed, stream, int(b)]).standard_normal(block)
                self._noise_blocks[key] = draws
            sel = blocks == b
            out[sel] = draws[idx[sel] - b * block]
        return out

    def _sensor_at(self, t: np.ndarray):
        p = self._preset
        n = update_index(t, p.update_period_s, self._phase)
        inst = boxcar_reading(n, self._energy, p, p.instant_window_s, self._phase, self._noise(1, n))
        if p.average_window_s is None:
            avg = np.full(inst.shape, np.nan)
        else:
            avg = boxcar_reading(n, self._energy, p, p.average_window_s, self._phase, self._noise(2, n))
        usage = avg if p.usage == "average" else inst
        return inst, avg, usage

    def _counter_at(self, t: np.ndarray) -> np.ndarray:
        return energy_counter_reading(t, self._energy, self._preset, self._energy_phase,
                                      self._counter_start_j)

    def _meter_at(self, t: np.ndarray) -> np.ndarray:
        rate = self.REFERENCE_RATE_HZ
        m = np.floor(np.asarray(t) * rate + 1e-9).astype(np.int64)
        tm = m / rate
        e = self._energy(np.concatenate([tm, tm - 1.0 / rate]))
        mean = (e[: len(tm)] - e[len(tm) :]) * rate
        return np.maximum(mean + self.REFERENCE_NOISE_W * self._noise(3, m), 0.0)
