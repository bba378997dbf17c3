"""Record a raw GPU recording: a full-rate NVML trace beside every timed launch, with on-GPU clock probes.

Run on a lent GPU (no setting is changed: NVML setters are replaced by functions that raise)::

    python benchmarks/gpu_raw_recording.py --out $OUT > /tmp/rec.log   # ~6.2 min on an H100

It writes seven files: the device tool brings back at most eight, so keep logs out of ``--out``
(a 9th file, the trace, was lost that way once).
    python benchmarks/gpu_raw_recording.py --out /tmp/rec --scale 0.05 --dry-cpu   # plumbing only

It writes the raw recording format that ``powermodels.recording`` reads (the same files and columns as
the shared ``h100-2026-11-25-raw`` recording) plus ``probes.parquet``:

- ``trace.parquet``: ``t_s``, ``power_instant_w`` (field 186), ``power_average_w`` (field 185),
  ``sm_clock_mhz``, ``mem_clock_mhz``, ``temperature_c``, ``memory_temperature_c`` (the HBM reading,
  NVML field ``NVML_FI_DEV_MEMORY_TEMP``; NaN where the board does not report it) and ``throttle_reasons``
  (these three every 8th poll, forward-filled), ``read_s``;
- ``energy.parquet``: ``t_s`` (middle of the call), ``energy_counter_j``, ``read_s``;
- ``launches.parquet``: ``workload``, ``phase``, ``repeat``, ``batch``, ``start_s``, ``end_s``,
  ``launches`` in the batch, ``time_s`` per launch (CUDA events mapped onto the host clock);
- ``phases.parquet``: ``phase``, ``workload``, ``repeat``, ``kind`` (idle / pressure / burst / series / ladder),
  ``t0_s``, ``t1_s``;
- ``probes.parquet``: one row per clock probe launched between batches on the same stream:
  ``t_s`` (host clock of the probe's end), ``workload``, ``batch`` (the batch that follows),
  ``clock_mhz`` = SM cycles ÷ ``%globaltimer`` ns over a ~20 µs spin, ``cycles``, ``elapsed_ns``;
- ``provenance.json`` (GPU, UUID, board part number, driver, limits, protocol, durations), ``nvidia_smi.txt``.

Protocols (as in the shared recording, so the two can be compared):

- **natural**: for fp32 GEMM / FMA loop / triad, cycles of [bf16 pressure load for 0–3 s, then a
  0.6 s burst of timed launches with a probe between batches], two rounds in opposite order: the
  clocks the power-cap controller chooses while it recovers. With ``--probe-pressure`` the pressure's
  launches are timed and probed too (launch rows under its own name, batches numbered on across the
  part), so that its cycles per launch can be read before the thermal series: a raw recording without
  them cannot tell a board's capped cycles before its capped series (docs/twin.md, session 22).
- **ladder** (``--ladder``, off by default): for each of the three, the workload alternating with the
  bf16 pressure every 10 ms for 1.5 s per pressure share (0.8, 0.65, 0.5), each step then 0.3 s of the
  workload alone; both loads' batches timed and probed with no host sync inside a cycle
  (``Recorder.alternating``). Under natural DVFS only a load at the power cap holds the clock below the
  top for a whole counter window; docs/recordings.md, "The ladder part". ~16 s in all.
- **thermal**: for each workload, ``idle`` seconds idle, then ``series`` seconds back to back from cold
  (probes every batch); some idle at the end.
- **capstarts** (``--parts capstarts``, off by default): ``--cap-starts`` times, ``--cap-idle`` seconds idle
  then ``--cap-series`` seconds of the bf16 GEMM from idle: the power-cap controller's start (overshoot,
  settling) repeated on one board, so that a twin's capped start is compared with the board's own spread
  rather than with one draw of it (docs/twin.md, session 12). Phases ``capstart``/``idle`` and
  ``capstart``/``series``. Several ``--cap-idle`` values are cycled over the starts (``--cap-idle 15 60``).

On a host with several GPUs, pick one with ``CUDA_VISIBLE_DEVICES``: the NVML sensors read are those of
the board CUDA runs on (matched by PCI bus id), so two boards can be recorded at once by two processes.

Which parts run, in this order: ``--parts`` (default ``natural thermal``; ``--ladder`` adds the ladder).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "src"))  # works without PYTHONPATH=src too
from _readonly_nvml import forbid_nvml_setters  # noqa: E402

from powermodels.termination import Terminated, terminate_raises  # noqa: E402

PROBE_SOURCE = r"""
extern "C" __global__ void clock_probe(long long* out, int slot, long long spin_cycles) {
    if (threadIdx.x != 0) return;
    unsigned long long g0, g1;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));
    long long c0 = clock64();
    long long c = c0;
    while (c - c0 < spin_cycles) { c = clock64(); }
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));
    long long c1 = clock64();
    out[4 * slot + 0] = c0; out[4 * slot + 1] = c1;
    out[4 * slot + 2] = (long long)g0; out[4 * slot + 3] = (long long)g1;
}
"""

FMA_SOURCE = r"""
extern "C" __global__ void fma_loop(float* out, int iterations) {
    float a = threadIdx.x * 1e-3f, b = 0.999f, c = 1e-4f;
    for (int i = 0; i < iterations; ++i) { a = fmaf(a, b, c); }
    out[blockIdx.x * blockDim.x + threadIdx.x] = a;
}
"""


def memory_temperature_c(nvml, handle) -> float:
    """The HBM temperature in °C (NVML field ``NVML_FI_DEV_MEMORY_TEMP``), NaN where it is not reported.

    Read beside the die temperature because the H200s' memory-bound power falls in two groups of boards
    (docs/twin.md, session 15): whether the high group runs its memory hotter needs this reading.
    """
    # never raise: this runs inside the sampler thread, whose death would end the whole trace
    try:
        value = nvml.nvmlDeviceGetFieldValues(handle, [nvml.NVML_FI_DEV_MEMORY_TEMP])[0]
    except Exception:  # an old pynvml without the field, or an NVMLError
        return float("nan")
    if value.nvmlReturn != nvml.NVML_SUCCESS:
        return float("nan")
    # the field's type differs between drivers; read the union member its valueType names
    # (nvmlValueType_t numbers them 0-6 in this order)
    member = dict(enumerate(("dVal", "uiVal", "ulVal", "ullVal", "sllVal", "siVal", "usVal"))).get(value.valueType)
    return float(getattr(value.value, member)) if member else float("nan")


def board_part_number(nvml, handle) -> str:
    """NVML's board part number (e.g. ``692-2G520-0282-001``), "" where the driver does not report it.

    H200 boards of two part numbers differ by ~30 % in memory power (docs/twin.md, session 17): the twin pools
    boards by it (:func:`powermodels.board_calibration.parts.board_part_number` reads it from the provenance).
    """
    try:
        part = nvml.nvmlDeviceGetBoardPartNumber(handle)
    except Exception:  # an old pynvml, or NVML_ERROR_NOT_SUPPORTED: the recording is still worth keeping
        return ""
    return part.decode() if isinstance(part, bytes) else str(part)


class Sampler(threading.Thread):
    """Poll NVML on a fixed period: power fields 186/185 and clocks every poll; die and memory temperature
    and the clock-event reasons every 8th."""

    def __init__(self, nvml, handle, capacity, period_s=5e-4):
        super().__init__(daemon=True)
        self.nvml, self.handle = nvml, handle
        self.period_s = period_s
        self.cols = {k: np.full(capacity, np.nan) for k in
                     ("t_s", "power_instant_w", "power_average_w", "sm_clock_mhz", "mem_clock_mhz",
                      "temperature_c", "memory_temperature_c", "throttle_reasons", "read_s")}
        self.n = 0
        self.stop_event = threading.Event()
        self.t0 = None

    def run(self):
        nv, h, c = self.nvml, self.handle, self.cols
        cap = len(c["t_s"])
        fields = [nv.NVML_FI_DEV_POWER_INSTANT, nv.NVML_FI_DEV_POWER_AVERAGE]
        i = 0
        next_t = time.perf_counter()
        while not self.stop_event.is_set() and i < cap:
            # NVML answers from a cache in ~15 µs: poll on a fixed period (~2 kHz, as the shared
            # recording) instead of as fast as possible, which filled memory in 27 s at 74 kHz
            next_t += self.period_s
            pause = next_t - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            else:
                next_t = time.perf_counter()
            a = time.perf_counter()
            vals = nv.nvmlDeviceGetFieldValues(h, fields)
            sm = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            mem = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM)
            if i % 8 == 0:
                c["temperature_c"][i] = nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)
                c["throttle_reasons"][i] = nv.nvmlDeviceGetCurrentClocksEventReasons(h)
                c["memory_temperature_c"][i] = memory_temperature_c(nv, h)
            b = time.perf_counter()
            c["t_s"][i] = (a + b) / 2 - self.t0
            c["read_s"][i] = b - a
            c["power_instant_w"][i] = vals[0].value.uiVal / 1000.0
            c["power_average_w"][i] = vals[1].value.uiVal / 1000.0
            c["sm_clock_mhz"][i] = sm
            c["mem_clock_mhz"][i] = mem
            i += 1
            self.n = i

    def frame(self):
        import pandas as pd

        df = pd.DataFrame({k: v[: self.n] for k, v in self.cols.items()})
        slow = ["temperature_c", "memory_temperature_c", "throttle_reasons"]
        df[slow] = df[slow].ffill()
        return df


class EnergyReader(threading.Thread):
    """Read the total-energy counter in a loop (each call takes a few ms)."""

    def __init__(self, nvml, handle, capacity):
        super().__init__(daemon=True)
        self.nvml, self.handle = nvml, handle
        self.t = np.full(capacity, np.nan)
        self.e = np.full(capacity, np.nan)
        self.r = np.full(capacity, np.nan)
        self.n = 0
        self.stop_event = threading.Event()
        self.t0 = None

    def run(self):
        nv, h = self.nvml, self.handle
        i = 0
        while not self.stop_event.is_set() and i < len(self.t):
            a = time.perf_counter()
            mj = nv.nvmlDeviceGetTotalEnergyConsumption(h)
            b = time.perf_counter()
            self.t[i], self.e[i], self.r[i] = (a + b) / 2 - self.t0, mj / 1000.0, b - a
            i += 1
            self.n = i
            time.sleep(0.0005)

    def frame(self):
        import pandas as pd

        return pd.DataFrame({"t_s": self.t[: self.n], "energy_counter_j": self.e[: self.n],
                             "read_s": self.r[: self.n]})


class Recorder:
    """Launch workloads with CUDA events and clock probes on the null stream, all mapped to one host clock."""

    def __init__(self, cp, t0, probe_cycles=40000, max_probes=400_000):
        self.cp, self.t0 = cp, t0
        self.probe = cp.RawKernel(PROBE_SOURCE, "clock_probe")
        self.probe_buf = cp.zeros(4 * max_probes, dtype=cp.int64)
        self.probe_cycles = np.int64(probe_cycles)
        self.n_probes = 0
        self.probe_meta = []  # (workload, batch)
        self.launch_rows = []
        self.phase_rows = []
        self.offset_s = self._globaltimer_offset()

    def _globaltimer_offset(self):
        """Host perf_counter minus %globaltimer: the smallest gap over 30 synchronised probes."""
        cp = self.cp
        best = np.inf
        for _ in range(30):
            slot = self.n_probes
            self._launch_probe("-", -1)
            cp.cuda.runtime.deviceSynchronize()
            host = time.perf_counter()
            g1 = int(self.probe_buf[4 * slot + 3].get())
            best = min(best, host - g1 * 1e-9)
        return best

    def _launch_probe(self, workload, batch):
        self.probe((1,), (32,), (self.probe_buf, np.int32(self.n_probes), self.probe_cycles))
        self.probe_meta.append((workload, batch))
        self.n_probes += 1

    def phase(self, phase, workload, repeat, kind, t0, t1):
        self.phase_rows.append((phase, workload, repeat, kind, t0 - self.t0, t1 - self.t0))

    def timed(self, fn, workload, phase, repeat, seconds, per_batch=1, probe=True, chunk_s=0.1, first_batch=0):
        """Run ``fn`` back to back for ``seconds``: events around each batch, a probe before each batch
        (batches numbered from ``first_batch``)."""
        cp = self.cp
        start_host = time.perf_counter()
        batch = first_batch
        pending = []  # (anchor_event, anchor_host, [(batch, ev_a, ev_b)])
        anchor = cp.cuda.Event()
        anchor.record()
        anchor.synchronize()
        anchor_host = time.perf_counter()
        deadline = start_host + seconds
        chunk = []
        chunk_started = time.perf_counter()
        last_sync_event = None
        while time.perf_counter() < deadline:
            if probe:
                self._launch_probe(workload, batch)
            a = cp.cuda.Event()
            b = cp.cuda.Event()
            a.record()
            for _ in range(per_batch):
                fn()
            b.record()
            chunk.append((batch, a, b))
            batch += 1
            if time.perf_counter() - chunk_started > chunk_s:
                # keep at most ~two chunks in flight so the host clock and the GPU stay close
                if last_sync_event is not None:
                    last_sync_event.synchronize()
                last_sync_event = b
                pending.append(chunk)
                chunk, chunk_started = [], time.perf_counter()
        if chunk:
            pending.append(chunk)
        cp.cuda.runtime.deviceSynchronize()
        end_host = time.perf_counter()
        for ch in pending:
            for bt, a, b in ch:
                sa = anchor_host + cp.cuda.get_elapsed_time(anchor, a) / 1e3
                sb = anchor_host + cp.cuda.get_elapsed_time(anchor, b) / 1e3
                self.launch_rows.append((workload, phase, repeat, bt, sa - self.t0, sb - self.t0,
                                         per_batch, (sb - sa) / per_batch))
        return start_host, end_host

    def alternating(self, loads, phase, repeat, seconds, chunk_s=0.1):
        """The ladder step: ``loads`` = [(fn, name, per_batch, batches), ...] in turn, again and again, for
        ``seconds``; each batch between CUDA events with a probe before it, all on one stream and with no
        host sync inside a cycle (one every ~``chunk_s``, as :meth:`timed`), so the loads follow each other
        within a few µs. Every batch becomes a launch row under its load's name."""
        cp = self.cp
        start_host = time.perf_counter()
        anchor = cp.cuda.Event()
        anchor.record()
        anchor.synchronize()
        anchor_host = time.perf_counter()
        deadline = start_host + seconds
        counters = {name: 0 for _, name, _, _ in loads}
        rows, last_sync, chunk_started = [], None, time.perf_counter()
        while time.perf_counter() < deadline:
            for fn, name, per, batches in loads:
                for _ in range(batches):
                    self._launch_probe(name, counters[name])
                    a, b = cp.cuda.Event(), cp.cuda.Event()
                    a.record()
                    for _ in range(per):
                        fn()
                    b.record()
                    rows.append((name, counters[name], per, a, b))
                    counters[name] += 1
            if time.perf_counter() - chunk_started > chunk_s:
                if last_sync is not None:
                    last_sync.synchronize()
                last_sync, chunk_started = rows[-1][4], time.perf_counter()
        cp.cuda.runtime.deviceSynchronize()
        end_host = time.perf_counter()
        for name, bt, per, a, b in rows:
            sa = anchor_host + cp.cuda.get_elapsed_time(anchor, a) / 1e3
            sb = anchor_host + cp.cuda.get_elapsed_time(anchor, b) / 1e3
            self.launch_rows.append((name, phase, repeat, bt, sa - self.t0, sb - self.t0, per, (sb - sa) / per))
        self.last_batch = dict(counters)
        return start_host, end_host

    def launch_time_s(self, fn, per_batch=1, n=5):
        """Mean time of one launch of ``fn`` (CUDA events over ``n`` batches)."""
        cp = self.cp
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(n * per_batch):
            fn()
        b.record()
        b.synchronize()
        return cp.cuda.get_elapsed_time(a, b) / 1e3 / (n * per_batch)

    def busy(self, fn, seconds):
        """Run ``fn`` back to back for ``seconds`` (no events): a pressure load."""
        cp = self.cp
        start = time.perf_counter()
        n = 0
        while time.perf_counter() - start < seconds:
            fn()
            n += 1
            if n % 8 == 0:
                cp.cuda.runtime.deviceSynchronize()
        cp.cuda.runtime.deviceSynchronize()
        return start, time.perf_counter()

    def probes_frame(self):
        import pandas as pd

        raw = self.probe_buf[: 4 * self.n_probes].get().reshape(-1, 4)
        cycles = raw[:, 1] - raw[:, 0]
        ns = raw[:, 3] - raw[:, 2]
        meta = np.array(self.probe_meta, dtype=object).reshape(-1, 2)
        df = pd.DataFrame({
            "t_s": raw[:, 3] * 1e-9 + self.offset_s - self.t0,
            "workload": meta[:, 0].astype(str),
            "batch": meta[:, 1].astype(np.int64),
            "clock_mhz": np.where(ns > 0, cycles / np.maximum(ns, 1) * 1e3, np.nan),
            "cycles": cycles.astype(np.int64),
            "elapsed_ns": ns.astype(np.int64),
        })
        return df[df["workload"] != "-"].reset_index(drop=True)


def build_workloads(cp, torch):
    """The four workloads of the shared recording: fp32 GEMM, FMA loop (clock reference), triad, bf16 GEMM."""
    n = 4096
    a = cp.random.rand(n, n, dtype=cp.float32)
    b = cp.random.rand(n, n, dtype=cp.float32)
    c = cp.empty((n, n), dtype=cp.float32)
    fma = cp.RawKernel(FMA_SOURCE, "fma_loop")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    fma_out = cp.empty(sms * 4 * 256, dtype=cp.float32)
    triad_n = 256 * 2**20 // 4
    x = cp.random.rand(triad_n, dtype=cp.float32)
    y = cp.random.rand(triad_n, dtype=cp.float32)
    z = cp.empty(triad_n, dtype=cp.float32)
    triad = cp.ElementwiseKernel("float32 x, float32 y, float32 s", "float32 z", "z = x + s * y", "triad")
    big = 8192
    xa = torch.randn(big, big, device="cuda", dtype=torch.bfloat16)
    xb = torch.randn(big, big, device="cuda", dtype=torch.bfloat16)
    xc = torch.empty(big, big, device="cuda", dtype=torch.bfloat16)
    iters = np.int32(500_000)
    return {
        "cupy_fp32_matmul_4096": (lambda: cp.matmul(a, b, out=c), 1),
        "cupy_fma_loop": (lambda: fma((sms * 4,), (256,), (fma_out, iters)), 1),
        "cupy_triad_256MiB": (lambda: triad(x, y, np.float32(1.5), z), 8),
        "torch_bf16_matmul_8192": (lambda: torch.matmul(xa, xb, out=xc), 1),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--scale", type=float, default=1.0, help="multiply every duration (0.05 for a smoke test)")
    p.add_argument("--cycles", type=int, default=8, help="natural cycles per workload and round")
    p.add_argument("--idle", type=float, default=30.0, help="seconds idle before each thermal series")
    p.add_argument("--lead-idle", type=float, default=5.0,
                   help="seconds idle before the first load (default 5; e.g. 60 on a board that may still be "
                        "warm from earlier work: the replay's initial ambient is read there)")
    p.add_argument("--series", type=float, default=25.0, help="seconds of each thermal series")
    p.add_argument("--ladder", action="store_true",
                   help="add the ladder part after the natural one (powermodels.natural_dvfs.natural_recording.Ladder: "
                        "each workload alternating with the bf16 pressure every 10 ms, pressure shares 0.8/0.65/0.5, "
                        "1.5 s each, then 0.3 s alone; ~16 s in all)")
    p.add_argument("--probe-pressure", action="store_true",
                   help="time and probe the natural part's bf16 pressure launches too (its cycles per launch, "
                        "read before the thermal series; docs/twin.md, session 22)")
    p.add_argument("--parts", nargs="+", choices=PARTS, default=["natural", "thermal"],
                   help="which parts to record, run in the order natural, ladder, capstarts, thermal "
                        "(default: natural thermal)")
    p.add_argument("--cap-starts", type=int, default=10, help="capped starts from idle in the capstarts part")
    p.add_argument("--cap-idle", type=float, nargs="+", default=[15.0],
                   help="seconds idle before each capped start; several values are cycled over the starts "
                        "(e.g. 15 60: short and long rests alternate on one board, so the start's dependence "
                        "on how cool the board is can be told from the board's own level)")
    p.add_argument("--cap-series", type=float, default=10.0,
                   help="seconds of each capped start (the settled power is read from 5 s on: at least 7)")
    args = p.parse_args(argv)
    if args.ladder and "ladder" not in args.parts:
        args.parts = [*args.parts, "ladder"]
    if "capstarts" in args.parts and not (args.cap_starts >= 1 and args.cap_series >= 7.0
                                     and min(args.cap_idle) >= 3.0):
        p.error("--cap-starts must be ≥ 1, --cap-series ≥ 7 s (settled from 5 s on) and --cap-idle ≥ 3 s")
    if not args.lead_idle >= 3.0:  # the initial ambient reads an idle stretch of ≥ 3 s (twin.ambient.MIN_IDLE_S)
        p.error(f"--lead-idle must be at least 3 s, got {args.lead_idle}")
    blocked = forbid_nvml_setters()
    from powermodels.natural_dvfs.natural_recording import Ladder

    args.ladder = Ladder() if "ladder" in args.parts else None
    # the sampler threads must get the GIL back quickly while the main thread launches
    sys.setswitchinterval(2e-4)
    import cupy as cp
    import pynvml as nv
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    nv.nvmlInit()
    h = nvml_handle_of_cuda_device(nv, cp)
    s = args.scale
    t0 = time.perf_counter()
    sampler = Sampler(nv, h, capacity=int(2_000_000))  # 2 kHz: ~1,000 s of room
    energy = EnergyReader(nv, h, capacity=400_000)
    sampler.t0 = energy.t0 = t0
    sampler.start()
    energy.start()
    rec = Recorder(cp, t0)
    work = build_workloads(cp, torch)
    for name, (fn, per) in work.items():  # compile and warm every workload once (before the first idle)
        for _ in range(3):
            fn()
    cp.cuda.runtime.deviceSynchronize()
    errors = []
    stopped = None
    rng = np.random.default_rng(0)
    # SIGTERM (`timeout`) raises inside: the protocol stops and everything recorded is written below
    with terminate_raises():
        try:
            _protocol(args, rec, work, rng, s)
        except (Terminated, KeyboardInterrupt) as exc:  # stopped: keep what was recorded
            stopped = str(exc) or type(exc).__name__
            errors.append(stopped)
            print(f"STOPPED ({stopped}): writing what was recorded to {args.out}", flush=True)
        except Exception as exc:  # keep what was recorded; say what failed
            errors.append(repr(exc))
            print("ERROR", repr(exc), flush=True)
    _write(args, nv, h, sampler, energy, rec, work, blocked, s, t0, errors, stopped)
    if stopped is not None:
        return 143 if "SIGTERM" in stopped else 129 if "SIGHUP" in stopped else 130
    return 0 if not errors else 1


def nvml_handle_of_cuda_device(nv, cp):
    """The NVML handle of the GPU that CUDA's device 0 is, matched by PCI bus id.

    NVML numbers every GPU of the host and ignores ``CUDA_VISIBLE_DEVICES``, so on a host with several
    GPUs ``CUDA_VISIBLE_DEVICES=1`` with NVML index 0 would time one board and read another's sensors.
    """
    def bus(text) -> tuple[int, str]:  # NVML writes the domain with 8 digits, CUDA with 4
        text = text.decode() if isinstance(text, bytes) else text
        domain, rest = text.strip().lower().split(":", 1)
        return int(domain, 16), rest

    wanted = bus(cp.cuda.Device(0).pci_bus_id)
    for i in range(nv.nvmlDeviceGetCount()):
        handle = nv.nvmlDeviceGetHandleByIndex(i)
        if bus(nv.nvmlDeviceGetPciInfo(handle).busId) == wanted:
            return handle
    raise RuntimeError(f"no NVML device has CUDA device 0's PCI bus id {cp.cuda.Device(0).pci_bus_id}")


def lead_idle(rec, seconds: float) -> None:
    """The first phase: ``seconds`` idle, whose temperature gives a replay its initial ambient.

    A board still warm from earlier work reads its leftover heat there as a warmer room
    (``twin-compare`` flags it); a longer lead idle (``--lead-idle 60``) shows the cooling trend.
    """
    idle(rec, "natural", -1, seconds)


#: the parts of the protocol, in the order they run
PARTS = ("natural", "ladder", "capstarts", "thermal")


def _protocol(args, rec, work, rng, s) -> None:
    """The parts of the module docstring that ``args.parts`` names, into ``rec``."""
    lead_idle(rec, args.lead_idle * s)
    natural = ["cupy_fp32_matmul_4096", "cupy_fma_loop", "cupy_triad_256MiB"]
    if "natural" in args.parts:
        _natural(args, rec, work, rng, s, natural)
    if args.ladder is not None:
        _ladder(args.ladder, rec, work, natural, "torch_bf16_matmul_8192", s)
    if "capstarts" in args.parts:
        _cap_starts(args, rec, work, "torch_bf16_matmul_8192", s)
    if "thermal" in args.parts:
        _thermal(args, rec, work, s)


def _natural(args, rec, work, rng, s, natural) -> None:
    """Cycles of [pressure 0–3 s, a 0.6 s probed burst] per workload, two rounds in opposite order.

    ``args.probe_pressure``: the pressure timed and probed as well (``Recorder.timed``, its batches numbered
    on across the part, since each workload's cycles reuse the same repeat numbers); else run untimed.
    """
    pressure = "torch_bf16_matmul_8192"
    pressure_fn, pressure_per = work[pressure]
    pressure_batch = 0
    for rnd, order in enumerate([natural, natural[::-1]]):
        for name in order:
            fn, per = work[name]
            for cyc in range(args.cycles):
                repeat = rnd * args.cycles + cyc
                seconds = float(rng.uniform(0, 3)) * s
                if args.probe_pressure:
                    rows = len(rec.launch_rows)
                    a, b = rec.timed(pressure_fn, pressure, "natural", repeat, seconds, per_batch=pressure_per,
                                     first_batch=pressure_batch)
                    pressure_batch += len(rec.launch_rows) - rows
                else:
                    a, b = rec.busy(pressure_fn, seconds)
                rec.phase("natural", pressure, repeat, "pressure", a, b)
                a, b = rec.timed(fn, name, "natural", repeat, 0.6 * max(s, 0.2), per_batch=per)
                rec.phase("natural", name, repeat, "burst", a, b)


def _cap_starts(args, rec, work, capped, s) -> None:
    """``args.cap_starts`` × [``cap_idle`` s idle, ``cap_series`` s of the capped load from idle, timed].

    ``args.cap_idle`` is a list cycled over the starts (start ``k`` rests ``cap_idle[k % len]``); the
    rest each start had is its ``capstart``/``idle`` phase of the same repeat.
    """
    fn, per = work[capped]
    rests = list(np.atleast_1d(args.cap_idle))
    for k in range(args.cap_starts):
        idle(rec, "capstart", k, rests[k % len(rests)] * s)
        a, b = rec.timed(fn, capped, "capstart", k, args.cap_series * max(s, 0.7), per_batch=per,
                         first_batch=0)
        rec.phase("capstart", capped, k, "series", a, b)
    if "thermal" not in args.parts:  # a last idle, so the last start's cooling is recorded too
        idle(rec, "capstart", args.cap_starts, max(rests) * s)


def idle(rec, phase: str, repeat: int, seconds: float) -> None:
    """``seconds`` of idle, recorded as an ``idle`` entry of ``phase``."""
    a = time.perf_counter()
    time.sleep(seconds)
    rec.phase(phase, "-", repeat, "idle", a, time.perf_counter())


def _thermal(args, rec, work, s) -> None:
    """Per workload: ``idle`` s idle, then ``series`` s back to back from cold; 20 s idle at the end."""
    for rep, name in enumerate(work):
        fn, per = work[name]
        idle(rec, "thermal", rep, args.idle * s)
        a, b = rec.timed(fn, name, "thermal", rep, args.series * s, per_batch=per)
        rec.phase("thermal", name, rep, "series", a, b)
    idle(rec, "thermal", 99, 20 * s)


def _ladder(ladder, rec, work, names, pressure, s) -> None:
    """The ladder part (docs/recordings.md, "The ladder part"): per workload and pressure share, the two
    loads alternating for ``hold_s`` (one ``ladder`` phase under the workload's name, the pressure's
    batches as launch rows under its own), then ``tail_s`` of the workload alone (a ``burst``)."""
    p_fn, p_per = work[pressure]
    t_p = rec.launch_time_s(p_fn, p_per)
    for name in names:
        fn, per = work[name]
        t_w = rec.launch_time_s(fn, per)
        for j, share in enumerate(ladder.shares):
            n_p = max(1, round(share * ladder.cycle_s / (p_per * t_p)))
            n_w = max(1, round(n_p * p_per * t_p * (1 - share) / share / (per * t_w)))
            a, b = rec.alternating([(p_fn, pressure, p_per, n_p), (fn, name, per, n_w)], "ladder", j,
                                   ladder.hold_s * max(s, 0.2))
            rec.phase("ladder", name, j, "ladder", a, b)
            if ladder.tail_s > 0:
                a, b = rec.timed(fn, name, "ladder", j, ladder.tail_s * max(s, 0.2), per_batch=per,
                                 first_batch=rec.last_batch[name])  # (workload, phase, repeat, batch) stays unique
                rec.phase("ladder", name, j, "burst", a, b)


def _write(args, nv, h, sampler, energy, rec, work, blocked, s, t0, errors, stopped) -> None:
    """Stop the samplers and write the recording (also after a stop: ``complete`` says which)."""
    sampler.stop_event.set(); energy.stop_event.set()
    sampler.join(); energy.join()
    import pandas as pd

    trace = sampler.frame()
    trace.to_parquet(args.out / "trace.parquet", index=False, compression="zstd")
    energy.frame().to_parquet(args.out / "energy.parquet", index=False)
    cols = ["workload", "phase", "repeat", "batch", "start_s", "end_s", "launches", "time_s"]
    launches = pd.DataFrame(rec.launch_rows, columns=cols)
    launches.to_parquet(args.out / "launches.parquet", index=False)
    pd.DataFrame(rec.phase_rows, columns=["phase", "workload", "repeat", "kind", "t0_s", "t1_s"]).to_parquet(
        args.out / "phases.parquet", index=False)
    probes = rec.probes_frame()
    probes.to_parquet(args.out / "probes.parquet", index=False)
    name = nv.nvmlDeviceGetName(h)
    prov = {
        "gpu": name if isinstance(name, str) else name.decode(),
        "uuid": nv.nvmlDeviceGetUUID(h),
        "board_part_number": board_part_number(nv, h),
        "driver": nv.nvmlSystemGetDriverVersion(),
        "power_limit_w": nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "max_sm_clock_mhz": nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "protocols": [p for p in PARTS if p in args.parts], "scale": s,
        "pressure_probed": bool(args.probe_pressure and "natural" in args.parts),
        **({"cap_starts": {"starts": args.cap_starts, "idle_s": list(args.cap_idle), "series_s": args.cap_series}}
           if "capstarts" in args.parts else {}),
        "settings_changed": False,
        **({"ladder": asdict(args.ladder)} if args.ladder is not None else {}),
        "nvml_setters_blocked": len(blocked),
        "clock": "time.perf_counter (host); probes mapped by the smallest host−%globaltimer gap of 30 synchronised probes",
        "probe": {"spin_cycles": int(rec.probe_cycles), "globaltimer_offset_s": rec.offset_s},
        "workloads": {k: {"launches_per_batch": v[1]} for k, v in work.items()},
        "errors": errors, "complete": stopped is None, "duration_s": time.perf_counter() - t0,
        "samples": len(trace), "sample_rate_hz": len(trace) / max(trace["t_s"].iloc[-1], 1e-9),
        "memory_temperature_c": {"reported": bool(trace["memory_temperature_c"].notna().any()),
                                 "min": float(trace["memory_temperature_c"].min()),
                                 "max": float(trace["memory_temperature_c"].max())},
        "energy_reads": int(energy.n), "launch_rows": len(launches), "probe_rows": len(probes),
        "made_by": "benchmarks/gpu_raw_recording.py (powermodels, independent of the library's code paths)",
    }
    (args.out / "provenance.json").write_text(json.dumps(prov, indent=1))
    try:
        smi = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True, timeout=30).stdout
    except Exception as exc:  # nvidia-smi missing is not fatal
        smi = repr(exc)
    (args.out / "nvidia_smi.txt").write_text(smi)
    summary = probes.groupby("workload")["clock_mhz"].describe()
    print(json.dumps({k: prov[k] for k in ("gpu", "uuid", "duration_s", "samples", "sample_rate_hz",
                                           "launch_rows", "probe_rows", "memory_temperature_c",
                                           "errors")}, indent=1))
    print(summary.to_string())


if __name__ == "__main__":
    sys.exit(main())
