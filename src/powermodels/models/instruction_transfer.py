"""Transfer of a per-instruction energy table to another GPU (Wattchmen §6).

Wattchmen §6 observes that the energy tables of two systems are close to an
affine function of each other (R² 0.988 between an air- and a water-cooled
V100) and builds the second system's table from a random 10 % subset of its
measurements: fit the subset, regress its energies on the reference table's,
and predict the rest with the line (Fig. 14: 13 % MAPE with 10 %, 14 % with
the full table).

Two ways to fit the line:

``method="rows"`` (default)
    The line is fitted to the measured rows directly: with the reference
    table, each row's dynamic energy is ``a·Σ_j c_j e_ref,j + b·Σ_j c_j``
    (``c_j`` its counts), two unknowns fitted by least squares on the
    relative residuals. Works from two microbenchmarks: a 10 % subset (six
    or seven rows) rarely identifies two opcodes on its own, because the loop
    instructions occur in every microbenchmark.
``method="energies"``
    Wattchmen's literal procedure: fit the subset with the joint solve,
    regress the new energies of opcodes identified on both systems on the
    reference energies, keep the fitted ones and map the others.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted

from .. import schema

__all__ = ["affine_transfer", "subset_rows"]


def subset_rows(n: int, fraction: float, random_state=None) -> np.ndarray:
    """Sorted indices of a random ``fraction`` of ``n`` rows (at least one).

    Raises
    ------
    ValueError
        If ``fraction`` is not in (0, 1] or ``n`` < 1.
    """
    if not (0 < fraction <= 1):
        raise ValueError(f"fraction: must be in (0, 1], got {fraction!r}")
    if n < 1:
        raise ValueError("X: no rows to take a subset of")
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n, size=max(1, round(fraction * n)), replace=False))


def affine_transfer(reference, X, y=None, *, fraction: float | None = None, random_state=None,
                    method: str = "rows"):
    """Fit a new system from some of its benchmarks via an affine map (Wattchmen §6).

    Fits a clone of ``reference`` on ``X`` (optionally a random ``fraction``
    of its rows), regresses the new energies of opcodes identified on both
    systems on the reference energies (least-squares line), and gives every
    opcode of the reference table that the new fit lacks, or cannot identify,
    ``slope·e_ref + intercept`` (clipped at 0).

    Parameters
    ----------
    reference : InstructionEnergyModel
        Fitted model of the reference system.
    X : instruction table or array-like
        Benchmarks measured on the new system.
    y : array-like, optional
        Their energies (default: the table's ``energy_j``).
    fraction : float in (0, 1], optional
        Use a random fraction of the rows of ``X`` (None: all of them, e.g.
        when only the subset was measured).
    random_state : int or Generator, optional
        Seed of the subset.
    method : {"rows", "energies"}, default="rows"
        How the line is fitted (module docstring).

    Returns
    -------
    InstructionEnergyModel
        A fitted model of the new system, with ``transfer_`` =
        ``{"slope", "intercept", "r2", "n_common", "n_rows", "n_transferred"}``.

    Raises
    ------
    ValueError
        If fewer than two opcodes are identified on both systems.
    """
    check_is_fitted(reference, "energies_")
    if method not in ("rows", "energies"):
        raise ValueError(f"method: must be 'rows' or 'energies', got {method!r}")
    if fraction is not None:
        rows = subset_rows(len(X), fraction, random_state)
        X = X.iloc[rows] if isinstance(X, pd.DataFrame) else np.asarray(X)[rows]
        y = None if y is None else np.asarray(y)[rows]
    if method == "rows":
        return _transfer_rows(reference, X, y)
    new = clone(reference).fit(X, y)
    ref_e, ref_ok = reference.energies_, reference.identifiable_
    common = [op for op in new.energies_.index
              if op in ref_e.index and new.identifiable_[op] and ref_ok[op]]
    if len(common) < 2:
        raise ValueError(f"X: only {len(common)} opcode(s) identified on both systems; "
                         "an affine transfer needs at least 2")
    ref = ref_e[common].to_numpy()
    tgt = new.energies_[common].to_numpy()
    slope, intercept = np.polyfit(ref, tgt, 1)
    pred = slope * ref + intercept
    ss = float(((tgt - tgt.mean()) ** 2).sum())
    r2 = 1.0 - float(((tgt - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    # opcodes the subset did not fit, or fitted without pinning them down, take the line
    mapped = [op for op in ref_e.index
              if op not in new.energies_.index or not new.identifiable_[op]]
    filled = pd.Series(np.maximum(slope * ref_e[mapped].to_numpy() + intercept, 0.0), index=mapped)
    kept = new.energies_.drop(index=[op for op in mapped if op in new.energies_.index])
    energies = pd.concat([kept, filled])
    energies.index.name, energies.name = schema.OPCODE, schema.ENERGY_J
    ident = pd.concat([new.identifiable_[kept.index], ref_ok[mapped]]).rename("identifiable")
    ident.index.name = schema.OPCODE
    new.energies_, new.identifiable_ = energies, ident
    new._derive_extension_tables()
    new.transfer_ = {"slope": float(slope), "intercept": float(intercept), "r2": r2,
                     "n_common": len(common), "n_rows": len(X),
                     "n_transferred": len(mapped), "method": "energies"}
    return new


def _transfer_rows(reference, X, y=None):
    """The line fitted to the rows' energies (``method="rows"``)."""
    from .instruction_opcodes import TRAFFIC_FEATURES

    counts, time, static = reference._predict_inputs(X)
    if y is None:
        if not (isinstance(X, pd.DataFrame) and schema.ENERGY_J in X.columns):
            raise ValueError(f"y: required unless X is a table with an {schema.ENERGY_J!r} column")
        y = X[schema.ENERGY_J].to_numpy(dtype=float)
    y = np.asarray(y, dtype=float)
    if len(y) < 2:
        raise ValueError(f"X: an affine transfer needs at least 2 rows, got {len(y)}")
    table = reference._energy_table(counts)
    e_ref = table[schema.ENERGY_PER_INSTRUCTION_J].to_numpy()
    instr = np.array([c not in TRAFFIC_FEATURES for c in counts.columns])  # sectors get no intercept
    c = counts.to_numpy()
    A = np.column_stack([c @ e_ref, c[:, instr].sum(axis=1)])
    d = y - time * static
    w = 1.0 / np.where(np.abs(y) > 0, np.abs(y), 1.0)  # relative residuals, as MAPE weighs them
    (slope, intercept), *_ = np.linalg.lstsq(A * w[:, None], d * w, rcond=None)
    pred = A @ [slope, intercept]
    ss = float(((d - d.mean()) ** 2).sum())
    r2 = 1.0 - float(((d - pred) ** 2).sum()) / ss if ss > 0 else 1.0
    new = copy.deepcopy(reference)
    ref_e = reference.energies_
    is_instr = np.array([op not in TRAFFIC_FEATURES for op in ref_e.index])
    mapped = np.maximum(slope * ref_e.to_numpy() + intercept * is_instr, 0.0)
    new.energies_ = pd.Series(mapped, index=ref_e.index.copy(), name=schema.ENERGY_J)
    if reference.static_power_w is None and isinstance(X, pd.DataFrame) \
            and schema.STATIC_POWER_W in X.columns:
        new.static_power_w_ = float(np.nanmean(X[schema.STATIC_POWER_W].to_numpy(dtype=float)))
    new._derive_extension_tables()
    new.transfer_ = {"slope": float(slope), "intercept": float(intercept), "r2": r2,
                     "n_common": int(len(ref_e)), "n_rows": len(y),
                     "n_transferred": int(len(ref_e)), "method": "rows"}
    return new
