"""Curve targets for the DVFS parameter predictor: learn the measured curves, then fit DSO eq. 1-2.

DSO (§IV-D) trains its regressor on the seven parameters of eq. 1-2. The
parameters of different kernels do not average into a plausible kernel: a
regressor that mixes the shares of a compute-bound and a memory-bound
neighbour gets a curve neither of them has. This module offers the other
target that cross-validation can choose (``targets="curve"`` in
:func:`~powermodels.models.dvfs_selection.cross_validate_predictors`): the
kernel's measured time and power at every clock pair of the training grid,
as ``log(T(f)/T_ref)`` and ``log(P(f)/P_ref)`` relative to its reference
(profiling) run. The predicted curves are turned back into DSO parameters by
fitting eq. 2 (time) and eq. 1 (power) to them
(:func:`~powermodels.models.dvfs_fit.fit_time`, :func:`~powermodels.models.dvfs_fit.fit_power`),
with the reference point weighted so that the model passes (nearly) through
the profiling run it was scaled by — the optimiser (eq. 4-5) works on the
parameters as before.

Every training kernel must have been measured at each clock pair of the grid
(regime points that :func:`~powermodels.models.dvfs_targets.kernel_parameters`
excluded are filled from that kernel's own eq. 1-2 fit), and a kernel to
predict is profiled at the grid's reference pair: its highest memory clock
and the highest core clock there.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.models.dvfs_fit import fit_power, fit_time
from powermodels.models.dvfs_params import DVFSParams
from powermodels.models.dvfs_targets import kept_runs

__all__ = ["TARGET_KINDS", "curve_clocks", "curve_targets", "params_from_curves", "reference_pair"]

#: What the predictor learns: DSO's parameter shares (§IV-D) or the measured curves.
TARGET_KINDS = ("shares", "curve")


def curve_clocks(runs: pd.DataFrame) -> np.ndarray:
    """The clock pairs at which every kernel of ``runs`` was measured, shape (n_pairs, 2), sorted.

    Raises ``ValueError`` when fewer than 3 pairs are common to all kernels.
    """
    for col in (schema.KERNEL, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ):
        if col not in runs.columns:
            raise ValueError(f"runs: column {col!r} is missing")
    common = None
    for _, g in runs.groupby(schema.KERNEL, sort=False):
        pairs = set(zip(g[schema.SM_CLOCK_MHZ].astype(float), g[schema.MEM_CLOCK_MHZ].astype(float),
                        strict=True))
        common = pairs if common is None else common & pairs
    if common is None or len(common) < 3:
        raise ValueError(f"curve targets need at least 3 clock pairs measured for every kernel, "
                         f"got {0 if common is None else len(common)}")
    return np.array(sorted(common, key=lambda p: (p[1], p[0])), dtype=float)


def reference_pair(clocks: np.ndarray) -> tuple[float, float]:
    """The grid's reference pair: the highest memory clock, and the highest core clock there."""
    clocks = np.asarray(clocks, dtype=float)
    fm = clocks[:, 1].max()
    return float(clocks[clocks[:, 1] == fm, 0].max()), float(fm)


def curve_targets(runs: pd.DataFrame, table: pd.DataFrame, clocks: np.ndarray) -> np.ndarray:
    """Each kernel's log time and log power ratios at ``clocks``, relative to the grid's reference pair.

    Parameters
    ----------
    runs : DataFrame
        The sweep (kernel, clocks, time, power), every kernel at every pair of ``clocks``.
    table : DataFrame
        :func:`~powermodels.models.dvfs_targets.kernel_parameters` of ``runs``: its excluded
        regime points are replaced by the kernel's own eq. 1-2 fit, and it sets the kernels' order.
    clocks : ndarray of shape (n_pairs, 2)
        Core and memory clock pairs (MHz), e.g. :func:`curve_clocks`.

    Returns
    -------
    ndarray of shape (n_kernels, 2 * n_pairs)
        ``log(T(f)/T(f_ref))`` at each pair, then ``log(P(f)/P(f_ref))``.
    """
    clocks = np.asarray(clocks, dtype=float)
    ref = reference_pair(clocks)
    knee = float(table.attrs.get("voltage_knee_mhz", np.nan))
    slope = float(table.attrs.get("voltage_slope_per_ghz", np.nan))
    kept = kept_runs(runs, table)
    means = kept.groupby([schema.KERNEL, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ])[
        [schema.TIME_S, schema.POWER_W]].mean()
    out = np.empty((len(table), 2 * len(clocks)))
    for i, (kernel, row) in enumerate(table.iterrows()):
        params = DVFSParams.from_values(row, voltage_knee_mhz=knee, voltage_slope_per_ghz=slope)
        t = params.time(clocks[:, 0], clocks[:, 1])
        p = params.power(clocks[:, 0], clocks[:, 1])
        for j, (fc, fm) in enumerate(clocks):
            key = (kernel, fc, fm)
            if key in means.index:
                t[j], p[j] = means.loc[key].to_numpy(dtype=float)
        j_ref = int(np.flatnonzero((clocks[:, 0] == ref[0]) & (clocks[:, 1] == ref[1]))[0])
        if not (np.all(t > 0) and np.all(p > 0)):
            raise ValueError(f"kernel {kernel!r}: time and power must be positive at every clock pair")
        out[i] = np.concatenate([np.log(t / t[j_ref]), np.log(p / p[j_ref])])
    return out


def params_from_curves(curves, clocks, *, reference_sm_clock_mhz, reference_mem_clock_mhz,
                       reference_time_s, reference_power_w, voltage_knee_mhz: float,
                       voltage_slope_per_ghz: float, loss: str = "huber",
                       reference_weight: float | None = None) -> list[DVFSParams]:
    """DSO eq. 1-2 fitted to predicted curves (:func:`curve_targets` layout), in s and W.

    Parameters
    ----------
    curves : array-like of shape (n_kernels, 2 * n_pairs)
        Predicted log time and log power ratios at ``clocks``.
    clocks : ndarray of shape (n_pairs, 2)
        The training grid's clock pairs (MHz).
    reference_sm_clock_mhz, reference_mem_clock_mhz : float or array-like of shape (n_kernels,)
        Clocks of each kernel's profiling run: the grid's reference pair.
    reference_time_s, reference_power_w : float or array-like of shape (n_kernels,)
        Time (s) and power (W) measured in that run; they scale the ratios.
    voltage_knee_mhz, voltage_slope_per_ghz : float
        The GPU's V(f) shape.
    loss : {"huber", "squared"}, default="huber"
        Loss of the eq. 1-2 fits (:mod:`~powermodels.models.dvfs_fit`).
    reference_weight : float or None, default=None
        Weight of the reference point in the fits (the others weigh 1); ``None``: the
        number of pairs, so the model passes (nearly) through the profiling run.

    Returns
    -------
    list of DVFSParams
        One per row of ``curves``.
    """
    clocks = np.asarray(clocks, dtype=float)
    y = np.atleast_2d(np.asarray(curves, dtype=float))
    n_pairs = len(clocks)
    if y.shape[1] != 2 * n_pairs or not np.all(np.isfinite(y)):
        raise ValueError(f"curves: expected {2 * n_pairs} finite values per kernel "
                         f"(log time and log power ratios at {n_pairs} clock pairs), got shape {y.shape}")
    ref = reference_pair(clocks)
    refs = [np.broadcast_to(np.asarray(v, dtype=float), (len(y),)) for v in (
        reference_sm_clock_mhz, reference_mem_clock_mhz, reference_time_s, reference_power_w)]
    if not (np.allclose(refs[0], ref[0]) and np.allclose(refs[1], ref[1])):
        raise ValueError(f"curve targets: the profiling run must be at the training grid's reference "
                         f"clocks {ref[0]:g}/{ref[1]:g} MHz")
    at_ref = (clocks[:, 0] == ref[0]) & (clocks[:, 1] == ref[1])
    weight = np.where(at_ref, float(n_pairs if reference_weight is None else reference_weight), 1.0)
    fc, fm = clocks[:, 0], clocks[:, 1]
    out = []
    for row, t_ref, p_ref in zip(y, refs[2], refs[3], strict=True):
        if not (np.isfinite(t_ref) and t_ref > 0 and np.isfinite(p_ref) and p_ref > 0):
            raise ValueError("reference_time_s and reference_power_w must be positive")
        t0, alpha, beta = fit_time(fc, fm, t_ref * np.exp(row[:n_pairs]), loss=loss, sample_weight=weight)
        coef = fit_power(fc, fm, p_ref * np.exp(row[n_pairs:]), voltage_knee_mhz, voltage_slope_per_ghz,
                         loss=loss, sample_weight=weight)
        out.append(DVFSParams(*(float(c) for c in coef), t0, alpha, beta,
                              voltage_knee_mhz=float(voltage_knee_mhz),
                              voltage_slope_per_ghz=float(voltage_slope_per_ghz)))
    return out
