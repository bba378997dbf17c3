"""The SM clock measured on the GPU itself: a one-warp probe kernel.

NVML's SM-clock reading is a slow sensor: on an H100 it changes only every ~100 ms, in
step with the power readings, while the real clock moves in 10–20 ms steps under the
power cap (``datasets/h100-2026-11-25-raw``, DESIGN.md). A 1–3 ms launch therefore
cannot be given its clock from the reading. The GPU can measure its own clock: the probe
reads ``%globaltimer`` (nanoseconds) and ``clock64()`` (SM cycles), spins ~20 µs of
cycles and reads both again; ``cycles / ns`` is the clock in GHz.

``%globaltimer`` ticks every 32 ns on an H100, so the probe starts and stops on a tick
edge: it spins until the timer changes, reads the cycle counter right after, spins until
the timer has advanced by at least :data:`PROBE_SPIN_NS` and reads the cycle counter right
after that change. Both ends then sit on a tick edge and the elapsed time is exact to the
few cycles a poll of the timer takes; :func:`clock_uncertainty_mhz` still bounds it by one
tick (0.16 % at 20 µs), the conservative figure a row reports.

A probe enqueued on the workload's own stream runs between that stream's launches (a
stream is serial), so the probes before and after a launch bracket the clock it ran at.

:class:`ClockProbe` is the interface; :class:`CupyClockProbe` runs the kernel with CuPy
(imported lazily), and the simulated GPU's probe reads the simulated clock
(:meth:`powermodels.devices.simulated.SimulatedGPU.clock_probe`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

import numpy as np

from .. import schema

if TYPE_CHECKING:  # annotations only: pandas is imported where a probe table is built
    import pandas as pd

__all__ = [
    "CLOCK_STEP_MHZ",
    "PROBE_SOURCE",
    "PROBE_SPIN_NS",
    "TIMER_TICK_NS",
    "ClockProbe",
    "CupyClockProbe",
    "SimulatedClockProbe",
    "clock_from_counts",
    "clock_uncertainty_mhz",
    "probe_times_s",
]

#: Hopper's SM-clock step (supported graphics clocks 15 MHz apart): two readings closer than half
#: of it are one clock, and the NVML reading can show a clock one step off for seconds.
CLOCK_STEP_MHZ = 15.0
#: Tick of ``%globaltimer`` on an H100 (measured: 1,979.9 MHz at a steady 1,980 MHz).
TIMER_TICK_NS = 32.0
#: Global-timer span a probe spins for: one tick is then ≤ 0.16 % of it.
PROBE_SPIN_NS = 20_000

#: CUDA source of the probe (one warp; lane 0 does the work, the others exit).
#: ``out`` holds 3 unsigned 64-bit words per slot: cycles, elapsed ns, start ns.
PROBE_SOURCE = r"""
extern "C" __global__ void powermodels_clock_probe(unsigned long long* out, long long slot,
                                                   unsigned long long spin_ns) {
    if (threadIdx.x != 0) return;
    unsigned long long g, g0, g1;
    long long c0, c1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0)); } while (g0 == g);
    c0 = clock64();
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1)); } while (g1 - g0 < spin_ns);
    c1 = clock64();
    out[3 * slot + 0] = (unsigned long long)(c1 - c0);
    out[3 * slot + 1] = g1 - g0;
    out[3 * slot + 2] = g0;
}
"""


def clock_from_counts(cycles, elapsed_ns) -> np.ndarray:
    """SM clock (MHz) from cycles counted over ``elapsed_ns`` global-timer nanoseconds."""
    cycles = np.asarray(cycles, dtype=float)
    elapsed_ns = np.asarray(elapsed_ns, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(elapsed_ns > 0, 1e3 * cycles / elapsed_ns, np.nan)


def clock_uncertainty_mhz(cycles, elapsed_ns, tick_ns: float = TIMER_TICK_NS) -> np.ndarray:
    """Bound of a probe's clock error (MHz): one timer tick over the elapsed time."""
    return clock_from_counts(cycles, elapsed_ns) * tick_ns / np.asarray(elapsed_ns, dtype=float)


def probe_times_s(starts_s, ends_s) -> np.ndarray:
    """Host times of the ``n + 1`` probes around ``n`` batches: before the first, between
    consecutive batches (the middle of the gap), after the last — so the probe before a
    batch is at or before its start and the one after at or after its end."""
    starts_s = np.asarray(starts_s, dtype=float)
    ends_s = np.asarray(ends_s, dtype=float)
    return np.concatenate([starts_s[:1], 0.5 * (starts_s[1:] + ends_s[:-1]), ends_s[-1:]])


def probe_table(cycles, elapsed_ns, gpu_time_ns=None) -> pd.DataFrame:
    """The results of a batch of probes as a table (``cycles``, ``elapsed_ns``, ``clock_mhz``)."""
    cycles = np.asarray(cycles, dtype=float)
    elapsed_ns = np.asarray(elapsed_ns, dtype=float)
    import pandas as pd  # here: importing the simulated GPU must not import pandas (start-up)

    out = pd.DataFrame({schema.PROBE_CYCLES: cycles, schema.PROBE_ELAPSED_NS: elapsed_ns,
                        schema.PROBE_CLOCK_MHZ: clock_from_counts(cycles, elapsed_ns)})
    if gpu_time_ns is not None:
        out[schema.PROBE_GPU_TIME_NS] = np.asarray(gpu_time_ns, dtype=float)
    return out


class ClockProbe(ABC):
    """Probes enqueued on a stream, read back together once the stream has finished.

    ``enqueue`` is cheap (a kernel launch); ``collect`` waits for the probes and returns
    one row per probe in the order they were enqueued, then forgets them.
    """

    @abstractmethod
    def enqueue(self, stream=None) -> int:
        """Put a probe on ``stream`` (the device's current stream when None); its index."""

    @abstractmethod
    def collect(self) -> pd.DataFrame:
        """Rows ``cycles``, ``elapsed_ns``, ``clock_mhz`` of the probes since the last collect."""

    def collect_clocks(self) -> np.ndarray:
        """Only the clocks (MHz) of the probes since the last collect (no table: cheap per call)."""
        return self.collect()[schema.PROBE_CLOCK_MHZ].to_numpy(float)

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the probe's GPU memory."""


class CupyClockProbe(ClockProbe):
    """The probe kernel run with CuPy (compiled once with NVRTC on first use).

    Parameters
    ----------
    capacity : int, default=4096
        Probes held before a ``collect``; the buffer grows (by a synchronising copy)
        beyond that.
    spin_ns : int, default=PROBE_SPIN_NS
        Global-timer span of one probe.
    """

    def __init__(self, capacity: int = 4096, spin_ns: int = PROBE_SPIN_NS):
        import cupy as cp

        if not (isinstance(capacity, int) and capacity >= 1):
            raise ValueError(f"CupyClockProbe: capacity must be an int >= 1, got {capacity!r}")
        if not (isinstance(spin_ns, int) and spin_ns >= 4 * TIMER_TICK_NS):
            raise ValueError(f"CupyClockProbe: spin_ns must be an int >= {4 * TIMER_TICK_NS:g}, got {spin_ns!r}")
        self._cp = cp
        self._kernel = cp.RawKernel(PROBE_SOURCE, "powermodels_clock_probe")
        self._buffer = cp.zeros(3 * capacity, dtype=cp.uint64)
        self.spin_ns = spin_ns
        self._count = 0

    def enqueue(self, stream=None) -> int:
        cp = self._cp
        if 3 * (self._count + 1) > self._buffer.size:
            # the probes may still run on another stream (the workload's): let them finish before
            # the copy reads the buffer and before the old buffer goes back to the memory pool
            cp.cuda.runtime.deviceSynchronize()
            bigger = cp.zeros(2 * self._buffer.size, dtype=cp.uint64)
            bigger[: self._buffer.size] = self._buffer
            self._buffer = bigger
        stream = stream if stream is not None else cp.cuda.get_current_stream()
        with stream:
            self._kernel((1,), (32,), (self._buffer, np.int64(self._count), np.uint64(self.spin_ns)))
        self._count += 1
        return self._count - 1

    def collect(self) -> pd.DataFrame:
        # the probes may sit on any stream: wait for the whole device before reading them back
        self._cp.cuda.runtime.deviceSynchronize()
        words = self._buffer[: 3 * self._count].get().reshape(-1, 3).astype(float)
        self._count = 0
        return probe_table(words[:, 0], words[:, 1], words[:, 2])

    def close(self) -> None:
        self._buffer = None


class SimulatedClockProbe(ClockProbe):
    """The probe on a simulated GPU: the simulated clock, counted as the kernel would count it.

    Parameters
    ----------
    clock_at_now : callable
        Returns ``(host_time_s, sm_clock_mhz)`` of the simulated GPU now.
    spin_ns : int, default=PROBE_SPIN_NS
        Global-timer span of one probe (rounded up to whole ticks, as the kernel stops on
        a tick edge).
    """

    def __init__(self, clock_at_now, spin_ns: int = PROBE_SPIN_NS):
        self._clock_at_now = clock_at_now
        self.spin_ns = spin_ns
        self._rows: list[tuple[float, float, float]] = []

    def enqueue(self, stream=None) -> int:
        t_s, mhz = self._clock_at_now()
        elapsed = float(np.ceil(self.spin_ns / TIMER_TICK_NS) * TIMER_TICK_NS)
        self._rows.append((float(np.round(mhz * elapsed / 1e3)), elapsed, 1e9 * t_s))
        return len(self._rows) - 1

    def collect(self) -> pd.DataFrame:
        rows = np.array(self._rows, dtype=float).reshape(-1, 3)
        self._rows = []
        return probe_table(rows[:, 0], rows[:, 1], rows[:, 2])

    def collect_clocks(self) -> np.ndarray:
        rows = np.array(self._rows, dtype=float).reshape(-1, 3)
        self._rows = []
        return clock_from_counts(rows[:, 0], rows[:, 1])
