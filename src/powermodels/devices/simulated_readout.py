"""What a simulated GPU's sensor shows, and its ground truth: :class:`SimulatedReadout`.

The read-out half of :class:`~powermodels.devices.simulated.SimulatedGPU`:
given the state that :class:`~powermodels.devices.simulated_engine.SimulationEngine`
has marched forward, it answers what a background sampler would have
recorded (:meth:`~SimulatedReadout.trace`: the emulated NVML readings of
:mod:`~powermodels.devices.sensor_emulation`, the energy counter and the
optional 5 kHz reference meter) and what really happened
(:meth:`~SimulatedReadout.truth`, :meth:`~SimulatedReadout.true_energy_j`).
It holds no state of its own: it is a mixin of ``SimulatedGPU``, whose
``__init__`` sets the sensor preset, its phases, the seed and the lock it reads.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from .. import schema
from ._checks import finite
from .sensor_emulation import boxcar_reading, energy_counter_reading, update_index

if TYPE_CHECKING:  # annotations only: pandas is imported when a table is asked for
    import pandas as pd

__all__ = ["SimulatedReadout"]


class SimulatedReadout:
    """Sensor traces and ground truth of a :class:`~powermodels.devices.simulated.SimulatedGPU`.

    A mixin: it reads the simulation state of
    :class:`~powermodels.devices.simulated_engine.SimulationEngine` and the
    sensor settings ``SimulatedGPU.__init__`` sets (``_preset``, ``_phase``,
    ``_energy_phase``, ``_counter_start_j``, ``reference_meter``, ``_lock``).
    """

    #: Sample rate and noise of the optional external reference meter.
    REFERENCE_RATE_HZ = 5000.0
    REFERENCE_NOISE_W = 0.5

    # ------------------------------------------------------------------
    # What happened: sensor traces and ground truth
    # ------------------------------------------------------------------

    def trace(self, start_s, end_s, sample_period_s=1e-3, run_id="run") -> pd.DataFrame:
        """What a background sampler would have recorded over ``[start_s, end_s]``, as a trace table.

        The columns of :meth:`trace_columns` as a :class:`pandas.DataFrame`.
        """
        import pandas as pd  # here, not at import: the simulated GPU's users without tables start faster

        return pd.DataFrame(self.trace_columns(start_s, end_s, sample_period_s, run_id))

    def trace_columns(self, start_s, end_s, sample_period_s=1e-3, run_id="run") -> dict[str, np.ndarray]:
        """What a background sampler would have recorded over ``[start_s, end_s]``: column -> array.

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
        dict of str to ndarray
            The columns of a trace table (:data:`powermodels.schema.TRACE_TABLE`). The energy
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
            k = self._reading_step(t)
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
            return columns

    def truth(self, start_s, end_s) -> pd.DataFrame:
        """The physical ground truth on the internal 0.2 ms grid over ``[start_s, end_s]``.

        One row per grid step overlapping the interval; ``t_s`` is the step's
        start and the true power (``reference_power_w``) is constant over it.
        The columns of :meth:`truth_columns` as a :class:`pandas.DataFrame`.
        """
        import pandas as pd

        return pd.DataFrame(self.truth_columns(start_s, end_s))

    def truth_columns(self, start_s, end_s) -> dict[str, np.ndarray]:
        """The ground truth of :meth:`truth` as column -> array."""
        start_s, end_s = self._interval("truth", start_s, end_s)
        with self._lock:
            self._update_cumulative()
            j0 = math.floor(max(start_s, 0.0) / self._df + 1e-9)
            j1 = max(math.ceil(end_s / self._df - 1e-9), j0 + 1)
            j1 = min(j1, self._tick)
            self._check_kept(np.array([j0 * self._df]))
            j = np.arange(j0, j1)
            k = j // self._r - self._k0
            b0, b1 = j0 - self._j0, j1 - self._j0  # rows of the kept fine-step buffers
            power = np.diff(self._ecum.data[b0 : b1 + 1]) / self._df
            return {
                schema.T_S: j * self._df,
                schema.REFERENCE_POWER_W: power,
                schema.TEMPERATURE_C: self._temp.data[k].copy(),
                schema.SM_CLOCK_MHZ: self._clocks[self._fi.data[k]],
                schema.MEM_CLOCK_MHZ: self._fm.data[k].copy(),
                schema.THROTTLE_REASONS: self._thr.data[k].astype(np.int64),
                schema.LOAD_ACTIVITY: np.clip(self._act.data[b0:b1], 0.0, 1.0),
            }

    def true_energy_j(self, start_s, end_s) -> float:
        """Exact integral of the true power over ``[start_s, end_s]`` (J)."""
        start_s, end_s = self._interval("true_energy_j", start_s, end_s, allow_empty=True)
        with self._lock:
            e = self._energy(np.array([start_s, end_s]))
            return float(e[1] - e[0])

    # ------------------------------------------------------------------
    # Internals: what the sensor shows at given times
    # ------------------------------------------------------------------

    def _interval(self, what: str, start_s, end_s, allow_empty: bool = False) -> tuple[float, float]:
        start_s = finite(f"{what}: start_s", start_s)
        end_s = finite(f"{what}: end_s", end_s)
        if end_s < start_s or (end_s == start_s and not allow_empty):
            raise ValueError(f"{what}: end_s ({end_s:g}) must be after start_s ({start_s:g})")
        if end_s > self.now() + 1e-9:
            raise ValueError(f"{what}: end_s ({end_s:g}) is after the simulated now ({self.now():g}); "
                             "simulate that time first")
        return start_s, min(end_s, self.now())

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

    def _reading_step(self, t: np.ndarray) -> np.ndarray:
        """Control step whose clocks and temperature the readings at ``t`` show.

        Live state, or with ``sensor.clock_period_s`` the state ``clock_delay_s``
        before the last update of the clock/temperature sensor.
        """
        p = self._preset
        if p.clock_period_s is None:
            return self._step_at(t)
        n = update_index(t, p.clock_period_s, math.fmod(self._phase, p.clock_period_s))
        u = math.fmod(self._phase, p.clock_period_s) + n * p.clock_period_s - p.clock_delay_s
        return self._step_at(np.maximum(u, self._j0 * self._df))

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
