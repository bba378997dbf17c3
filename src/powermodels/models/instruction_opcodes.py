"""Opcode vocabulary of the per-instruction energy model (Wattchmen §3.4-3.5).

Grouping of modifiers, buckets of base opcodes, multiply-accumulates of tensor
instructions and the split of global-memory opcodes by cache level. Pure
string/array helpers shared by :class:`~powermodels.models.InstructionEnergyModel`
and its transfer (:mod:`.instruction_transfer`).
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .. import schema

__all__ = ["BUCKETS", "GLOBAL_LSU", "LEVELS", "LOADS", "STATIC", "STORES", "TRAFFIC",
           "TRAFFIC_FEATURES", "UNCOALESCED", "access_bytes", "alu_base", "base_opcode", "closest_variant",
           "group_opcode", "mma_family", "mma_macs", "opcode_bucket", "split_levels",
           "uncoalesced_sectors"]

LOADS = frozenset({"LDG", "LD"})
STORES = frozenset({"STG", "ST", "RED", "REDG", "ATOMG", "ATOM", "LDGSTS"})
LEVELS = ("L1", "L2", "DRAM")
STATIC = "STATIC"  # component name of the time-proportional (constant + static) energy
#: Memory-traffic features (32-byte sectors per run) and the table columns they come from.
TRAFFIC = {"SECTORS@L1": schema.L1_SECTORS, "SECTORS@L2": schema.L2_SECTORS,
           "SECTORS@DRAM": schema.DRAM_SECTORS}
#: L1 sectors beyond what the global loads/stores would move fully coalesced (our extension):
#: the feature :func:`uncoalesced_sectors` computes, priced per sector besides ``SECTORS@L1``.
UNCOALESCED = "SECTORS@UNCOALESCED"
#: Every per-sector feature (not an instruction: no ``min_share``, no coverage, no intercept).
TRAFFIC_FEATURES = (*TRAFFIC, UNCOALESCED)
#: Opcodes whose sectors ``l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}`` count (the table's
#: ``l1_sectors``): global and generic loads/stores and cp.async (``LDGSTS``, seen on real H100
#: tables: cuBLAS SGEMM's 1.0·10⁸ L1 sectors are its LDGSTS.128's); atomics and reductions are
#: counted by other metrics.
GLOBAL_LSU = frozenset({"LDG", "STG", "LD", "ST", "LDGSTS"})

#: Bucket → base opcodes (Wattchmen §3.4 "bucketing", AccelWattch-style components).
BUCKETS: dict[str, frozenset[str]] = {
    "FP32": frozenset("FADD FMUL FFMA FMNMX FSETP FSEL FSET FCHK FRND FSWZADD FADD32I "
                      "FMUL32I FFMA32I".split()),
    "FP64": frozenset("DADD DMUL DFMA DSETP DMNMX".split()),
    "FP16": frozenset("HADD2 HMUL2 HFMA2 HSETP2 HMNMX2 HSET2 HADD2.F32".split()),
    "SFU": frozenset(["MUFU"]),
    "CONV": frozenset("F2F F2I I2F I2FP F2IP FRND I2I F2FP".split()),
    "INT": frozenset("IADD3 IADD IMAD IMUL LOP3 LOP SHF SHL SHR ISETP IMNMX VIMNMX POPC FLO "
                     "PRMT LEA SEL MOV IABS BMSK BREV SGXT VIADD VIADDMNMX IDP IDP4A PLOP3 P2R "
                     "R2P S2R S2UR CS2R LDC R2UR UIADD3 UIMAD ULOP3 USHF UISETP USEL UMOV ULDC "
                     "ULEA UPRMT UFLO UPOPC UBMSK USGXT UP2UR UPLOP3 VOTEU UMNMX LDCU".split()),
    "CONTROL": frozenset("BRA BRX JMP JMX CALL RET EXIT BSSY BSYNC WARPSYNC BAR BREAK YIELD "
                         "NANOSLEEP BMOV KILL ACQBULK".split()),
    "WARP": frozenset("SHFL VOTE MATCH REDUX ELECT".split()),
    "MEM-shared": frozenset("LDS STS ATOMS LDSM STSM".split()),
    "MEM-global": frozenset((*LOADS, *STORES, "CCTL", "UBLKCP", "UTMALDG", "UTMASTG",
                             "UTMAPF", "SYNCS")),
    "MEM-local": frozenset("LDL STL".split()),
    "TENSOR": frozenset("HMMA IMMA DMMA BMMA HGMMA IGMMA QGMMA BGMMA WARPGROUP".split()),
    "MEM-traffic": frozenset(["SECTORS"]),
    "MISC": frozenset("NOP MEMBAR DEPBAR ERRBAR FENCE CGAERRBAR LDGDEPBAR ARRIVES".split()),
}
_BUCKET_OF = {op: b for b, ops in BUCKETS.items() for op in ops}

# Modifiers that select cache policy, memory ordering or scheduling but not the work done
# (Wattchmen §3.4: STG.E.EF.64 is treated as STG.E.64).
_NEUTRAL = frozenset("EF EL LU EU NA STRONG GPU SYS CTA SM CONSTANT DEFER_BLOCKING LTC64B "
                     "LTC128B LTC256B ZFILL BYPASS PRIVATE MMIO REUSE".split())
# Compare-and-set families whose comparison/combine modifiers are grouped (ISETP.GE.OR ≡ ISETP.GE.AND).
_SETP = frozenset("ISETP FSETP DSETP HSETP2 PSETP UISETP".split())
_MMA_SHAPES = {"16816": (16, 8, 16), "1688": (16, 8, 8), "16832": (16, 8, 32), "884": (8, 8, 4),
               "8816": (8, 8, 16), "16864": (16, 8, 64), "1684": (16, 8, 4), "8832": (8, 8, 32),
               "88128": (8, 8, 128), "168128": (16, 8, 128), "168256": (16, 8, 256)}


def group_opcode(op: str, modifier_depth: int | None = None, rules: bool = True) -> str:
    """Canonical group of an opcode (Wattchmen §3.4 "grouping").

    Parameters
    ----------
    op : str
        SASS opcode with modifiers, e.g. ``"LDG.E.128.SYS"``.
    modifier_depth : int, optional
        Keep at most this many modifiers after the rules (``None`` keeps all;
        ``0`` keeps the base opcode only).
    rules : bool, default=True
        Drop cache/ordering modifiers (``EF``, ``STRONG``, ``GPU``, ``SYS``,
        ``CONSTANT``...) and the comparison modifiers of ``*SETP`` opcodes.

    Examples
    --------
    >>> group_opcode("LDG.E.128.SYS")
    'LDG.E.128'
    >>> group_opcode("ISETP.GE.U32.AND")
    'ISETP'
    >>> group_opcode("LDG.E.128.SYS", modifier_depth=1, rules=False)
    'LDG.E'
    """
    parts = op.split(".")
    base, mods = parts[0], parts[1:]
    if rules:
        mods = [] if base in _SETP else [m for m in mods if m not in _NEUTRAL]
    if modifier_depth is not None:
        mods = mods[:modifier_depth]
    return ".".join([base, *mods])


def base_opcode(op: str) -> str:
    """Base opcode without modifiers or memory level (``"LDG.E.128@L2"`` → ``"LDG"``)."""
    return op.split("@")[0].split(".")[0]


def opcode_bucket(op: str) -> str:
    """Bucket of an opcode (``"FP32"``, ``"INT"``, ``"MEM-global"``, ``"TENSOR"``... or ``"MISC"``)."""
    name = op.split("@")[0]
    if name.startswith("HADD2.F32"):
        return "CONV"  # f16→f32 conversion on sm_90
    if name.startswith("HFMA2.MMA"):
        return "FP16"
    return _BUCKET_OF.get(base_opcode(op), "MISC")


def mma_macs(op: str) -> float | None:
    """Multiply-accumulates per warp-level instruction of a tensor opcode, or None.

    ``HMMA.16816.F32`` → 16·8·16 = 2048; ``DMMA.8x8x4`` → 256; warp-group
    instructions (``HGMMA.64x128x16.F32``) are issued by the four warps of the
    group, so each warp-level instruction counts a quarter of 64·128·16.
    """
    base = base_opcode(op)
    if opcode_bucket(op) != "TENSOR" or base == "WARPGROUP":
        return None
    for token in op.split("@")[0].split(".")[1:]:
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", token)
        if m:
            macs = float(np.prod([int(v) for v in m.groups()]))
            return macs / 4 if base.endswith("GMMA") else macs
        if token in _MMA_SHAPES:
            return float(np.prod(_MMA_SHAPES[token]))
    return None


def mma_family(op: str) -> str:
    """Tensor family sharing a per-MAC energy: "H" (FP16/BF16/FP8/1-bit), "I", "D" or ""."""
    return {"H": "H", "B": "H", "Q": "H", "I": "I", "D": "D"}.get(base_opcode(op)[0], "")


def split_levels(counts: pd.DataFrame, hits) -> pd.DataFrame:
    """Split global loads by L1/L2 hits and stores/atomics by L2 hits (Wattchmen §3.5)."""
    if hits is None:
        return counts
    h1, h2 = hits
    out = {}
    for op in counts.columns:
        c = counts[op].to_numpy()
        base = base_opcode(op)
        if base in LOADS:
            parts = {"L1": c * h1, "L2": c * (1 - h1) * h2, "DRAM": c * (1 - h1) * (1 - h2)}
        elif base in STORES:
            parts = {"L2": c * h2, "DRAM": c * (1 - h2)}
        else:
            out[op] = out.get(op, 0.0) + c
            continue
        for level, v in parts.items():
            key = f"{op}@{level}"
            out[key] = out.get(key, 0.0) + v
    return pd.DataFrame(out, index=counts.index)


def closest_variant(op: str, energies: pd.Series) -> float | None:
    """Energy of the fitted variant of ``op``'s base opcode and level sharing the most leading
    modifiers (ties: the one with fewest modifiers, then their mean); None when there is none.

    Wattchmen §3.4's grouping at prediction: ``IMAD.MOV.U32`` takes ``IMAD``'s energy.
    ``energies``: fitted energy per feature (``OP.MOD…[@LEVEL]`` → J).
    """
    name, _, level = op.partition("@")
    mods = name.split(".")
    best, score = [], None
    for other in energies.index:
        oname, _, olevel = other.partition("@")
        omods = oname.split(".")
        if omods[0] != mods[0] or olevel != level:
            continue
        common = 0
        for a, b in zip(mods[1:], omods[1:], strict=False):
            if a != b:
                break
            common += 1
        key = (common, -len(omods))
        if score is None or key > score:
            best, score = [other], key
        elif key == score:
            best.append(other)
    if not best:
        return None
    return float(np.mean([energies[b] for b in best]))


def access_bytes(op: str) -> int:
    """Bytes one thread moves with a global load/store opcode (``LDG.E.128`` → 16, ``LDG.E`` → 4).

    The width modifier (``64``, ``128``; ``U8``/``S16``… for sub-word accesses) gives it;
    without one the access is a 32-bit word.

    Examples
    --------
    >>> access_bytes("LDG.E.128.CONSTANT"), access_bytes("STG.E.U8"), access_bytes("LDG.E")
    (16, 1, 4)
    """
    for token in op.split("@")[0].split(".")[1:]:
        if token in ("8", "16", "32", "64", "128", "256"):
            return int(token) // 8
        m = re.fullmatch(r"[US](8|16|32|64)", token)
        if m:
            return int(m.group(1)) // 8
    return 4


def uncoalesced_sectors(raw: pd.DataFrame, l1_sectors) -> np.ndarray:
    """L1 sectors per run beyond those of fully coalesced accesses (our extension).

    A warp instruction whose 32 threads read consecutive ``b``-byte words touches
    ``32·b/32 = b`` sectors of 32 bytes; a gather or a strided access touches up to 32. The
    excess ``max(0, l1_sectors − Σ count·access_bytes)`` over the opcodes of
    :data:`GLOBAL_LSU` is the traffic a coalesced microbenchmark never prices: each such sector
    is a separate tag lookup and L2 request (and, at DRAM footprints, another DRAM row more
    often). Partially active warps move fewer sectors than the ideal, so a run's sum can come
    out below it: clipped at 0.

    Parameters
    ----------
    raw : DataFrame
        Opcode counts per run with the profiled names (modifiers kept), without the
        ``op:`` prefix.
    l1_sectors : array-like
        The table's ``l1_sectors`` (global load + store sectors through L1) per run.

    Returns
    -------
    ndarray
        Excess sectors per run (≥ 0).
    """
    ideal = np.zeros(len(raw))
    for op in raw.columns:
        if base_opcode(op) in GLOBAL_LSU:
            ideal += raw[op].to_numpy(dtype=float) * access_bytes(op)
    return np.maximum(np.asarray(l1_sectors, dtype=float) - ideal, 0.0)


#: Buckets whose modifiers select the work done (access width, MMA shape): kept by :func:`alu_base`.
_WORK_MODIFIERS = frozenset({"MEM-shared", "MEM-global", "MEM-local", "TENSOR"})


def alu_base(op: str) -> str:
    """``op`` without modifiers if it is an ALU/control opcode whose bucket does not depend on them.

    Grouping of Wattchmen §3.4 between "all modifiers" and "base opcode only": on an ALU
    opcode a modifier selects a variant of the same datapath (``SHF.R.U32.HI`` is a
    funnel shift as ``SHF.L.W`` is), and a variant seen in one microbenchmark only otherwise
    takes that row's unexplained energy; on memory and tensor opcodes the modifiers give
    the bytes moved or the multiply-accumulates, and are kept. A modifier that moves the
    opcode to another bucket (``HADD2.F32``, a conversion) is kept too.

    Examples
    --------
    >>> alu_base("SHF.R.U32.HI"), alu_base("LDG.E.128"), alu_base("HADD2.F32")
    ('SHF', 'LDG.E.128', 'HADD2.F32')
    """
    base = base_opcode(op)
    bucket = opcode_bucket(op)
    if bucket in _WORK_MODIFIERS or opcode_bucket(base) != bucket:
        return op
    return base
