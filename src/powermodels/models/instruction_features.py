"""Reading an instruction table into the per-instruction model's features (Wattchmen §3.4-3.5).

:class:`~powermodels.models.instruction.InstructionEnergyModel` fits one energy
per *feature*, not per profiled opcode. :func:`table_features` turns the
``op:<OPCODE>`` count columns of an instruction table
(:func:`powermodels.schema.validate_instruction_table`) into feature counts:
opcodes grouped by the model's rules (:func:`~.instruction_opcodes.group_opcode`),
global-memory opcodes split by the L1/L2 hit rates into ``OP@L1``, ``OP@L2``,
``OP@DRAM`` (:func:`~.instruction_opcodes.split_levels`), and the memory-traffic
and uncoalesced-sector features when the table has their columns. It checks
every column it reads, so a bad table fails with a message naming the column.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .. import schema
from .instruction_opcodes import TRAFFIC, UNCOALESCED, split_levels, uncoalesced_sectors

__all__ = ["table_features"]


def table_features(X: pd.DataFrame, group: Callable[[str], str], *, memory_levels: bool,
                   memory_traffic: bool, uncoalesced: bool, require_instructions: bool):
    """Feature counts, run time and static power of each run of an instruction table.

    Parameters
    ----------
    X : DataFrame
        Instruction table: ``op:<OPCODE>`` count columns, ``time_s``, optionally
        ``static_power_w``, ``l1_hit_rate`` and ``l2_hit_rate``, and the sector columns.
    group : callable
        Maps a profiled opcode (without the ``op:`` prefix) to its feature name;
        opcodes mapped to the same name are summed.
    memory_levels : bool
        Split global-memory opcodes by the hit-rate columns (when both are present).
    memory_traffic : bool
        Add the per-sector features when the table has every sector column.
    uncoalesced : bool
        With the per-sector features, also add the L1 sectors beyond what the
        global loads/stores would move fully coalesced.
    require_instructions : bool
        Refuse a table whose opcode counts are all zero (in ``fit``: nothing to
        attribute energy to, a singular solve).

    Returns
    -------
    counts : DataFrame of shape (n_runs, n_features)
        Feature counts, indexed ``0 … n_runs-1``.
    time : ndarray of shape (n_runs,)
        Run time (s).
    static : ndarray of shape (n_runs,) or None
        The table's constant + static power (W); None without the column or when it is all NaN.

    Raises
    ------
    ValueError
        If a count, time, static-power or sector column has NaN, infinite or
        negative values, ``time_s`` is missing, or (``require_instructions``)
        every opcode count is zero.
    """
    ops = schema.opcode_columns(X)
    for name in ops:
        values = pd.to_numeric(X[name], errors="coerce").to_numpy(dtype=float)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"instruction table: column {name!r} has NaN or infinite counts")
        if (values < 0).any():
            raise ValueError(f"instruction table: column {name!r} has negative counts")
    if require_instructions and not (X[ops].to_numpy(dtype=float) != 0).any():  # a singular NNLS system
        raise ValueError("instruction table: every opcode count is zero; there is no "
                         "instruction to attribute energy to")
    if schema.TIME_S not in X.columns:
        raise ValueError(f"instruction table: column {schema.TIME_S!r} is missing")
    time = X[schema.TIME_S].to_numpy(dtype=float)
    if not np.all(np.isfinite(time)) or (time < 0).any():
        raise ValueError(f"instruction table: column {schema.TIME_S!r} has NaN, "
                         "infinite or negative values")
    static = None
    if schema.STATIC_POWER_W in X.columns:
        static = X[schema.STATIC_POWER_W].to_numpy(dtype=float)
        if np.isnan(static).all():
            static = None
        elif not np.all(np.isfinite(static)):
            raise ValueError(f"instruction table: column {schema.STATIC_POWER_W!r} "
                             "has NaN values in some rows")
    raw = X[ops].astype(float)
    raw.columns = [c[len(schema.OPCODE_PREFIX):] for c in ops]
    counts = raw.T.groupby(group, sort=False).sum().T
    hits = None
    if memory_levels and schema.L1_HIT_RATE in X.columns \
            and schema.L2_HIT_RATE in X.columns:
        h1 = np.clip(X[schema.L1_HIT_RATE].to_numpy(dtype=float), 0.0, 1.0)
        h2 = np.clip(X[schema.L2_HIT_RATE].to_numpy(dtype=float), 0.0, 1.0)
        hits = (np.nan_to_num(h1, nan=0.0), np.nan_to_num(h2, nan=1.0))
    counts = split_levels(counts.reset_index(drop=True), hits)
    if memory_traffic and all(c in X.columns for c in TRAFFIC.values()):
        for feature, col in TRAFFIC.items():
            v = X[col].to_numpy(dtype=float)
            if not np.all(np.isfinite(v)) or (v < 0).any():
                raise ValueError(f"instruction table: column {col!r} has NaN, "
                                 "infinite or negative sector counts")
            counts[feature] = v
        if uncoalesced:  # needs the widths of the profiled names, before grouping
            counts[UNCOALESCED] = uncoalesced_sectors(raw.reset_index(drop=True),
                                                      X[schema.L1_SECTORS].to_numpy(dtype=float))
    return counts, time, static
