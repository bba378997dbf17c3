"""Fit the thesis calibration from measured tables, and say what the data can identify.

This is the model half of ``powermodels calibrate`` (:mod:`powermodels.workflows.calibrate`
measures; this module only fits, so it runs on any stored table). Three kinds of rows come in,
each a table with :mod:`powermodels.schema` columns and a ``phase``:

``sweep``
    one point per (workload, locked clock): mean power, time per launch, temperature
    (thesis §4.1 and §4.5 — only where the user allowed clock changes);
``ramp``
    points of one workload at one locked clock while the die warms (thesis §4.6);
``natural``
    *natural DVFS*: per-launch time and clock, and per-sensor-update power and clock, recorded
    while the GPU's own power-cap controller moves the clock (no setting changed).

For every workload configuration the fit decides whether power vs clock (eq. 4.1) and time vs
clock (eq. 4.5, and DSO eq. 2) are *identified*: the clocks it ran at must span at least
``min_span_mhz`` over at least ``min_clocks`` distinct clocks. A kernel that never reaches the
power cap runs at one clock, and then its curve is **not fitted**; the result says so and why,
instead of extrapolating a curve through one point. The temperature slope α (eq. 4.6) is fitted
only where the clock is stable (one clock per group) and the temperature moved by at least
``min_temperature_span_c``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import schema
from ..models import (
    DVFSTimeModel,
    FrequencyPowerModel,
    GroupedEstimator,
    RationalTimeModel,
    TemperatureCorrection,
    compare_per_group_vs_global,
)
from ..models.temperature import WeakTemperatureCorrelationWarning
from .held_out_band import held_out_first, validate_band
from .time_curves import clock_points

__all__ = ["PHASES", "Calibration", "fit_calibration", "group_key", "stable_clock_rows"]

#: Kinds of calibration rows (the ``phase`` column).
PHASES = ("sweep", "ramp", "natural")


def group_key(kernel, config) -> str:
    """The per-configuration group of a row: ``"kernel[config]"``, or ``"kernel"`` without one."""
    return f"{kernel}[{config}]" if config not in (None, "") else str(kernel)


@dataclass
class Calibration:
    """A fitted thesis calibration and what it could (not) identify.

    Attributes
    ----------
    power_models : GroupedEstimator or None
        Eq. 4.1 per configuration (groups = :func:`group_key`), fitted to power normalised to
        ``T_ref`` with α (eq. 4.7) when α was identified — otherwise the warming during a sweep
        leaks into the curve; None when no group's power curve was identified.
    power_global : FrequencyPowerModel or None
        Eq. 4.1 pooled over the identified groups.
    time_models : GroupedEstimator or None
        Eq. 4.5 per configuration, fitted to one point per clock step (median time of the
        launches there: :mod:`~powermodels.workflows.time_curves`).
    dvfs_time_models : GroupedEstimator or None
        DSO eq. 2 per configuration (core and memory clock), fitted to the same points.
    temperature : TemperatureCorrection or None
        α (eq. 4.6) pooled within constant-clock groups, with ``T_ref``.
    reference_clock_mhz, reference_temperature_c : float
        Where corrected numbers are reported (eq. 4.2 and 4.7).
    identifiability : DataFrame
        One row per (group, quantity): clock range, distinct clocks, whether fitted, why not.
    comparison : DataFrame
        Per-config vs global cross-validated MAPE (thesis §5.7), for power and time.
    validation : DataFrame
        Held-out clock band per group: time MAPE of eq. 4.5 and DSO eq. 2, the form chosen by
        leave-one-clock-out CV on the training clocks only (``time_form_cv``, its CV MAPE
        ``time_cv_mape_pct``, with the fewest launches a fitted clock point needs,
        ``time_min_launches``) and its held-out MAPE (``time_mape_selected_pct``), energy at the
        band (:mod:`powermodels.workflows.held_out_band`).
    clock_range_mhz, temperature_range_c : tuple of float
        The calibrated ranges (outside them a correction extrapolates).
    """

    power_models: GroupedEstimator | None
    power_global: FrequencyPowerModel | None
    time_models: GroupedEstimator | None
    dvfs_time_models: GroupedEstimator | None
    temperature: TemperatureCorrection | None
    reference_clock_mhz: float
    reference_temperature_c: float
    identifiability: pd.DataFrame
    comparison: pd.DataFrame
    validation: pd.DataFrame
    clock_range_mhz: tuple[float, float]
    temperature_range_c: tuple[float, float]
    notes: list[str] = field(default_factory=list)

    def models(self) -> dict:
        """The fitted estimators as a plain dict (what a calibration file stores)."""
        return {"power": self.power_models, "power_global": self.power_global,
                "time": self.time_models, "dvfs_time": self.dvfs_time_models,
                "temperature": self.temperature}

    def metadata(self) -> dict:
        """JSON-serialisable facts a calibration file carries beside the models."""
        ident = self.identifiability.replace({np.nan: None})
        return {
            "kind": "powermodels-thesis-calibration",
            "reference_clock_mhz": self.reference_clock_mhz,
            "reference_temperature_c": self.reference_temperature_c,
            "clock_range_mhz": list(self.clock_range_mhz),
            "temperature_range_c": list(self.temperature_range_c),
            "identifiability": ident.to_dict(orient="records"),
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------
# Helpers.
# --------------------------------------------------------------------------


def _require(table: pd.DataFrame, name: str, *columns: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"{name}: expected a DataFrame, got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{name}: column {missing[0]!r} is missing (have {list(table.columns)})")


def _groups(table: pd.DataFrame) -> np.ndarray:
    return np.array([group_key(k, c) for k, c in zip(table[schema.KERNEL], table[schema.CONFIG])],
                    dtype=object)


def _clock_support(clocks: np.ndarray, step_mhz: float) -> tuple[float, float, int]:
    clocks = clocks[np.isfinite(clocks)]
    if clocks.size == 0:
        return math.nan, math.nan, 0
    distinct = np.unique(np.round(clocks / step_mhz))
    return float(clocks.min()), float(clocks.max()), int(distinct.size)


def _identified(lo, hi, n, min_span, min_clocks, what: str) -> tuple[bool, str]:
    if n == 0:
        return False, f"no {what} data"
    if n < min_clocks or not hi - lo >= min_span:
        return False, (f"clock range {lo:.0f}–{hi:.0f} MHz ({n} distinct clock{'s' if n != 1 else ''}) "
                       f"is narrower than {min_span:.0f} MHz / {min_clocks} clocks: the {what} "
                       f"curve is not identified (the kernel never moved the clock far enough)")
    return True, ""


# --------------------------------------------------------------------------
# The fit.
# --------------------------------------------------------------------------


def fit_calibration(points: pd.DataFrame | None = None, launches: pd.DataFrame | None = None,
                    samples: pd.DataFrame | None = None, *, reference_clock_mhz: float | None = None,
                    reference_temperature_c: float | None = None, min_span_mhz: float = 150.0,
                    min_clocks: int = 4, min_temperature_span_c: float = 3.0,
                    clock_step_mhz: float = 15.0, holdout_band: tuple[float, float] = (0.4, 0.6),
                    temperature_samples: pd.DataFrame | None = None) -> Calibration:
    """Fit the thesis calibration (eq. 4.1, 4.5, 4.6; DSO eq. 2) to calibration tables.

    Parameters
    ----------
    points : DataFrame, optional
        Sweep and ramp points: ``kernel, config, phase, sm_clock_mhz, mem_clock_mhz,
        temperature_c, power_w, time_s``.
    launches : DataFrame, optional
        Natural-DVFS launches: ``kernel, config, time_s, sm_clock_mhz, mem_clock_mhz,
        temperature_c`` (one row per launch, the clock it ran at).
    samples : DataFrame, optional
        Natural-DVFS power: ``kernel, config, power_w, sm_clock_mhz, temperature_c`` (one row
        per sensor update whose window lay inside the workload's launches).
    reference_clock_mhz : float, optional
        ``f_ref``; default the highest clock in the data.
    reference_temperature_c : float, optional
        ``T_ref``; default the coldest temperature in the data (the thesis' choice).
    min_span_mhz, min_clocks : float, int
        A curve is fitted only over at least this clock span and this many distinct clocks.
    min_temperature_span_c : float
        α is fitted only from groups whose temperature moved by at least this at one clock.
    clock_step_mhz : float
        Clocks closer than this count as one (Hopper: 15 MHz steps).
    holdout_band : (float, float)
        Fraction of each group's clock range held out to validate the time and power models.
    temperature_samples : DataFrame, optional
        Rows α is fitted from (default the ramp points, else ``samples``): ``kernel, config,
        power_w, sm_clock_mhz, temperature_c`` and optionally ``stretch`` (each stretch of
        back-to-back launches is its own group: its own thermal history).

    Returns
    -------
    Calibration
    """
    if points is None and launches is None and samples is None:
        raise ValueError("fit_calibration: no data (points, launches and samples are all None)")
    if not (0 <= holdout_band[0] < holdout_band[1] <= 1):
        raise ValueError(f"holdout_band must be 0 <= lo < hi <= 1, got {holdout_band!r}")
    if not min_clocks >= 2:
        raise ValueError(f"min_clocks must be >= 2, got {min_clocks!r}")
    base = (schema.KERNEL, schema.CONFIG, schema.SM_CLOCK_MHZ, schema.TEMPERATURE_C)
    if points is not None:
        _require(points, "points", *base, schema.CALIBRATION_PHASE, schema.POWER_W, schema.TIME_S,
                 schema.MEM_CLOCK_MHZ)
    if launches is not None:
        _require(launches, "launches", *base, schema.TIME_S, schema.MEM_CLOCK_MHZ)
    if samples is not None:
        _require(samples, "samples", *base, schema.POWER_W)

    sweep = (points.loc[points[schema.CALIBRATION_PHASE] == "sweep"] if points is not None
             else pd.DataFrame(columns=[*base, schema.POWER_W, schema.TIME_S, schema.MEM_CLOCK_MHZ]))
    ramp = (points.loc[points[schema.CALIBRATION_PHASE] == "ramp"] if points is not None
            else sweep.iloc[:0])
    # power vs clock comes from the locked sweep where there is one, else the natural samples
    power_data = sweep if len(sweep) else (samples if samples is not None else sweep)
    time_data = sweep if len(sweep) else (launches if launches is not None else sweep)

    notes: list[str] = []
    ident_rows = []
    all_clocks, all_temps = [], []
    for table in (sweep, ramp, power_data, time_data):
        if len(table):
            all_clocks.append(table[schema.SM_CLOCK_MHZ].to_numpy(float))
            all_temps.append(table[schema.TEMPERATURE_C].to_numpy(float))
    if not all_clocks:
        raise ValueError("fit_calibration: the tables have no rows")
    clocks_all = np.concatenate(all_clocks)
    temps_all = np.concatenate(all_temps)
    f_ref = float(np.nanmax(clocks_all)) if reference_clock_mhz is None else float(reference_clock_mhz)
    if not (np.isfinite(f_ref) and f_ref > 0):
        raise ValueError(f"reference_clock_mhz must be a positive clock, got {reference_clock_mhz!r}")

    # -- temperature slope α (eq. 4.6) at a stable clock, first: the power curves are fitted to
    # power normalised to T_ref, or the warming during a sweep would leak into P(f) -----------
    temperature = None
    t_source = (temperature_samples if temperature_samples is not None
                else ramp if len(ramp) else (samples if samples is not None else ramp))
    t_rows = stable_clock_rows(t_source, clock_step_mhz, min_temperature_span_c)
    no_temperature = not np.isfinite(temps_all).any()
    if no_temperature:  # a recording whose NVML trace was lost: no T_ref, no α
        notes.append("no temperature was recorded: alpha and the reference temperature are unavailable")
    t_ref = (math.nan if no_temperature else float(np.nanmin(temps_all))) if reference_temperature_c is None \
        else float(reference_temperature_c)
    if not (np.isfinite(t_ref) or (no_temperature and reference_temperature_c is None)):
        raise ValueError(f"reference_temperature_c must be finite, got {reference_temperature_c!r}")
    if len(t_rows):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", WeakTemperatureCorrelationWarning)
            temperature = TemperatureCorrection(group_column=schema.GROUP, reference_temperature_c=t_ref).fit(
                t_rows[[schema.POWER_W, schema.TEMPERATURE_C, schema.GROUP]])
        for w in caught:
            notes.append(f"temperature slope: {w.message}")
        ident_rows.append({schema.GROUP: "(all)", "quantity": "temperature",
                           "clock_lo_mhz": float(t_rows[schema.SM_CLOCK_MHZ].min()),
                           "clock_hi_mhz": float(t_rows[schema.SM_CLOCK_MHZ].max()),
                           "distinct_clocks": int(t_rows[schema.GROUP].nunique()), "rows": len(t_rows),
                           "identified": True, "reason": ""})
    else:
        ident_rows.append({schema.GROUP: "(all)", "quantity": "temperature", "clock_lo_mhz": math.nan,
                           "clock_hi_mhz": math.nan, "distinct_clocks": 0, "rows": 0, "identified": False,
                           "reason": f"no group held one clock while its temperature moved by "
                                     f">= {min_temperature_span_c:g} °C: alpha is not identified"})

    if temperature is not None and len(power_data):
        power_data = power_data.copy()
        power_data[schema.POWER_W] = (power_data[schema.POWER_W].to_numpy(float) - temperature.alpha_w_per_c_
                                      * (power_data[schema.TEMPERATURE_C].to_numpy(float) - t_ref))

    # -- power vs clock (eq. 4.1), per group, then global over identified groups ----------------
    pg = _groups(power_data) if len(power_data) else np.array([], dtype=object)
    keep_power = np.zeros(len(power_data), dtype=bool)
    for g in pd.unique(pg):
        m = pg == g
        lo, hi, n = _clock_support(power_data[schema.SM_CLOCK_MHZ].to_numpy(float)[m], clock_step_mhz)
        ok, why = _identified(lo, hi, n, min_span_mhz, min_clocks, "power")
        keep_power |= m if ok else False
        ident_rows.append({schema.GROUP: g, "quantity": "power", "clock_lo_mhz": lo, "clock_hi_mhz": hi,
                           "distinct_clocks": n, "rows": int(m.sum()), "identified": ok, "reason": why})
    power_models = power_global = None
    if keep_power.any():
        X = power_data.loc[keep_power, [schema.SM_CLOCK_MHZ]].reset_index(drop=True)
        y = power_data.loc[keep_power, schema.POWER_W].to_numpy(float)
        power_models = GroupedEstimator(FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ)).fit(
            X, y, groups=pg[keep_power])
        power_global = FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(X, y)

    # -- time vs clock (eq. 4.5 and DSO eq. 2), per group ----------------------------------------
    tg = _groups(time_data) if len(time_data) else np.array([], dtype=object)
    keep_time = np.zeros(len(time_data), dtype=bool)
    validation = []
    for g in pd.unique(tg):
        m = tg == g
        f = time_data[schema.SM_CLOCK_MHZ].to_numpy(float)[m]
        lo, hi, n = _clock_support(f, clock_step_mhz)
        ok, why = _identified(lo, hi, n, min_span_mhz, min_clocks, "time")
        ident_rows.append({schema.GROUP: g, "quantity": "time", "clock_lo_mhz": lo, "clock_hi_mhz": hi,
                           "distinct_clocks": n, "rows": int(m.sum()), "identified": ok, "reason": why})
        if not ok:
            continue
        keep_time |= m
        validation.append(validate_band(time_data.loc[m], power_data.loc[pg == g] if len(pg) else None,
                                         g, holdout_band, clock_step_mhz))
    time_models = dvfs_time_models = None
    if keep_time.any():
        cols = [schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]
        # one point per clock and group, as in the validation (time_curves says why)
        kept = time_data.loc[keep_time].assign(**{schema.GROUP: tg[keep_time]})
        # and only the clock points with the launches the band's CV chose (held_out_band)
        fewest = {r[schema.GROUP]: r.get("time_min_launches", 1) for r in validation}
        per_group = [clock_points(rows, clock_step_mhz).pipe(lambda p, m=fewest.get(g, 1): p.loc[
            p[schema.LAUNCHES] >= (m if m == m else 1)]).assign(**{schema.GROUP: g})
            for g, rows in kept.groupby(schema.GROUP, sort=False)]
        points_all = pd.concat(per_group, ignore_index=True)
        X = points_all[cols]
        y = points_all[schema.TIME_S].to_numpy(float)
        point_groups = points_all[schema.GROUP].to_numpy(object)
        time_models = GroupedEstimator(RationalTimeModel(clock_column=schema.SM_CLOCK_MHZ)).fit(
            X[[schema.SM_CLOCK_MHZ]], y, groups=point_groups)
        if np.isfinite(X[schema.MEM_CLOCK_MHZ].to_numpy(float)).all():
            dvfs_time_models = GroupedEstimator(DVFSTimeModel(clock_column=schema.SM_CLOCK_MHZ,
                                                              memory_clock_column=schema.MEM_CLOCK_MHZ)).fit(
                X, y, groups=point_groups)
        else:
            notes.append("no memory-clock reading: DSO eq. 2 (core and memory clock) is not fitted")

    comparison = _comparison(power_data.loc[keep_power], pg[keep_power], time_data.loc[keep_time],
                             tg[keep_time], clock_step_mhz)
    if not keep_power.any():
        notes.append("no workload's power curve was identified: corrections to another clock are "
                     "unavailable (measure at the clock you report, or allow clock changes)")
    return Calibration(
        power_models=power_models, power_global=power_global, time_models=time_models,
        dvfs_time_models=dvfs_time_models, temperature=temperature,
        reference_clock_mhz=f_ref, reference_temperature_c=t_ref,
        identifiability=pd.DataFrame(ident_rows), comparison=comparison,
        validation=held_out_first(pd.DataFrame(validation)),
        clock_range_mhz=(float(np.nanmin(clocks_all)), float(np.nanmax(clocks_all))),
        temperature_range_c=((math.nan, math.nan) if no_temperature
                             else (float(np.nanmin(temps_all)), float(np.nanmax(temps_all)))),
        notes=notes)


def stable_clock_rows(table, step_mhz: float, min_span_c: float = 3.0) -> pd.DataFrame:
    """Rows of the groups α is fitted on: configuration × clock (× stretch) whose temperature moved
    by at least ``min_span_c`` at one clock, with ≥ 3 rows; ``schema.GROUP`` names each group."""
    if table is None or not len(table):
        return pd.DataFrame(columns=[schema.POWER_W, schema.TEMPERATURE_C, schema.GROUP, schema.SM_CLOCK_MHZ])
    t = table.copy()
    t[schema.GROUP] = [f"{g}@{round(f / step_mhz) * step_mhz:.0f}"
                       for g, f in zip(_groups(t), t[schema.SM_CLOCK_MHZ].to_numpy(float))]
    if schema.STRETCH in t:
        t[schema.GROUP] = [f"{g}#{k}" for g, k in zip(t[schema.GROUP], t[schema.STRETCH])]
    t = t.loc[np.isfinite(t[schema.POWER_W].to_numpy(float)) & np.isfinite(t[schema.TEMPERATURE_C].to_numpy(float))]
    span = t.groupby(schema.GROUP)[schema.TEMPERATURE_C].agg(lambda s: s.max() - s.min())
    size = t.groupby(schema.GROUP).size()
    good = span.index[(span >= min_span_c) & (size >= 3)]
    return t.loc[t[schema.GROUP].isin(good)].reset_index(drop=True)


def _comparison(power_rows, power_groups, time_rows, time_groups, step_mhz) -> pd.DataFrame:
    """Per-config vs global (thesis §5.7) for power and time where ≥ 2 groups are identified."""
    out = []
    for quantity, rows, groups, est, target in (
            ("power", power_rows, power_groups, FrequencyPowerModel(), schema.POWER_W),
            ("time", time_rows, time_groups, RationalTimeModel(), schema.TIME_S)):
        if len(rows) == 0 or np.unique(groups).size < 2:
            continue
        clocks = np.round(rows[schema.SM_CLOCK_MHZ].to_numpy(float) / step_mhz)
        if np.unique(clocks).size < 2:
            continue
        # MAPE is relative already: no per-group rescaling, which would let held-out rows set
        # their own scale; a global time model across kernels of different lengths is poor,
        # and that is the answer the comparison gives
        y = rows[target].to_numpy(float)
        table = compare_per_group_vs_global(est, rows[[schema.SM_CLOCK_MHZ]].to_numpy(float), y,
                                            groups, clocks)
        table.insert(0, "quantity", quantity)
        out.append(table)
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()
