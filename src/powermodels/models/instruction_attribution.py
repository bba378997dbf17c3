"""Energies of any feature from a fitted per-instruction table, and where a run's energy goes.

:class:`~powermodels.models.instruction.InstructionEnergyModel` fits energies for
the features its training rows contain. Everything it reports from that table
is computed here, from the fitted energies alone:

* :func:`extension_tables` — the tables of Wattchmen's coverage extension
  (§3.4-3.5), derived once after a fit: the mean energy of each bucket, the
  median ratio between memory levels, the energy per multiply-accumulate of
  tensor instructions;
* :func:`feature_energy` / :func:`energy_table` — the energy per instruction of
  any feature, fitted or extended (scaled from another memory level or tensor
  shape, taken from the closest fitted variant, or the bucket mean), and where
  it came from;
* :func:`energy_breakdown` — each run's energy per feature or per component
  (``InstructionEnergyModel.breakdown``);
* :func:`covered_share` — the share of each run's instructions that have an
  energy (``InstructionEnergyModel.coverage``, Wattchmen §5.2).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from .. import schema
from .instruction_opcodes import (
    LEVELS,
    STATIC,
    closest_variant,
    mma_family,
    mma_macs,
    opcode_bucket,
)

__all__ = ["ExtensionTables", "covered_share", "energy_breakdown", "energy_table",
           "extension_tables", "feature_energy"]


class ExtensionTables(NamedTuple):
    """What the coverage extension (Wattchmen §3.4-3.5) reads besides the fitted energies.

    The estimator keeps the fields as its fitted attributes (``bucket_energies_``,
    ``level_ratios_``, ``_by_op_levels``, ``mac_energies_``).
    """

    #: ``(bucket, level)`` → mean fitted energy (level "" for non-memory features).
    bucket_energies: dict[tuple[str, str], float]
    #: ``(from_level, to_level)`` → median energy ratio of memory opcodes fitted at both.
    level_ratios: dict[tuple[str, str], float]
    #: memory opcode (without ``@level``) → its fitted energy at each level.
    levels_by_opcode: dict[str, dict[str, float]]
    #: MMA family ("H", "I", "D", "") → mean energy per multiply-accumulate (J).
    mac_energies: dict[str, float]


def extension_tables(energies: pd.Series, identifiable: pd.Series) -> ExtensionTables:
    """Derive the coverage extension's tables from the fitted energies.

    Parameters
    ----------
    energies : pandas.Series
        Fitted energy per instruction (J), indexed by feature.
    identifiable : pandas.Series of bool
        Whether the training rows pin each feature's energy down (same index).

    Returns
    -------
    ExtensionTables
        The bucket means (over identifiable members, else over all fitted
        members), level ratios, per-opcode level energies and per-MAC energies.
    """
    buckets: dict[tuple[str, str], list[float]] = {}
    sure: dict[tuple[str, str], list[float]] = {}
    for op, v in energies.items():
        level = op.split("@")[1] if "@" in op else ""
        key = (opcode_bucket(op), level)
        buckets.setdefault(key, []).append(float(v))
        if identifiable[op]:
            sure.setdefault(key, []).append(float(v))
    # bucket mean over identifiable members, else over all fitted members
    bucket_energies = {k: float(np.mean(sure.get(k, v))) for k, v in buckets.items()}
    by_op: dict[str, dict[str, float]] = {}
    for op, v in energies.items():
        if "@" in op:
            name, level = op.split("@")
            by_op.setdefault(name, {})[level] = float(v)
    ratios = {}
    for a in LEVELS:
        for b in LEVELS:
            r = [lv[b] / lv[a] for lv in by_op.values() if a in lv and b in lv and lv[a] > 0]
            if a != b and r:
                ratios[(a, b)] = float(np.median(r))
    macs: dict[str, list[float]] = {}
    for op, v in energies.items():
        m = mma_macs(op)
        if m:
            macs.setdefault(mma_family(op), []).append(float(v) / m)
            macs.setdefault("", []).append(float(v) / m)
    mac_energies = {k: float(np.mean(v)) for k, v in macs.items()}
    return ExtensionTables(bucket_energies, ratios, by_op, mac_energies)


def feature_energy(op: str, energies: pd.Series, tables: ExtensionTables,
                   extension: str) -> tuple[float, str]:
    """Energy per instruction of one feature and where it came from.

    Parameters
    ----------
    op : str
        Feature name (grouped opcode, ``OP@LEVEL`` or a sector feature).
    energies : pandas.Series
        Fitted energy per instruction (J), indexed by feature.
    tables : ExtensionTables
        From :func:`extension_tables`.
    extension : {"bucket", "none"}
        "none": only fitted features have an energy (Wattchmen-Direct).

    Returns
    -------
    energy : float
        Energy per instruction (J); 0 when nothing gives one.
    source : {"fitted", "scaled", "grouped", "bucket", "none"}
        Tried in that order: fitted; scaled from another memory level of the same
        opcode or by multiply-accumulates from other tensor shapes; the closest
        fitted variant of the same base opcode; the bucket mean.
    """
    if op in energies.index:
        return float(energies[op]), "fitted"
    if extension == "none":
        return 0.0, "none"
    if "@" in op:  # memory level scaling from another level of the same opcode first
        name, level = op.split("@")
        known = tables.levels_by_opcode.get(name, {})
        for src in ("L2", "L1", "DRAM"):
            if src in known and (src, level) in tables.level_ratios:
                return known[src] * tables.level_ratios[(src, level)], "scaled"
    m = mma_macs(op)  # a tensor op of another shape: by its multiply-accumulates
    if m:
        per_mac = tables.mac_energies.get(mma_family(op), tables.mac_energies.get(""))
        if per_mac is not None:
            return m * per_mac, "scaled"
    grouped = closest_variant(op, energies)
    if grouped is not None:
        return grouped, "grouped"
    level = op.split("@")[1] if "@" in op else ""
    key = (opcode_bucket(op), level)
    if key in tables.bucket_energies:
        return tables.bucket_energies[key], "bucket"
    return 0.0, "none"


def energy_table(features, energies: pd.Series, tables: ExtensionTables,
                 extension: str) -> pd.DataFrame:
    """:func:`feature_energy` of each feature, as a table.

    Parameters
    ----------
    features : iterable of str
        Feature names (the columns of a count table).
    energies, tables, extension
        As in :func:`feature_energy`.

    Returns
    -------
    DataFrame
        Columns ``opcode``, ``energy_per_instruction_j``, ``source``; one row per
        feature, in the order given.
    """
    rows = [(op, *feature_energy(op, energies, tables, extension)) for op in features]
    return pd.DataFrame(rows, columns=[schema.OPCODE, schema.ENERGY_PER_INSTRUCTION_J, schema.ENERGY_SOURCE])


def energy_breakdown(counts: pd.DataFrame, time: np.ndarray, static: np.ndarray,
                     table: pd.DataFrame, *, workloads=None, by: str = "opcode") -> pd.DataFrame:
    """Each run's energy per feature (long table) or per component (wide table).

    Parameters
    ----------
    counts : DataFrame of shape (n_runs, n_features)
        Feature counts per run.
    time : ndarray of shape (n_runs,)
        Run time (s).
    static : ndarray of shape (n_runs,)
        Constant + static power of each run (W).
    table : DataFrame
        :func:`energy_table` of ``counts``' columns, indexed by ``opcode``.
    workloads : ndarray of shape (n_runs,), optional
        Run names, inserted as a ``workload`` column of the long table.
    by : {"opcode", "component"}, default="opcode"
        "opcode": one row per (run, feature with a count) with columns ``run``,
        ``workload`` (if given), ``opcode``, ``component``, ``count``,
        ``energy_per_instruction_j``, ``energy_j``, ``source``; plus one
        ``STATIC`` row per run for ``time·(P_const+P_static)``.
        "component": one row per run, one column per component (J).

    Returns
    -------
    DataFrame
    """
    frames = []
    for i in range(len(counts)):
        c = counts.iloc[i]
        part = pd.DataFrame({
            schema.RUN_INDEX: i,
            schema.OPCODE: counts.columns,
            schema.COMPONENT: [opcode_bucket(op) for op in counts.columns],
            schema.INSTRUCTION_COUNT: c.to_numpy(),
            schema.ENERGY_PER_INSTRUCTION_J: table[schema.ENERGY_PER_INSTRUCTION_J].to_numpy(),
            schema.ENERGY_SOURCE: table[schema.ENERGY_SOURCE].to_numpy(),
        })
        part = part[part[schema.INSTRUCTION_COUNT] > 0]
        part = pd.concat([part, pd.DataFrame({
            schema.RUN_INDEX: [i], schema.OPCODE: [STATIC], schema.COMPONENT: [STATIC],
            schema.INSTRUCTION_COUNT: [time[i]], schema.ENERGY_PER_INSTRUCTION_J: [static[i]],
            schema.ENERGY_SOURCE: ["time"]})],
            ignore_index=True)
        frames.append(part)
    out = pd.concat(frames, ignore_index=True)
    out[schema.ENERGY_J] = out[schema.INSTRUCTION_COUNT] * out[schema.ENERGY_PER_INSTRUCTION_J]
    if workloads is not None:
        out.insert(1, schema.WORKLOAD, workloads[out[schema.RUN_INDEX].to_numpy()])
    if by == "component":
        return out.pivot_table(index=schema.RUN_INDEX, columns=schema.COMPONENT, values=schema.ENERGY_J,
                               aggfunc="sum", fill_value=0.0)
    return out


def covered_share(counts: pd.DataFrame, table: pd.DataFrame) -> np.ndarray:
    """Share of each run's instructions whose feature has an energy (Wattchmen §5.2 "coverage").

    Parameters
    ----------
    counts : DataFrame of shape (n_runs, n_features)
        Instruction counts per run (no sector features: sectors are not instructions).
    table : DataFrame
        :func:`energy_table` of ``counts``' columns, in the same order.

    Returns
    -------
    ndarray of shape (n_runs,)
        Covered instructions / all instructions; 0 for a run without instructions.
    """
    covered = (table[schema.ENERGY_SOURCE] != "none").to_numpy()
    total = counts.to_numpy().sum(axis=1)
    return np.where(total > 0, counts.to_numpy()[:, covered].sum(axis=1)
                    / np.where(total > 0, total, 1.0), 0.0)
