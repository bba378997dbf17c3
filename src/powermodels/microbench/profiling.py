"""Kernel features for the DVFS parameter predictor (DSO §IV-D, Tables I-II).

Two feature sets, both with ``schema.FEATURE_PREFIX`` column names:

static (Table II)
    PTX instruction mix from ``nvcc -ptx`` (or NVRTC) output: counts of
    instruction types, data types and state spaces, each normalised by its
    category's total (:func:`ptx_features`).
runtime (Table I)
    Utilisation ratios equivalent to DCGM's profiling fields (SM active,
    occupancy, tensor / fp64 / fp32 / fp16 / integer pipe activity, DRAM
    active). DCGM is not available on the lent machine, so they come from
    ``ncu --clock-control none --csv --metrics ...`` (:data:`NCU_METRICS`,
    :func:`ncu_command`, :func:`parse_ncu_csv`). ``--clock-control none``
    keeps ncu from locking clocks: the GPU's settings are never changed.

:func:`read_nv_dvfs_benchmark` reads the DSO authors' public RTX 8000 data
(blackjack2015/NV-DVFS-Benchmark) into the same names.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema

__all__ = [
    "NCU_METRICS",
    "PTX_DATA_TYPES",
    "PTX_STATE_SPACES",
    "compile_ptx",
    "count_ptx",
    "ncu_command",
    "ncu_launches",
    "parse_ncu_csv",
    "ptx_features",
    "read_nv_dvfs_benchmark",
    "runtime_features",
    "split_ptx_entries",
]

# --------------------------------------------------------------------------
# Static PTX features (Table II).
# --------------------------------------------------------------------------

#: The 17 fundamental PTX operand types of DSO Table II.
PTX_DATA_TYPES = ("b8", "b16", "b32", "b64", "u8", "u16", "u32", "u64", "s8", "s16", "s32",
                  "s64", "f16", "f16x2", "f32", "f64", "pred")
#: The 8 PTX state spaces of DSO Table II.
PTX_STATE_SPACES = ("reg", "sreg", "const", "global", "local", "param", "shared", "tex")
# Opcodes whose first modifier is part of the name in the DSO feature set.
_COMPOUND_OPCODES = ("add.cc", "sub.cc", "mad.cc", "bar.warp.sync", "match.sync")
_SPECIAL_REGISTERS = re.compile(
    r"%(tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|clock64|clock|"
    r"lanemask_\w+|globaltimer\w*|pm\d|envreg\d+|dynamic_smem_size|total_smem_size)\b"
)
_INSTRUCTION = re.compile(r"^(?:@!?%\w+\s+)?([a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*)(?:\s|;|$)")


def count_ptx(ptx: str) -> dict[str, Counter]:
    """Raw counts of PTX instruction types, data types and state spaces.

    Parameters
    ----------
    ptx : str
        PTX text (one or more ``.entry`` functions).

    Returns
    -------
    dict
        ``{"instruction": Counter, "type": Counter, "space": Counter}``.
        An instruction with several type modifiers (``cvt.f32.s32``) counts
        each; ``.reg`` declarations count as the ``reg`` space, reads of
        special registers (``%tid.x``) as ``sreg``.
    """
    if not isinstance(ptx, str):
        raise ValueError(f"ptx must be PTX text (str), got {type(ptx).__name__}")
    inst, types, spaces = Counter(), Counter(), Counter()
    for raw in ptx.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line.endswith(":") or line in ("{", "}"):
            continue
        if line.startswith(".reg"):
            spaces["reg"] += 1
            continue
        if line.startswith("."):  # other directives: .version, .entry, .param, .shared decls ...
            if line.startswith((".shared", ".local", ".const", ".global")):
                spaces[line.split()[0][1:]] += 1
            continue
        m = _INSTRUCTION.match(line)
        if m is None:
            continue
        parts = m.group(1).split(".")
        name = parts[0]
        for compound in _COMPOUND_OPCODES:
            if m.group(1) == compound or m.group(1).startswith(compound + "."):
                name = compound
        inst[name] += 1
        for mod in parts[1:]:
            if mod in PTX_DATA_TYPES:
                types[mod] += 1
            elif mod in PTX_STATE_SPACES:
                spaces[mod] += 1
        if name == "tex":
            spaces["tex"] += 1
        spaces["sreg"] += len(_SPECIAL_REGISTERS.findall(line))
    return {"instruction": inst, "type": types, "space": spaces}


def ptx_features(ptx: str) -> pd.Series:
    """DSO Table II features of PTX text: counts normalised per category.

    Returns
    -------
    pandas.Series
        ``feat:ptx_inst:<opcode>`` for every opcode seen, and
        ``feat:ptx_type:<type>`` / ``feat:ptx_space:<space>`` for all 17
        types and 8 spaces; each category sums to 1 (or is all 0 when empty).
    """
    counts = count_ptx(ptx)
    if not counts["instruction"]:
        raise ValueError("ptx: no instructions found (is this PTX text?)")
    out = {}
    for key, prefix, names in (
        ("instruction", schema.PTX_INSTRUCTION_PREFIX, sorted(counts["instruction"])),
        ("type", schema.PTX_TYPE_PREFIX, PTX_DATA_TYPES),
        ("space", schema.PTX_SPACE_PREFIX, PTX_STATE_SPACES),
    ):
        total = sum(counts[key].values())
        for name in names:
            out[prefix + name] = counts[key][name] / total if total else 0.0
    return pd.Series(out, dtype=float)


_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)", re.M)


def split_ptx_entries(ptx: str) -> dict[str, str]:
    """PTX text of each ``.entry`` (kernel) in a module, by kernel name.

    Each part runs from its ``.entry`` line to the next one; module-level
    declarations before the first entry are left out.
    """
    marks = list(_ENTRY.finditer(ptx))
    if not marks:
        raise ValueError("ptx: no .entry (kernel) found")
    ends = [m.start() for m in marks[1:]] + [len(ptx)]
    return {m.group(1): ptx[m.start():end] for m, end in zip(marks, ends, strict=True)}


def compile_ptx(source, *, arch: str = "sm_90", nvcc: str | None = None,
                options: tuple[str, ...] = ()) -> str:
    """PTX of a CUDA source file, by ``nvcc -ptx`` (or CuPy's NVRTC when nvcc is absent).

    Parameters
    ----------
    source : str or Path
        A ``.cu`` file.
    arch : str, default="sm_90"
        Target architecture (``sm_XX`` or ``compute_XX``).
    nvcc : str or None
        Path of nvcc; default: found on PATH.
    options : tuple of str
        Extra compiler options.
    """
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"source: {path} is not a file")
    exe = nvcc or shutil.which("nvcc")
    if exe is not None:
        proc = subprocess.run([exe, f"-arch={arch}", "-ptx", *options, str(path), "-o", "-"],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise ValueError(f"nvcc failed on {path}: {proc.stderr.strip()[:2000]}")
        return proc.stdout
    from cupy.cuda import compiler  # lazy: only without nvcc

    arch_nv = arch.replace("sm_", "compute_")
    return compiler.compile_using_nvrtc(path.read_text(), options=options, arch=arch_nv,
                                        filename=path.name)


# --------------------------------------------------------------------------
# Runtime utilisation features (Table I) from Nsight Compute.
# --------------------------------------------------------------------------

#: ncu metrics standing in for DCGM's profiling fields, first available wins.
#: All are percentages of the peak sustained rate over the kernel's elapsed cycles.
NCU_METRICS: dict[str, tuple[str, ...]] = {
    schema.FEAT_SM_ACTIVE: ("sm__cycles_active.avg.pct_of_peak_sustained_elapsed",),
    schema.FEAT_SM_OCCUPANCY: ("sm__warps_active.avg.pct_of_peak_sustained_elapsed",
                               "sm__warps_active.avg.pct_of_peak_sustained_active"),
    schema.FEAT_TENSOR_ACTIVE: ("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                                "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_elapsed"),
    schema.FEAT_DRAM_ACTIVE: ("dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
                              "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    schema.FEAT_FP64_ACTIVE: ("sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed",
                              "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_elapsed"),
    schema.FEAT_FP32_ACTIVE: ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                              "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_elapsed"),
    schema.FEAT_FP16_ACTIVE: ("sm__pipe_fp16_cycles_active.avg.pct_of_peak_sustained_elapsed",
                              "sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_elapsed"),
    schema.FEAT_INT_ACTIVE: ("sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed",
                             "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_elapsed"),
}


def ncu_command(program: list[str], *, metrics=None, ncu: str = "ncu",
                kernel_regex: str | None = None, launch_count: int | None = None) -> list[str]:
    """The ncu command line collecting the Table I metrics, with clocks left alone.

    ``--clock-control none`` is always present: ncu would otherwise lock the
    clocks to base for the measurement (a settings change on a lent GPU).
    """
    if not program:
        raise ValueError("program must be a non-empty command list")
    if metrics is None:
        metrics = sorted({m for cands in NCU_METRICS.values() for m in cands})
    cmd = [ncu, "--clock-control", "none", "--csv", "--metrics", ",".join(metrics)]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    if launch_count:
        cmd += ["--launch-count", str(int(launch_count))]
    return [*cmd, *program]


def _number(text: str) -> float:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return np.nan


def ncu_launches(text: str) -> list[dict]:
    """The launches of ``ncu --csv --metrics`` output, in launch order.

    Lines that are not CSV (``==PROF==`` messages, program output) are
    skipped; percentages become ratios 0..1.

    Returns
    -------
    list of dict
        ``{"id": int, "kernel": str, "grid": str, "metrics": {name: value}}``.
    """
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        raise ValueError("ncu output: no CSV header (a line starting with '\"ID\"') found")
    body = [ln for ln in lines[start:] if ln.startswith('"')]
    rows = list(csv.DictReader(io.StringIO("\n".join(body))))
    if not rows:
        raise ValueError("ncu output: no metric rows")
    for col in ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value"):
        if col not in rows[0]:
            raise ValueError(f"ncu output: column {col!r} is missing")
    launches: dict[str, dict] = {}
    for r in rows:
        v = _number(r["Metric Value"])
        if r["Metric Unit"].strip() == "%":
            v /= 100.0
        launch = launches.setdefault(r["ID"], {"id": int(_number(r["ID"])), "kernel": r["Kernel Name"],
                                               "grid": r.get("Grid Size", ""), "metrics": {}})
        launch["metrics"][r["Metric Name"]] = v
    return sorted(launches.values(), key=lambda launch: launch["id"])


def runtime_features(metrics: dict) -> dict:
    """Table I features from one launch's ncu metrics (first available of :data:`NCU_METRICS`)."""
    return {feat: next((metrics[m] for m in cands if m in metrics), np.nan)
            for feat, cands in NCU_METRICS.items()}


def parse_ncu_csv(text: str) -> pd.DataFrame:
    """Table I features from ``ncu --csv --metrics`` output, one row per kernel name.

    Launches of the same kernel are averaged. For each feature the first
    metric of :data:`NCU_METRICS` present is used; a feature with none
    present is NaN.

    Returns
    -------
    DataFrame
        Indexed by kernel name (``schema.KERNEL``), columns
        ``schema.RUNTIME_FEATURES``.
    """
    rows = [{schema.KERNEL: launch["kernel"], **runtime_features(launch["metrics"])}
            for launch in ncu_launches(text)]
    table = pd.DataFrame(rows)
    return table.groupby(schema.KERNEL, sort=False)[list(schema.RUNTIME_FEATURES)].mean()


# --------------------------------------------------------------------------
# The DSO authors' public data (NV-DVFS-Benchmark).
# --------------------------------------------------------------------------

# Their DCGM column names and ours.
_DCGM_COLUMNS = {
    "SMACT": schema.FEAT_SM_ACTIVE, "SMOCC": schema.FEAT_SM_OCCUPANCY,
    "TENSO": schema.FEAT_TENSOR_ACTIVE, "DRAMA": schema.FEAT_DRAM_ACTIVE,
    "FP64A": schema.FEAT_FP64_ACTIVE, "FP32A": schema.FEAT_FP32_ACTIVE,
    "FP16A": schema.FEAT_FP16_ACTIVE, "INTAC": schema.FEAT_INT_ACTIVE,
}
_NVDVFS_META = ("argNo", "average_power", "benchmark", "core_frequency", "kernel",
                "memory_frequency", "time")


def read_nv_dvfs_benchmark(path) -> pd.DataFrame:
    """Read an NV-DVFS-Benchmark CSV (the DSO authors' data) into powermodels' names.

    Parameters
    ----------
    path : str or Path
        ``rtx8000-dvfs-*.csv``: columns ``benchmark, argNo, kernel,
        core_frequency, memory_frequency, time`` (ms), ``average_power`` (W),
        DCGM activity and optionally raw PTX counts.

    Returns
    -------
    DataFrame
        ``schema.KERNEL`` (``benchmark:argNo``), ``schema.SM_CLOCK_MHZ``,
        ``schema.MEM_CLOCK_MHZ``, ``schema.TIME_S``, ``schema.POWER_W``,
        ``schema.ENERGY_J``, the runtime features present, and the PTX counts
        normalised per category (Table II) when present.
    """
    raw = pd.read_csv(path)
    for col in _NVDVFS_META:
        if col not in raw.columns:
            raise ValueError(f"{path}: column {col!r} is missing")
    out = pd.DataFrame({
        schema.KERNEL: raw["benchmark"].astype(str) + ":" + raw["argNo"].astype(str),
        schema.SM_CLOCK_MHZ: raw["core_frequency"].astype(float),
        schema.MEM_CLOCK_MHZ: raw["memory_frequency"].astype(float),
        schema.TIME_S: raw["time"].astype(float) / 1e3,
        schema.POWER_W: raw["average_power"].astype(float),
    })
    out[schema.ENERGY_J] = out[schema.TIME_S] * out[schema.POWER_W]
    for src, dst in _DCGM_COLUMNS.items():
        if src in raw.columns:
            out[dst] = raw[src].astype(float)
    ptx_cols = [c for c in raw.columns if c not in _NVDVFS_META and c not in _DCGM_COLUMNS]
    if ptx_cols:
        spaces = [c for c in ptx_cols if c in PTX_STATE_SPACES]
        types = [c for c in ptx_cols if c in PTX_DATA_TYPES]
        insts = [c for c in ptx_cols if c not in spaces and c not in types]
        for cols, prefix in ((insts, schema.PTX_INSTRUCTION_PREFIX),
                             (types, schema.PTX_TYPE_PREFIX), (spaces, schema.PTX_SPACE_PREFIX)):
            block = raw[cols].astype(float)
            total = block.sum(axis=1).replace(0.0, np.nan)
            normed = block.div(total, axis=0).fillna(0.0)
            normed.columns = [prefix + c for c in cols]
            out = pd.concat([out, normed], axis=1)
    return out
