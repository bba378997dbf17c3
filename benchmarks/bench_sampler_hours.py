"""The background sampler over an hour at 2 kHz: rate, window-query cost and memory stay flat.

An hour of real time is too long for a benchmark, so the hour is *simulated*
(honestly, in two parts):

1. **Real time, empty buffer** — the real :class:`~powermodels.measuring.sampler.Sampler`
   samples a fake device at its default 2 kHz for ``--realtime`` seconds while
   the main thread asks for a 1 s window every 50 ms (what a runner does).
2. **The hour, accelerated** — the same sampler thread (the same fast loop,
   the same buffer, the same trims) reads a fake device whose clock advances
   0.5 ms per reading (2 kHz of device time) without sleeping, until the
   buffer has seen ``--minutes`` of device time (default 62: the retention
   of 3600 s is reached and trimming runs). Per device-minute it reports
   the readings the loop could store per wall second (must stay ≫ 2,000),
   the longest wall gap between two readings (a trim or a query stalling
   the loop would show here) and the cost of a 1 s window query from the
   main thread, which keeps querying throughout.
3. **Real time, full buffer** — the clock is switched back to real time
   (continuing after the hour) and part 1 is repeated with an hour of
   readings held: achieved rate and query cost at the end vs the start.

Memory: the buffer's bytes (``Sampler.nbytes``), the process's resident set
and its peak. The device is a fake (~1 µs per read, like NVML's power call);
on a real GPU a read costs a few µs more through ctypes.

Usage::

    python benchmarks/bench_sampler_hours.py               # writes results/sampler_hours.md
    python benchmarks/bench_sampler_hours.py --minutes 3 --realtime 1   # smoke test
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import write_report

from powermodels.devices.base import Device, DeviceInfo, Reading, Settings
from powermodels.measuring.sampler import Sampler
from powermodels.reporting import markdown_table

RESULTS = Path(__file__).resolve().parent / "results" / "sampler_hours.md"
PERIOD_S = 5e-4


class ClockedDevice(Device):
    """A fake GPU whose clock is either real time or advanced 0.5 ms per reading.

    ``read`` also records the largest wall-clock gap between two reads (per
    device minute), which is where a stall of the sampler loop would show.
    """

    def __init__(self):
        self.accelerated = False
        self._sim = 0.0
        self._wall0 = time.perf_counter()
        self._offset = 0.0
        self._last_wall = None
        self.max_gap_s = 0.0
        self.energy_j = 1e6

    @property
    def info(self):
        return DeviceInfo(name="clocked fake", kind="fake")

    def set_accelerated(self, on: bool) -> None:
        t = self.now()
        self.accelerated = on
        self._sim = t
        self._offset = t - (time.perf_counter() - self._wall0)
        self._last_wall = None

    def now(self):
        if self.accelerated:
            return self._sim
        return self._offset + (time.perf_counter() - self._wall0)

    def read(self):
        wall = time.perf_counter()
        if self._last_wall is not None and wall - self._last_wall > self.max_gap_s:
            self.max_gap_s = wall - self._last_wall
        self._last_wall = wall
        if self.accelerated:
            self._sim += PERIOD_S
        t = self.now()
        return Reading(t_s=t, power_instant_w=300.0 + (t % 1.0), power_average_w=300.0,
                       power_usage_w=300.0, temperature_c=55.0, sm_clock_mhz=1980.0,
                       mem_clock_mhz=2619.0, throttle_reasons=0)

    def read_energy_j(self):
        return 300.0 * self.now() + self.energy_j

    def supported_clocks(self):
        return {2619.0: [1980.0]}

    def power_limits_w(self):
        return (200.0, 700.0, 700.0)

    def current_settings(self):
        return Settings()

    def _apply_sm_clock(self, mhz):
        raise AssertionError("the benchmark never changes settings")

    _apply_mem_clock = _apply_power_limit = _apply_sm_clock


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def query_cost_s(sampler, t_end, repeats=21) -> float:
    """Median wall cost of a 1 s window ending 0.5 s before ``t_end``."""
    costs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sampler.table(t_end - 1.5, t_end - 0.5, run_id="q")
        costs.append(time.perf_counter() - t0)
    return float(np.median(costs))


def realtime(sampler, dev, seconds) -> dict:
    """Sample in real time at 2 kHz while the main thread queries a 1 s window every 50 ms."""
    dev.set_accelerated(False)
    dev.max_gap_s = 0.0
    sampler.period_s = PERIOD_S
    sampler.energy_period_s = 0.02
    sampler.start()
    t0 = dev.now()
    costs, stalls = [], []
    while dev.now() < t0 + seconds:
        w0 = time.perf_counter()
        sampler.table(dev.now() - 1.5, dev.now() - 0.5, run_id="q")
        costs.append(time.perf_counter() - w0)
        time.sleep(0.05)
        stalls.append(time.perf_counter() - w0 - 0.05)
    t1 = dev.now()
    sampler.stop()
    per_second = [sampler.rate_hz(a, a + 1.0) for a in np.arange(t0, t1 - 1.0, 1.0)]
    return {"rate_hz": sampler.rate_hz(t0, t1), "min_rate_hz": min(per_second) if per_second else np.nan,
            "query_ms": 1e3 * float(np.median(costs)), "max_gap_ms": 1e3 * dev.max_gap_s,
            "main_stall_ms": 1e3 * max(stalls), "held": len(sampler)}


def accelerated(sampler, dev, minutes) -> list[dict]:
    """The sampler thread at full speed on the accelerated clock; one row per device minute.

    At each minute's end the sampler is paused for a moment to time a 1 s
    window query alone (while it runs flat out, a main-thread query also
    waits for the GIL: reported separately as the concurrent query).
    """
    sampler.period_s = 1e-9       # the loop never sleeps: device time runs ahead of wall time
    sampler.energy_period_s = 2e-4  # a counter read every ~0.05 s of device time at ~250x
    dev.set_accelerated(True)
    start = dev.now()
    rows = []
    for minute in range(1, minutes + 1):
        target = start + 60.0 * minute
        n0, w0 = sampler._readings.dropped + len(sampler), time.perf_counter()
        dev.max_gap_s = 0.0
        dev._last_wall = None
        costs = []
        sampler.start()
        try:
            while dev.now() < target:  # the main thread keeps querying, like a runner
                q0 = time.perf_counter()
                sampler.table(dev.now() - 1.5, dev.now() - 0.5, run_id="q")
                costs.append(time.perf_counter() - q0)
                time.sleep(0.002)
        finally:
            sampler.stop()
        wall = time.perf_counter() - w0
        stored = sampler._readings.dropped + len(sampler) - n0
        rows.append({"minute": minute, "stored_per_wall_s": stored / wall,
                     "max_gap_ms": 1e3 * dev.max_gap_s,
                     "query_ms": 1e3 * query_cost_s(sampler, dev.now()),
                     "concurrent_ms": 1e3 * float(np.median(costs)) if costs else np.nan,
                     "held": len(sampler), "buffer_mib": sampler.nbytes() / 2**20,
                     "rss_mib": rss_mib()})
    return rows


def _table(header, rows) -> str:
    return markdown_table(pd.DataFrame(rows, columns=header))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=62, help="device minutes to accelerate through")
    parser.add_argument("--realtime", type=float, default=10.0, help="seconds of real-time sampling")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    dev = ClockedDevice()
    sampler = Sampler(dev, period_s=PERIOD_S, energy_period_s=0.02, max_seconds=3600.0)
    rss0 = rss_mib()
    load0 = os.getloadavg()[0]
    before = realtime(sampler, dev, args.realtime)
    q_start = query_cost_s(sampler, dev.now())
    w0 = time.perf_counter()
    rows = accelerated(sampler, dev, args.minutes)
    fill_wall = time.perf_counter() - w0
    q_end = query_cost_s(sampler, dev.now())
    after = realtime(sampler, dev, args.realtime)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    show = [r for r in rows if r["minute"] in (1, 2, 10, 30, 59, 60, 61, 62)
            or r["minute"] == rows[-1]["minute"]]
    table = _table(
        ["device minute", "stored / wall s", "longest gap (ms)", "1 s window query (ms)",
         "concurrent query (ms)", "readings held", "buffer (MiB)", "RSS (MiB)"],
        [[r["minute"], f"{r['stored_per_wall_s']:,.0f}", f"{r['max_gap_ms']:.1f}",
          f"{r['query_ms']:.2f}", f"{r['concurrent_ms']:.2f}", f"{r['held']:,}",
          f"{r['buffer_mib']:.0f}", f"{r['rss_mib']:.0f}"]
         for r in show])
    rt = _table(
        ["real-time 2 kHz", "readings held", "rate (Hz)", "slowest 1 s (Hz)", "longest gap (ms)",
         "1 s window query (ms)", "main-thread stall (ms)"],
        [[name, f"{r['held']:,}", f"{r['rate_hz']:,.0f}", f"{r['min_rate_hz']:,.0f}",
          f"{r['max_gap_ms']:.1f}", f"{r['query_ms']:.2f}", f"{r['main_stall_ms']:.1f}"]
         for name, r in (("start (empty buffer)", before), ("after the hour", after))])
    slowest = min(r["stored_per_wall_s"] for r in rows)
    text = f"""# Sampler over an hour at 2 kHz

`python benchmarks/bench_sampler_hours.py --minutes {args.minutes} --realtime {args.realtime:g}` on
{platform.processor() or platform.machine()}, Python {platform.python_version()}, a fake device
(~1 µs per read). Real-time parts sample at the default 2 kHz; the hour in between runs the same
sampler thread on a clock advanced 0.5 ms per reading (2 kHz of device time) without sleeping,
so it took {fill_wall:.0f} s of wall time for {args.minutes} device minutes. Load average
{load0:.1f} at the start (a {os.cpu_count()}-core machine shared with other work).

## Real time, before and after the hour

{rt}

## The accelerated hour (retention 3600 s; the main thread queries a 1 s window throughout)

{table}

*stored / wall s*: readings the loop stored per second of wall time (2,000 needed). *Longest gap*:
wall time between two reads, where a stall of the loop would show (the interpreter hands the GIL
over every 5 ms, so a few ms is the floor while the main thread builds a table). *1 s window
query*: median of 21 with the sampler paused at the minute's end; *concurrent*: while it runs
flat out (GIL-bound).

The slowest device minute stored {slowest:,.0f} readings per wall second: the loop has headroom of
{slowest / 2000:.0f}x over 2 kHz at every buffer length. A 1 s window (2,000 readings + counter)
costs {1e3 * q_start:.2f} ms with {before['held']:,} readings held and {1e3 * q_end:.2f} ms with
{rows[-1]['held']:,} (medians of 21, sampler stopped).

Memory: buffer {rows[-1]['buffer_mib']:.0f} MiB for {rows[-1]['held']:,} readings
({rows[-1]['buffer_mib'] * 2**20 / max(rows[-1]['held'], 1):.0f} B each, incl. the chunk being
filled); process RSS {rss0:.0f} MiB at the start, peak {peak:.0f} MiB.
"""
    return write_report(text, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
