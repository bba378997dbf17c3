"""The :class:`Runner` interface every protocol is written against, and its sensor profile.

Implementations: :class:`~powermodels.measuring.runner.SimulatedRunner` and
:class:`~powermodels.measuring.cupy_runner.CupyRunner`;
:func:`~powermodels.measuring.runner.make_runner` picks one for a device.
Times returned by every method are on the device's host clock
(``device.now()``), the clock of the trace table's ``t_s``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import schema, workloads
from ..devices.base import Device

__all__ = ["HOPPER_SENSOR", "Runner", "SensorProfile", "merge_intervals", "probed_batches", "resolve"]


@dataclass(frozen=True)
class SensorProfile:
    """What the protocols need to know about the power sensor (Yang §IV, Fig. 14).

    A reading at host time ``t`` of a boxcar sensor averages the power over
    ``[t - delay_s - window_s, t - delay_s]``.

    Attributes
    ----------
    update_period_s : float
        Time between new values.
    instant_window_s : float
        Boxcar window of the instant reading (field 186).
    average_window_s : float
        Boxcar window of the average reading (field 185).
    delay_s : float
        Reporting delay beyond the window.
    rise_time_s : float
        Time the power takes to rise after a load starts (Yang: ~250 ms).
    """

    update_period_s: float = 0.1
    instant_window_s: float = 0.025
    average_window_s: float = 1.0
    delay_s: float = 0.0
    rise_time_s: float = 0.25


#: Hopper/A100 defaults from Yang Fig. 14 (100 ms update, 25 ms instant window, 1 s average).
HOPPER_SENSOR = SensorProfile()


def merge_intervals(intervals: np.ndarray, tol_s: float = 1e-6) -> np.ndarray:
    """Merge ``(n, 2)`` [start, end] intervals that touch (gap ≤ ``tol_s``) into blocks."""
    iv = np.asarray(intervals, dtype=float).reshape(-1, 2)
    if iv.shape[0] == 0:
        return iv
    iv = iv[np.argsort(iv[:, 0])]
    out = [list(iv[0])]
    for s, e in iv[1:]:
        if s - out[-1][1] <= tol_s:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return np.array(out)


def probed_batches(run, loads, cycles: int, probe) -> tuple[np.ndarray, np.ndarray, pd.DataFrame]:
    """``cycles`` × each load's batches in turn, by ``run``, a probe before the first batch and after each.

    The host-side loop of a runner whose launches need no host synchronisation between them (the
    simulated GPU), and of any runner without ``run_probed_alternating``.

    Parameters
    ----------
    run : callable
        ``run(workload, config, launches)`` → ``(launches, 2)`` [start, end] host times.
    loads : list of (workload, config, int, int)
        ``(workload, config, batches, per_batch)``: each cycle runs ``batches`` batches of
        ``per_batch`` launches of each load, in this order.
    cycles : int
        How many times the loads take their turns.
    probe : ClockProbe
        Enqueued before the first batch and after each one, collected once at the end.

    Returns
    -------
    (ndarray, ndarray, DataFrame)
        ``(n, 3)`` rows ``[start_s, end_s, mean time per launch]``, each row's load (index into
        ``loads``), and the ``n + 1`` probes with their host times (``t_s``).
    """
    from ..devices.clock_probe import probe_times_s

    if not (int(cycles) >= 1 and loads and all(b >= 1 and n >= 1 for _, _, b, n in loads)):
        raise ValueError(f"probed_batches: cycles, batches and per_batch must be >= 1, got {cycles!r}, "
                         f"{[(b, n) for _, _, b, n in loads]!r}")
    rows, which = [], []
    probe.enqueue()
    for _ in range(int(cycles)):
        for k, (workload, config, batches, per_batch) in enumerate(loads):
            for _ in range(batches):
                iv = np.asarray(run(workload, config, per_batch))
                probe.enqueue()
                rows.append((iv[0, 0], iv[-1, 1], float(np.mean(iv[:, 1] - iv[:, 0]))))
                which.append(k)
    rows = np.array(rows, dtype=float)
    probes = probe.collect()
    probes.insert(0, schema.T_S, probe_times_s(rows[:, 0], rows[:, 1])[:len(probes)])
    return rows, np.array(which, dtype=int), probes


def resolve(workload, config=None) -> tuple[workloads.Workload, dict]:
    """``(Workload, full valid configuration)`` from a workload (or registry name) and a config.

    ``config`` may be None (the default), a dict or a ``"p=v,..."`` string;
    ValueError names a bad parameter or the broken restriction.
    """
    w = workloads.as_workload(workload)
    return w, w.validate_config(w.parse_config(config))


class Runner(ABC):
    """Run workloads and read what the sensor recorded, on one host clock."""

    device: Device
    sensor: SensorProfile

    @property
    def device_name(self) -> str:
        return self.device.info.name

    def now(self) -> float:
        return self.device.now()

    @abstractmethod
    def run(self, workload, config=None, launches: int = 1, gap_s: float = 0.0) -> np.ndarray:
        """Run ``workload`` with ``config`` ``launches`` times; ``(launches, 2)`` [start, end] host times.

        ``workload`` is a :class:`~powermodels.workloads.Workload` or a
        registry name; ``config`` a dict, a ``"p=v,..."`` string or None (see :func:`resolve`).
        """

    @abstractmethod
    def idle(self, seconds: float) -> tuple[float, float]:
        """Leave the GPU idle for ``seconds``; (start, end)."""

    @abstractmethod
    def trace(self, start_s: float, end_s: float, run_id: str = "run") -> pd.DataFrame:
        """Trace table of the sensor readings in ``[start_s, end_s]``."""

    @abstractmethod
    def square_wave(self, on_s: float, off_s: float, periods: int, amplitude: float = 1.0) -> np.ndarray:
        """Yang's square-wave load; ``(periods, 2)`` [on_start, on_end] host times."""

    @abstractmethod
    def step(self, duration_s: float, amplitude: float = 1.0) -> tuple[float, float]:
        """One continuous load of ``duration_s``; (start, end)."""

    # -- the clock the launches ran at, measured on the GPU -----------------------

    #: The on-GPU clock probe run before and after every :meth:`run` (None: no probes).
    clock_probe = None
    #: Probes kept for :meth:`probed_clocks` (the oldest half is dropped beyond this).
    max_probes = 200_000

    def probe_clocks(self, on: bool = True) -> bool:
        """Probe the SM clock on the GPU before and after every :meth:`run` call (where the
        device can: :meth:`~powermodels.devices.base.Device.clock_probe`); True when on."""
        self.clock_probe = self.device.clock_probe() if on else None
        self._probe_t: list = []
        self._probe_f: list = []
        return self.clock_probe is not None

    def _record_probes(self, intervals: np.ndarray) -> None:
        """Collect the probe before and after one ``run`` (at its first start and last end)."""
        f = self.clock_probe.collect_clocks()
        t = np.array([intervals[0, 0], intervals[-1, 1]])[: f.size]
        self._probe_t.extend(t.tolist())
        self._probe_f.extend(f[: t.size].tolist())
        if len(self._probe_t) > self.max_probes:
            del self._probe_t[: self.max_probes // 2], self._probe_f[: self.max_probes // 2]

    def probed_clocks(self, start_s: float, end_s: float) -> np.ndarray:
        """SM clocks (MHz) of the probes that describe ``[start_s, end_s]``: those inside it and the
        nearest before and after where there are some (a span inside one ``run`` call has probes
        only at its ends). Empty without probes, or when none lies inside or on both sides."""
        if self.clock_probe is None or not self._probe_t:
            return np.empty(0)
        t = np.asarray(self._probe_t)
        f = np.asarray(self._probe_f)
        order = np.argsort(t, kind="stable")
        t, f = t[order], f[order]
        lo = np.searchsorted(t, start_s + 1e-9, side="right") - 1  # last probe at or before the start
        hi = np.searchsorted(t, end_s - 1e-9, side="left")         # first probe at or after the end
        inside = (t >= start_s - 1e-9) & (t <= end_s + 1e-9)
        if not inside.any() and (lo < 0 or hi >= t.size):
            return np.empty(0)
        return f[max(lo, 0):min(hi, t.size - 1) + 1]

    def reference_energy_j(self, intervals: np.ndarray) -> float:
        """True (or externally metered) energy over the intervals; NaN when unknown."""
        return math.nan

    @staticmethod
    def _per_config(cache: dict, workload, config, make):
        """``make(workload, config)``, built once per workload and configuration and kept in ``cache``.

        ``workload`` and ``config`` are resolved first (:func:`resolve`); ``make``
        receives the :class:`~powermodels.workloads.Workload` and the full configuration.
        """
        w, config = resolve(workload, config)
        key = (w, w.config_id(config))
        if key not in cache:
            cache[key] = make(w, config)
        return cache[key]

    def run_as_called(self, workload, config=None, launches: int = 1) -> np.ndarray:
        """``launches`` calls as the user's program makes them (``launch="as_called"``); a runner
        that has no other way runs them with :meth:`run` (one call per launch)."""
        return self.run(workload, config, launches)

    def launch_time_s(self, workload, config=None, launches: int = 3) -> float:
        """Per-launch time of a warm workload (median of ``launches`` timed launches after one warm-up)."""
        self.run(workload, config, 1)
        iv = self.run(workload, config, launches)
        return float(np.median(iv[:, 1] - iv[:, 0]))

    def close(self) -> None:  # noqa: B027 - optional hook
        """Stop background threads."""

    #: Set by :func:`make_runner` when it opened the device from a kind: ``close`` closes it too.
    _owns_device = False

    def _close_owned_device(self) -> None:
        if self._owns_device:
            self._owns_device = False
            self.device.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
