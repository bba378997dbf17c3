"""Registry of the Wattchmen-style microbenchmarks in ``kernels/microbench/*.cu``.

Each microbenchmark is one kernel (all share the signature
``(const void* in, void* out, long long iters, unsigned mask)``, see
``kernels/microbench/common.cuh``) plus a launch configuration: the grid is
``blocks_per_sm × SM count`` so every SM is saturated (Wattchmen §3.2), and
``mask`` sets the memory footprint, hence the cache level a memory
instruction hits. ``targets`` lists the SASS opcodes (with modifiers, as
emitted by ``nvcc 13.0 -arch=sm_90``) the benchmark is built to execute; the
SASS test checks they are in the cubin.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["HOPPER_MICROBENCHMARKS", "MEASUREMENT_ROWS", "MICROBENCHMARKS", "OPERAND_VARIANTS",
           "TOGGLING_ONLY", "Microbenchmark", "kernel_dir", "microbenchmark"]

KiB = 1024
MiB = 1024 * KiB

#: Footprints of the three memory levels: inside L1 (256 KiB/SM), inside L2 (50 MiB), DRAM.
L1_BYTES = 16 * KiB
L2_BYTES = 8 * MiB
DRAM_BYTES = 512 * MiB
#: Default footprint of the ALU benchmarks' input reads (a few loads per thread, L1-resident).
ALU_BYTES = 64 * KiB


def kernel_dir() -> Path:
    """The folder holding the microbenchmark sources (repo checkout or installed package)."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[3] / "kernels" / "microbench",
                      here.parents[1] / "kernels" / "microbench"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("kernels/microbench not found next to the package")


@dataclass(frozen=True)
class Microbenchmark:
    """One microbenchmark: source, kernel, launch configuration, expected SASS.

    Attributes
    ----------
    name : str
        Registry key (``"ldg128_l2"``).
    source : str
        File name in ``kernels/microbench``.
    kernel : str
        ``extern "C"`` kernel name.
    targets : tuple of str
        Dominant SASS opcodes with modifiers (sm_90, nvcc 13.0).
    component : str
        What it exercises (FP32, INT, MEM-global, TENSOR, ...).
    footprint_bytes : int
        Bytes of the buffer the kernel indexes (power of two).
    element_bytes : int
        Bytes per element of that buffer (``mask = footprint/element - 1``).
    level : str
        Intended memory level ("L1", "L2", "DRAM") or "" for non-memory benchmarks.
    block : int
        Threads per block.
    blocks_per_sm : int
        Blocks launched per SM.
    arch : str
        ``nvcc -arch`` the source is compiled for (``sm_90a`` for warp-group MMA).
    per_step : tuple of float
        Warp instructions of each target per unrolled step (empty: one each), as in the
        loop's SASS; the simulated GPU executes this mix.
    access : str
        How a global-memory target touches memory: "coalesced" (a warp's accesses share
        lines), "stride" (one 32-byte sector per thread, consecutive sectors) or "random"
        (one sector per thread, anywhere in the footprint).
    """

    name: str
    source: str
    kernel: str
    targets: tuple[str, ...]
    component: str
    footprint_bytes: int = ALU_BYTES
    element_bytes: int = 4
    level: str = ""
    block: int = 256
    blocks_per_sm: int = 8
    arch: str = "sm_90"
    per_step: tuple[float, ...] = ()
    access: str = "coalesced"

    def __post_init__(self):
        if self.per_step and len(self.per_step) != len(self.targets):
            raise ValueError(f"{self.name}: per_step has {len(self.per_step)} entries for "
                             f"{len(self.targets)} targets")
        if self.access not in ("coalesced", "stride", "random"):
            raise ValueError(f"{self.name}: access must be 'coalesced', 'stride' or 'random', "
                             f"got {self.access!r}")

    @property
    def mask(self) -> int:
        """Element-index mask passed to the kernel."""
        return self.footprint_bytes // self.element_bytes - 1

    def grid(self, sm_count: int) -> int:
        """Blocks to launch on a GPU with ``sm_count`` SMs (saturates every SM)."""
        if sm_count < 1:
            raise ValueError(f"sm_count: must be ≥ 1, got {sm_count}")
        return self.blocks_per_sm * sm_count

    @property
    def path(self) -> Path:
        """Path of the source file."""
        return kernel_dir() / self.source


def _alu(name, source, targets, component, **kw):
    return Microbenchmark(name, source, f"mb_{name}", tuple(targets), component, **kw)


def _mem(name, kernel, targets, component, level, element_bytes, **kw):
    footprint = {"L1": L1_BYTES, "L2": L2_BYTES, "DRAM": DRAM_BYTES}[level]
    return Microbenchmark(name, "global.cu", kernel, tuple(targets), component,
                          footprint_bytes=footprint, element_bytes=element_bytes, level=level, **kw)


_LIST = [
    # FP32 and special functions
    _alu("fadd", "fp32.cu", ["FADD"], "FP32"),
    _alu("fmul", "fp32.cu", ["FMUL"], "FP32"),
    _alu("ffma", "fp32.cu", ["FFMA"], "FP32"),
    _alu("fmnmx", "fp32.cu", ["FMNMX"], "FP32"),
    _alu("fsetp", "fp32.cu", ["FSETP.GT.AND", "FSEL"], "FP32"),
    _alu("mufu_ex2", "fp32.cu", ["MUFU.EX2"], "SFU"),
    _alu("mufu_rsq", "fp32.cu", ["MUFU.RSQ"], "SFU"),
    _alu("mufu_sin", "fp32.cu", ["MUFU.SIN", "FMUL.RZ"], "SFU"),
    _alu("mufu_rcp", "fp32.cu", ["MUFU.RCP", "FADD"], "SFU"),
    _alu("mufu_lg2", "fp32.cu", ["MUFU.LG2"], "SFU"),
    # FP64
    _alu("dadd", "fp64.cu", ["DADD"], "FP64"),
    _alu("dmul", "fp64.cu", ["DMUL"], "FP64"),
    _alu("dfma", "fp64.cu", ["DFMA"], "FP64"),
    # FP16x2
    _alu("hadd2", "fp16.cu", ["HADD2"], "FP16"),
    _alu("hmul2", "fp16.cu", ["HMUL2", "HFMA2.MMA"], "FP16"),
    _alu("hfma2", "fp16.cu", ["HFMA2"], "FP16"),
    # integer
    _alu("iadd3", "int.cu", ["IADD3", "IMAD.IADD"], "INT"),
    _alu("imad", "int.cu", ["IMAD"], "INT"),
    _alu("imad_hi", "int.cu", ["IMAD.HI.U32"], "INT"),
    _alu("lop3", "int.cu", ["LOP3.LUT"], "INT"),
    _alu("shf", "int.cu", ["SHF.L.W.U32.HI", "SHF.R.W.U32"], "INT"),
    _alu("imnmx", "int.cu", ["VIMNMX", "VIMNMX.U32"], "INT"),
    _alu("popc", "int.cu", ["POPC"], "INT"),
    _alu("prmt", "int.cu", ["PRMT"], "INT"),
    _alu("flo", "int.cu", ["FLO.U32"], "INT"),
    _alu("isetp", "int.cu", ["ISETP.GE.AND", "ISETP.GT.XOR", "SEL"], "INT"),
    # conversions
    _alu("i2f", "convert.cu", ["I2FP.F32.S32", "F2I.TRUNC.NTZ"], "CONV"),
    _alu("f2f_f64", "convert.cu", ["F2F.F64.F32", "F2F.F32.F64"], "CONV"),
    _alu("f2f_f16", "convert.cu", ["F2FP.F16.F32.PACK_AB", "HADD2.F32"], "CONV"),
    # control
    _alu("bra", "control.cu", ["BRA", "VIADD", "UIADD3"], "CONTROL"),
    _alu("predicated", "control.cu", ["IADD3", "IMAD.IADD"], "CONTROL"),
    _alu("bar", "control.cu", ["BAR.SYNC.DEFER_BLOCKING"], "CONTROL"),
    _alu("nanosleep", "control.cu", ["NANOSLEEP"], "STATIC"),
    # warp shuffles
    _alu("shfl_idx", "shfl.cu", ["SHFL.IDX"], "WARP"),
    _alu("shfl_bfly", "shfl.cu", ["SHFL.BFLY"], "WARP"),
    # shared memory
    _alu("lds32", "shared.cu", ["LDS"], "MEM-shared"),
    _alu("lds64", "shared.cu", ["LDS.64"], "MEM-shared"),
    _alu("lds128", "shared.cu", ["LDS.128"], "MEM-shared"),
    _alu("sts32", "shared.cu", ["STS"], "MEM-shared"),
    _alu("sts128", "shared.cu", ["STS.128"], "MEM-shared"),
    _alu("atoms", "shared.cu", ["ATOMS.ADD"], "MEM-shared"),
    # global memory: one kernel per width, the level set by the footprint
    _mem("ldg32_l1", "mb_ldg32", ["LDG.E"], "MEM-global", "L1", 4),
    _mem("ldg64_l1", "mb_ldg64", ["LDG.E.64"], "MEM-global", "L1", 8),
    _mem("ldg128_l1", "mb_ldg128", ["LDG.E.128"], "MEM-global", "L1", 16),
    _mem("ldg16_l2", "mb_ldg16", ["LDG.E.U16"], "MEM-global", "L2", 2),
    _mem("ldg32_l2", "mb_ldg32", ["LDG.E"], "MEM-global", "L2", 4),
    _mem("ldg64_l2", "mb_ldg64", ["LDG.E.64"], "MEM-global", "L2", 8),
    _mem("ldg128_l2", "mb_ldg128", ["LDG.E.128"], "MEM-global", "L2", 16),
    _mem("ldg32_dram", "mb_ldg32", ["LDG.E"], "MEM-global", "DRAM", 4),
    _mem("ldg64_dram", "mb_ldg64", ["LDG.E.64"], "MEM-global", "DRAM", 8),
    _mem("ldg128_dram", "mb_ldg128", ["LDG.E.128"], "MEM-global", "DRAM", 16),
    _mem("stg32_l2", "mb_stg32", ["STG.E"], "MEM-global", "L2", 4),
    _mem("stg64_l2", "mb_stg64", ["STG.E.64"], "MEM-global", "L2", 8),
    _mem("stg128_l2", "mb_stg128", ["STG.E.128"], "MEM-global", "L2", 16),
    _mem("stg32_dram", "mb_stg32", ["STG.E"], "MEM-global", "DRAM", 4),
    _mem("stg128_dram", "mb_stg128", ["STG.E.128"], "MEM-global", "DRAM", 16),
    _mem("red_l2", "mb_red", ["REDG.E.ADD.STRONG.GPU"], "MEM-global", "L2", 4),
    # tensor cores (mma.sync; HGMMA is not emitted, see tensor.cu)
    _alu("hmma_f32", "tensor.cu", ["HMMA.16816.F32"], "TENSOR"),
    _alu("hmma_f16", "tensor.cu", ["HMMA.16816.F16"], "TENSOR"),
    _alu("hmma_bf16", "tensor.cu", ["HMMA.16816.F32.BF16"], "TENSOR"),
    _alu("hmma_tf32", "tensor.cu", ["HMMA.1688.F32.TF32"], "TENSOR"),
    _alu("imma_s8", "tensor.cu", ["IMMA.16832.S8.S8"], "TENSOR"),
    _alu("dmma", "tensor.cu", ["DMMA.8x8x4"], "TENSOR"),
]

#: name → :class:`Microbenchmark`, in a stable order (the 63 of the H200 dataset).
MICROBENCHMARKS: dict[str, Microbenchmark] = {m.name: m for m in _LIST}

_WG = ("HGMMA.64x64x16.F32", "WARPGROUP.ARRIVE", "WARPGROUP.DEPBAR.LE")


def _groups(name, per_arrive, per_depbar):
    """HGMMA with ``per_arrive`` instructions per ARRIVE and ``per_depbar`` per DEPBAR."""
    return Microbenchmark(name, "wgmma_groups.cu", f"mb_{name}", _WG, "TENSOR", block=128,
                          arch="sm_90a", per_step=(1.0, 1 / per_arrive, 1 / per_depbar))


def _irregular(name, target, access):
    return Microbenchmark(name, "irregular.cu", f"mb_{name.rsplit('_', 1)[0]}", (target,),
                          "MEM-global", footprint_bytes=DRAM_BYTES, element_bytes=4, level="DRAM",
                          access=access)


#: Opt-in microbenchmarks (``sm_90a`` for the warp-group ones), added by ``calibrate-instructions
#: --hopper-extras`` and ``benchmarks/gpu_wattchmen_transfer.py measure --hopper-extras``:
#: warp-group MMA (HGMMA), which cuBLAS GEMMs use and the mma.sync benchmarks cannot emit (the
#: H200 GEMMs were under-predicted by 25-27 %), and operand-toggling variants of FFMA, DMMA and
#: HGMMA (``operands.cu``): the base benchmarks feed each instruction the same values again and
#: again, a GEMM on real data does not, and the H100's capped GEMMs (88 % FFMA in
#: ``cublas_sgemm_4096``) took 1.6-1.9x the dynamic energy the table gave them. Then the
#: :data:`MEASUREMENT_ROWS` of issue 26 (not yet measured on a GPU): HGMMA with 2 and 4
#: instructions per arrive/commit group (``wgmma_groups.cu``), so the joint solve can separate
#: HGMMA from ``WARPGROUP.ARRIVE``/``DEPBAR`` and ``UMOV`` (1 : 1 : 1 : 1.56 in
#: ``hgmma_f32_rand``), and uncoalesced DRAM accesses (``irregular.cu``: gather, strided load,
#: scatter), whose per-sector energy the coalesced streams of ``global.cu`` do not measure.
HOPPER_MICROBENCHMARKS: dict[str, Microbenchmark] = {m.name: m for m in [
    Microbenchmark("hgmma_f32", "wgmma.cu", "mb_hgmma_f32", _WG, "TENSOR", block=128,
                   arch="sm_90a"),
    Microbenchmark("ffma_rand", "operands.cu", "mb_ffma_rand", ("FFMA",), "FP32", arch="sm_90a"),
    Microbenchmark("dmma_rand", "operands.cu", "mb_dmma_rand", ("DMMA.8x8x4",), "TENSOR",
                   arch="sm_90a"),
    Microbenchmark("hgmma_f32_rand", "operands.cu", "mb_hgmma_f32_rand", _WG, "TENSOR",
                   block=128, arch="sm_90a"),
    # SASS per 32 HGMMA (nvcc 13.0, sm_90a): ARRIVE 16 / 8 / 16 / 8, DEPBAR 16 / 8 / 8 / 8,
    # UMOV 50 / 50 / 50 / 2 (hgmma_f32_rand: 32, 32, 50)
    _groups("hgmma_f32_rand_g2", 2, 2),
    _groups("hgmma_f32_rand_g4", 4, 4),
    _groups("hgmma_f32_rand_g2x2", 2, 4),
    _groups("hgmma_f32_rand_g4_ab", 4, 4),
    _irregular("ldg32_rand_dram", "LDG.E", "random"),
    _irregular("ldg32_stride_dram", "LDG.E", "stride"),
    _irregular("stg32_rand_dram", "STG.E", "random"),
]}


#: Operand-toggling variant → the base microbenchmark it re-measures on changing operand values.
OPERAND_VARIANTS = {"ffma_rand": "ffma", "dmma_rand": "dmma", "hgmma_f32_rand": "hgmma_f32"}
#: Rows added for issue 26 whose use ``analyze`` decides by leave-one-microbenchmark-out CV
#: (:func:`~powermodels.instruction_energy.selection.cross_validate_instruction_models`,
#: ``held_back``): name → what the rows measure.
MEASUREMENT_ROWS = {
    "hgmma groups": ("hgmma_f32_rand_g2", "hgmma_f32_rand_g4", "hgmma_f32_rand_g2x2",
                     "hgmma_f32_rand_g4_ab"),
    "irregular memory": ("ldg32_rand_dram", "ldg32_stride_dram", "stg32_rand_dram"),
}
#: Microbenchmarks measured on toggling operands only (no fixed-operand counterpart): left out of
#: a fixed-operand table along with the :data:`OPERAND_VARIANTS`.
TOGGLING_ONLY = frozenset(MEASUREMENT_ROWS["hgmma groups"])


def microbenchmark(name: str) -> Microbenchmark:
    """Look up a microbenchmark by name.

    Raises
    ------
    ValueError
        If ``name`` is not registered (the message lists the names).
    """
    try:
        return {**MICROBENCHMARKS, **HOPPER_MICROBENCHMARKS}[name]
    except KeyError:
        raise ValueError(f"name: unknown microbenchmark {name!r} "
                         f"(have {', '.join([*MICROBENCHMARKS, *HOPPER_MICROBENCHMARKS])})") from None
