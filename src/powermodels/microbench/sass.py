"""SASS tools: compile CUDA to a cubin, disassemble it, count opcodes, parse ncu counts.

Static counts (what the binary *contains*) come from ``cuobjdump -sass``;
dynamic counts (what a launch *executed*) come from Nsight Compute's
``sass__inst_executed_per_opcode_with_modifier_all`` metric (Wattchmen §4.2:
"we retain all modifier information"), read from ``ncu --csv --page raw
--print-metric-instances details`` output.

``nvcc`` is found on ``PATH``; ``cuobjdump``/``nvdisasm`` on ``PATH`` or in the
``nvidia-cuda-cuobjdump``/``nvidia-cuda-nvdisasm`` wheels (``nvidia/cu*/bin``).
"""

from __future__ import annotations

import csv
import glob
import io
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

__all__ = [
    "OPCODE_METRIC",
    "aggregate_launches",
    "compile_cubin",
    "count_static_opcodes",
    "disassemble",
    "find_tool",
    "instruction_table_from_ncu",
    "loop_opcode_counts",
    "parse_ncu_csv",
    "parse_ncu_instances",
    "parse_sass",
]

#: Nsight Compute metric with per-opcode (with modifiers) executed warp-instruction counts.
OPCODE_METRIC = "sass__inst_executed_per_opcode_with_modifier_all"

# "        /*0110*/              @!P0 BRA 0x2a70 ;   /* 0x... */"
_SASS_LINE = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")


def find_tool(name: str) -> str | None:
    """Path of a CUDA binary tool (``nvcc``, ``cuobjdump``, ``nvdisasm``, ``ncu``), or None.

    Looks on ``PATH``, then in the pip wheels' ``nvidia/cu*/bin`` folders of
    every ``sys.path`` entry, then under ``/usr/local/cuda*/bin`` and
    ``/opt/nvidia/nsight-compute/*``.
    """
    found = shutil.which(name)
    if found:
        return found
    patterns = [os.path.join(p, "nvidia", "cu*", "bin", name) for p in sys.path if p]
    patterns += [os.path.join(p, "nvidia", "cuda_*", "bin", name) for p in sys.path if p]
    patterns += [f"/usr/local/cuda*/bin/{name}", f"/opt/nvidia/nsight-compute/*/{name}"]
    for pattern in patterns:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def _tool_env() -> dict[str, str]:
    # cuobjdump shells out to nvdisasm, which may live in another wheel's bin folder.
    env = dict(os.environ)
    extra = [os.path.dirname(p) for p in (find_tool("nvdisasm"), find_tool("cuobjdump")) if p]
    env["PATH"] = os.pathsep.join([*extra, env.get("PATH", "")])
    return env


def _require(name: str) -> str:
    path = find_tool(name)
    if path is None:
        raise FileNotFoundError(f"{name} not found on PATH or in the nvidia-* pip wheels")
    return path


def compile_cubin(source: str | os.PathLike, out: str | os.PathLike | None = None,
                  arch: str = "sm_90", extra_flags: tuple[str, ...] = ()) -> Path:
    """Compile a ``.cu`` file to a cubin with ``nvcc -cubin -arch=<arch>``.

    Parameters
    ----------
    source : path
        CUDA source file.
    out : path, optional
        Output cubin; default next to ``source`` with suffix ``.<arch>.cubin``.
    arch : str, default="sm_90"
        Target architecture (the cubin then holds that machine's SASS).
    extra_flags : tuple of str
        More nvcc flags (e.g. ``("-DMB_UNROLL=16",)``).

    Returns
    -------
    pathlib.Path
        The cubin.
    """
    source = Path(source)
    if not source.is_file():
        raise FileNotFoundError(f"source: {source} does not exist")
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise ValueError(f"arch: {arch!r} is not an sm_XX architecture")
    out = Path(out) if out is not None else source.with_suffix(f".{arch}.cubin")
    cmd = [_require("nvcc"), f"-arch={arch}", "-cubin", "-O3", *extra_flags,
           "-I", str(source.parent), "-o", str(out), str(source)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed on {source}:\n{proc.stderr}")
    return out


def disassemble(cubin: str | os.PathLike) -> str:
    """SASS text of a cubin (``cuobjdump -sass``)."""
    proc = subprocess.run([_require("cuobjdump"), "-sass", str(cubin)], capture_output=True,
                          text=True, check=False, env=_tool_env())
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump failed on {cubin}:\n{proc.stderr}")
    return proc.stdout


def _sass_instructions(text: str) -> dict[str, list[tuple[int, str]]]:
    """``cuobjdump -sass`` text → function → ``(address, instruction)``, predicate guards dropped."""
    functions: dict[str, list[tuple[int, str]]] = {}
    current: list[tuple[int, str]] | None = None
    for line in text.splitlines():
        m = _FUNCTION.match(line)
        if m:
            current = functions.setdefault(m.group(1), [])
            continue
        m = _SASS_LINE.match(line)
        if m and current is not None:
            instr = _PREDICATE.sub("", m.group(2).strip())
            if instr:
                current.append((int(m.group(1), 16), instr))
    return functions


def parse_sass(text: str) -> dict[str, list[str]]:
    """Split ``cuobjdump -sass`` text into functions → list of opcodes (with modifiers).

    Predicate guards (``@P0``, ``@!PT``) are dropped; operands are dropped; the
    opcode keeps its modifiers (``LDG.E.128``, ``ISETP.GE.U32.AND``).
    """
    return {name: [instr.split()[0] for _, instr in lines]
            for name, lines in _sass_instructions(text).items()}


def count_static_opcodes(sass_or_cubin: str | os.PathLike, function: str | None = None,
                         ) -> Counter:
    """Static opcode counts of one function (or all) in SASS text or a cubin path.

    Parameters
    ----------
    sass_or_cubin : str or path
        SASS text (as from :func:`disassemble`) or a path to a cubin.
    function : str, optional
        Only this function (kernel) name; by default all functions together.

    Raises
    ------
    ValueError
        If ``function`` is not in the SASS.
    """
    text = str(sass_or_cubin)
    if "\n" not in text and Path(text).is_file():
        text = disassemble(text)
    functions = parse_sass(text)
    if function is not None:
        if function not in functions:
            raise ValueError(f"function: {function!r} not in SASS (have {sorted(functions)})")
        return Counter(functions[function])
    total: Counter = Counter()
    for ops in functions.values():
        total.update(ops)
    return total


def loop_opcode_counts(sass_text: str, function: str, target: str) -> Counter:
    """Static opcode counts of the loop of ``function`` that holds the most ``target``.

    A loop is the span from a backward ``BRA``'s target to the branch (the SASS of a
    microbenchmark's unrolled body): its counts are what one trip executes, so their ratios
    are the ratios the profiled dynamic counts will have, without the prologue and epilogue.

    Parameters
    ----------
    sass_text : str
        ``cuobjdump -sass`` text.
    function : str
        Kernel name.
    target : str
        Opcode with modifiers (``"HGMMA.64x64x16.F32"``).

    Returns
    -------
    collections.Counter
        Opcode → count in that loop.

    Raises
    ------
    ValueError
        If the function is missing or has no loop holding ``target``.
    """
    lines = _sass_instructions(sass_text).get(function)
    if lines is None:
        raise ValueError(f"function: {function!r} not in SASS")
    best: Counter | None = None
    for addr, instr in lines:
        parts = instr.split()
        if parts[0] != "BRA" or len(parts) < 2:
            continue
        to = int(parts[1].rstrip(","), 16)
        if to < addr:
            loop = Counter(i.split()[0] for a, i in lines if to <= a <= addr)
            if loop[target] and (best is None or loop[target] > best[target]):
                best = loop
    if best is None:
        raise ValueError(f"{function}: no loop holds {target!r}")
    return best


def _number(text: str) -> float:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return float("nan")
    return float(text)


def parse_ncu_instances(cell: str) -> dict[str, float]:
    """Parse one instanced-metric CSV cell of ``--print-metric-instances details``.

    The cell reads ``"TOTAL (NAME: VALUE; NAME: VALUE; ...)"``; returns
    ``{NAME: VALUE}``. A bare number (no instances) gives ``{}``.

    Raises
    ------
    ValueError
        If the cell is malformed or the instances do not add up to the total.
    """
    cell = cell.strip()
    m = re.fullmatch(r"([0-9.,eE+-]+)\s*(?:\((.*)\))?", cell, flags=re.S)
    if not m:
        raise ValueError(f"ncu instanced metric: cannot parse cell {cell[:80]!r}")
    total = _number(m.group(1))
    if not m.group(2):
        return {}
    out: dict[str, float] = {}
    for item in m.group(2).split(";"):
        if not item.strip():
            continue
        name, _, value = item.rpartition(":")
        if not name:
            raise ValueError(f"ncu instanced metric: item {item!r} has no 'NAME: VALUE'")
        out[name.strip()] = out.get(name.strip(), 0.0) + _number(value)
    if abs(sum(out.values()) - total) > 1e-6 * max(total, 1.0) + 0.5:
        raise ValueError(f"ncu instanced metric: instances add to {sum(out.values()):g}, "
                         f"the total says {total:g}")
    return out


def parse_ncu_csv(text: str, metric: str | None = OPCODE_METRIC) -> list[dict]:
    """Parse ``ncu --csv --page raw --print-metric-instances details`` output.

    Parameters
    ----------
    text : str
        The CSV text (ncu's own log lines starting with ``==`` are skipped).
    metric : str or None
        The instanced opcode metric to expand (None: no opcode column; each
        launch then has an empty ``opcodes`` dict).

    Returns
    -------
    list of dict
        One dict per profiled kernel launch, in launch order, with keys
        ``id``, ``kernel``, ``grid``, ``block``, ``opcodes`` (dict opcode →
        executed warp instructions) and ``metrics`` (every other numeric
        column, e.g. ``gpu__time_duration.sum`` or ``lts__t_sector_hit_rate.pct``).

    Raises
    ------
    ValueError
        If the header lacks the ``ID``/``Kernel Name`` columns or ``metric``.
    """
    # Instanced cells of big kernels exceed csv's default 128 KiB field limit.
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")]
    if not lines:
        return []
    reader = csv.DictReader(io.StringIO("\n".join(lines)))
    fields = reader.fieldnames or []
    for need in ("ID", "Kernel Name", *([metric] if metric else [])):
        if need not in fields:
            raise ValueError(f"ncu csv: column {need!r} is missing (have {fields[:12]}...)")
    launches = []
    for row in reader:
        ident = (row.get("ID") or "").strip()
        if not ident.isdigit():  # the units row and blank rows
            continue
        metrics = {}
        for key, value in row.items():
            if key in (None, metric) or value is None or "(" in value:
                continue
            try:
                metrics[key] = _number(value)
            except ValueError:
                continue
        launches.append({
            "id": int(ident),
            "kernel": row["Kernel Name"],
            "grid": row.get("Grid Size", ""),
            "block": row.get("Block Size", ""),
            "opcodes": parse_ncu_instances(row[metric]) if metric else {},
            "metrics": metrics,
        })
    return launches


#: ncu metrics of one profile that :func:`instruction_table_from_ncu` turns into a table.
NCU_TABLE_METRICS = (OPCODE_METRIC, "gpu__time_duration.sum", "l1tex__t_sector_hit_rate.pct",
                     "lts__t_sector_hit_rate.pct", "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                     "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
                     "lts__t_sectors_srcunit_tex.sum", "dram__sectors_read.sum",
                     "dram__sectors_write.sum")
_TIME_UNITS = {"ns": 1e-9, "nsecond": 1e-9, "us": 1e-6, "usecond": 1e-6, "ms": 1e-3,
               "msecond": 1e-3, "s": 1.0, "second": 1.0}
_GLOBAL_MEMORY = ("LDG", "STG", "RED", "REDG", "ATOMG", "LD", "ST", "LDGSTS")


def aggregate_launches(launches: list[dict]) -> tuple[dict[str, float], float, float]:
    """Opcode counts summed over launches of :func:`parse_ncu_csv`, and their L1 and L2 hit rates.

    Each launch's hit rate (clipped to [0, 100] %: ncu can report a little
    over 100 % for near-empty traffic) is weighted by its global-memory
    instructions; a rate is NaN when no launch has both.

    Returns
    -------
    counts : dict
        Opcode → executed warp instructions.
    l1_hit_rate, l2_hit_rate : float
        Fractions in [0, 1].
    """
    import numpy as np

    counts: dict[str, float] = {}
    num, den = [0.0, 0.0], [0.0, 0.0]
    for x in launches:
        mem = 0.0
        for op, c in x["opcodes"].items():
            counts[op] = counts.get(op, 0.0) + c
            mem += c if op.split(".")[0] in _GLOBAL_MEMORY else 0.0
        for i, key in enumerate(("l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct")):
            rate = x["metrics"].get(key)
            if rate is not None and np.isfinite(rate) and mem > 0:
                num[i] += mem * min(max(rate, 0.0), 100.0) / 100
                den[i] += mem
    l1, l2 = (n / d if d else np.nan for n, d in zip(num, den, strict=True))
    return counts, l1, l2


def instruction_table_from_ncu(text: str, metric: str = OPCODE_METRIC, per_kernel: bool = True):
    """Instruction table (see :mod:`powermodels.schema`) from an ncu raw CSV profile.

    Parameters
    ----------
    text : str
        Output of ``ncu --csv --page raw --print-metric-instances details
        --metrics <NCU_TABLE_METRICS>``.
    metric : str
        The instanced opcode metric.
    per_kernel : bool, default=True
        One row per kernel name (launches summed); False: one row for the
        whole profile.

    Returns
    -------
    pandas.DataFrame
        ``workload``, ``time_s`` (sum of ``gpu__time_duration``), hit rates
        weighted by each launch's global-memory instructions, sector counts
        (when profiled) and ``op:*`` counts.
    """
    import numpy as np
    import pandas as pd

    from .. import schema

    launches = parse_ncu_csv(text, metric)
    if not launches:
        raise ValueError("ncu csv: no kernel launches in the profile")
    rows = list(csv.reader(io.StringIO("\n".join(
        ln for ln in text.splitlines() if ln.strip() and not ln.startswith("==")))))
    units = dict(zip(rows[0], rows[1], strict=False)) if len(rows) > 1 and not rows[1][0] else {}
    to_s = _TIME_UNITS.get(units.get("gpu__time_duration.sum", "ns").strip(), 1e-9)
    sectors = {schema.L1_SECTORS: ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                                   "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
               schema.L2_SECTORS: ("lts__t_sectors_srcunit_tex.sum",),
               schema.DRAM_SECTORS: ("dram__sectors_read.sum", "dram__sectors_write.sum")}
    groups: dict[str, list[dict]] = {}
    for launch in launches:
        groups.setdefault(launch["kernel"] if per_kernel else "all", []).append(launch)
    out = []
    for name, group in groups.items():
        row = {schema.WORKLOAD: name,
               schema.TIME_S: to_s * sum(x["metrics"].get("gpu__time_duration.sum", 0.0)
                                          for x in group)}
        counts, row[schema.L1_HIT_RATE], row[schema.L2_HIT_RATE] = aggregate_launches(group)
        for col, names in sectors.items():
            if all(n in group[0]["metrics"] for n in names):
                row[col] = float(sum(np.nan_to_num(x["metrics"].get(n, 0.0))
                                     for x in group for n in names))
        row.update({schema.OPCODE_PREFIX + op: c for op, c in counts.items()})
        out.append(row)
    df = pd.DataFrame(out)
    ops = sorted(schema.opcode_columns(df))
    df[ops] = df[ops].fillna(0.0)
    return df[[c for c in df.columns if c not in ops] + ops]
