"""Runners: one interface for running workloads and reading traces, real GPU or simulated.

The protocols (:mod:`powermodels.measuring.protocols`) are written once against
:class:`Runner`; two implementations exist:

* :class:`SimulatedRunner` — ``gpu.run`` / ``gpu.idle`` / ``gpu.square_wave``
  advance the :class:`~powermodels.devices.simulated.SimulatedGPU`'s clock and
  ``gpu.trace`` returns what a background sampler would have recorded;
* :class:`CupyRunner` — CuPy launches timed with CUDA events mapped onto the
  host clock (:class:`~powermodels.devices.event_clock.EventClock`) while a
  :class:`~powermodels.measuring.sampler.Sampler` thread reads the sensor.

Both take any :class:`~powermodels.workloads.Workload` (or what
:func:`~powermodels.workloads.as_workload` converts, e.g. a registry
name) with a configuration: the simulated runner runs the workload's twin,
the CuPy runner what ``workload.prepare(config)`` returns.

Times returned by every method are on the device's host clock (``device.now()``),
the clock of the trace table's ``t_s``.
"""

from __future__ import annotations

import numpy as np

from ..devices.base import Device
from .cupy_runner import CupyRunner, back_to_back
from .runner_base import HOPPER_SENSOR, Runner, SensorProfile, merge_intervals, probed_batches, resolve

__all__ = [
    "HOPPER_SENSOR",
    "CupyRunner",
    "Runner",
    "SensorProfile",
    "SimulatedRunner",
    "back_to_back",
    "make_runner",
    "merge_intervals",
    "resolve",
]


class SimulatedRunner(Runner):
    """Runner over a :class:`~powermodels.devices.simulated.SimulatedGPU`.

    Parameters
    ----------
    gpu : SimulatedGPU
        The simulated device.
    sample_period_s : float, default=1e-3
        Period of the emulated background sampler (``gpu.trace``).
    host_call_s : float, default=0
        The host's time per call (Python and the launch API: ~10 µs on the
        lent H100, where a ~6 µs CuPy call took 10.6 µs as called and 5.8 µs
        graph-batched). One call per launch (:meth:`run`, :meth:`run_as_called`)
        leaves the GPU idle for ``host_call_s − t_launch`` when the launch is
        shorter; launches in graphs (:meth:`run_graphs`) pay it once per graph.
        0: no host cost (the simulated GPU's default).
    probed_call_s : float, default=0
        The host's round trip at the end of each probed call (:meth:`run_probed`,
        :meth:`run_probed_alternating`), while the GPU idles: a real runner waits for the
        last batch, maps its events onto the host clock and reads the probes back. Between
        the natural-DVFS recorder's calls this left the GPU idle 4.1–4.6 ms (median) on the
        H100 GPU-f73aad1d and the H200 GPU-25027b10 (``datasets/*-2026-11-27/natural_dvfs_ladder_*``).
        0: none (the simulated GPU's default).
    """

    def __init__(self, gpu, sample_period_s: float = 1e-3, host_call_s: float = 0.0, probed_call_s: float = 0.0):
        if not (isinstance(host_call_s, (int, float)) and 0 <= host_call_s < 1):
            raise ValueError(f"SimulatedRunner: host_call_s must be in [0, 1) s, got {host_call_s!r}")
        if not (isinstance(probed_call_s, (int, float)) and 0 <= probed_call_s < 1):
            raise ValueError(f"SimulatedRunner: probed_call_s must be in [0, 1) s, got {probed_call_s!r}")
        self.probed_call_s = float(probed_call_s)
        self.device = gpu
        self.gpu = gpu
        self.sample_period_s = sample_period_s
        self.host_call_s = float(host_call_s)
        s = gpu.sensor
        self.sensor = SensorProfile(
            update_period_s=s.update_period_s,
            instant_window_s=s.instant_window_s,
            average_window_s=s.average_window_s,
            delay_s=getattr(s, "delay_s", 0.0),
            rise_time_s=HOPPER_SENSOR.rise_time_s,
        )
        self._cache: dict = {}

    def _workload(self, workload, config):
        """The twin (:meth:`Workload.simulated <powermodels.workloads.Workload.simulated>`)."""
        return self._per_config(self._cache, workload, config, lambda w, c: w.simulated(c))

    def run(self, workload, config=None, launches=1, gap_s=0.0):
        if launches < 1:
            raise ValueError(f"run: launches must be >= 1, got {launches}")
        twin = self._workload(workload, config)
        return self._run(twin, launches, max(float(gap_s), self._host_gap_s(twin)))

    def _run(self, twin, launches, gap_s):
        if self.clock_probe is None:
            return np.asarray(self.gpu.run(twin, launches=int(launches), gap_s=gap_s))
        self.clock_probe.enqueue()
        iv = np.asarray(self.gpu.run(twin, launches=int(launches), gap_s=gap_s))
        self.clock_probe.enqueue()
        self._record_probes(iv)
        return iv

    def _host_gap_s(self, w) -> float:
        """Idle GPU time per launch when the host makes one call per launch."""
        if self.host_call_s <= 0:
            return 0.0
        r = self.gpu.read()
        return max(0.0, self.host_call_s - float(w.time_s(r.sm_clock_mhz, r.mem_clock_mhz)))

    def run_probed(self, workload, config, batches: int, per_batch: int, probe):
        """``batches`` × ``per_batch`` launches, a probe before the first batch and after each, then
        the host's round trip (``probed_call_s``); ``(rows, probes)`` as ``CupyRunner.run_probed``."""
        rows, _, probes = self.run_probed_alternating([(workload, config, batches, per_batch)], 1, probe)
        return rows, probes

    def run_probed_alternating(self, loads, cycles: int, probe):
        """The loads' batches in turn, ``cycles`` times, in one probed call (one host round trip).

        Parameters
        ----------
        loads : list of (workload, config, int, int)
            ``(workload, config, batches, per_batch)`` per load.
        cycles : int
            How many times the loads take their turns.
        probe : ClockProbe
            Enqueued before the first batch and after each.

        Returns
        -------
        (ndarray, ndarray, DataFrame)
            As :func:`~powermodels.measuring.runner_base.probed_batches`.
        """
        out = probed_batches(self.run, loads, cycles, probe)
        if self.probed_call_s > 0:
            self.gpu.idle(self.probed_call_s)
        return out

    def run_graphs(self, workload, config=None, launches=1, batch=1):
        """``launches`` launches in graphs of ``batch``: back to back, the host's cost paid per graph."""
        if launches < 1 or batch < 1:
            raise ValueError(f"run_graphs: launches and batch must be >= 1, got {launches}, {batch}")
        return self._run(self._workload(workload, config), launches, 0.0)

    def run_as_called(self, workload, config=None, launches=1):
        """One host call per launch, as a program makes them; each launch's interval spans its share
        of the whole run (the host's gaps are charged to the calls, as the GPU sees them)."""
        iv = self.run(workload, config, launches)
        edges = np.linspace(float(iv[0, 0]), float(iv[-1, 1]) + self._host_gap_s(self._workload(workload, config)),
                            len(iv) + 1)
        return np.column_stack([edges[:-1], edges[1:]])

    def launch_time_s(self, workload, config=None, launches=3):
        w = self._workload(workload, config)
        r = self.gpu.read()
        return float(w.time_s(r.sm_clock_mhz, r.mem_clock_mhz)) if np.isfinite(r.sm_clock_mhz) \
            else super().launch_time_s(workload, config, launches)

    def idle(self, seconds):
        return tuple(self.gpu.idle(seconds))

    def trace(self, start_s, end_s, run_id="run"):
        # like waiting for a real sampler to pass end_s: the GPU idles meanwhile
        if end_s > self.gpu.now():
            self.gpu.idle(end_s - self.gpu.now())
        start_s = max(start_s, 0.0)
        return self.gpu.trace(start_s, end_s, sample_period_s=self.sample_period_s, run_id=run_id)

    def square_wave(self, on_s, off_s, periods, amplitude=1.0):
        return np.asarray(self.gpu.square_wave(on_s, off_s, periods, amplitude=amplitude))

    def step(self, duration_s, amplitude=1.0):
        return tuple(self.gpu.step(duration_s, amplitude=amplitude))

    def reference_energy_j(self, intervals):
        return float(sum(self.gpu.true_energy_j(s, e) for s, e in merge_intervals(intervals)))

    def close(self):
        self._close_owned_device()


def make_runner(device: Device | str = "auto", **kwargs) -> Runner:
    """A runner for ``device`` (a Device, or a kind for :func:`~powermodels.devices.open_device`).

    Simulated devices get a :class:`SimulatedRunner`, NVML devices a :class:`CupyRunner`.
    A device opened here from a kind is closed by the runner's ``close``; a
    Device passed in stays open (its owner closes it).
    """
    owns = isinstance(device, str)
    if owns:
        from ..devices import open_device

        device = open_device(device, **kwargs.pop("device_kwargs", {}))
    try:
        simulated = device.info.kind == "simulated"
        runner = SimulatedRunner(device, **kwargs) if simulated else CupyRunner(device, **kwargs)
    except BaseException:
        if owns:
            device.close()
        raise
    runner._owns_device = owns  # closing the runner closes the device it opened (NVML shutdown)
    runner.probe_clocks(True)  # every row then says the clock its launches ran at, probed on the GPU
    return runner
