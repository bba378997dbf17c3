"""Per-kernel DSO fits of a sweep table: the training targets of the parameter predictor.

For every kernel of a sweep (one row per run: kernel, clocks, time, power)
this fits DSO eq. 1-2 (§IV-B) robustly, after excluding the clocks where the
GPU changed regime (:func:`~powermodels.models.dvfs_regimes.detect_regimes`,
each exclusion warned with its clock), and reports how well the model holds
on the kept points, so that a predictor trains only on trustworthy targets.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.models.dvfs_fit import fit_power, fit_time
from powermodels.models.dvfs_params import DVFSParams
from powermodels.models.dvfs_regimes import DVFSRegimeWarning, detect_regimes

__all__ = ["excluded_clock_counts", "kept_runs", "kernel_parameters"]


def _check_runs(runs, columns: dict):
    """``columns`` maps parameter → column name; the first is the group column (any values)."""
    if not isinstance(runs, pd.DataFrame):
        raise ValueError(f"runs must be a DataFrame, got {type(runs).__name__}")
    for param, col in columns.items():
        if col not in runs.columns:
            raise ValueError(f"runs: column {col!r} ({param}) is missing; runs has {list(runs.columns)}")
    for param, col in list(columns.items())[1:]:
        v = pd.to_numeric(runs[col], errors="coerce").to_numpy(dtype=float)
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"runs: column {col!r} ({param}) must hold finite positive numbers")


def _renamed_argument(new: str, value, old: str, old_value):
    """``value``, or the deprecated keyword ``old``'s value where it was passed (FutureWarning)."""
    if old_value is None:
        return value
    warnings.warn(f"kernel_parameters: {old} is now {new} ({old} is deprecated and will be removed "
                  f"in 0.3); pass {new}={old_value!r}", FutureWarning, stacklevel=3)
    return old_value


def kernel_parameters(runs: pd.DataFrame, *, group_column: str = schema.KERNEL,
                      clock_column: str = schema.SM_CLOCK_MHZ,
                      memory_clock_column: str = schema.MEM_CLOCK_MHZ,
                      time_column: str = schema.TIME_S, power_column: str = schema.POWER_W,
                      voltage_knee_mhz: float, voltage_slope_per_ghz: float,
                      loss: str = "huber", detect: bool = True, max_fit_mape: float = 0.03,
                      min_points: int = 5, detect_kwargs: dict | None = None,
                      core_clock_column: str | None = None,
                      mem_clock_column: str | None = None) -> pd.DataFrame:
    """Fit DSO eq. 1-2 per kernel: the training targets of the DVFS parameter predictor.

    Parameters
    ----------
    runs : DataFrame
        One row per measured run (at least 3 distinct core clocks per kernel).
    group_column, clock_column, memory_clock_column, time_column, power_column : str
        Column names (the estimators' convention, ``docs/columns.md``).
    voltage_knee_mhz, voltage_slope_per_ghz : float
        The GPU's V(f) shape (see :func:`powermodels.models.dvfs_fit.fit_voltage_curve`).
    loss : {"huber", "squared"}, default="huber"
        Loss of the fits (:mod:`powermodels.models.dvfs_fit`).
    detect : bool, default=True
        Exclude the points where the GPU changed regime (a
        :class:`~powermodels.models.dvfs_regimes.DVFSRegimeWarning` names each
        kernel's excluded clocks). Needs more than ``min_points`` points.
    max_fit_mape : float, default=0.03
        A kernel is trusted (``schema.DVFS_TRUSTED``) when eq. 1 and eq. 2 each
        miss its kept points by at most this mean relative error.
    min_points : int, default=5
        Fewest points a trusted fit keeps.
    detect_kwargs : dict or None
        Passed to :func:`~powermodels.models.dvfs_regimes.detect_regimes`.
    core_clock_column, mem_clock_column : str or None
        Deprecated old names of ``clock_column``/``memory_clock_column``
        (removed in 0.3).

    Returns
    -------
    DataFrame
        Indexed by kernel: the parameters (``schema.DVFS_PARAMETERS``), the
        same as shares of T and P at the reference clocks
        (``schema.DVFS_SHARES``, see :meth:`DVFSParams.to_shares`), the
        reference itself — the highest kept memory clock and the highest kept
        core clock there (``schema.SM_CLOCK_MHZ``, ``schema.MEM_CLOCK_MHZ``)
        with the mean measured time and power there
        (``schema.DVFS_REFERENCE_TIME_S``, ``schema.DVFS_REFERENCE_POWER_W``) —
        and the fit quality: ``schema.DVFS_FIT_TIME_MAPE``,
        ``schema.DVFS_FIT_POWER_MAPE`` (fractions, kept points),
        ``schema.DVFS_N_POINTS``, ``schema.DVFS_EXCLUDED_CLOCKS``
        (``"MHz:kind;..."``) and ``schema.DVFS_TRUSTED``.
    """
    clock_column = _renamed_argument("clock_column", clock_column, "core_clock_column", core_clock_column)
    memory_clock_column = _renamed_argument("memory_clock_column", memory_clock_column,
                                            "mem_clock_column", mem_clock_column)
    _check_runs(runs, {"group_column": group_column, "clock_column": clock_column,
                       "memory_clock_column": memory_clock_column, "time_column": time_column,
                       "power_column": power_column})
    vkw = {"voltage_knee_mhz": float(voltage_knee_mhz), "voltage_slope_per_ghz": float(voltage_slope_per_ghz)}
    rows, warned = {}, []
    for kernel, g in runs.groupby(group_column, sort=False):
        fc = g[clock_column].to_numpy(dtype=float)
        fm = g[memory_clock_column].to_numpy(dtype=float)
        t = g[time_column].to_numpy(dtype=float)
        p = g[power_column].to_numpy(dtype=float)
        if len(np.unique(fc)) < 3:
            raise ValueError(f"runs: kernel {kernel!r} has fewer than 3 distinct core clocks")
        keep = np.ones(len(t), dtype=bool)
        excluded = ""
        if detect and len(t) > min_points:
            flags = detect_regimes(fc, fm, t, p, **vkw, min_points=min_points, loss=loss,
                                   **(detect_kwargs or {}))
            keep = ~flags["excluded"].to_numpy()
            excluded = ";".join(f"{fc[i]:g}:{flags['kind'].iloc[i]}" for i in np.flatnonzero(~keep))
            if excluded:
                warned.append(f"{kernel} at " + ", ".join(
                    f"{fc[i]:g} MHz ({flags['kind'].iloc[i]}, time {flags['time_miss'].iloc[i]:+.1%})"
                    for i in np.flatnonzero(~keep)))
        fck, fmk, tk, pk = fc[keep], fm[keep], t[keep], p[keep]
        m_ref = fmk.max()
        c_ref = fck[fmk == m_ref].max()
        at_ref = (fmk == m_ref) & (fck == c_ref)
        t_ref, p_ref = float(tk[at_ref].mean()), float(pk[at_ref].mean())
        t0, alpha, beta = fit_time(fck, fmk, tk, loss=loss)
        coef = fit_power(fck, fmk, pk, vkw["voltage_knee_mhz"], vkw["voltage_slope_per_ghz"], loss=loss)
        params = DVFSParams(*(float(c) for c in coef), t0, alpha, beta, **vkw)
        row = params.as_series().to_dict()
        for name, share in zip(schema.DVFS_SHARES, params.to_shares(c_ref, m_ref, t_ref, p_ref),
                               strict=True):
            row[name] = share
        row[schema.SM_CLOCK_MHZ] = c_ref
        row[schema.MEM_CLOCK_MHZ] = m_ref
        row[schema.DVFS_REFERENCE_TIME_S] = t_ref
        row[schema.DVFS_REFERENCE_POWER_W] = p_ref
        t_mape = float(np.mean(np.abs(params.time(fck, fmk) / tk - 1)))
        p_mape = float(np.mean(np.abs(params.power(fck, fmk) / pk - 1)))
        row[schema.DVFS_FIT_TIME_MAPE] = t_mape
        row[schema.DVFS_FIT_POWER_MAPE] = p_mape
        row[schema.DVFS_N_POINTS] = len(t)
        row[schema.DVFS_EXCLUDED_CLOCKS] = excluded
        row[schema.DVFS_TRUSTED] = bool(t_mape <= max_fit_mape and p_mape <= max_fit_mape
                                        and keep.sum() >= min(min_points, len(t)))
        rows[kernel] = row
    if warned:
        warnings.warn(f"DVFS sweep: excluded points where the GPU changed regime (eq. 1-2 fitted "
                      f"without them): {'; '.join(warned)}", DVFSRegimeWarning, stacklevel=2)
    out = pd.DataFrame.from_dict(rows, orient="index")
    out.index.name = group_column
    for col in (*schema.DVFS_PARAMETERS, *schema.DVFS_SHARES, schema.DVFS_FIT_TIME_MAPE,
                schema.DVFS_FIT_POWER_MAPE):
        out[col] = out[col].astype(float)
    out[schema.DVFS_N_POINTS] = out[schema.DVFS_N_POINTS].astype(int)
    out[schema.DVFS_TRUSTED] = out[schema.DVFS_TRUSTED].astype(bool)
    out.attrs.update(vkw)  # the V(f) shape the parameters belong to
    return out


def excluded_clock_counts(table: pd.DataFrame) -> pd.DataFrame:
    """How many kernels of a :func:`kernel_parameters` table excluded each clock, by kind.

    A clock excluded by many kernels is a property of the GPU (a P-state, a
    memory clock that moves with the core clock), not of one kernel.

    Returns
    -------
    DataFrame
        Columns ``sm_clock_mhz``, ``kind``, ``kernels`` (count) and
        ``share`` (of the table's kernels), most frequent first.
    """
    if schema.DVFS_EXCLUDED_CLOCKS not in table.columns:
        raise ValueError(f"table: column {schema.DVFS_EXCLUDED_CLOCKS!r} is missing "
                         "(a kernel_parameters table)")
    pairs = [item.split(":") for s in table[schema.DVFS_EXCLUDED_CLOCKS] for item in s.split(";") if item]
    if not pairs:
        return pd.DataFrame({schema.SM_CLOCK_MHZ: [], "kind": [], "kernels": [], "share": []})
    df = pd.DataFrame(pairs, columns=[schema.SM_CLOCK_MHZ, "kind"])
    df[schema.SM_CLOCK_MHZ] = df[schema.SM_CLOCK_MHZ].astype(float)
    out = df.value_counts().rename("kernels").reset_index()
    out["share"] = out["kernels"] / len(table)
    return out.sort_values(["kernels", schema.SM_CLOCK_MHZ], ascending=[False, True],
                           ignore_index=True)


def kept_runs(runs: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """The rows of a sweep that :func:`kernel_parameters` kept (its excluded kernel/clock points dropped)."""
    if schema.DVFS_EXCLUDED_CLOCKS not in table.columns:
        return runs
    drop = {(k, float(item.split(":")[0])) for k, s in table[schema.DVFS_EXCLUDED_CLOCKS].items()
            for item in s.split(";") if item}
    if not drop:
        return runs
    key = zip(runs[schema.KERNEL], runs[schema.SM_CLOCK_MHZ].astype(float), strict=True)
    return runs[[k not in drop for k in key]]
