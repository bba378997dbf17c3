"""A simulated GPU with known per-instruction energies, for the calibration workflow.

:class:`SimulatedInstructionBackend` stands in for
:class:`~powermodels.microbench.gpu.CupyNcuBackend`: the same calls
(idle power, steady-state power and time of a microbenchmark or workload, an
ncu raw CSV of each pass), computed from a preset (:data:`PRESETS`) instead of
measured. Energy of a launch follows Wattchmen eq. 1-3 exactly::

    E = (P_const + P_static) · T + Σ_i count_i · e_i + Σ_level sectors_level · e_level

so a calibration on it must recover the preset's table, and two presets
related by an affine map (plus per-opcode scatter) test the §6 transfer.

Each microbenchmark's loop body is its registry targets
(:mod:`powermodels.microbench.catalog`; ``per_step`` of each) unrolled :data:`UNROLL` times plus the
loop's own ``IADD3``/``ISETP``/``BRA``, and a fixed prologue (index
arithmetic, two input loads, one store, ``EXIT``), so its counts are linear in
the iteration count as on a real GPU. A global access moves ``bytes per thread`` of sectors per
warp instruction when coalesced, one 32-byte sector per thread in a ``stride`` or ``random``
benchmark (``access``); the simulated DRAM has no row buffer, so a random sector costs what a
streamed one does. Noise: a relative Gaussian error on the
measured power (``noise``), seeded.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field, replace

import numpy as np

from . import sass
from .catalog import HOPPER_MICROBENCHMARKS, MICROBENCHMARKS, microbenchmark
from .gpu import window_clocks

__all__ = ["PRESETS", "SIM_WORKLOADS", "InstructionPreset", "SimulatedInstructionBackend",
           "affine_preset"]

UNROLL = 16
PJ = 1e-12
_LOOP = {"IADD3": 1, "ISETP.GE.AND": 1, "BRA": 1}
_PROLOGUE = {"S2R": 2, "IMAD": 4, "LDG.E": 2, "STG.E": 1, "EXIT": 1}
_SECTORS_PER_INSTR = {"U16": 2, "": 4, "64": 8, "128": 16}  # 32 threads × bytes / 32 B

#: Energies (pJ per warp instruction) of the first preset, near the H200 fit.
_BASE_PJ = {
    "FADD": 150, "FMUL": 155, "FFMA": 210, "FMNMX": 160, "FSETP.GT.AND": 380, "FSEL": 380,
    "FMUL.RZ": 245, "MUFU.EX2": 140, "MUFU.RSQ": 140, "MUFU.SIN": 245, "MUFU.RCP": 450,
    "MUFU.LG2": 157, "DADD": 555, "DMUL": 770, "DFMA": 640, "HADD2": 150, "HMUL2": 198,
    "HFMA2": 237, "HFMA2.MMA": 198, "IADD3": 300, "IMAD.IADD": 300, "IMAD": 516,
    "IMAD.HI.U32": 197, "LOP3.LUT": 437, "SHF.L.W.U32.HI": 475, "SHF.R.W.U32": 475,
    "VIMNMX": 378, "VIMNMX.U32": 378, "POPC": 136, "PRMT": 373, "FLO.U32": 211,
    "ISETP.GE.AND": 250, "ISETP.GT.XOR": 250, "SEL": 260, "I2FP.F32.S32": 287,
    "F2I.TRUNC.NTZ": 287, "F2F.F64.F32": 386, "F2F.F32.F64": 386, "F2FP.F16.F32.PACK_AB": 275,
    "HADD2.F32": 275, "BRA": 286, "VIADD": 280, "UIADD3": 338, "BAR.SYNC.DEFER_BLOCKING": 120,
    "NANOSLEEP": 5, "SHFL.IDX": 776, "SHFL.BFLY": 654, "LDS": 756, "LDS.64": 1477,
    "LDS.128": 2651, "STS": 902, "STS.128": 2601, "ATOMS.ADD": 1173, "LDG.E": 400,
    "LDG.E.64": 600, "LDG.E.128": 900, "LDG.E.U16": 380, "STG.E": 900, "STG.E.64": 1200,
    "STG.E.128": 1600, "REDG.E.ADD.STRONG.GPU": 2500, "HMMA.16816.F32": 3464,
    "HMMA.16816.F16": 2623, "HMMA.16816.F32.BF16": 2930, "HMMA.1688.F32.TF32": 2781,
    "IMMA.16832.S8.S8": 2161, "DMMA.8x8x4": 2379, "S2R": 200, "EXIT": 100,
    "HGMMA.64x64x16.F32": 6000, "WARPGROUP.ARRIVE": 100, "WARPGROUP.DEPBAR.LE": 100,
}
#: Cycles a warp instruction occupies one of an SM's four schedulers (others 1); chosen so the
#: microbenchmarks draw 250-700 W on the 132-SM preset, as on the H200.
_CYCLES = {"HGMMA": 64, "MUFU": 4, "DADD": 2, "DMUL": 2, "DFMA": 2, "HMMA": 16, "IMMA": 16,
           "DMMA": 32, "LDS": 8, "STS": 8, "ATOMS": 16, "SHFL": 4, "NANOSLEEP": 200}
_MEM_CYCLES = {"L1": 8, "L2": 32, "DRAM": 128}  # global accesses wait for their level

@dataclass(frozen=True)
class InstructionPreset:
    """A simulated GPU's instruction energies and power.

    Attributes
    ----------
    name : str
    energies_j : dict
        Opcode (with modifiers, as ncu prints it) → dynamic energy per warp instruction (J).
    sector_j : dict
        Memory level ("L1", "L2", "DRAM") → energy per 32-byte sector (J).
    static_power_w, idle_power_w : float
        Constant + static power while busy; power at rest.
    sm_count : int
    clock_mhz : float
        SM clock (fixed: the simulated GPU does not change clocks).
    """

    name: str
    energies_j: dict = field(repr=False)
    sector_j: dict = field(repr=False)
    static_power_w: float = 140.0
    idle_power_w: float = 120.0
    sm_count: int = 132
    clock_mhz: float = 1980.0


def affine_preset(base: InstructionPreset, name: str, slope: float, intercept_j: float,
                  scatter: float = 0.05, static_power_w: float | None = None,
                  seed: int = 0) -> InstructionPreset:
    """Another GPU whose energies are ``slope·e + intercept`` times a log-normal scatter.

    The structure Wattchmen §6 relies on (R² ≈ 0.99 between two V100 systems).
    """
    rng = np.random.default_rng(seed)
    ops = sorted(base.energies_j)
    factor = np.exp(scatter * rng.standard_normal(len(ops)))
    energies = {op: max(0.0, slope * base.energies_j[op] + intercept_j) * f
                for op, f in zip(ops, factor, strict=True)}
    sectors = {k: slope * v for k, v in base.sector_j.items()}
    return replace(base, name=name, energies_j=energies, sector_j=sectors,
                   static_power_w=base.static_power_w if static_power_w is None else static_power_w)


_HOPPER_A = InstructionPreset("sim-hopper-a", {k: v * PJ for k, v in _BASE_PJ.items()},
                              {"L1": 160 * PJ, "L2": 950 * PJ, "DRAM": 1750 * PJ})
#: Presets by name: two GPUs whose tables are affinely related (§6 transfer tests).
PRESETS = {
    "sim-hopper-a": _HOPPER_A,
    "sim-hopper-b": affine_preset(_HOPPER_A, "sim-hopper-b", slope=0.8, intercept_j=40 * PJ,
                                  scatter=0.05, static_power_w=110.0, seed=1),
}

#: Validation workloads of the simulated GPU: per-warp opcode mix, level of global accesses.
SIM_WORKLOADS = {
    "sim_gemm": ({"FFMA": 64, "LDS.128": 8, "LDS": 4, "LDG.E.128": 1, "BAR.SYNC.DEFER_BLOCKING": 2,
                  "IADD3": 3, "ISETP.GE.AND": 1, "BRA": 1}, "L2"),
    "sim_stream": ({"LDG.E.128": 2, "STG.E.128": 1, "FFMA": 4, "IMAD": 2, "IADD3": 2,
                    "ISETP.GE.AND": 1, "BRA": 1}, "DRAM"),
    "sim_mixed": ({"IMAD": 8, "FADD": 8, "MUFU.EX2": 2, "SHFL.BFLY": 4, "HMMA.16816.F32": 2,
                   "DFMA": 2, "LDG.E": 2, "IADD3": 4, "ISETP.GE.AND": 1, "BRA": 1}, "L1"),
    "sim_reduce": ({"LDG.E.64": 2, "FADD": 4, "SHFL.BFLY": 5, "ATOMS.ADD": 1, "IADD3": 2,
                    "ISETP.GE.AND": 1, "BRA": 1}, "DRAM"),
}
_SIM_WORKLOAD_WARPS = 1 << 22  # warp-iterations per workload step


def _cycles(op: str, level: str) -> float:
    base = op.split(".")[0]
    if base in ("LDG", "STG", "REDG"):
        return _MEM_CYCLES[level or "L1"]
    return next((v for k, v in _CYCLES.items() if base.startswith(k)), 1)


class SimulatedInstructionBackend:
    """Calibration backend on a simulated GPU with a known table (see module docstring).

    Parameters
    ----------
    preset : str or InstructionPreset, default="sim-hopper-a"
    noise : float, default=0.0
        Relative standard deviation of the measured power.
    seed : int, default=0
    profiled : tuple of int
        Iteration counts of the two profiles of each microbenchmark.
    target_launch_s : float, default=0.02
        A microbenchmark launch lasts about this long.
    hopper_extras : bool, default=False
        Also offer :data:`~powermodels.microbench.catalog.HOPPER_MICROBENCHMARKS`.
    """

    kind = "simulated"

    def __init__(self, preset="sim-hopper-a", noise: float = 0.0, seed: int = 0,
                 profiled=(8, 16), target_launch_s: float = 0.02, hopper_extras: bool = False):
        self.hopper_extras = bool(hopper_extras)
        if isinstance(preset, str):
            if preset not in PRESETS:
                raise ValueError(f"preset: unknown {preset!r} (have {', '.join(PRESETS)})")
            preset = PRESETS[preset]
        if not (np.isfinite(noise) and noise >= 0):
            raise ValueError(f"noise: must be a finite number ≥ 0, got {noise!r}")
        self.preset, self.noise, self.profiled = preset, float(noise), tuple(profiled)
        self.target_launch_s = float(target_launch_s)
        self._rng = np.random.default_rng(seed)

    # -- the backend calls -------------------------------------------------------------

    def open(self, micro):
        return self

    def close(self):
        pass

    def info(self) -> dict:
        p = self.preset
        return {"gpu": f"Simulated {p.name}", "uuid": f"SIM-{p.name}", "driver": "simulated",
                "sm_count": p.sm_count}

    def microbenchmarks(self) -> list[str]:
        return [*MICROBENCHMARKS, *(HOPPER_MICROBENCHMARKS if self.hopper_extras else ())]

    def idle_power(self) -> float:
        return self._noisy(self.preset.idle_power_w)

    def measure_microbenchmark(self, name: str) -> dict:
        counts, level, _ = self._launch(name, 1)
        t1 = self._time(counts, level)  # one iteration (+ prologue)
        iters = max(self.profiled[-1] * 4, round(self.target_launch_s / max(t1, 1e-12)))
        iters = int(iters // 8 * 8)  # as on the GPU: whole unrolled loop bodies
        return {**self._measure(*self._launch(name, iters)), "iters": iters}

    def prepare_workloads(self, specs) -> tuple[list[str], list[str]]:
        names, problems = [], []
        for spec in specs:
            if spec in ("sim", "simulated"):
                names += list(SIM_WORKLOADS)
            elif spec in SIM_WORKLOADS:
                names.append(spec)
            else:
                problems.append(f"{spec}: not a simulated workload (have {', '.join(SIM_WORKLOADS)})")
        return names, problems

    def measure_workload(self, name: str) -> dict:
        return self._measure(*self._workload(name))

    def profile(self, plan: dict, say) -> dict:
        """ncu raw CSVs (opcode pass with instances, sector pass) of ``plan``, as ncu writes them."""
        launches, code = [], 0
        for name in plan["micro"]:
            for iters in self.profiled:
                launches.append(("marker", code, False))
                launches.append((f"mb_{name}", *self._launch(name, iters)))
                launches.append(("marker", code, True))
                code += 1
        for name in plan["workloads"]:
            launches.append(("marker", code, False))
            launches.append((name, *self._workload(name)))
            launches.append(("marker", code, True))
            code += 1
        say(f"simulated ncu: {len(launches)} launches")
        return {"opcode_csv": _ncu_csv(launches, self, opcodes=True),
                "sector_csv": _ncu_csv(launches, self, opcodes=False),
                "metric": sass.OPCODE_METRIC}

    # -- physics -----------------------------------------------------------------------

    def _launch(self, name: str, iters: int):
        """Counts (opcode → warp instructions), memory level and access pattern of one launch."""
        m = microbenchmark(name)
        warps = m.grid(self.preset.sm_count) * m.block // 32
        per_step = m.per_step or [1] * len(m.targets)
        body = {op: UNROLL * k for op, k in zip(m.targets, per_step, strict=True)}
        for op, k in _LOOP.items():
            body[op] = body.get(op, 0) + k
        counts = {op: k * iters * warps for op, k in body.items()}
        for op, k in _PROLOGUE.items():
            counts[op] = counts.get(op, 0) + k * warps
        return counts, m.level or "L1", m.access

    def _workload(self, name: str):
        if name not in SIM_WORKLOADS:
            raise ValueError(f"workload: unknown simulated workload {name!r}")
        mix, level = SIM_WORKLOADS[name]
        return {op: k * _SIM_WORKLOAD_WARPS for op, k in mix.items()}, level

    def _sectors(self, counts: dict, level: str, access: str = "coalesced") -> dict:
        out = {"L1": 0.0, "L2": 0.0, "DRAM": 0.0}
        per_thread = access in ("stride", "random")  # one 32-byte sector per thread
        for op, c in counts.items():
            parts = op.split(".")
            if parts[0] not in ("LDG", "STG", "REDG"):
                continue
            width = next((p for p in parts[1:] if p in _SECTORS_PER_INSTR), "")
            s = c * (32 if per_thread else _SECTORS_PER_INSTR[width])
            out["L1"] += s if parts[0] == "LDG" else 0.0
            if parts[0] != "LDG" or level in ("L2", "DRAM"):
                out["L2"] += s
            if level == "DRAM":
                out["DRAM"] += s
        return out

    def _time(self, counts: dict, level: str) -> float:
        # the access pattern only shapes the sectors: the simulated time counts instructions and levels
        cycles = sum(c * _cycles(op, level) for op, c in counts.items())
        return cycles / (4 * self.preset.sm_count * self.preset.clock_mhz * 1e6)

    def _energy(self, counts: dict, level: str, access: str = "coalesced") -> float:
        p = self.preset
        missing = sorted(set(counts) - set(p.energies_j))
        if missing:
            raise ValueError(f"preset {p.name}: no energy for opcodes {missing}")
        dyn = sum(c * p.energies_j[op] for op, c in counts.items())
        dyn += sum(s * p.sector_j[lv] for lv, s in self._sectors(counts, level, access).items())
        return p.static_power_w * self._time(counts, level) + dyn

    def _measure(self, counts: dict, level: str, access: str = "coalesced") -> dict:
        t = self._time(counts, level)
        return {"power_w": self._noisy(self._energy(counts, level, access) / t), "time_s": t,
                "temperature_c": 50.0, "sm_clock_mhz": self.preset.clock_mhz,
                "mem_clock_mhz": 3201.0,
                **window_clocks([self.preset.clock_mhz], [self.preset.clock_mhz])}

    def _noisy(self, value: float) -> float:
        return float(value * (1 + self.noise * self._rng.standard_normal())) if self.noise else value

    def hit_rates(self, level: str) -> tuple[float, float]:
        """(L1, L2) sector hit rates in % of a launch whose global accesses hit ``level``."""
        return {"L1": (100.0, 100.0), "L2": (0.0, 100.0), "DRAM": (0.0, 0.0)}[level]


_SECTOR_COLUMNS = {"L1": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
                   "L2": ("lts__t_sectors_srcunit_tex.sum",),
                   "DRAM": ("dram__sectors_read.sum",)}
_ZERO_COLUMNS = ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "dram__sectors_write.sum")


def _ncu_csv(launches, backend: SimulatedInstructionBackend, *, opcodes: bool) -> str:
    """ncu ``--csv --page raw`` text of ``launches`` (a units row, then one row per launch)."""
    if opcodes:
        metrics = [sass.OPCODE_METRIC, "l1tex__t_sector_hit_rate.pct",
                   "lts__t_sector_hit_rate.pct", "gpu__time_duration.sum"]
        units = ["inst", "%", "%", "ns"]
    else:
        metrics = [c for cols in _SECTOR_COLUMNS.values() for c in cols] + list(_ZERO_COLUMNS)
        units = ["sector"] * len(metrics)
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["ID", "Kernel Name", "Grid Size", "Block Size", *metrics])
    w.writerow(["", "", "", "", *units])
    for i, (kernel, *rest) in enumerate(launches):
        if kernel == "marker":
            code, end = rest
            values = ([f"0 ({'S2R: 0'})", "0", "0", "1000"] if opcodes
                      else ["0"] * len(metrics))
            w.writerow([i, "pm_marker", f"({code + 1}, 1, 1)", f"({2 if end else 1}, 1, 1)", *values])
            continue
        counts, level, *access = rest
        if opcodes:
            total = sum(int(c) for c in counts.values())
            cell = f"{total} (" + "; ".join(f"{op}: {int(c)}" for op, c in counts.items()) + ")"
            l1, l2 = backend.hit_rates(level)
            values = [cell, f"{l1}", f"{l2}", f"{backend._time(counts, level) * 1e9:.0f}"]
        else:
            sectors = backend._sectors(counts, level, *access)
            values = [f"{sectors[lv]:.0f}" for lv in _SECTOR_COLUMNS] + ["0"] * len(_ZERO_COLUMNS)
        w.writerow([i, kernel, "(1056, 1, 1)", "(256, 1, 1)", *values])
    return buf.getvalue()
