"""Instruction tables from an energy record and ncu profiles (Wattchmen §3.3, §4).

The calibration (:mod:`.instruction_calibration`) measures, per microbenchmark
and workload, a steady-state power and a time per launch (the *record*), then
profiles every item under ``ncu --clock-control none`` between two marker
launches (``pm_marker``: grid = item code + 1, block 1 = begin, 2 = end).
This module turns the record and the ncu raw CSVs into the instruction tables
(:func:`powermodels.schema.validate_instruction_table`) that
:class:`~powermodels.models.InstructionEnergyModel` fits:

* microbenchmarks are profiled at two small iteration counts
  (:data:`PROFILE_ITERS`) and their counts extrapolated linearly to the
  measured iteration count (exact for the unrolled loop bodies);
* workloads are profiled for one step;
* ``energy_j = power_w · time_s`` per launch/step, ``static_power_w`` is the
  NANOSLEEP microbenchmark's power (constant + static, Wattchmen §3.3.1).

Pure functions of text and dicts: no GPU, so a calibration can be rebuilt
anywhere from its raw files (:func:`rebuild_tables`).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from ..microbench import sass
from ..microbench.gpu import SECTOR_METRICS  # named here too (where the tables use it)

__all__ = ["MARKER_KERNEL", "PROFILE_ITERS", "SECTOR_METRICS", "STATIC_MICROBENCHMARK",
           "build_tables", "plan_of", "rebuild_tables", "record_row", "sector_columns",
           "segment_launches", "with_sectors"]

#: Iteration counts the microbenchmarks are profiled at (multiples of 8: ptxas unrolls by 4).
PROFILE_ITERS = (8, 16)
#: Name of the marker kernel that brackets every profiled item.
MARKER_KERNEL = "pm_marker"
#: Microbenchmark whose power is the constant + static power (Wattchmen §3.3.1).
STATIC_MICROBENCHMARK = "nanosleep"


def plan_of(record: dict) -> dict:
    """The profiling plan of a record: microbenchmarks and workloads in measured order."""
    return {"micro": list(record["micro"]), "workloads": list(record["workloads"]),
            "set": record.get("set", "heldout")}


def _marker(launch) -> tuple[int, bool] | None:
    if MARKER_KERNEL not in launch["kernel"]:
        return None
    grid = [int(v) for v in launch["grid"].strip("()").split(",")]
    block = [int(v) for v in launch["block"].strip("()").split(",")]
    return grid[0] - 1, block[0] == 2


def segment_launches(launches: list[dict]) -> dict[int, list[dict]]:
    """Group ncu launches by the marker code of the segment they fall in.

    Launches outside a begin/end marker pair (warm-ups, allocations) are dropped.
    """
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


def _extrapolate(a: dict, b: dict, iters: int, profiled=PROFILE_ITERS) -> dict:
    """Linear extrapolation in iterations of counts profiled at ``profiled`` = (i_a, i_b)."""
    ia, ib = profiled
    return {k: max(0.0, a.get(k, 0.0) + (b.get(k, 0.0) - a.get(k, 0.0)) * (iters - ia) / (ib - ia))
            for k in set(a) | set(b)}


def build_tables(record: dict, csv_text: str, plan: dict, metric: str = sass.OPCODE_METRIC,
                 profiled=PROFILE_ITERS) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Instruction tables (one row per microbenchmark / workload) from a record and ncu.

    Parameters
    ----------
    record : dict
        Energy record: ``idle_power_w``, ``micro`` and ``workloads`` (name →
        ``power_w``, ``time_s``, ``temperature_c``, ``sm_clock_mhz``;
        microbenchmarks also ``iters``).
    csv_text : str
        ``ncu --csv --page raw --print-metric-instances details`` of the opcode pass.
    plan : dict
        ``{"micro": [...], "workloads": [...]}`` in profiled order (:func:`plan_of`).
    metric : str
        The instanced opcode metric of the profile.
    profiled : tuple of int
        The two iteration counts each microbenchmark was profiled at.

    Returns
    -------
    micro, workloads : pandas.DataFrame
    """
    seg = segment_launches(sass.parse_ncu_csv(csv_text, metric))
    idle = record["idle_power_w"]
    static = record["micro"].get(STATIC_MICROBENCHMARK, {}).get("power_w", np.nan)
    rows_m, rows_w, code = [], [], 0
    for name in plan["micro"]:
        ca, _, _ = sass.aggregate_launches(seg.get(code, []))
        cb, r1, r2 = sass.aggregate_launches(seg.get(code + 1, []))
        code += 2
        meas = record["micro"][name]
        counts = _extrapolate(ca, cb, meas["iters"], profiled)
        rows_m.append(record_row(name, meas, counts, r1, r2, idle, static))
    for name in plan["workloads"]:
        counts, r1, r2 = sass.aggregate_launches(seg.get(code, []))
        code += 1
        rows_w.append(record_row(name, record["workloads"][name], counts, r1, r2, idle, static))
    return _frame(rows_m), _frame(rows_w)


def record_row(name, meas, counts, r1, r2, idle, static) -> dict:
    """One instruction-table row: measured power/time, profiled counts and hit rates."""
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


def sector_columns(record: dict, csv_text: str, plan: dict,
                   profiled=PROFILE_ITERS) -> dict[str, dict[str, float]]:
    """Per item: sectors through L1, L2, DRAM (microbenchmarks extrapolated in iterations)."""
    seg = segment_launches(sass.parse_ncu_csv(csv_text, None))

    def total(launches):
        return {col: float(sum(np.nan_to_num(x["metrics"].get(m, 0.0)) for x in launches
                               for m in names)) for col, names in SECTOR_METRICS.items()}

    out, code = {}, 0
    for name in plan["micro"]:
        sa, sb = total(seg.get(code, [])), total(seg.get(code + 1, []))
        code += 2
        out[name] = _extrapolate(sa, sb, record["micro"][name]["iters"], profiled)
    for name in plan["workloads"]:
        out[name] = total(seg.get(code, []))
        code += 1
    return out


def with_sectors(df: pd.DataFrame, sectors: dict) -> pd.DataFrame:
    """Insert the sector columns after the hit rates."""
    if df.empty:
        return df
    extra = pd.DataFrame({col: [sectors[w][col] for w in df[schema.WORKLOAD]]
                          for col in SECTOR_METRICS}, index=df.index)
    at = df.columns.get_loc(schema.L2_HIT_RATE) + 1
    return pd.concat([df.iloc[:, :at], extra, df.iloc[:, at:]], axis=1)


def tables_from_profiles(record: dict, opcode_csv: str, sector_csv: str | None = None,
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables of a record, with sector columns when a sector profile is given."""
    plan = plan_of(record)
    micro, wl = build_tables(record, opcode_csv, plan, record.get("ncu_metric", sass.OPCODE_METRIC))
    if sector_csv:
        sectors = sector_columns(record, sector_csv, plan)
        micro, wl = (with_sectors(df, sectors) for df in (micro, wl))
    return micro, wl


def _read_text(path: Path) -> str:
    return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()


def rebuild_tables(record_path, opcode_csv, sector_csv=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rebuild the instruction tables from the raw files of a calibration (``.gz`` read too).

    Parameters
    ----------
    record_path : path
        The energy record (``measure.json``).
    opcode_csv, sector_csv : path
        The opcode and (optional) sector ncu raw CSVs.

    Returns
    -------
    micro, workloads : pandas.DataFrame
    """
    for p in (record_path, opcode_csv, *([sector_csv] if sector_csv else [])):
        if not Path(p).is_file():
            raise FileNotFoundError(f"{p}: no such file (raw files of a calibration expected)")
    record = json.loads(Path(record_path).read_text())
    return tables_from_profiles(record, _read_text(Path(opcode_csv)),
                                _read_text(Path(sector_csv)) if sector_csv else None)
