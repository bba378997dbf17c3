"""The setting of an eq. 4.1 fit chosen by cross-validation on the training clocks only.

:func:`select_setting` scores every setting of :func:`~powermodels.natural_dvfs.power_fit.fit_setting`
— form (``linear``, ``v2f``), temperature term (``alpha``, ``none``), windows fitted (``counter``,
``counter+instant``) and ``P_static`` (``free``, ``idle``) — on folds of the training windows'
mean clock, and returns the best. By default the folds are leave-one-bin-out — each ``bin_mhz``
bin predicted from a fit on every other bin — wherever the band lies, as before session 9.

With ``extrapolation_rules`` (opt-in, **off by default**: with the two rules of
:func:`~powermodels.natural_dvfs.power_fit.fit_setting` it made 15 of 21 held-out cells worse on
the seven real ladder recordings, docs/calibration.md "Extrapolating to the band") the folds
follow where the model is to be used, and every fit holds ``P_static`` within its physical range
and lets the ``v2f`` knee reach down to the band's low edge:

* **The band inside the training clocks** (windows on both sides of it): leave-one-bin-out, i.e.
  interpolation, as the band asks.
* **The band outside them** (every training window above it, as the uncapped workloads on the
  real boards of 2026-11-27, whose windows stay at 1,800–2,000 MHz; or every one below it, as the
  capped pressure GEMM): **towards the band**. The bins are ordered by their distance from the
  band, and each bin but the two farthest is predicted from a fit on the bins *farther* from the
  band than it only (never on those between it and the band), so every fold's error is an
  extrapolation in the direction the band lies. Leave-one-bin-out there scores interpolation,
  which the band never asks for: inside a 200 MHz range a free intercept predicts each interior
  bin from its neighbours, while the band is 300 MHz away (the H100 GPU-a8fc3d71's FMA loop: its
  free linear fit was chosen, and extrapolated to the band it missed by 17.8 %). Folds towards
  the band still extrapolate less far than the band does — a 200 MHz range gives folds 50–150 MHz
  out —, which is why ``P_static`` is also held to its physical range
  (:func:`~powermodels.natural_dvfs.power_fit.p_static_bounds`).

The rules are written from the geometry of training windows and band and from eq. 4.1's
physics, and neither reads a held-out window: the band's windows are never among the rows given.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema
from .clock_windows import ClockWindows
from .power_fit import FORMS, SOURCES, STATICS, TEMPERATURES, fit_setting, mape_pct, predict_setting

__all__ = ["CV_FOLDS", "extrapolation_side", "select_setting"]

#: How the CV's folds were formed: leave-one-bin-out, or towards a band below / above the training clocks.
CV_FOLDS = ("leave-one-bin-out", "towards the band below", "towards the band above")


def _settings(alpha_w_per_c: float, has_instant: bool, idle_w: float, idle_temperature_c: float) -> list[dict]:
    temps = TEMPERATURES if np.isfinite(alpha_w_per_c) else ("none",)
    sources = SOURCES if has_instant else ("counter",)
    statics = STATICS if np.isfinite(idle_w) else ("free",)
    # the idle power moves to T_ref with α only at a known idle temperature
    return [{schema.SETTING_FORM: f, schema.SETTING_TEMPERATURE: t, schema.SETTING_SOURCES: s, schema.SETTING_P_STATIC: p}
            for f in FORMS for t in temps for s in sources for p in statics
            if not (p == "idle" and t == "alpha" and not np.isfinite(idle_temperature_c))]


def _instant_offset(cw: ClockWindows, train, params: dict) -> float:
    """The instant field's offset from the counter: fitted, else the median training residual."""
    if params[schema.INSTANT_OFFSET_W] or params[schema.SETTING_SOURCES] != "counter":
        return params[schema.INSTANT_OFFSET_W]
    inst = train[(cw.table[schema.WINDOW_SOURCE].to_numpy(object)[train] == "instant")]
    if not inst.size:
        return 0.0
    return float(np.median(cw.table[schema.POWER_W].to_numpy(float)[inst] - predict_setting(cw, inst, params)))


def extrapolation_side(clocks_mhz, band_mhz: tuple[float, float] | None) -> str:
    """Where the band lies from the training windows' mean clocks: below, above, or neither.

    Parameters
    ----------
    clocks_mhz : array of float
        The training windows' mean clocks (MHz).
    band_mhz : (float, float) or None
        The held-out band.

    Returns
    -------
    str
        ``"below"`` when every training clock lies above the band, ``"above"`` when every one
        lies below it, else ``""`` (inside, or no band given).
    """
    f = np.asarray(clocks_mhz, float)
    f = f[np.isfinite(f)]
    if band_mhz is None or not f.size:
        return ""
    lo, hi = float(band_mhz[0]), float(band_mhz[1])
    if np.all(f > hi):
        return "below"
    if np.all(f < lo):
        return "above"
    return ""


def _folds(bins: np.ndarray, side: str) -> list[tuple[np.ndarray, np.ndarray]]:
    """(train, test) masks: leave-one-bin-out, or each bin but the two farthest from the band
    predicted from the bins farther from it."""
    folds = np.unique(bins)
    if not side:
        return [(bins != b, bins == b) for b in folds]
    near_first = folds if side == "below" else folds[::-1]
    out = []
    for b in near_first[:-2]:
        farther = bins > b if side == "below" else bins < b
        out.append((farther, bins == b))
    return out


def select_setting(cw: ClockWindows, rows, *, alpha_w_per_c: float = math.nan,
                   reference_temperature_c: float = math.nan, idle_w: float = math.nan,
                   idle_temperature_c: float = math.nan, bin_mhz: float = 50.0,
                   min_folds: int = 3, band_mhz: tuple[float, float] | None = None,
                   extrapolation_rules: bool = False) -> tuple[dict, float, pd.DataFrame]:
    """Choose the setting by CV over clock bins of windows ``rows`` (training clocks only).

    Folds are ``bin_mhz`` bins of the windows' mean clock: leave-one-bin-out, or, with
    ``extrapolation_rules`` and ``band_mhz`` outside every training window's clock, towards the
    band (the module's docstring: each bin but the two farthest from the band predicted from the
    bins farther from it). Each fold's windows — counter windows and instant readings, the latter with the instant
    field's offset (fitted, or the median residual of the training readings for a counter-only
    fit) — are predicted by a fit on its training bins, and each fold's MAPE counts once: the many
    windows at the highest clock do not outweigh the few below it, and the instant readings,
    which reach the lowest clocks of each recovery, let the CV see the curve's shape there.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    rows : array of int
        Positions in ``cw.table`` of the training windows (never the held-out band's).
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock and ``T_ref``; without them only ``temperature="none"`` is tried.
    idle_w, idle_temperature_c : float, optional
        Measured idle power and its temperature; without them ``P_static`` is always fitted
        (with ``extrapolation_rules`` held ≥ 0 only).
    bin_mhz : float, default=50
        Width of a bin (the windows' mean clock).
    min_folds : int, default=3
        Fewest bins for a CV.
    band_mhz : (float, float), optional
        The band the fit is for; read only with ``extrapolation_rules``.
    extrapolation_rules : bool, default=False
        Opt-in (the module's docstring says why it is off by default): folds towards ``band_mhz``
        where it lies outside the training clocks (leave-one-bin-out otherwise, or without a
        band), and every fit with ``bound_p_static`` and the band's low edge as
        ``knee_floor_mhz`` (:func:`~powermodels.natural_dvfs.power_fit.fit_setting`), as in the
        final fit. Off: leave-one-bin-out, ``P_static`` unbounded, the knee within the training clocks.

    Returns
    -------
    (dict, float, DataFrame)
        The chosen setting, its CV MAPE (%), and every setting's CV MAPE (with ``cv_folds``). With
        fewer than ``min_folds`` bins the first setting (linear, α where known, counter, P_static
        free) is returned with a NaN score.
    """
    rows = np.asarray(rows)
    t = cw.table.iloc[rows]
    counter = (t[schema.WINDOW_SOURCE] == "counter").to_numpy()
    instant = ~counter
    f = t[schema.SM_CLOCK_MHZ].to_numpy(float)
    bins = np.floor(f / bin_mhz)
    side = extrapolation_side(f, band_mhz) if extrapolation_rules else ""
    settings = _settings(alpha_w_per_c, bool(instant.any()), idle_w, idle_temperature_c)
    if np.unique(bins).size < min_folds:
        return settings[0], math.nan, pd.DataFrame()
    if not counter.any():
        raise ValueError(f"select_setting: none of the {rows.size} window(s) given is a counter window "
                         f"({schema.WINDOW_SOURCE}): no fold can be fitted")
    folds = _folds(bins, side)
    # as the final fit's (fit_setting)
    knee_floor = float(band_mhz[0]) if extrapolation_rules and band_mhz is not None else math.nan
    y_all = cw.table[schema.POWER_W].to_numpy(float)
    scores = []
    for s in settings:
        fold_mape = []
        for in_train, in_test in folds:
            train, test = rows[in_train], rows[in_test]
            if not counter[in_train].any():
                continue
            params = fit_setting(cw, train, s, alpha_w_per_c=alpha_w_per_c,
                                 reference_temperature_c=reference_temperature_c, idle_w=idle_w,
                                 idle_temperature_c=idle_temperature_c, knee_floor_mhz=knee_floor,
                                 bound_p_static=extrapolation_rules)
            pred = predict_setting(cw, test, params) + instant[in_test] * _instant_offset(cw, train, params)
            fold_mape.append(mape_pct(y_all[test], pred))
        scores.append({**s, schema.CV_MAPE_PCT: float(np.mean(fold_mape)) if fold_mape else math.nan,
                       schema.CV_FOLDS: CV_FOLDS[{"": 0, "below": 1, "above": 2}[side]]})
    table = pd.DataFrame(scores)
    if not np.isfinite(table[schema.CV_MAPE_PCT].to_numpy(float)).any():
        return settings[0], math.nan, table
    best = int(np.nanargmin(table[schema.CV_MAPE_PCT].to_numpy(float)))
    return settings[best], float(table[schema.CV_MAPE_PCT].iloc[best]), table
