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
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from ..microbench import sass
from ..microbench.gpu import SECTOR_METRICS  # named here too (where the tables use it)

__all__ = ["MARKER_KERNEL", "PROFILE_ITERS", "SECTOR_METRICS", "STATIC_MICROBENCHMARK",
           "build_tables", "count_ratios", "earlier_profiles", "item_launches", "plan_of", "profile_plan",
           "rebuild_tables", "record_row", "sector_columns", "segment_launches",
           "tables_from_profiles", "with_sectors"]

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


def item_launches(csv_text: str, plan: dict, metric: str | None = sass.OPCODE_METRIC,
                  ) -> dict[tuple[str, str], list[list[dict]]]:
    """The ncu launches of each profiled item, keyed ``("micro" | "workloads", name)``.

    A microbenchmark has two launch lists (its two :data:`PROFILE_ITERS` profiles), a workload
    one. ``plan`` (:func:`plan_of`) gives the profiled order, hence each item's marker codes.
    """
    if not (plan["micro"] or plan["workloads"]):
        return {}
    seg = segment_launches(sass.parse_ncu_csv(csv_text, metric))
    out, code = {}, 0
    for name in plan["micro"]:
        out[("micro", name)] = [seg.get(code, []), seg.get(code + 1, [])]
        code += 2
    for name in plan["workloads"]:
        out[("workloads", name)] = [seg.get(code, [])]
        code += 1
    return out


def _launches_of(launches: dict, key: tuple[str, str]) -> list[list[dict]]:
    try:
        return launches[key]
    except KeyError:
        raise ValueError(f"{key[0]}: {key[1]!r} has no ncu profile (neither profiled in this run "
                         "nor in the counts-from source)") from None


def build_tables(record: dict, csv_text: str, plan: dict, metric: str = sass.OPCODE_METRIC,
                 profiled=PROFILE_ITERS, launches: dict | None = None,
                 ) -> tuple[pd.DataFrame, pd.DataFrame]:
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
    launches : dict, optional
        Launches of items profiled elsewhere (:func:`item_launches` of an earlier run on the
        same GPU model and toolchain); those of ``csv_text`` take precedence.

    Returns
    -------
    micro, workloads : pandas.DataFrame
    """
    found = {**(launches or {}), **item_launches(csv_text, plan, metric)}
    idle = record["idle_power_w"]
    static = record["micro"].get(STATIC_MICROBENCHMARK, {}).get("power_w", np.nan)
    rows_m, rows_w = [], []
    for name, meas in record["micro"].items():
        la, lb = _launches_of(found, ("micro", name))
        ca, _, _ = sass.aggregate_launches(la)
        cb, r1, r2 = sass.aggregate_launches(lb)
        counts = _extrapolate(ca, cb, meas["iters"], profiled)
        rows_m.append(record_row(name, meas, counts, r1, r2, idle, static))
    for name, meas in record["workloads"].items():
        counts, r1, r2 = sass.aggregate_launches(_launches_of(found, ("workloads", name))[0])
        rows_w.append(record_row(name, meas, counts, r1, r2, idle, static))
    return _frame(rows_m), _frame(rows_w)


def record_row(name, meas, counts, r1, r2, idle, static) -> dict:
    """One instruction-table row: measured power/time, profiled counts and hit rates."""
    row = {schema.WORKLOAD: name, schema.TIME_S: meas["time_s"],
           schema.ENERGY_J: meas["power_w"] * meas["time_s"], schema.POWER_W: meas["power_w"],
           schema.STATIC_POWER_W: static, schema.IDLE_POWER_W: idle,
           schema.L1_HIT_RATE: r1, schema.L2_HIT_RATE: r2,
           schema.TEMPERATURE_C: meas["temperature_c"], schema.SM_CLOCK_MHZ: meas["sm_clock_mhz"]}
    probed = meas.get("probe_clock_mhz")
    if probed is not None:  # a record with on-GPU clock probes (issue 26): the row says which
        use = bool(np.isfinite(probed))
        row[schema.SM_CLOCK_MHZ] = float(probed) if use else meas["sm_clock_mhz"]
        row[schema.CLOCK_SOURCE] = "probe" if use else "nvml"
    row.update({schema.OPCODE_PREFIX + op: c for op, c in counts.items()})
    return row


def _frame(rows) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    ops = sorted(schema.opcode_columns(df))
    df[ops] = df[ops].fillna(0.0)
    return df[[c for c in df.columns if c not in ops] + ops]


def sector_columns(record: dict, csv_text: str, plan: dict, profiled=PROFILE_ITERS,
                   launches: dict | None = None) -> dict[str, dict[str, float]]:
    """Per item: sectors through L1, L2, DRAM (microbenchmarks extrapolated in iterations).

    ``launches``: sector-pass launches of items profiled elsewhere, as in :func:`build_tables`.
    """
    found = {**(launches or {}), **item_launches(csv_text, plan, None)}

    def total(launches):
        return {col: float(sum(np.nan_to_num(x["metrics"].get(m, 0.0)) for x in launches
                               for m in names)) for col, names in SECTOR_METRICS.items()}

    out = {}
    for name, meas in record["micro"].items():
        la, lb = _launches_of(found, ("micro", name))
        out[name] = _extrapolate(total(la), total(lb), meas["iters"], profiled)
    for name in record["workloads"]:
        out[name] = total(_launches_of(found, ("workloads", name))[0])
    return out


def with_sectors(df: pd.DataFrame, sectors: dict) -> pd.DataFrame:
    """Insert the sector columns after the hit rates."""
    if df.empty:
        return df
    extra = pd.DataFrame({col: [sectors[w][col] for w in df[schema.WORKLOAD]]
                          for col in SECTOR_METRICS}, index=df.index)
    at = df.columns.get_loc(schema.L2_HIT_RATE) + 1
    return pd.concat([df.iloc[:, :at], extra, df.iloc[:, at:]], axis=1)


def count_ratios(new: dict, old: dict) -> dict[str, float]:
    """New ÷ old total instruction count of each item profiled in both (launch dicts of
    :func:`item_launches`; a microbenchmark's larger profile): 1.0 when reused counts hold."""
    out = {}
    for key in sorted(set(new) & set(old)):
        a, b = (sum(sass.aggregate_launches(x[-1])[0].values()) for x in (new[key], old[key]))
        out[key[1]] = float(a / b) if b else float("nan")
    return out


def profile_plan(record: dict) -> dict:
    """The items this record's own ncu CSVs cover (all of :func:`plan_of` unless the run reused
    counts: then ``record["profile_plan"]``)."""
    return record.get("profile_plan") or plan_of(record)


def tables_from_profiles(record: dict, opcode_csv: str, sector_csv: str | None = None,
                         earlier: tuple[dict, str, str | None] | None = None,
                         ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Both tables of a record, with sector columns when a sector profile is given.

    ``earlier`` = ``(record, opcode_csv, sector_csv)`` of an earlier run whose profiles stand in
    for the items this run did not profile (``record["counts_from"]`` says which).
    """
    plan = profile_plan(record)
    old_ops = old_sec = None
    if earlier is not None:
        old_record, old_opcode_csv, old_sector_csv = earlier
        old_plan = profile_plan(old_record)
        old_ops = item_launches(old_opcode_csv, old_plan,
                                old_record.get("ncu_metric", sass.OPCODE_METRIC))
        old_sec = item_launches(old_sector_csv, old_plan, None) if old_sector_csv else None
    micro, wl = build_tables(record, opcode_csv, plan, record.get("ncu_metric", sass.OPCODE_METRIC),
                             launches=old_ops)
    # with reused counts the sector columns need the source's sector profile too; an empty
    # sector CSV is fine when this run profiled nothing itself
    if (sector_csv if earlier is None else (sector_csv is not None and old_sec is not None)):
        sectors = sector_columns(record, sector_csv, plan, launches=old_sec)
        micro, wl = (with_sectors(df, sectors) for df in (micro, wl))
    elif earlier is not None:
        # the model's memory terms need these columns: say so rather than fit without them unnoticed
        why = "the earlier run has no sector profile" if old_sec is None else "this run's sector profile is missing"
        warnings.warn(f"instruction tables: sector-traffic columns left out ({why})", UserWarning, stacklevel=2)
    return micro, wl


def _read_text(path: Path) -> str:
    return gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text()


def earlier_profiles(folder) -> tuple[dict, str, str | None]:
    """``(record, opcode_csv, sector_csv)`` of an earlier calibration's raw files in ``folder``.

    ``measure.json`` (or the H200 dataset's ``wattchmen_measure.json``), ``ncu_raw.csv[.gz]`` and,
    when there, ``ncu_sectors.csv[.gz]``: the profiles a run with ``counts_from`` reuses.
    """
    folder = Path(folder)

    def first(*names):
        return next((folder / f"{n}{x}" for n in names for x in ("", ".gz")
                     if (folder / f"{n}{x}").is_file()), None)

    record, opcodes = first("measure.json", "wattchmen_measure.json"), first("ncu_raw.csv")
    if record is None or opcodes is None:
        raise FileNotFoundError(f"counts_from: {folder} lacks measure.json or ncu_raw.csv[.gz]")
    sectors = first("ncu_sectors.csv")
    return (json.loads(record.read_text()), _read_text(opcodes),
            _read_text(sectors) if sectors else None)


def rebuild_tables(record_path, opcode_csv, sector_csv=None, counts_from=None,
                   ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rebuild the instruction tables from the raw files of a calibration (``.gz`` read too).

    Parameters
    ----------
    record_path : path
        The energy record (``measure.json``).
    opcode_csv, sector_csv : path
        The opcode and (optional) sector ncu raw CSVs.
    counts_from : path, optional
        Folder of the earlier run whose profiles the record reused (its
        ``counts_from["path"]``); required when the record has ``counts_from``.

    Returns
    -------
    micro, workloads : pandas.DataFrame
    """
    for p in (record_path, opcode_csv, *([sector_csv] if sector_csv else [])):
        if not Path(p).is_file():
            raise FileNotFoundError(f"{p}: no such file (raw files of a calibration expected)")
    record = json.loads(Path(record_path).read_text())
    if record.get("counts_from") and counts_from is None:
        raise ValueError(f"counts_from: {record_path} reused the ncu counts of "
                         f"{record['counts_from'].get('path')!r}; pass that folder")
    return tables_from_profiles(record, _read_text(Path(opcode_csv)),
                                _read_text(Path(sector_csv)) if sector_csv else None,
                                earlier_profiles(counts_from) if counts_from else None)
