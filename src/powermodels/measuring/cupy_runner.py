"""The real-GPU runner: CuPy launches timed by CUDA events while a sampler thread reads NVML.

CuPy is imported only when a :class:`CupyRunner` launches or waits.
"""

from __future__ import annotations

import time

import numpy as np

from .. import schema, workloads
from ..devices.base import Device, on_device_gpu
from .runner_base import HOPPER_SENSOR, Runner, SensorProfile, resolve

__all__ = ["CupyRunner", "back_to_back"]


def back_to_back(pk, launches: int, in_flight: int, stream) -> list:
    """Launch ``pk`` ``launches`` times back to back on ``stream``; the ``launches + 1`` CUDA events.

    Event ``i`` is recorded before launch ``i`` and event ``i + 1`` after it.
    At most ``in_flight`` launches are queued ahead of the host (waiting on an
    older event keeps the queue short and releases the GIL for the sampler).
    Returns after the last launch finished.
    """
    import cupy as cp

    events = [cp.cuda.Event()]
    events[0].record(stream)
    for i in range(launches):
        pk.launch(stream)
        ev = cp.cuda.Event()
        ev.record(stream)
        events.append(ev)
        if i >= in_flight:
            events[i - in_flight].synchronize()
    events[-1].synchronize()
    return events


class CupyRunner(Runner):
    """Runner on a real GPU: CuPy launches, CUDA events on the host clock, background sampler.

    Parameters
    ----------
    device : Device
        Usually :class:`~powermodels.devices.nvml.NVMLDevice`; its ``now()``
        must be ``time.perf_counter`` (the clock the events are mapped onto).
    sample_period_s : float, default=5e-4
        Fast sampler period.
    energy_period_s : float, default=0.02
        Energy-counter period.
    sensor : SensorProfile, default=HOPPER_SENSOR
        Sensor timing used by the protocols.
    in_flight : int, default=32
        Launches allowed in the queue ahead of the GPU, so the host never
        blocks inside a launch call.
    keep_prepared : int, default=4
        Prepared workload configurations kept (compiled, arguments on the GPU);
        the least recently used beyond that is closed, so a campaign over a
        search space does not hold every configuration's arrays at once.
    """

    def __init__(self, device: Device, sample_period_s: float = 5e-4, energy_period_s: float = 0.02,
                 sensor: SensorProfile = HOPPER_SENSOR, in_flight: int = 32, keep_prepared: int = 4):
        from ..devices.event_clock import EventClock
        from .sampler import Sampler

        self.device = device
        self.sensor = sensor
        self.in_flight = in_flight
        self.sampler = Sampler(device, period_s=sample_period_s, energy_period_s=energy_period_s).start()
        self.clock = EventClock(now=device.now)
        with device.cuda_device():  # the events on the GPU the sensor reads, as every launch (on_device_gpu)
            self.clock.calibrate()
        self._prepared: dict = {}  # insertion order = least recently used first
        self.keep_prepared = max(1, int(keep_prepared))
        self._square: dict = {}

    @on_device_gpu
    def prepared(self, workload, config=None):
        """``workload.prepare(config)``, once per workload and configuration (the last
        ``keep_prepared`` kept; an evicted one is closed and prepared again when needed)."""
        w, config = resolve(workload, config)
        key = (w, w.config_id(config))
        pk = self._per_config(self._prepared, w, config, lambda w, c: w.prepare(c))
        self._prepared[key] = self._prepared.pop(key)  # most recently used last
        while len(self._prepared) > self.keep_prepared:
            old = self._prepared.pop(next(iter(self._prepared)))
            close = getattr(old, "close", None)
            if close is not None:
                close()
        return pk

    @on_device_gpu
    def run(self, workload, config=None, launches=1, gap_s=0.0):
        pk = self.prepared(workload, config)
        if self.clock_probe is None:
            return self._launch(pk, launches, gap_s)
        import cupy as cp

        # on the workload's stream; work timed by synchronizes runs on its framework's streams,
        # which the legacy default stream waits for
        stream = cp.cuda.Stream.null if getattr(pk, "timing", "events") == "synchronize" \
            else cp.cuda.get_current_stream()
        self.clock_probe.enqueue(stream)
        iv = self._launch(pk, launches, gap_s)
        self.clock_probe.enqueue(stream)
        self._record_probes(iv)
        return iv

    def _launch(self, pk, launches, gap_s=0.0, at=None):
        import cupy as cp

        if launches < 1:
            raise ValueError(f"run: launches must be >= 1, got {launches}")
        if getattr(pk, "timing", "events") == "synchronize":
            return self._launch_synchronized(pk, launches, gap_s, at)
        stream = cp.cuda.get_current_stream()
        if gap_s > 0 or at is not None:
            starts, ends = [], []
            for i in range(launches):
                if at is not None:
                    _sleep_until(at[i], self.device.now)
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record(stream)
                pk.launch(stream)
                e1.record(stream)
                starts.append(e0)
                ends.append(e1)
                if gap_s > 0:
                    e1.synchronize()
                    _sleep_until(self.device.now() + gap_s, self.device.now)
            ends[-1].synchronize()
            self.clock.calibrate(8)
            return np.column_stack([self.clock.host_times(starts), self.clock.host_times(ends)])
        events = back_to_back(pk, launches, self.in_flight, stream)
        self.clock.calibrate(8)
        t = self.clock.host_times(events)
        return np.column_stack([t[:-1], t[1:]])

    @on_device_gpu
    def run_probed(self, workload, config, batches: int, per_batch: int, probe):
        """``batches`` × ``per_batch`` launches back to back, a clock probe before the first batch
        and after each, on the workload's stream.

        Returns ``(rows, probes)``: ``rows`` is ``(batches, 3)`` of ``[start_s, end_s, time per
        launch]`` on the host clock, ``probes`` the ``batches + 1`` probes
        (:meth:`ClockProbe.collect <powermodels.devices.clock_probe.ClockProbe.collect>`) with
        their host times. Work timed by device synchronizes (a callable on its framework's
        streams) puts the probes on the legacy default stream, which waits for every stream.
        """
        if batches < 1 or per_batch < 1:
            raise ValueError(f"run_probed: batches and per_batch must be >= 1, got {batches}, {per_batch}")
        rows, _, probes = self.run_probed_alternating([(workload, config, batches, per_batch)], 1, probe)
        return rows, probes

    @on_device_gpu
    def run_probed_alternating(self, loads, cycles: int, probe):
        """The loads' batches in turn, ``cycles`` times, all queued on one stream in one call.

        Each batch lies between CUDA events with a probe before it (and one after the last);
        the host waits only to keep at most ``in_flight`` batches queued, and maps the events and
        reads the probes back once, at the end. One call per load and turn (:meth:`run_probed`)
        left the GPU idle 3–7 ms at every switch (the end sync, the event clock's calibration, the
        probe readback, the recorder's bookkeeping: 4.1–4.6 ms median on the H100 GPU-f73aad1d
        and the H200 GPU-25027b10), a third to a half of the natural-DVFS ladder's time.
        Work timed by device synchronizes (a callable on its framework's streams) cannot be
        queued: then every load runs batch by batch with a synchronize around each and the probes
        on the legacy default stream, which waits for every stream (the gaps come back).

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
            ``(n, 3)`` rows ``[start_s, end_s, mean time per launch]`` on the host clock, each
            row's load (index into ``loads``), and the ``n + 1`` probes with their host times.
        """
        import cupy as cp

        from ..devices.clock_probe import probe_times_s

        if not (int(cycles) >= 1 and loads and all(b >= 1 and n >= 1 for _, _, b, n in loads)):
            raise ValueError(f"run_probed_alternating: cycles, batches and per_batch must be >= 1, got {cycles!r}, "
                             f"{[(b, n) for _, _, b, n in loads]!r}")
        pks = [self.prepared(w, c) for w, c, _, _ in loads]
        turns = [(k, pk, per_batch) for _ in range(int(cycles))
                 for k, (pk, (_, _, batches, per_batch)) in enumerate(zip(pks, loads)) for _ in range(batches)]
        which = np.array([k for k, _, _ in turns], dtype=int)
        if any(getattr(pk, "timing", "events") == "synchronize" for pk in pks):
            probe.enqueue(cp.cuda.Stream.null)
            rows = []
            for _, pk, per_batch in turns:
                iv = self._launch_synchronized(pk, per_batch)
                probe.enqueue(cp.cuda.Stream.null)
                rows.append((iv[0, 0], iv[-1, 1], float(np.mean(iv[:, 1] - iv[:, 0]))))
            rows = np.array(rows, dtype=float)
        else:
            stream = cp.cuda.get_current_stream()
            starts, ends = [], []
            probe.enqueue(stream)
            for _, pk, per_batch in turns:
                e0, e1 = cp.cuda.Event(), cp.cuda.Event()
                e0.record(stream)
                for _ in range(per_batch):
                    pk.launch(stream)
                e1.record(stream)
                probe.enqueue(stream)
                starts.append(e0)
                ends.append(e1)
                if len(ends) > self.in_flight:  # keep the queue short (and the GIL free for the sampler)
                    ends[-1 - self.in_flight].synchronize()
            ends[-1].synchronize()
            self.clock.calibrate(8)
            s, e = self.clock.host_times(starts), self.clock.host_times(ends)
            rows = np.column_stack([s, e, (e - s) / np.array([n for _, _, n in turns], dtype=float)])
        probes = probe.collect()
        probes.insert(0, schema.T_S, probe_times_s(rows[:, 0], rows[:, 1])[:len(probes)])
        return rows, which, probes

    @on_device_gpu
    def run_as_called(self, workload, config=None, launches=1):
        """One call per launch in a plain loop, as the user's program makes them: no CUDA events
        between calls, no queue limit of ours; the host clock from just before the first call to
        the end of the last, split evenly (the host's gaps are charged to the calls)."""
        import cupy as cp

        if launches < 1:
            raise ValueError(f"run_as_called: launches must be >= 1, got {launches}")
        pk = self.prepared(workload, config)
        if getattr(pk, "timing", "events") == "synchronize":
            return self._launch_synchronized(pk, launches)
        stream = cp.cuda.get_current_stream()
        cp.cuda.runtime.deviceSynchronize()
        t0 = self.device.now()
        for _ in range(int(launches)):
            pk.launch(stream)
        stream.synchronize()
        edges = np.linspace(t0, self.device.now(), int(launches) + 1)
        return np.column_stack([edges[:-1], edges[1:]])

    def _launch_synchronized(self, pk, launches, gap_s=0.0, at=None):
        """Time work that runs on streams other than ours: device synchronizes on the host clock.

        Back to back, the launches share the span between the synchronize before
        the first and the one after the last evenly (one synchronize per launch
        would leave the GPU idle between them); with gaps or a schedule, each
        launch is bracketed by its own synchronizes.
        """
        import cupy as cp

        sync = cp.cuda.runtime.deviceSynchronize
        now = self.device.now
        sync()
        if gap_s > 0 or at is not None:
            rows = []
            for i in range(launches):
                if at is not None:
                    _sleep_until(at[i], now)
                t0 = now()
                pk.launch(None)
                sync()
                rows.append((t0, now()))
                if gap_s > 0:
                    _sleep_until(now() + gap_s, now)
            return np.array(rows, dtype=float)
        t0 = now()
        for _ in range(launches):
            pk.launch(None)
        sync()
        edges = np.linspace(t0, now(), launches + 1)
        return np.column_stack([edges[:-1], edges[1:]])

    @on_device_gpu
    def idle(self, seconds):
        import cupy as cp

        cp.cuda.runtime.deviceSynchronize()  # all streams: a callable's framework may use its own
        start = self.device.now()
        _sleep_until(start + seconds, self.device.now)
        return start, self.device.now()

    def trace(self, start_s, end_s, run_id="run"):
        self.sampler.wait_past(end_s)
        return self.sampler.table(start_s, end_s, run_id=run_id)

    # -- square wave (Yang §IV) -----------------------------------------------

    @on_device_gpu
    def calibrate_square_wave(self, amplitude: float = 1.0, target_s: float = 0.05) -> tuple[float, float]:
        """Fit kernel time = ``c0 + c1 · iterations`` for the square-wave kernel; return (c0, c1).

        Times four chain lengths around ``target_s`` (three launches each,
        median) and fits the line by least squares.
        """
        guess = 200_000
        pk = workloads.square_wave_kernel(amplitude, guess)
        t_guess = float(np.median(np.diff(self._launch(pk, 3), axis=1)))
        per_iter = t_guess / guess
        xs, ys = [], []
        for frac in (0.25, 0.5, 1.0, 1.5):
            n = max(1000, int(frac * target_s / per_iter))
            pk = workloads.square_wave_kernel(amplitude, n)
            iv = self._launch(pk, 3)
            xs.append(n)
            ys.append(float(np.median(iv[:, 1] - iv[:, 0])))
        c1, c0 = np.polyfit(np.array(xs, float), np.array(ys), 1)
        self._square[amplitude] = (float(c0), float(c1))
        return float(c0), float(c1)

    def _square_kernel(self, on_s, amplitude):
        if amplitude not in self._square:
            self.calibrate_square_wave(amplitude, target_s=max(on_s, 0.01))
        c0, c1 = self._square[amplitude]
        iterations = max(1, round((on_s - c0) / c1))
        return workloads.square_wave_kernel(amplitude, iterations)

    @on_device_gpu
    def square_wave(self, on_s, off_s, periods, amplitude=1.0):
        pk = self._square_kernel(on_s, amplitude)
        # the host schedules each period on its own clock, so launch jitter never accumulates
        t0 = self.device.now() + 0.01
        at = t0 + (on_s + off_s) * np.arange(periods)
        return self._launch(pk, periods, at=at)

    @on_device_gpu
    def step(self, duration_s, amplitude=1.0):
        chunk = min(0.05, duration_s)
        pk = self._square_kernel(chunk, amplitude)
        n = max(1, round(duration_s / chunk))
        iv = self._launch(pk, n)
        return float(iv[0, 0]), float(iv[-1, 1])

    def close(self):
        try:
            with self.device.cuda_device():
                for pk in self._prepared.values():
                    close = getattr(pk, "close", None)
                    if close is not None:
                        close()
            self._prepared.clear()
        finally:
            try:
                self.sampler.stop()
            finally:
                self._close_owned_device()


def _sleep_until(t_s: float, now) -> None:
    """Sleep until host time ``t_s``; the last 0.2 ms by yielding (``sleep(0)`` releases the GIL,
    so the sampler thread is never starved by the wait)."""
    while True:
        left = t_s - now()
        if left <= 0:
            return
        time.sleep(left - 1e-4 if left > 2e-4 else 0)
