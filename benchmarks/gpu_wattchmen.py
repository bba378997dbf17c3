"""Wattchmen on the lent Hopper GPU: measure, profile, fit, predict held-out workloads.

Three steps (Wattchmen §3.3, §4, §5):

``measure``  (GPU) steady-state power of every microbenchmark in
    :mod:`powermodels.harness.microbench` and of ≥10 held-out workloads (cuBLAS
    SGEMM/HGEMM/DGEMM, a tiled SGEMM, reduction, sort, FFT, STREAM triad, SpMV,
    softmax, transpose, histogram, scan) from the NVML total-energy counter
    (idle power first; the counter is polled while the GPU is kept busy and
    the power is the counter's slope between two of its update edges).
    Then re-runs itself under ``ncu --clock-control none`` at small iteration
    counts for SASS opcode counts (with modifiers) and L1/L2 hit rates;
    microbenchmark counts are extrapolated linearly to the measured iteration
    count from two profiled counts (exact for loop bodies). Writes the two
    instruction tables.
    ``measure --set fresh`` measures a second, separate set of held-out
    workloads (:func:`fresh_workloads`, never used while the model's settings
    were chosen) plus NANOSLEEP for this run's static power, then both ncu
    passes (opcodes, sectors), and writes ``wattchmen_fresh_workloads.parquet``.
``profile``  (internal, run under ncu by ``measure``).
``analyze``  (anywhere) fits :class:`~powermodels.models.instruction.InstructionEnergyModel`
    on the microbenchmarks, predicts the held-out workloads, prints direct
    and extended MAPE, coverage and two breakdowns next to Wattchmen's H100
    numbers (16 % direct / 12 % extended, Table 7).

Usage::

    PYTHONPATH=src python3 benchmarks/gpu_wattchmen.py measure --out $OUT
    PYTHONPATH=src python benchmarks/gpu_wattchmen.py analyze --data datasets/h200
    PYTHONPATH=src python3 benchmarks/gpu_wattchmen.py measure --set fresh --out $OUT
    PYTHONPATH=src python benchmarks/gpu_wattchmen.py rebuild --set fresh --data datasets/h200
    PYTHONPATH=src python benchmarks/gpu_wattchmen.py analyze --set fresh --data datasets/h200
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from powermodels import schema  # noqa: E402
from powermodels.harness import sass  # noqa: E402
from powermodels.harness.microbench import MICROBENCHMARKS  # noqa: E402

# Profiled iteration counts of the microbenchmarks (counts are linear in iters).
PROFILE_ITERS = (8, 16)   # multiples of 8: ptxas unrolls the outer loop by 4
TARGET_LAUNCH_S = 0.02     # one microbenchmark launch ≈ 20 ms at the measured iteration count
BATCH_S = 0.05             # work queued per batch while the counter is polled
WARM_S = 0.8               # warm-up before the power window (ramp and clock settle)
WINDOW_S = 2.2             # power window
# Memory traffic per launch (32-byte sectors), profiled in a separate ncu pass.
SECTOR_METRICS = {
    schema.L1_SECTORS: ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    schema.L2_SECTORS: ("lts__t_sectors_srcunit_tex.sum",),
    schema.DRAM_SECTORS: ("dram__sectors_read.sum", "dram__sectors_write.sum"),
}
NCU_METRICS = [sass.OPCODE_METRIC, "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
               "gpu__time_duration.sum"]

TILED_SGEMM = r"""
extern "C" __global__ void tiled_sgemm(const float* A, const float* B, float* C, int n) {
  __shared__ float As[32][33], Bs[32][33];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
  float acc = 0.f;
  for (int t = 0; t < n; t += 32) {
    As[ty][tx] = A[row * n + t + tx];
    Bs[ty][tx] = B[(t + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 32; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}
"""
MARKER = r'extern "C" __global__ void pm_marker(int* p) { if (p[0] == 12345) p[1] = 1; }'


# --------------------------------------------------------------------------- GPU side

class Gpu:
    """CuPy + NVML handles, compiled microbenchmarks and buffers."""

    def __init__(self, cubin_dir: Path, names=None):
        import cupy as cp
        import pynvml

        self.cp, self.nvml = cp, pynvml
        pynvml.nvmlInit()
        self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.sm_count = cp.cuda.Device(0).attributes["MultiProcessorCount"]
        self.modules = {}
        cubin_dir.mkdir(parents=True, exist_ok=True)
        wanted = [MICROBENCHMARKS[n] for n in (MICROBENCHMARKS if names is None else names)]
        for src in sorted({m.source for m in wanted}):
            path = MICROBENCHMARKS[next(n for n, m in MICROBENCHMARKS.items()
                                        if m.source == src)].path
            cubin = cubin_dir / f"{Path(src).stem}.cubin"
            if not cubin.exists():
                sass.compile_cubin(path, out=cubin)
            self.modules[src] = cp.RawModule(path=str(cubin))
        big = 512 * 2**20
        self.inp = cp.random.uniform(1.0, 2.0, size=big // 4 + 2**20, dtype=cp.float32)
        self.out = cp.zeros(big // 4 + 2**22, dtype=cp.float32)
        self.marker_fn = cp.RawKernel(MARKER, "pm_marker")
        self.marker_buf = cp.zeros(4, dtype=cp.int32)

    def info(self) -> dict:
        nv = self.nvml
        name = nv.nvmlDeviceGetName(self.h)
        return {
            "gpu": name.decode() if isinstance(name, bytes) else name,
            "driver": _s(nv.nvmlSystemGetDriverVersion()),
            "sm_count": int(self.sm_count),
            "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "cupy": self.cp.__version__,
        }

    def energy_mj(self) -> int:
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.h)

    def launcher(self, name: str, iters: int):
        m = MICROBENCHMARKS[name]
        fn = self.modules[m.source].get_function(m.kernel)
        grid, block = (m.grid(self.sm_count),), (m.block,)
        args = (self.inp, self.out, np.int64(iters), np.uint32(m.mask))
        return lambda: fn(grid, block, args)

    def marker(self, code: int, end: bool):
        self.marker_fn((code + 1,), (2 if end else 1,), (self.marker_buf,))

    def sample_state(self) -> dict:
        nv = self.nvml
        return {"temperature_c": float(nv.nvmlDeviceGetTemperature(self.h, nv.NVML_TEMPERATURE_GPU)),
                "sm_clock_mhz": float(nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_SM)),
                "mem_clock_mhz": float(nv.nvmlDeviceGetClockInfo(self.h, nv.NVML_CLOCK_MEM))}

    def time_once(self, step, repeat: int = 3) -> float:
        cp = self.cp
        step()
        cp.cuda.Device().synchronize()
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        for _ in range(repeat):
            step()
        b.record()
        b.synchronize()
        return cp.cuda.get_elapsed_time(a, b) / 1e3 / repeat

    def steady_power(self, step, step_s: float, warm_s: float = WARM_S,
                     window_s: float = WINDOW_S) -> dict:
        """Keep the GPU busy with ``step`` and read the energy counter's slope.

        Two batches stay queued so the GPU never idles while the host polls the
        counter (≈4 ms a read). Power = ΔE/Δt between the first and last counter
        update edges inside the window; time per step from CUDA events over the
        window's batches.
        """
        cp = self.cp
        per_batch = max(1, round(BATCH_S / max(step_s, 1e-6)))
        inflight, samples = [], []
        t0 = time.monotonic()
        t_win, t_end = t0 + warm_s, t0 + warm_s + window_s
        ev_start = ev_stop = None
        steps_in_window = 0
        while True:
            now = time.monotonic()
            while len(inflight) < 2 and now < t_end:
                if ev_start is None and now >= t_win:
                    ev_start = cp.cuda.Event()
                    ev_start.record()
                for _ in range(per_batch):
                    step()
                if ev_start is not None:
                    steps_in_window += per_batch
                ev = cp.cuda.Event()
                ev.record()
                inflight.append(ev)
            samples.append((time.monotonic(), self.energy_mj()))
            while inflight and inflight[0].done:
                inflight.pop(0)
            if now >= t_end:
                break
        ev_stop = cp.cuda.Event()
        ev_stop.record()
        state = self.sample_state()
        ev_stop.synchronize()
        gpu_s = cp.cuda.get_elapsed_time(ev_start, ev_stop) / 1e3
        power = _counter_slope(samples, t_win + 0.1, t_end)
        return {"power_w": power, "time_s": gpu_s / steps_in_window, "steps": steps_in_window,
                "per_batch": per_batch, "n_samples": len(samples), **state}

    def idle_power(self, seconds: float = 3.0) -> float:
        self.cp.cuda.Device().synchronize()
        time.sleep(1.0)
        samples, t0 = [], time.monotonic()
        while time.monotonic() - t0 < seconds:
            samples.append((time.monotonic(), self.energy_mj()))
            time.sleep(0.002)
        return _counter_slope(samples, t0, t0 + seconds)


def _s(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def _counter_slope(samples, t_from, t_to) -> float:
    """Power (W) from (t, mJ) samples: slope between the first and last update edges in range."""
    t = np.array([s[0] for s in samples])
    e = np.array([s[1] for s in samples], dtype=float)
    edge = np.flatnonzero(np.diff(e) != 0) + 1
    edge = edge[(t[edge] >= t_from) & (t[edge] <= t_to)]
    if len(edge) < 2:
        return float("nan")
    i, j = edge[0], edge[-1]
    return (e[j] - e[i]) / 1e3 / (t[j] - t[i])


def workloads(gpu: Gpu) -> dict:
    """Held-out workloads (not microbenchmarks): name → zero-argument step."""
    cp = gpu.cp
    rs = cp.random.RandomState(0)
    w = {}

    def gemm(n, dtype):
        a = rs.uniform(-1, 1, (n, n)).astype(dtype)
        b = rs.uniform(-1, 1, (n, n)).astype(dtype)
        c = cp.empty((n, n), dtype=dtype)
        return lambda: cp.matmul(a, b, out=c)

    w["cublas_sgemm_4096"] = gemm(4096, cp.float32)
    w["cublas_hgemm_8192"] = gemm(8192, cp.float16)
    w["cublas_dgemm_4096"] = gemm(4096, cp.float64)

    n = 2048
    tiled = cp.RawKernel(TILED_SGEMM, "tiled_sgemm")
    ta, tb = rs.uniform(-1, 1, (n, n), dtype=cp.float32), rs.uniform(-1, 1, (n, n), dtype=cp.float32)
    tc = cp.empty((n, n), dtype=cp.float32)
    w["tiled_sgemm_2048"] = lambda: tiled((n // 32, n // 32), (32, 32), (ta, tb, tc, np.int32(n)))

    x = rs.uniform(0, 1, 2**28, dtype=cp.float32)
    w["reduction_sum_256M"] = lambda: x.sum()
    xs = rs.uniform(0, 1, 2**24, dtype=cp.float32)
    w["sort_16M"] = lambda: cp.sort(xs)
    xf = (rs.uniform(0, 1, 2**24) + 1j * rs.uniform(0, 1, 2**24)).astype(cp.complex64)
    w["fft_16M"] = lambda: cp.fft.fft(xf)
    triad = cp.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "pm_triad")
    tb_, tc_, ta_ = (rs.uniform(0, 1, 2**26, dtype=cp.float32) for _ in range(3))
    w["stream_triad_64M"] = lambda: triad(tb_, tc_, np.float32(3.0), ta_)

    import cupyx.scipy.sparse as sp
    rows, per_row = 2**21, 16
    indptr = cp.arange(0, rows * per_row + 1, per_row, dtype=cp.int32)
    indices = rs.randint(0, rows, rows * per_row).astype(cp.int32)
    data = rs.uniform(0, 1, rows * per_row, dtype=cp.float32)
    mat = sp.csr_matrix((data, indices, indptr), shape=(rows, rows))
    vec = rs.uniform(0, 1, rows, dtype=cp.float32)
    w["spmv_csr_2M"] = lambda: mat @ vec
    sm = rs.uniform(-4, 4, (4096, 8192), dtype=cp.float32)

    def softmax():
        e = cp.exp(sm - sm.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    w["softmax_4096x8192"] = softmax
    tr = rs.uniform(0, 1, (8192, 8192), dtype=cp.float32)
    w["transpose_8192"] = lambda: cp.ascontiguousarray(tr.T)
    bins = rs.randint(0, 1024, 2**26).astype(cp.int32)
    w["histogram_64M"] = lambda: cp.bincount(bins, minlength=1024)
    cs = rs.uniform(0, 1, 2**26, dtype=cp.float32)
    w["cumsum_64M"] = lambda: cp.cumsum(cs)
    return w


def fresh_workloads(gpu: Gpu) -> dict:
    """Second held-out set, added after the model was frozen (never used to choose settings).

    Library kernels and code paths the first set does not have: strided-batched
    GEMM, GEMV, an FP16 fused elementwise kernel, an LU solve (cuSOLVER), a 2-D
    convolution, transcendentals, argsort, a random gather + scatter and an einsum.
    A workload whose construction fails is left out (and said so), not the set.
    """
    cp = gpu.cp
    rs = cp.random.RandomState(1)
    w = {}

    def add(name, build):
        try:
            w[name] = build()
        except Exception as err:  # e.g. a missing cupyx module on the machine
            print(f"{name}: not built ({type(err).__name__}: {err})", flush=True)

    def batched_sgemm():
        a, b = (rs.uniform(-1, 1, (64, 1024, 1024), dtype=cp.float32) for _ in range(2))
        c = cp.empty((64, 1024, 1024), dtype=cp.float32)
        return lambda: cp.matmul(a, b, out=c)

    def sgemv():
        a = rs.uniform(-1, 1, (16384, 16384), dtype=cp.float32)
        x = rs.uniform(-1, 1, 16384, dtype=cp.float32)
        return lambda: cp.matmul(a, x)

    def fp16_fused():
        a, b, c = (rs.uniform(0, 1, 2**26, dtype=cp.float32).astype(cp.float16) for _ in range(3))

        @cp.fuse(kernel_name="pm_fp16_fused")
        def f(a, b, c):
            return a * b + c * a - b * c

        return lambda: f(a, b, c)

    def lu_solve():
        n = 4096
        a = rs.uniform(-1, 1, (n, n), dtype=cp.float32) + n * cp.eye(n, dtype=cp.float32)
        rhs = rs.uniform(-1, 1, (n, 256), dtype=cp.float32)
        return lambda: cp.linalg.solve(a, rhs)

    def conv2d():
        from cupyx.scipy import ndimage

        img = rs.uniform(0, 1, (4096, 4096), dtype=cp.float32)
        k = rs.uniform(0, 1, (7, 7), dtype=cp.float32)
        return lambda: ndimage.convolve(img, k)

    def transcendental():
        kern = cp.ElementwiseKernel("float32 x", "float32 y",
                                    "y = expf(-x * x) * sinf(3.0f * x) + logf(1.0f + x)",
                                    "pm_transcendental")
        x = rs.uniform(0, 4, 2**26, dtype=cp.float32)
        y = cp.empty_like(x)
        return lambda: kern(x, y)

    def argsort():
        x = rs.uniform(0, 1, 2**24, dtype=cp.float32)
        return lambda: cp.argsort(x)

    def gather_scatter():
        n = 2**26
        src = rs.uniform(0, 1, n, dtype=cp.float32)
        gidx = rs.randint(0, n, n).astype(cp.int64)
        sidx = rs.permutation(n).astype(cp.int64)
        buf, dst = cp.empty(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)

        def step():
            cp.take(src, gidx, out=buf)   # random gather
            dst[sidx] = buf               # random scatter (a permutation)
        return step

    def einsum():
        a, b = (rs.uniform(-1, 1, (8192, 8192), dtype=cp.float32) for _ in range(2))
        return lambda: cp.einsum("ij,ij->i", a, b)

    add("batched_sgemm_64x1024", batched_sgemm)
    add("sgemv_16384", sgemv)
    add("fp16_fused_64M", fp16_fused)
    add("lu_solve_4096x256", lu_solve)
    add("conv2d_7x7_4096", conv2d)
    add("transcendental_64M", transcendental)
    add("argsort_16M", argsort)
    add("gather_scatter_64M", gather_scatter)
    add("einsum_rowdot_8192", einsum)
    return w


# Workload sets: "heldout" is the first set (the model's settings were chosen looking at
# its errors); "fresh" was added afterwards as a clean test set.
WORKLOAD_SETS = {"heldout": workloads, "fresh": fresh_workloads}
# Microbenchmarks measured with a set (the fresh set needs only this run's static power).
SET_MICRO = {"heldout": None, "fresh": ["nanosleep"]}
FRESH_TABLE = "wattchmen_fresh_workloads.parquet"
BREAKDOWN = {"heldout": "cublas_sgemm_4096,stream_triad_64M",
             "fresh": "batched_sgemm_64x1024,gather_scatter_64M"}


def calibrate_iters(gpu: Gpu, name: str) -> int:
    probe = 64 if name != "nanosleep" else 256
    t = gpu.time_once(gpu.launcher(name, probe), repeat=2)
    iters = max(PROFILE_ITERS[-1] * 4, round(probe * TARGET_LAUNCH_S / max(t, 1e-7)))
    return int(iters // 8 * 8)  # same unrolled-loop remainder as the profiled counts


def _ncu_profile_command(ncu: str, metrics: list[str], rep: Path, *, nvtx: bool) -> list[str]:
    """ncu over this script's ``profile`` step (plan in ``rep``'s folder); clocks left alone."""
    return [ncu, "--clock-control", "none", *(["--nvtx", "--nvtx-include", "pm/"] if nvtx else []),
            "--metrics", ",".join(metrics), "--force-overwrite", "-o", str(rep),
            sys.executable, __file__, "profile", "--plan", str(rep.parent / "pm_plan.json")]


def cmd_measure(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "measure_log.txt", "a")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    if args.record:  # profile only: reuse an earlier energy phase
        record = json.loads(Path(args.record).read_text())
        say(f"reusing {args.record}")
        if args.sectors:
            return _profile_sectors(record, out, say)
        return _profile_and_tables(record, out, say)
    micro_names = SET_MICRO[args.set]
    gpu = Gpu(Path("/tmp/pm_cubins"), names=micro_names)
    info = gpu.info()
    say(json.dumps(info))
    names = [n for n in (micro_names or MICROBENCHMARKS)
             if not args.only or n in args.only.split(",")]
    record = {"info": info, "idle_power_w": None, "micro": {}, "workloads": {}}
    if args.set != "heldout":
        record["set"] = args.set
    record["idle_power_w"] = gpu.idle_power()
    say(f"idle power {record['idle_power_w']:.2f} W")
    t_start = time.monotonic()
    for name in names:
        try:
            iters = calibrate_iters(gpu, name)
            step = gpu.launcher(name, iters)
            res = gpu.steady_power(step, gpu.time_once(step, repeat=1))
            res["iters"] = iters
            record["micro"][name] = res
            say(f"{name:14s} iters={iters:8d} t={res['time_s'] * 1e3:8.3f} ms "
                f"P={res['power_w']:7.2f} W T={res['temperature_c']:.0f}C f={res['sm_clock_mhz']:.0f}")
        except Exception as err:  # one broken benchmark must not lose the rest
            say(f"{name}: FAILED {type(err).__name__}: {err}")
    wl = WORKLOAD_SETS[args.set](gpu)
    for name, step in wl.items():
        if args.only and name not in args.only.split(","):
            continue
        try:
            step_s = gpu.time_once(step, repeat=3)
            res = gpu.steady_power(step, step_s)
            record["workloads"][name] = res
            say(f"{name:20s} t={res['time_s'] * 1e3:8.3f} ms P={res['power_w']:7.2f} W "
                f"T={res['temperature_c']:.0f}C f={res['sm_clock_mhz']:.0f}")
        except Exception as err:
            say(f"{name}: FAILED {type(err).__name__}: {err}")
    say(f"energy phase took {time.monotonic() - t_start:.0f} s")
    (out / "measure.json").write_text(json.dumps(record, indent=1))
    del gpu, wl
    if args.set == "fresh":
        return _profile_fresh(record, out, say)
    return _profile_and_tables(record, out, say)


def _plan(record: dict) -> dict:
    return {"micro": list(record["micro"]), "workloads": list(record["workloads"]),
            "set": record.get("set", "heldout")}


def fresh_table(record: dict, csv_text: str, sectors_csv: str) -> pd.DataFrame:
    """The fresh set's instruction table (sector columns included) from the raw files."""
    plan = _plan(record)
    _, wtab = build_tables(record, csv_text, plan, record.get("ncu_metric", sass.OPCODE_METRIC))
    return _with_sectors(wtab, sector_columns(record, sectors_csv, plan))


def _profile_fresh(record: dict, out: Path, say) -> int:
    """Both ncu passes (opcodes, then sectors) and the fresh table, in one go."""
    code = _profile_and_tables(record, out, say, write_tables=False)
    code = _profile_sectors(record, out, say) or code
    if code:
        return code
    record = json.loads((out / "measure.json").read_text())
    table = fresh_table(record, (out / "ncu_raw.csv").read_text(),
                        (out / "ncu_sectors.csv").read_text())
    table.to_parquet(out / FRESH_TABLE)
    say(f"fresh table: {table.shape}")
    return 0


def _profile_sectors(record: dict, out: Path, say) -> int:
    """Second ncu pass (hardware counters only): global sectors through L1, L2 and DRAM."""
    ncu = sass.find_tool("ncu")
    rep = Path("/tmp/pm_sectors")
    plan = _plan(record)
    (rep.parent / "pm_plan.json").write_text(json.dumps(plan))
    metrics = [m for names in SECTOR_METRICS.values() for m in names]
    cmd = _ncu_profile_command(ncu, metrics, rep, nvtx=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    say(f"ncu sectors rc={proc.returncode} in {time.monotonic() - t0:.0f} s; "
        f"tail: {proc.stdout[-600:]} {proc.stderr[-600:]}")
    csv = subprocess.run([ncu, "-i", str(rep) + ".ncu-rep", "--csv", "--page", "raw"],
                         capture_output=True, text=True, check=False)
    (out / "ncu_sectors.csv").write_text(csv.stdout)
    n = len(sass.parse_ncu_csv(csv.stdout, None)) if csv.stdout.strip() else 0
    say(f"sector profile: {n} launches")
    return 0 if n else 1


def sector_columns(record: dict, csv_text: str, plan: dict) -> dict[str, dict[str, float]]:
    """Per item: sectors through L1, L2, DRAM (microbenchmarks extrapolated in iterations)."""
    seg = segment_launches(sass.parse_ncu_csv(csv_text, None))

    def total(launches):
        return {col: float(sum(np.nan_to_num(x["metrics"].get(m, 0.0)) for x in launches
                               for m in names)) for col, names in SECTOR_METRICS.items()}

    out, code = {}, 0
    a, b = PROFILE_ITERS
    for name in plan["micro"]:
        sa, sb = total(seg.get(code, [])), total(seg.get(code + 1, []))
        code += 2
        n = record["micro"][name]["iters"]
        out[name] = {k: max(0.0, sa[k] + (sb[k] - sa[k]) * (n - a) / (b - a)) for k in sa}
    for name in plan["workloads"]:
        out[name] = total(seg.get(code, []))
        code += 1
    return out


def _profile_and_tables(record: dict, out: Path, say, write_tables: bool = True) -> int:
    # ncu phase: this script again, under the profiler, at small iteration counts.
    ncu = sass.find_tool("ncu")
    if ncu is None:
        say("ncu not found: no opcode counts")
        return 1
    rep = Path("/tmp/pm_profile")
    plan = _plan(record)
    (rep.parent / "pm_plan.json").write_text(json.dumps(plan))
    # Try the modifier-resolved metric with the NVTX filter first; fall back to the
    # base-opcode metric and to no filter (markers still segment the launches).
    csv_text, metric = "", None
    for metric, nvtx in ((sass.OPCODE_METRIC, True), (sass.OPCODE_METRIC, False),
                         ("sass__inst_executed_per_opcode", False)):
        metrics = [metric, *NCU_METRICS[1:]]
        cmd = _ncu_profile_command(ncu, metrics, rep, nvtx=nvtx)
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        say(f"ncu ({metric}, nvtx={nvtx}) rc={proc.returncode} in {time.monotonic() - t0:.0f} s; "
            f"tail: {proc.stdout[-800:]} {proc.stderr[-800:]}")
        csv = subprocess.run([ncu, "-i", str(rep) + ".ncu-rep", "--csv", "--page", "raw",
                              "--print-metric-instances", "details"],
                             capture_output=True, text=True, check=False)
        try:
            launches = sass.parse_ncu_csv(csv.stdout, metric)
        except ValueError as err:
            say(f"ncu csv unusable: {err}; {csv.stderr[-500:]}")
            launches = []
        if any("pm_marker" not in x["kernel"] for x in launches):
            csv_text = csv.stdout
            break
    (out / "ncu_raw.csv").write_text(csv_text)
    if not csv_text:
        say("no usable ncu profile")
        return 1
    record["ncu_metric"] = metric
    (out / "measure.json").write_text(json.dumps(record, indent=1))
    if not write_tables:
        return 0
    micro, wtab = build_tables(record, csv_text, plan, metric)
    micro.to_parquet(out / "wattchmen_microbench.parquet")
    wtab.to_parquet(out / "wattchmen_workloads.parquet")
    say(f"tables: {micro.shape} microbenchmarks, {wtab.shape} workloads")
    return 0


def cmd_profile(args) -> int:
    """Run under ncu: each item between two marker kernels, inside NVTX range 'pm'."""
    import cupy as cp

    def push():
        try:
            cp.cuda.nvtx.RangePush("pm")
        except Exception:  # without NVTX the markers still segment the launches
            pass

    def pop():
        try:
            cp.cuda.nvtx.RangePop()
        except Exception:
            pass

    def profiled(step, code, warmups):
        """``warmups`` unprofiled calls, then one call between the markers of ``code``."""
        for _ in range(warmups):
            step()
        cp.cuda.Device().synchronize()
        push()
        gpu.marker(code, end=False)
        step()
        gpu.marker(code, end=True)
        cp.cuda.Device().synchronize()
        pop()

    plan = json.loads(Path(args.plan).read_text())
    gpu = Gpu(Path("/tmp/pm_cubins"), names=plan["micro"])
    code = 0
    for name in plan["micro"]:
        for iters in PROFILE_ITERS:
            profiled(gpu.launcher(name, iters), code, warmups=1)
            code += 1
    wl = WORKLOAD_SETS[plan.get("set", "heldout")](gpu)
    for name in plan["workloads"]:
        profiled(wl[name], code, warmups=2)
        code += 1
    return 0


def _marker(launch) -> tuple[int, bool] | None:
    if "pm_marker" not in launch["kernel"]:
        return None
    grid = [int(v) for v in launch["grid"].strip("()").split(",")]
    block = [int(v) for v in launch["block"].strip("()").split(",")]
    return grid[0] - 1, block[0] == 2


def segment_launches(launches: list[dict]) -> dict[int, list[dict]]:
    """Group ncu launches by the marker code of the segment they fall in."""
    out: dict[int, list[dict]] = {}
    current = None
    for launch in launches:
        mark = _marker(launch)
        if mark is not None:
            current = None if mark[1] else mark[0]
            if current is not None:
                out.setdefault(current, [])
            continue
        if current is not None:
            out[current].append(launch)
    return out


def build_tables(record: dict, csv_text: str, plan: dict, metric: str = sass.OPCODE_METRIC,
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Instruction tables (one row per microbenchmark / workload) from measurements and ncu."""
    seg = segment_launches(sass.parse_ncu_csv(csv_text, metric))
    idle = record["idle_power_w"]
    static = record["micro"].get("nanosleep", {}).get("power_w", np.nan)
    rows_m, rows_w, code = [], [], 0
    a, b = PROFILE_ITERS
    for name in plan["micro"]:
        ca, _, _ = sass.aggregate_launches(seg.get(code, []))
        cb, r1, r2 = sass.aggregate_launches(seg.get(code + 1, []))
        code += 2
        meas = record["micro"][name]
        n = meas["iters"]
        ops = set(ca) | set(cb)
        counts = {op: max(0.0, ca.get(op, 0.0) + (cb.get(op, 0.0) - ca.get(op, 0.0)) * (n - a) / (b - a))
                  for op in ops}
        rows_m.append(_row(name, meas, counts, r1, r2, idle, static))
    for name in plan["workloads"]:
        counts, r1, r2 = sass.aggregate_launches(seg.get(code, []))
        code += 1
        rows_w.append(_row(name, record["workloads"][name], counts, r1, r2, idle, static))
    return _frame(rows_m), _frame(rows_w)


def _row(name, meas, counts, r1, r2, idle, static) -> dict:
    row = {schema.WORKLOAD: name, schema.TIME_S: meas["time_s"],
           schema.ENERGY_J: meas["power_w"] * meas["time_s"], schema.POWER_W: meas["power_w"],
           schema.STATIC_POWER_W: static, schema.IDLE_POWER_W: idle,
           schema.L1_HIT_RATE: r1, schema.L2_HIT_RATE: r2,
           schema.TEMPERATURE_C: meas["temperature_c"], schema.SM_CLOCK_MHZ: meas["sm_clock_mhz"]}
    row.update({schema.OPCODE_PREFIX + op: c for op, c in counts.items()})
    return row


def _frame(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    ops = sorted(schema.opcode_columns(df))
    df[ops] = df[ops].fillna(0.0)
    return df[[c for c in df.columns if c not in ops] + ops]


# --------------------------------------------------------------------------- analysis

WATTCHMEN_H100 = {"direct_mape_pct": 16.0, "extended_mape_pct": 12.0,
                  "direct_coverage_pct": 66.0, "extended_coverage_pct": 92.0}


def cmd_analyze(args) -> int:
    from powermodels.models.instruction import InstructionEnergyModel

    data = Path(args.data)
    fresh = args.set == "fresh"
    micro = pd.read_parquet(data / "wattchmen_microbench.parquet")
    wl = pd.read_parquet(data / (FRESH_TABLE if fresh else "wattchmen_workloads.parquet"))
    micro = micro[np.isfinite(micro[schema.ENERGY_J])].reset_index(drop=True)
    wl = wl[np.isfinite(wl[schema.ENERGY_J]) & (wl[schema.opcode_columns(wl)].sum(axis=1) > 0)]
    wl = wl.reset_index(drop=True)
    # prediction sees only what a profiler gives (time, counts, hit rates)
    extra = [schema.POWER_W, schema.TEMPERATURE_C, schema.SM_CLOCK_MHZ]
    micro = micro.drop(columns=[c for c in extra if c in micro.columns])
    wl = wl.drop(columns=[c for c in extra if c in wl.columns])
    y = wl[schema.ENERGY_J].to_numpy()
    lines = []
    results = {}
    if fresh:
        lines.append(f"fresh held-out set ({len(wl)} workloads measured after the model was frozen; "
                     "default settings, no change after seeing these errors)\n")
    for label, ext in (("direct", "none"), ("extended", "bucket")):
        model = InstructionEnergyModel(extension=ext).fit(micro)
        pred = model.predict(wl)
        ape = np.abs(pred - y) / y * 100
        cov = model.coverage(wl)
        results[label] = {"model": model, "pred": pred, "ape": ape, "cov": cov}
    m = results["extended"]["model"]
    lines.append(f"fit on {len(micro)} microbenchmarks: {len(m.energies_)} opcode features, "
                 f"rank {m.rank_}, relative residual {m.relative_residual_:.3f}, "
                 f"static+constant power {m.static_power_w_:.1f} W\n")
    lines.append("| workload | measured J | direct J | APE % | extended J | APE % | coverage direct % | coverage extended % |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for i, name in enumerate(wl[schema.WORKLOAD]):
        d, e = results["direct"], results["extended"]
        lines.append(f"| {name} | {y[i]:.4g} | {d['pred'][i]:.4g} | {d['ape'][i]:.1f} | "
                     f"{e['pred'][i]:.4g} | {e['ape'][i]:.1f} | {100 * d['cov'][i]:.0f} | "
                     f"{100 * e['cov'][i]:.0f} |")
    summary = {
        "direct_mape_pct": float(results["direct"]["ape"].mean()),
        "extended_mape_pct": float(results["extended"]["ape"].mean()),
        "direct_coverage_pct": float(100 * results["direct"]["cov"].mean()),
        "extended_coverage_pct": float(100 * results["extended"]["cov"].mean()),
    }
    keys = (("direct_mape_pct", "direct MAPE %"), ("extended_mape_pct", "extended MAPE %"),
            ("direct_coverage_pct", "direct coverage %"),
            ("extended_coverage_pct", "extended coverage %"))
    first = REPO / "benchmarks" / "results" / "wattchmen.json"
    if fresh and first.exists():
        tuned = json.loads(first.read_text())
        lines.append("\n| | fresh set (unbiased) | first held-out set (settings tuned on it) "
                     "| Wattchmen H100 (Table 7, §5.2.3) |")
        lines.append("|---|---|---|---|")
        for key, label in keys:
            lines.append(f"| {label} | {summary[key]:.1f} | {tuned[key]:.1f} "
                         f"| {WATTCHMEN_H100[key]:.0f} |")
    else:
        lines.append("\n| | ours (this GPU) | Wattchmen H100 (Table 7, §5.2.3) |")
        lines.append("|---|---|---|")
        for key, label in keys:
            lines.append(f"| {label} | {summary[key]:.1f} | {WATTCHMEN_H100[key]:.0f} |")
    if fresh:
        # The table's static power is this run's NANOSLEEP power (as in the first set);
        # without it the model falls back to the training run's value.
        alt = []
        for ext in ("none", "bucket"):
            p = InstructionEnergyModel(extension=ext).fit(micro).predict(
                wl.drop(columns=[schema.STATIC_POWER_W]))
            alt.append(float(np.mean(np.abs(p - y) / y) * 100))
        summary["direct_mape_training_static_pct"] = alt[0]
        summary["extended_mape_training_static_pct"] = alt[1]
        lines.append(f"\nstatic power: this run's NANOSLEEP {wl[schema.STATIC_POWER_W].iloc[0]:.1f} W "
                     f"(idle {wl[schema.IDLE_POWER_W].iloc[0]:.1f} W); with the training run's "
                     f"{m.static_power_w_:.1f} W instead: direct {alt[0]:.1f} %, extended {alt[1]:.1f} %")
    # leave-one-out over the microbenchmarks themselves (no held-out workload involved)
    loo = []
    for i in range(0 if fresh else len(micro)):
        rest = micro.drop(index=i)
        pred_i = InstructionEnergyModel().fit(rest).predict(micro.iloc[[i]])[0]
        loo.append(abs(pred_i - micro[schema.ENERGY_J].iloc[i]) / micro[schema.ENERGY_J].iloc[i])
    if not fresh:
        loo = np.array(loo) * 100
        worst = micro[schema.WORKLOAD].iloc[np.argsort(loo)[::-1][:5]].tolist()
        lines.append(f"\nleave-one-out over the {len(micro)} microbenchmarks (extended model): "
                     f"MAPE {loo.mean():.1f} %, median {np.median(loo):.1f} %, worst {worst}")
        summary["microbench_loo_mape_pct"] = float(loo.mean())
    else:
        lines.append("\nfor information only (computed after the figures above, used to choose "
                     "nothing): the other settings on the fresh set")
    # sensitivity: the same data under other model settings (MAPE over the held-out workloads)
    lines.append("\n| model settings | direct MAPE % | extended MAPE % |")
    lines.append("|---|---|---|")
    variants = [("default", {}), ("no memory-level split", {"memory_levels": False}),
                ("no sector traffic", {"memory_traffic": False}),
                ("plain NNLS (alpha=0)", {"alpha": 0.0}), ("min_share=0.01", {"min_share": 0.01}),
                ("bvls solver", {"solver": "bvls"})]
    for label, params in variants:
        mape = []
        for ext in ("none", "bucket"):
            p = InstructionEnergyModel(extension=ext, **params).fit(micro).predict(wl)
            mape.append(float(np.mean(np.abs(p - y) / y) * 100))
        lines.append(f"| {label} | {mape[0]:.1f} | {mape[1]:.1f} |")
    for name in (args.breakdown or BREAKDOWN[args.set]).split(","):
        if name not in set(wl[schema.WORKLOAD]):
            continue
        row = wl[wl[schema.WORKLOAD] == name]
        bd = m.breakdown(row)
        comp = bd.groupby(schema.COMPONENT)[schema.ENERGY_J].sum().sort_values(ascending=False)
        lines.append(f"\nbreakdown of {name} (measured {row[schema.ENERGY_J].iloc[0]:.4g} J):\n")
        lines.append("| component | J | % |")
        lines.append("|---|---|---|")
        for k, v in comp.items():
            lines.append(f"| {k} | {v:.4g} | {100 * v / comp.sum():.1f} |")
        top = bd.sort_values(schema.ENERGY_J, ascending=False).head(8)
        lines.append("\n| opcode | count | J/instr | J | source |")
        lines.append("|---|---|---|---|---|")
        for _, r in top.iterrows():
            lines.append(f"| {r[schema.OPCODE]} | {r[schema.INSTRUCTION_COUNT]:.3g} "
                         f"| {r[schema.ENERGY_PER_INSTRUCTION_J]:.3g} | {r[schema.ENERGY_J]:.4g} "
                         f"| {r[schema.ENERGY_SOURCE]} |")
    text = "\n".join(lines)
    print(text)
    out = REPO / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    stem = "wattchmen_fresh" if fresh else "wattchmen"
    (out / f"{stem}.md").write_text(text + "\n")
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=1) + "\n")
    return 0


def _with_sectors(df: pd.DataFrame, sectors: dict) -> pd.DataFrame:
    """Insert the sector columns after the hit rates."""
    extra = pd.DataFrame({col: [sectors[w][col] for w in df[schema.WORKLOAD]]
                          for col in SECTOR_METRICS}, index=df.index)
    at = df.columns.get_loc(schema.L2_HIT_RATE) + 1
    return pd.concat([df.iloc[:, :at], extra, df.iloc[:, at:]], axis=1)


def cmd_rebuild(args) -> int:
    """Rebuild the instruction tables from the raw files kept in the dataset folder."""
    import gzip

    data = Path(args.data)
    if args.set == "fresh":
        record = json.loads((data / "wattchmen_fresh_measure.json").read_text())
        with gzip.open(data / "ncu_fresh_raw.csv.gz", "rt") as f, \
                gzip.open(data / "ncu_fresh_sectors.csv.gz", "rt") as g:
            table = fresh_table(record, f.read(), g.read())
        table.to_parquet(data / FRESH_TABLE)
        print(f"rebuilt {table.shape} fresh workload table in {data}")
        return 0
    record = json.loads((data / "wattchmen_measure.json").read_text())
    with gzip.open(data / "ncu_raw.csv.gz", "rt") as f:
        csv_text = f.read()
    plan = {"micro": list(record["micro"]), "workloads": list(record["workloads"])}
    micro, wtab = build_tables(record, csv_text, plan, record.get("ncu_metric", sass.OPCODE_METRIC))
    if (data / "ncu_sectors.csv.gz").exists():
        with gzip.open(data / "ncu_sectors.csv.gz", "rt") as f:
            sectors = sector_columns(record, f.read(), plan)
        micro, wtab = (_with_sectors(df, sectors) for df in (micro, wtab))
    micro.to_parquet(data / "wattchmen_microbench.parquet")
    wtab.to_parquet(data / "wattchmen_workloads.parquet")
    print(f"rebuilt {micro.shape} microbenchmark and {wtab.shape} workload tables in {data}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", default=os.environ.get("OUT", "wattchmen_out"))
    m.add_argument("--only", default="", help="comma-separated subset of names")
    m.add_argument("--record", default="", help="measure.json of an earlier run: profile only")
    m.add_argument("--sectors", action="store_true", help="with --record: sector-count pass only")
    m.add_argument("--set", choices=sorted(WORKLOAD_SETS), default="heldout",
                   help="workload set; 'fresh' also runs both ncu passes and writes " + FRESH_TABLE)
    pr = sub.add_parser("profile")
    pr.add_argument("--plan", required=True)
    a = sub.add_parser("analyze")
    a.add_argument("--data", default=str(REPO / "datasets" / "h200"))
    a.add_argument("--breakdown", default="", help="comma-separated workloads "
                   "(default: two per set, see BREAKDOWN)")
    a.add_argument("--set", choices=sorted(WORKLOAD_SETS), default="heldout")
    r = sub.add_parser("rebuild")
    r.add_argument("--data", default=str(REPO / "datasets" / "h200"))
    r.add_argument("--set", choices=sorted(WORKLOAD_SETS), default="heldout")
    args = p.parse_args(argv)
    return {"measure": cmd_measure, "profile": cmd_profile, "analyze": cmd_analyze,
            "rebuild": cmd_rebuild}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
