"""Microbenchmark energy and ncu profiles on a real GPU (CuPy + NVML + Nsight Compute).

:class:`CupyNcuBackend` is the real-GPU backend of
:func:`powermodels.instruction_energy.calibration.calibrate_instructions`
(Wattchmen §3.3, §4):

* **steady-state energy** — the GPU is kept busy with one microbenchmark or
  workload (two batches always queued) while the host polls NVML's total-energy
  counter; the power is the counter's slope between its first and last update
  edges inside the window (:func:`counter_slope`), the time per launch comes
  from CUDA events over the window's batches. Idle power first.
* **counts** — this module re-runs itself under
  ``ncu --clock-control none`` (clocks and limits are left to the GPU: nothing
  is locked or changed) and launches every item between two marker kernels
  (:data:`~powermodels.instruction_energy.tables.MARKER_KERNEL`):
  microbenchmarks at the two :data:`~powermodels.instruction_energy.tables.PROFILE_ITERS`,
  workloads for one step; a first pass for the SASS opcode counts with
  modifiers and the L1/L2 hit rates, a second for the sector counters.

The NVML handle is resolved from the CUDA device's PCI bus id, so the energy
counter read is the one of the GPU CuPy runs on (``CUDA_VISIBLE_DEVICES``
renumbers CUDA devices only). CuPy and pynvml are imported inside functions.
"""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import schema
from . import sass
from .catalog import HOPPER_MICROBENCHMARKS, MICROBENCHMARKS, microbenchmark

__all__ = ["SECTOR_METRICS", "CupyNcuBackend", "MeasureSettings", "MicrobenchGpu", "counter_slope",
           "window_clocks"]

MARKER = r'extern "C" __global__ void pm_marker(int* p) { if (p[0] == 12345) p[1] = 1; }'
#: Metrics of the opcode pass besides the opcode metric itself.
NCU_METRICS = ["l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct", "gpu__time_duration.sum"]
#: Memory traffic per launch (32-byte sectors), profiled in a separate ncu pass.
SECTOR_METRICS = {
    schema.L1_SECTORS: ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                        "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
    schema.L2_SECTORS: ("lts__t_sectors_srcunit_tex.sum",),
    schema.DRAM_SECTORS: ("dram__sectors_read.sum", "dram__sectors_write.sum"),
}


@dataclass(frozen=True)
class MeasureSettings:
    """Timing of the steady-state energy measurement (defaults: the H200 dataset's).

    Attributes
    ----------
    target_launch_s : float
        One microbenchmark launch lasts about this long at the measured iteration count.
    batch_s : float
        Work queued per batch while the counter is polled.
    warm_s : float
        Warm-up before the power window (ramp and clock settle).
    window_s : float
        Power window.
    idle_s : float
        Idle-power window (after 1 s of rest).
    """

    target_launch_s: float = 0.02
    batch_s: float = 0.05
    warm_s: float = 0.8
    window_s: float = 2.2
    idle_s: float = 3.0

    def __post_init__(self):
        for name in ("target_launch_s", "batch_s", "warm_s", "window_s", "idle_s"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name}: must be a positive number of seconds, got {v!r}")


def counter_slope(samples, t_from: float, t_to: float) -> float:
    """Power (W) from ``(t, mJ)`` samples: slope between the first and last update edges in range.

    NaN when fewer than two counter updates fall in ``[t_from, t_to]``.
    """
    t = np.array([s[0] for s in samples])
    e = np.array([s[1] for s in samples], dtype=float)
    edge = np.flatnonzero(np.diff(e) != 0) + 1
    edge = edge[(t[edge] >= t_from) & (t[edge] <= t_to)]
    if len(edge) < 2:
        return float("nan")
    i, j = edge[0], edge[-1]
    return (e[j] - e[i]) / 1e3 / (t[j] - t[i])


def window_clocks(probed_mhz, nvml_mhz) -> dict:
    """Summary of the clocks seen in a power window (keys of the energy record).

    ``probe_clock_mhz`` (median of the on-GPU probes) with its 5th/95th percentiles and count,
    and ``nvml_clock_mean_mhz`` (mean of NVML's readings); NaN where there was none.
    """
    probed = np.asarray(probed_mhz, dtype=float)
    probed = probed[np.isfinite(probed)]
    nvml = np.asarray(nvml_mhz, dtype=float)
    nvml = nvml[np.isfinite(nvml)]  # a failed NVML read is NaN, like a failed probe
    pct = np.percentile(probed, [50, 5, 95]) if len(probed) else [np.nan] * 3
    return {"probe_clock_mhz": float(pct[0]), "probe_clock_p05_mhz": float(pct[1]),
            "probe_clock_p95_mhz": float(pct[2]), "n_probes": int(len(probed)),
            "nvml_clock_mean_mhz": float(nvml.mean()) if len(nvml) else float("nan")}


def _text(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


class MicrobenchGpu:
    """CuPy + NVML handles, compiled microbenchmarks and buffers of CUDA device 0."""

    def __init__(self, cubin_dir: Path, names=None):
        import cupy as cp
        import pynvml

        self.cp, self.nvml = cp, pynvml
        pynvml.nvmlInit()
        dev = cp.cuda.Device(0)
        try:  # the NVML device CuPy runs on, whatever CUDA_VISIBLE_DEVICES says
            self.h = pynvml.nvmlDeviceGetHandleByPciBusId(dev.pci_bus_id.encode())
        except Exception:  # noqa: BLE001 - old drivers: fall back to the NVML index
            self.h = pynvml.nvmlDeviceGetHandleByIndex(0)
        self.sm_count = dev.attributes["MultiProcessorCount"]
        self.modules = {}
        cubin_dir.mkdir(parents=True, exist_ok=True)
        wanted = [microbenchmark(n) for n in (MICROBENCHMARKS if names is None else names)]
        for m in {m.source: m for m in wanted}.values():
            cubin = cubin_dir / f"{Path(m.source).stem}.{m.arch}.cubin"
            if not cubin.exists():
                sass.compile_cubin(m.path, out=cubin, arch=m.arch)
            self.modules[m.source] = cp.RawModule(path=str(cubin))
        big = 512 * 2**20
        self.inp = cp.random.uniform(1.0, 2.0, size=big // 4 + 2**20, dtype=cp.float32)
        self.out = cp.zeros(big // 4 + 2**22, dtype=cp.float32)
        self.marker_fn = cp.RawKernel(MARKER, "pm_marker")
        self.marker_buf = cp.zeros(4, dtype=cp.int32)

    def info(self) -> dict:
        nv = self.nvml
        return {"gpu": _text(nv.nvmlDeviceGetName(self.h)),
                "uuid": _text(nv.nvmlDeviceGetUUID(self.h)),
                "driver": _text(nv.nvmlSystemGetDriverVersion()),
                "sm_count": int(self.sm_count),
                "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "cupy": self.cp.__version__,
                "power_limit_w": self._power_limit_w()}

    def _power_limit_w(self) -> float | None:
        """The enforced power limit (a read; the predictions of InstructionEnergyModel are held
        at it), None where the driver does not say."""
        try:
            return self.nvml.nvmlDeviceGetEnforcedPowerLimit(self.h) / 1000.0
        except self.nvml.NVMLError:
            return None

    def energy_mj(self) -> int:
        return self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.h)

    def launcher(self, name: str, iters: int):
        m = microbenchmark(name)
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

    def clock_probe(self):
        """The on-GPU clock probe (created on first use), or None where it cannot run."""
        if not hasattr(self, "_probe"):
            from ..devices.clock_probe import CupyClockProbe

            try:
                self._probe = CupyClockProbe()
                self._probe.enqueue()  # compiles (NVRTC) and runs once: a failure shows here
                self._probe.collect()
            except Exception as err:  # noqa: BLE001 - the power window must not depend on it
                warnings.warn(f"clock probe unavailable ({type(err).__name__}: {err}); NVML clock only",
                              RuntimeWarning, stacklevel=2)
                self._probe = None
        return self._probe

    def steady_power(self, step, step_s: float, settings: MeasureSettings) -> dict:
        """Keep the GPU busy with ``step`` and read the energy counter's slope.

        Two batches stay queued so the GPU never idles while the host polls the
        counter (≈4 ms a read). Power = ΔE/Δt between the first and last counter
        update edges inside the window; time per step from CUDA events over the
        window's batches. The clock the item ran at: a clock probe after every batch of
        the window (on the same stream, so it runs between batches; ~20 µs each), and
        NVML's SM-clock reading every ~50 ms (a slow sensor, issue 26).
        """
        cp = self.cp
        per_batch = max(1, round(settings.batch_s / max(step_s, 1e-6)))
        probe = self.clock_probe()
        inflight, samples, nvml_clocks = [], [], []
        t0 = time.monotonic()
        t_win, t_end = t0 + settings.warm_s, t0 + settings.warm_s + settings.window_s
        ev_start, t_clock = None, t_win
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
                    if probe is not None:
                        probe.enqueue()
                ev = cp.cuda.Event()
                ev.record()
                inflight.append(ev)
            samples.append((time.monotonic(), self.energy_mj()))
            if now >= t_clock:
                nvml_clocks.append(self.nvml.nvmlDeviceGetClockInfo(self.h, self.nvml.NVML_CLOCK_SM))
                t_clock = now + 0.05
            while inflight and inflight[0].done:
                inflight.pop(0)
            if now >= t_end:
                break
        ev_stop = cp.cuda.Event()
        ev_stop.record()
        state = self.sample_state()
        ev_stop.synchronize()
        gpu_s = cp.cuda.get_elapsed_time(ev_start, ev_stop) / 1e3
        power = counter_slope(samples, t_win + 0.1, t_end)
        return {"power_w": power, "time_s": gpu_s / steps_in_window, "steps": steps_in_window,
                "per_batch": per_batch, "n_samples": len(samples), **state,
                **window_clocks(probe.collect_clocks() if probe is not None else [], nvml_clocks)}

    def idle_power(self, seconds: float = 3.0) -> float:
        self.cp.cuda.Device().synchronize()
        time.sleep(1.0)
        samples, t0 = [], time.monotonic()
        while time.monotonic() - t0 < seconds:
            samples.append((time.monotonic(), self.energy_mj()))
            time.sleep(0.002)
        return counter_slope(samples, t0, t0 + seconds)

    def calibrate_iters(self, name: str, settings: MeasureSettings, profiled=(8, 16)) -> int:
        """Iterations for one launch of about ``settings.target_launch_s`` (a multiple of 8)."""
        probe = 64 if name != "nanosleep" else 256
        t = self.time_once(self.launcher(name, probe), repeat=2)
        iters = max(profiled[-1] * 4, round(probe * settings.target_launch_s / max(t, 1e-7)))
        return int(iters // 8 * 8)  # same unrolled-loop remainder as the profiled counts


class CupyNcuBackend:
    """Real-GPU backend: energy from NVML, counts from ``ncu --clock-control none``.

    Parameters
    ----------
    settings : MeasureSettings, optional
        Timing of the energy measurement.
    cubin_dir : path, optional
        Where the microbenchmark cubins are compiled (default: a temporary folder).
    ncu : str, optional
        Path of ``ncu`` (default: found on PATH or in the CUDA toolkit).
    profiled : tuple of int
        Iteration counts of the two profiles of each microbenchmark.
    hopper_extras : bool, default=False
        Also offer :data:`~powermodels.microbench.catalog.HOPPER_MICROBENCHMARKS` (sm_90a).
    """

    kind = "gpu"

    def __init__(self, settings: MeasureSettings | None = None, cubin_dir=None, ncu=None,
                 profiled=(8, 16), hopper_extras: bool = False):
        self.hopper_extras = bool(hopper_extras)
        self.settings = settings or MeasureSettings()
        self.cubin_dir = Path(cubin_dir or Path(tempfile.gettempdir()) / "pm_cubins")
        self.ncu = ncu
        self.profiled = tuple(profiled)
        self._gpu = None
        self._steps: dict = {}

    def open(self, micro: list[str]):
        self._gpu = MicrobenchGpu(self.cubin_dir, names=micro)
        return self

    def info(self) -> dict:
        return self._gpu.info()

    def microbenchmarks(self) -> list[str]:
        return [*MICROBENCHMARKS, *(HOPPER_MICROBENCHMARKS if self.hopper_extras else ())]

    def idle_power(self) -> float:
        return self._gpu.idle_power(self.settings.idle_s)

    def measure_microbenchmark(self, name: str) -> dict:
        gpu = self._gpu
        iters = gpu.calibrate_iters(name, self.settings, self.profiled)
        step = gpu.launcher(name, iters)
        res = gpu.steady_power(step, gpu.time_once(step, repeat=1), self.settings)
        res["iters"] = iters
        return res

    def prepare_workloads(self, specs) -> tuple[list[str], list[str]]:
        from .validation_workloads import build_workloads

        self._steps, problems = build_workloads(self._gpu.cp, specs)
        return list(self._steps), problems

    def measure_workload(self, name: str) -> dict:
        step = self._steps[name]
        return self._gpu.steady_power(step, self._gpu.time_once(step, repeat=3), self.settings)

    def close(self):
        self._gpu, self._steps = None, {}

    def profile(self, plan: dict, say) -> dict:
        """Both ncu passes over ``plan``; ``{"opcode_csv", "sector_csv", "metric"}``."""
        self.close()  # the profiled child needs the GPU memory
        ncu = self.ncu or sass.find_tool("ncu")
        if ncu is None:
            raise FileNotFoundError("ncu (Nsight Compute) not found: no opcode counts")
        with tempfile.TemporaryDirectory() as tmp:
            plan_path = Path(tmp) / "plan.json"
            plan_path.write_text(json.dumps({**plan, "profiled": list(self.profiled),
                                             "cubin_dir": str(self.cubin_dir)}))
            opcode_csv, metric = "", None
            # The modifier-resolved metric with the NVTX filter first; then without the filter
            # (the markers still segment the launches) and the base-opcode metric.
            for metric, nvtx in ((sass.OPCODE_METRIC, True), (sass.OPCODE_METRIC, False),
                                 ("sass__inst_executed_per_opcode", False)):
                text = self._run_ncu(ncu, [metric, *NCU_METRICS], plan_path, nvtx, say,
                                     instances=True)
                try:
                    launches = sass.parse_ncu_csv(text, metric)
                except ValueError as err:
                    say(f"ncu csv unusable: {err}")
                    launches = []
                if any("pm_marker" not in x["kernel"] for x in launches):
                    opcode_csv = text
                    break
            if not opcode_csv:
                raise RuntimeError("no usable ncu opcode profile (see the log)")
            sector_metrics = [m for names in SECTOR_METRICS.values() for m in names]
            sector_csv = self._run_ncu(ncu, sector_metrics, plan_path, True, say, instances=False)
        return {"opcode_csv": opcode_csv, "sector_csv": sector_csv, "metric": metric}

    @staticmethod
    def _run_ncu(ncu, metrics, plan_path: Path, nvtx: bool, say, instances: bool) -> str:
        rep = plan_path.parent / "profile"
        cmd = [ncu, "--clock-control", "none",
               *(["--nvtx", "--nvtx-include", "pm/"] if nvtx else []),
               "--metrics", ",".join(metrics), "--force-overwrite", "-o", str(rep),
               sys.executable, "-m", "powermodels.microbench.gpu", "--plan", str(plan_path)]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        say(f"ncu ({metrics[0]}, nvtx={nvtx}) rc={proc.returncode} in {time.monotonic() - t0:.0f} s; "
            f"tail: {proc.stdout[-600:]} {proc.stderr[-600:]}")
        csv = subprocess.run([ncu, "-i", str(rep) + ".ncu-rep", "--csv", "--page", "raw",
                              *(["--print-metric-instances", "details"] if instances else [])],
                             capture_output=True, text=True, check=False)
        return csv.stdout


def _profile_child(plan_path: str) -> int:
    """Run under ncu: each item between two marker kernels, inside NVTX range 'pm'."""
    import cupy as cp

    from .validation_workloads import build_workloads

    def nvtx(push: bool):
        try:
            cp.cuda.nvtx.RangePush("pm") if push else cp.cuda.nvtx.RangePop()
        except Exception:  # noqa: BLE001 - without NVTX the markers still segment the launches
            pass

    def profiled(step, code, warmups):
        """``warmups`` unprofiled calls, then one call between the markers of ``code``."""
        for _ in range(warmups):
            step()
        cp.cuda.Device().synchronize()
        nvtx(True)
        gpu.marker(code, end=False)
        step()
        gpu.marker(code, end=True)
        cp.cuda.Device().synchronize()
        nvtx(False)

    plan = json.loads(Path(plan_path).read_text())
    gpu = MicrobenchGpu(Path(plan["cubin_dir"]), names=plan["micro"])
    code = 0
    for name in plan["micro"]:
        for iters in plan["profiled"]:
            profiled(gpu.launcher(name, iters), code, warmups=1)
            code += 1
    steps, _ = build_workloads(cp, plan.get("specs", []))
    for name in plan["workloads"]:
        profiled(steps[name], code, warmups=2)
        code += 1
    return 0


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="(internal) profiled launches, run under ncu")
    ap.add_argument("--plan", required=True)
    sys.exit(_profile_child(ap.parse_args().plan))
