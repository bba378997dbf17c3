"""Train the DSO parameter predictor from the sweep table of any GPU, and apply it.

The workflow of DSO (Wang et al., §IV-D) on data the user brings:

1. V(f), a property of the GPU, is chosen from the training sweep's power
   (:func:`~powermodels.models.dvfs_fit.fit_voltage_curve`).
2. Every training kernel's sweep is fitted with DSO eq. 1-2 after the
   clocks where the GPU changed regime are excluded (with a warning naming
   them) — :func:`~powermodels.models.dvfs_targets.kernel_parameters`.
3. The regressor from features to parameters is chosen among DSO's MLP and
   alternatives by cross-validation that holds out whole applications of
   the training set (:func:`~powermodels.models.dvfs_selection.cross_validate_predictors`),
   then refitted on all trusted training kernels.
4. A new kernel's profiling run (features, clocks, time and power at one
   clock pair) gives its DVFS model; the optimiser picks its clocks.

No GPU-specific constant lives here: clocks come from the sweep, the power
limit from the caller (the device, or the sweep's metadata via
:func:`read_nv_dvfs_config`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.models.dvfs_curves import TARGET_KINDS, curve_clocks, curve_targets, params_from_curves
from powermodels.models.dvfs_fit import fit_voltage_curve
from powermodels.models.dvfs_params import DVFSParams
from powermodels.models.dvfs_predictor import DVFSParameterPredictor
from powermodels.models.dvfs_selection import (
    CANDIDATES,
    cross_validate_predictors,
    curve_errors,
    make_candidate,
    reference_of,
)
from powermodels.models.dvfs_targets import excluded_clock_counts, kernel_parameters

__all__ = ["TrainedDVFSPredictor", "application_of", "best_per_quantity", "combine_models", "evaluate_models",
           "fitted_models", "predict_models", "profile_features", "profiles_of", "read_nv_dvfs_config",
           "train_dvfs_predictor", "with_power_feature"]

#: the parameters of DSO eq. 2 (time); the rest of :class:`DVFSParams` is eq. 1 (power) and V(f)
TIME_PARAMETERS = ("t0_s", "alpha_s_mhz", "beta_s_mhz")


def application_of(kernel: str) -> str:
    """The application of a kernel id: the part before ``":"`` (``"cfd:input000"`` → ``"cfd"``)."""
    return str(kernel).split(":", 1)[0]


def read_nv_dvfs_config(path) -> dict:
    """Power limit and clock lists of an NV-DVFS-Benchmark ``*.cfg`` (its ``[dvfs_control]``).

    Returns
    -------
    dict
        ``p_max_w`` (``powerLim``), ``core_clocks_mhz`` (``coreF``) and
        ``mem_clocks_mhz`` (``memF``), each present only when the file sets it.
    """
    text = Path(path).read_text()
    out = {}
    m = re.search(r"^\s*powerLim\s*=\s*([0-9.]+)", text, re.MULTILINE)
    if m:
        out["p_max_w"] = float(m.group(1))
    for key, name in (("coreF", "core_clocks_mhz"), ("memF", "mem_clocks_mhz")):
        m = re.search(rf"^\s*{key}\s*=\s*\[([^\]]*)\]", text, re.MULTILINE)
        if m:
            out[name] = [float(v) for v in m.group(1).split(",") if v.strip()]
    return out


def with_power_feature(runs: pd.DataFrame, p_max_w: float) -> pd.DataFrame:
    """``runs`` with :data:`schema.FEAT_POWER_OF_LIMIT`: each run's power over the board's limit.

    The profiling run measures the kernel's power at its reference clocks anyway
    (DSO uses it to scale the predicted shares back to watts); as a feature it
    tells the predictor how much of that power is dynamic — the static share
    of eq. 2 is larger for a kernel that draws little. Dividing by the power
    limit (the GPU's own, from the device or the sweep's metadata) keeps the
    feature a ratio, like the utilisation counters.

    Parameters
    ----------
    runs : DataFrame
        Rows with :data:`schema.POWER_W`.
    p_max_w : float
        The board's power limit (W), > 0.
    """
    if not (np.isfinite(p_max_w) and p_max_w > 0):
        raise ValueError(f"p_max_w must be a positive power limit in W, got {p_max_w!r}")
    if schema.POWER_W not in runs.columns:
        raise ValueError(f"runs: column {schema.POWER_W!r} is missing")
    share = pd.Series(runs[schema.POWER_W].to_numpy(dtype=float) / float(p_max_w), index=runs.index,
                      name=schema.FEAT_POWER_OF_LIMIT)
    return pd.concat([runs.drop(columns=[schema.FEAT_POWER_OF_LIMIT], errors="ignore"), share], axis=1)


def profile_features(runs: pd.DataFrame, columns, table: pd.DataFrame) -> pd.DataFrame:
    """Features of each kernel's profiling run: the mean of its rows at its reference clocks."""
    missing = [c for c in columns if c not in runs.columns]
    if missing:
        raise ValueError(f"runs: feature column {missing[0]!r} is missing")
    at = runs.merge(table[[schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]].reset_index(),
                    on=[schema.KERNEL, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ])
    return at.groupby(schema.KERNEL)[list(columns)].mean().loc[table.index]


@dataclass
class TrainedDVFSPredictor:
    """What :func:`train_dvfs_predictor` learned and how it was chosen."""

    predictor: DVFSParameterPredictor
    candidate: str
    voltage_knee_mhz: float
    voltage_slope_per_ghz: float
    feature_columns: list
    targets: pd.DataFrame
    cv: pd.DataFrame
    regime_clocks: pd.DataFrame
    metadata: dict = field(default_factory=dict)
    #: what the predictor learned: ``"shares"`` (DSO §IV-D) or ``"curve"`` (models.dvfs_curves)
    target_kind: str = "shares"
    #: the training grid's clock pairs, shape (n_pairs, 2), for ``targets="curve"``
    curve_clocks: np.ndarray | None = None

    @property
    def voltage(self) -> dict:
        """``voltage_knee_mhz`` and ``voltage_slope_per_ghz`` as keyword arguments."""
        return {"voltage_knee_mhz": self.voltage_knee_mhz,
                "voltage_slope_per_ghz": self.voltage_slope_per_ghz}


def train_dvfs_predictor(sweep: pd.DataFrame, feature_columns, *, groups=None,
                         candidates=CANDIDATES, candidate: str | None = None, seeds=(0, 1, 2),
                         n_splits: int = 6, detect: bool = True, voltage=None,
                         progress=None, targets: str = "shares") -> TrainedDVFSPredictor:
    """Train the DVFS parameter predictor on a training sweep, choosing the regressor by grouped CV.

    Parameters
    ----------
    sweep : DataFrame
        One row per run of a training kernel: ``kernel``, ``sm_clock_mhz``,
        ``mem_clock_mhz``, ``time_s``, ``power_w`` and the feature columns
        (at least at each kernel's highest clocks, the profiling run).
    feature_columns : sequence of str
        Features of the profiling run (DSO Tables I-II).
    groups : callable or None
        Kernel id → application for the CV folds; default :func:`application_of`.
    candidates : sequence of str
        Regressors compared (``models.dvfs_selection.CANDIDATES``).
    candidate : str or None
        Skip the comparison and use this one (the CV table is then empty).
    seeds : sequence of int
        Seeds for the CV's stability; the final model uses the first.
    n_splits : int, default=6
        CV folds (at most the number of applications).
    detect : bool, default=True
        Exclude regime-change clocks from the per-kernel fits (warned).
    voltage : (float, float) or None
        V(f) ``(knee_mhz, slope_per_ghz)``; default chosen from the sweep's power.
    progress : callable or None
        Called with a one-line message per step.
    targets : {"shares", "curve"}, default="shares"
        What the regressor learns: DSO's parameter shares (§IV-D), or the measured time
        and power curves at the clock pairs every training kernel has, to which eq. 1-2
        are fitted at prediction (:mod:`~powermodels.models.dvfs_curves`); the CV compares
        candidates with this target.

    Returns
    -------
    TrainedDVFSPredictor
    """
    say = progress or (lambda msg: None)
    cols = list(feature_columns)
    if not cols:
        raise ValueError("feature_columns: at least one feature is needed")
    if targets not in TARGET_KINDS:
        raise ValueError(f"targets must be one of {TARGET_KINDS}, got {targets!r}")
    if voltage is None:
        knee, slope = fit_voltage_curve(sweep[schema.SM_CLOCK_MHZ], sweep[schema.MEM_CLOCK_MHZ],
                                        sweep[schema.POWER_W], sweep[schema.KERNEL])
    else:
        knee, slope = (float(v) for v in voltage)
    say(f"V(f): knee {knee:.0f} MHz, slope {slope:g}/GHz")
    vkw = {"voltage_knee_mhz": knee, "voltage_slope_per_ghz": slope}
    table = kernel_parameters(sweep, **vkw, detect=detect)
    say(f"fitted eq. 1-2 to {len(table)} kernels; {int(table[schema.DVFS_TRUSTED].sum())} trusted")
    feats = profile_features(sweep, cols, table)
    group_of = groups or application_of
    g = np.array([group_of(k) for k in table.index])
    if candidate is None:
        cv = cross_validate_predictors(feats, table, sweep, g, **vkw, candidates=candidates,
                                       seeds=seeds, n_splits=n_splits, targets=targets)
        candidate = str(cv["candidate"].iloc[0])
        say(f"cross-validated {len(cv)} candidates over {len(np.unique(g))} applications: "
            f"{candidate} (CV MAPE {cv['cv_mape'].iloc[0]:.2f} %)")
    else:
        cv = pd.DataFrame()
    trusted = table[schema.DVFS_TRUSTED].to_numpy(dtype=bool)
    clocks = curve_clocks(sweep) if targets == "curve" else None
    y = (curve_targets(sweep, table, clocks) if targets == "curve"
         else table[list(schema.DVFS_SHARES)].to_numpy(dtype=float))
    pred = make_candidate(candidate, seeds[0] if len(seeds) else None).fit(feats[trusted], y[trusted])
    meta = {**vkw, "candidate": candidate, "feature_columns": cols, "target_kind": targets}
    if clocks is not None:
        meta["curve_clocks"] = clocks.tolist()
    return TrainedDVFSPredictor(pred, candidate, knee, slope, cols, table, cv,
                                excluded_clock_counts(table), meta, targets, clocks)


def predict_models(trained: TrainedDVFSPredictor, profiles: pd.DataFrame, *, voltage=None) -> dict:
    """DVFS models of profiled kernels: ``{kernel: DVFSParams}``.

    ``profiles`` holds one row per kernel: ``kernel``, the feature columns and
    the profiling run's ``sm_clock_mhz``, ``mem_clock_mhz``, ``time_s``, ``power_w``.
    ``voltage`` ``(knee_mhz, slope_per_ghz)`` is the V(f) of the GPU the
    profiles come from, when it is not the training GPU.
    """
    needed = [schema.KERNEL, *trained.feature_columns, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ,
              schema.TIME_S, schema.POWER_W]
    for col in needed:
        if col not in profiles.columns:
            raise ValueError(f"profiles: column {col!r} is missing")
    vkw = trained.voltage if voltage is None else {
        "voltage_knee_mhz": float(voltage[0]), "voltage_slope_per_ghz": float(voltage[1])}
    refs = {"reference_sm_clock_mhz": profiles[schema.SM_CLOCK_MHZ].to_numpy(dtype=float),
            "reference_mem_clock_mhz": profiles[schema.MEM_CLOCK_MHZ].to_numpy(dtype=float),
            "reference_time_s": profiles[schema.TIME_S].to_numpy(dtype=float),
            "reference_power_w": profiles[schema.POWER_W].to_numpy(dtype=float)}
    features = profiles[trained.feature_columns]
    if trained.target_kind == "curve":
        plist = params_from_curves(trained.predictor.predict(features), trained.curve_clocks, **vkw, **refs)
    else:
        plist = trained.predictor.predict_params(features, **vkw, **refs)
    return dict(zip(profiles[schema.KERNEL], plist, strict=True))


def profiles_of(sweep: pd.DataFrame, feature_columns, table: pd.DataFrame) -> pd.DataFrame:
    """The profiling run of each kernel of a sweep (its reference clocks), as :func:`predict_models` takes."""
    feats = profile_features(sweep, feature_columns, table).reset_index()
    ref = pd.DataFrame(reference_of(table)).rename(columns={
        "reference_sm_clock_mhz": schema.SM_CLOCK_MHZ, "reference_mem_clock_mhz": schema.MEM_CLOCK_MHZ,
        "reference_time_s": schema.TIME_S, "reference_power_w": schema.POWER_W})
    return pd.concat([feats, ref], axis=1)


def fitted_models(table: pd.DataFrame) -> dict:
    """Each kernel's own fitted DVFS model (the floor of any predictor): ``{kernel: DVFSParams}``."""
    knee = float(table.attrs.get("voltage_knee_mhz", np.nan))
    slope = float(table.attrs.get("voltage_slope_per_ghz", np.nan))
    return {k: DVFSParams.from_values(row, voltage_knee_mhz=knee, voltage_slope_per_ghz=slope)
            for k, row in table.iterrows()}


def evaluate_models(sweep: pd.DataFrame, models: dict) -> pd.DataFrame:
    """Time and power MAPE (percent) of each kernel's model over all its measured runs."""
    kernels = list(models)
    t, p = curve_errors(sweep, [models[k] for k in kernels], kernels)
    return pd.DataFrame({"time_mape": t * 100, "power_mape": p * 100}, index=pd.Index(kernels, name=schema.KERNEL))


def best_per_quantity(cv: pd.DataFrame, key: str = "features") -> dict:
    """The CV's best (``key``, candidate) for time and for power separately.

    DSO eq. 1 (power) and eq. 2 (time) share no parameter (§IV-B), and the predictor's time
    and power shares are separate outputs (§IV-D), so each may come from the predictor whose
    grouped CV on the training applications scored that quantity best.

    Parameters
    ----------
    cv : DataFrame
        Cross-validation rows with ``key``, ``candidate``, ``cv_time_mape`` and ``cv_power_mape``
        (:func:`~powermodels.models.dvfs_selection.cross_validate_predictors`, one block per
        feature set).

    Returns
    -------
    dict
        ``{"time": (key value, candidate), "power": (key value, candidate)}``.
    """
    out = {}
    for quantity in ("time", "power"):
        column = f"cv_{quantity}_mape"
        missing = [c for c in (key, "candidate", column) if c not in cv.columns]
        if missing:
            raise ValueError(f"cv: column {missing[0]!r} is missing")
        scores = pd.to_numeric(cv[column], errors="coerce")
        if scores.isna().all():
            raise ValueError(f"cv: column {column!r} has no finite score: no candidate can be chosen for {quantity}")
        best = cv.loc[scores.idxmin()]
        out[quantity] = (best[key], str(best["candidate"]))
    return out


def combine_models(time_models: dict, power_models: dict) -> dict:
    """Per kernel, DSO eq. 2's parameters from ``time_models`` and eq. 1's (and V(f)) from ``power_models``.

    Both are ``{kernel: DVFSParams}`` for the same kernels (e.g. :func:`predict_models` of two
    predictors chosen by :func:`best_per_quantity`).
    """
    missing = sorted(set(power_models) ^ set(time_models))
    if missing:
        raise ValueError(f"combine_models: kernel {missing[0]!r} is in only one of the two model sets")
    return {k: replace(power_models[k], **{name: getattr(time_models[k], name) for name in TIME_PARAMETERS})
            for k in power_models}
