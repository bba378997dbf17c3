"""Power at held-out clocks with the ladder's mixed windows scored too: each load by its own time.

On the real boards of 2026-11-27 (``docs/recordings.md``, "On real boards") an uncapped workload's
probed clock left 1,980 MHz only while it shared time with the capped pressure GEMM: the
gap-free ladder held ~700 W with the mix's clock at 1,596–1,860 MHz, inside the held-out band,
where a mixed window could neither train nor — in
:func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks` alone — be tested. Here a
mixed window is predicted as the sum over its loads of each load's thesis eq. 4.1 power (§4.1.1,
with α's term of eq. 4.6 where the CV chose it) over its own time:

    P̄ = (1 − s_c)·P_static + a·s·mean_s(g(f)) + s_c·P_c(f_c),
    P_c(f_c) = P_static,c + a_c·mean_c(g_c(f)) (+ α_c·(T̄ − T_ref)),

the workload's ``P_static, a, g`` fitted on its own training windows, the companion's
``P_c`` on the *companion's own* windows (pure, outside the band), never on the mixed windows
(the gaps between launches, 1–2 %, count at the workload's ``P_static``, as in a pure window).
Each load keeps its own ``P_static``: a fit over a narrow clock range gives an intercept, not the
chip's static power (−400 to −500 W on the H100 GPU-f73aad1d's windows), so one shared static
term would add one load's intercept to the other's slope (+28–40 % on those mixed windows). The
companion's part is then a known offset (``companion_power_w``): subtracted in the workload's
fit, added in its prediction, so a mixed window in the band is a test window like a pure one
and a mixed window outside it trains.

Two declared bands, reported side by side, never chosen by their score:

* ``fixed``: issue 26's 1,500–1,800 MHz (:data:`~powermodels.natural_dvfs.clock_power.DEFAULT_BAND_MHZ`),
  the figure :func:`~powermodels.natural_dvfs.power_target.power_target` reads;
* ``relative``: per workload, the middle 40–60 % of the workload's own kept counter windows'
  clock range — the rule of the time band (``workflows/held_out_band.py``) — so that both sides
  have training windows.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .. import schema
from ..models.voltage import relative_voltage
from .clock_power import (
    DEFAULT_BAND_MHZ,
    fit_setting,
    idle_arguments,
    power_at_heldout_clocks,
    predict_setting,
    select_setting,
)
from .clock_windows import ClockWindows
from .joint_choice import choose_fit, joint_band

__all__ = ["BAND_RULES", "RELATIVE_BAND", "companion_term", "heldout_power_from_recording", "mix_check",
           "mixed_power_at_heldout_clocks", "relative_band",
           "with_companion_power"]

BAND_RULES = ("fixed", "relative")
#: The relative band's fractions of a workload's clock range (``workflows/held_out_band.py``'s rule).
RELATIVE_BAND = (0.4, 0.6)


def relative_band(cw: ClockWindows, workload: str, band: tuple[float, float] = RELATIVE_BAND) -> tuple[float, float]:
    """The middle ``band`` of ``workload``'s kept counter windows' mean clocks (pure and mixed).

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    workload : str
        Whose windows.
    band : (float, float)
        Fractions of the clock range.

    Returns
    -------
    (float, float)
        ``(lo, hi)`` in MHz; NaN without a kept counter window.
    """
    t = cw.table
    sel = ((t[schema.WORKLOAD] == workload) & t[schema.WINDOW_KEPT] & (t[schema.WINDOW_SOURCE] == "counter")).to_numpy()
    f = t[schema.SM_CLOCK_MHZ].to_numpy(float)[sel]
    if not np.isfinite(f).any():
        return math.nan, math.nan
    f0, f1 = np.nanmin(f), np.nanmax(f)
    return float(f0 + band[0] * (f1 - f0)), float(f0 + band[1] * (f1 - f0))


def companion_term(cw: ClockWindows, rows, params: dict) -> np.ndarray:
    """The companion's eq. 4.1 power over its own time, ``s_c·P_c(f_c)``, in mixed windows ``rows``.

    Parameters
    ----------
    cw : ClockWindows
        The windows (the companion's trajectory over its own time in each mixed window).
    rows : array of int
        Positions in ``cw.table``.
    params : dict
        The companion's own fit (:func:`~powermodels.natural_dvfs.clock_power.fit_setting`).

    Returns
    -------
    ndarray
        W; 0 where a window has no companion time.
    """
    rows = np.asarray(rows)
    knee, slope = params[schema.FIT_KNEE_MHZ], params[schema.FIT_SLOPE_PER_GHZ]
    if params[schema.SETTING_FORM] == "linear":
        def g(f):
            return f
    else:
        def g(f):
            return f * relative_voltage(f, knee, slope) ** 2
    share = cw.table[schema.COMPANION_SHARE].to_numpy(float)[rows]
    mean = np.nan_to_num(cw.mean_of(g, rows, companion=True))
    power = params[schema.FIT_P_STATIC_W] + params[schema.FIT_A_W_PER_MHZ] * mean
    if params[schema.CORRECTION_ALPHA_W_PER_C]:
        temp = cw.table[schema.TEMPERATURE_C].to_numpy(float)[rows]
        power = power + params[schema.CORRECTION_ALPHA_W_PER_C] * (temp - params[schema.REFERENCE_TEMPERATURE_C])
    return np.where(share > 0, share * power, 0.0)



def with_companion_power(cw: ClockWindows, rows, params: dict) -> ClockWindows:
    """``cw`` with the companion's term (:func:`companion_term`) in ``companion_power_w`` of ``rows``.

    Parameters
    ----------
    cw : ClockWindows
        The windows (left as they are).
    rows : array of int
        Positions of the mixed windows in ``cw.table``.
    params : dict
        The companion's own fit (:func:`~powermodels.natural_dvfs.clock_power.fit_setting`).

    Returns
    -------
    ClockWindows
        A copy whose other rows have no companion term (NaN), so the fits leave them as they were.
    """
    table = cw.table.copy()
    table[schema.COMPANION_POWER_W] = np.nan
    table.iloc[rows, table.columns.get_loc(schema.COMPANION_POWER_W)] = companion_term(cw, rows, params)
    return dataclasses.replace(cw, table=table)

def _companion_fit(cw: ClockWindows, companion: str, lo: float, hi: float, *, alpha, t_ref, idle,
                   max_band_share, min_train, bin_mhz, extrapolation_rules):
    """The companion's own eq. 4.1 fit on its pure windows outside ``[lo, hi]``, or a reason why not."""
    t = cw.table
    f = t[schema.SM_CLOCK_MHZ].to_numpy(float)
    pure = t[schema.COMPANION_SHARE].to_numpy(float) <= 0
    temp_ok = np.isfinite(t[schema.TEMPERATURE_C].to_numpy(float)) | ~np.isfinite(alpha)
    sel = ((t[schema.WORKLOAD] == companion).to_numpy() & t[schema.WINDOW_KEPT].to_numpy(bool) & pure & temp_ok
           & ~((f >= lo) & (f <= hi)) & (cw.band_share(lo, hi) <= max_band_share))
    rows = np.flatnonzero(sel)
    n_counter = int((t[schema.WINDOW_SOURCE].to_numpy(object)[rows] == "counter").sum())
    if n_counter < min_train:
        return None, f"the companion {companion} has {n_counter} own training counter window(s) (< {min_train})"
    setting, _, _ = select_setting(cw, rows, alpha_w_per_c=alpha, reference_temperature_c=t_ref, bin_mhz=bin_mhz,
                                   band_mhz=(lo, hi), extrapolation_rules=extrapolation_rules, **idle)
    params = fit_setting(cw, rows, setting, alpha_w_per_c=alpha, reference_temperature_c=t_ref,
                         knee_floor_mhz=lo if extrapolation_rules else math.nan, bound_p_static=extrapolation_rules,
                         **idle)
    return params, ""


def mixed_power_at_heldout_clocks(cw: ClockWindows, companion_of: dict | None = None, *, band_rule: str = "fixed",
                                  band_mhz: tuple[float, float] = DEFAULT_BAND_MHZ,
                                  relative: tuple[float, float] = RELATIVE_BAND,
                                  alpha_w_per_c: float | None = None, reference_temperature_c: float | None = None,
                                  idle_w: float | None = None, idle_temperature_c: float | None = None,
                                  max_band_share: float = 0.0, min_train: int = 6,
                                  bin_mhz: float = 50.0, extrapolation_rules: bool = False,
                                  joint_fit: bool = False) -> pd.DataFrame:
    """Per workload: held-out power at a clock band, mixed windows predicted load by load.

    Parameters
    ----------
    cw : ClockWindows
        :func:`~powermodels.natural_dvfs.clock_windows.clock_windows` of a recording.
    companion_of : dict of str to str, optional
        Per workload with a ladder, the one load sharing its mixed windows
        (:func:`~powermodels.natural_dvfs.ladder_windows.companions`). Without it (or without
        enough of the companion's own training windows) the workload's mixed windows are
        handled as in :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`
        (a free ``a_c``, never tested).
    band_rule : {"fixed", "relative"}
        ``fixed``: ``band_mhz`` for every workload; ``relative``: the middle ``relative`` fractions
        of each workload's own window-clock range (:func:`relative_band`).
    band_mhz, relative : (float, float)
        The two rules' bands.
    alpha_w_per_c, reference_temperature_c, idle_w, idle_temperature_c : float, optional
        As :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`.
    max_band_share, min_train, bin_mhz, extrapolation_rules
        As :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`; the companion's
        fit takes the same limits and rules (``extrapolation_rules``: opt-in, off by default).
    joint_fit : bool, default=False
        Also score the fit over every load with the board's voltage curve shared
        (:mod:`~powermodels.natural_dvfs.joint_power`) and take it for a load where its CV on
        the training windows beats the load's own fit's (``power_fit_cv``; both fits' CV and
        held-out figures stay in the row). Not with ``extrapolation_rules``. Opt-in: on seven real
        ladder recordings it made 12 of 28 held-out cells worse and 8 better (the module
        :mod:`~powermodels.natural_dvfs.joint_power`).

    Returns
    -------
    DataFrame
        :func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`' columns, one row
        per workload (the held-out figure first), with ``band_rule`` and ``companion_workload``;
        ``test_mixed`` counts the mixed test windows.
    """
    if band_rule not in BAND_RULES:
        raise ValueError(f"band_rule must be one of {BAND_RULES}, got {band_rule!r}")
    companion_of = companion_of or {}
    alpha = math.nan if alpha_w_per_c is None or reference_temperature_c is None else float(alpha_w_per_c)
    t_ref = math.nan if reference_temperature_c is None else float(reference_temperature_c)
    idle = idle_arguments(idle_w, idle_temperature_c)
    t = cw.table
    if not len(t):
        return pd.DataFrame()
    mixed = (t[schema.COMPANION_SHARE].to_numpy(float) > 0) & t[schema.WINDOW_KEPT].to_numpy(bool)
    fits, joint, out = {}, {}, []
    for w in pd.unique(t[schema.WORKLOAD]):
        lo, hi = band_mhz if band_rule == "fixed" else relative_band(cw, w, relative)
        head = {schema.WORKLOAD: w, schema.BAND_RULE: band_rule, schema.COMPANION_WORKLOAD: companion_of.get(w, "")}
        if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
            out.append({**head, schema.BAND_LO_MHZ: lo, schema.BAND_HI_MHZ: hi, schema.POWER_MAPE_PCT: math.nan,
                        schema.TEST_WINDOWS: 0, schema.NOTE: "no clock range to place a band in"})
            continue
        rows_mixed = np.flatnonzero(mixed & (t[schema.WORKLOAD] == w).to_numpy())
        view, note = cw, ""
        if rows_mixed.size and head[schema.COMPANION_WORKLOAD]:
            key = (head[schema.COMPANION_WORKLOAD], lo, hi)
            if key not in fits:  # the companion fitted once per band, on its own windows outside it
                fits[key] = _companion_fit(cw, key[0], lo, hi, alpha=alpha, t_ref=t_ref, idle=idle,
                                           max_band_share=max_band_share, min_train=min_train, bin_mhz=bin_mhz,
                                           extrapolation_rules=extrapolation_rules)
            params_c, note = fits[key]
            if params_c is not None:
                view = with_companion_power(cw, rows_mixed, params_c)
        r = power_at_heldout_clocks(view, band_mhz=(lo, hi), alpha_w_per_c=alpha_w_per_c,
                                    reference_temperature_c=reference_temperature_c, max_band_share=max_band_share,
                                    min_train=min_train, bin_mhz=bin_mhz, workloads=[w],
                                    extrapolation_rules=extrapolation_rules, **idle)
        row = {**head, **r.iloc[0].to_dict()}
        if joint_fit and not extrapolation_rules:
            if (lo, hi) not in joint:  # one joint CV per band, every load's training windows
                joint[lo, hi] = joint_band(cw, companion_of, (lo, hi), alpha_w_per_c=alpha, reference_temperature_c=t_ref,
                                           max_band_share=max_band_share, min_train=min_train, bin_mhz=bin_mhz)
            row = choose_fit(row, cw, companion_of, joint[lo, hi])
        if note:
            row[schema.NOTE] = "; ".join(x for x in (row[schema.NOTE], note + ": its mixed windows are not tested") if x)
        out.append(row)
    return pd.DataFrame(out)


def mix_check(cw: ClockWindows, companion_of: dict, *, idle_w: float | None = None,
              idle_temperature_c: float | None = None, bin_mhz: float = 50.0,
              alpha_w_per_c: float | None = None, reference_temperature_c: float | None = None) -> pd.DataFrame:
    """Does a mixed window draw the sum of its loads' power? An in-sample check, not a held-out figure.

    Each load is fitted (setting by :func:`~powermodels.natural_dvfs.clock_power.select_setting`'s
    CV; no temperature term unless α is given) on *all* its own pure kept windows, the mixed windows predicted as in
    :func:`mixed_power_at_heldout_clocks`, and their error set beside the pure windows' in-sample
    scatter: a mixed error well beyond that scatter says the sum over the loads' time misses.

    Parameters
    ----------
    cw : ClockWindows
        The windows.
    companion_of : dict of str to str
        Per workload with a ladder, its companion load.
    idle_w, idle_temperature_c : float, optional
        Measured idle power and its temperature (the CV may hold ``P_static`` there).
    bin_mhz : float
        CV fold width.
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock and ``T_ref``: the CV may then choose α's term (eq. 4.6). The mixed
        windows run at the cap, 8–14 °C above the pure uncapped ones on the H100s of 2026-11-27/28,
        3–4 % of their power at α ≈ 1.5–2 W/°C.

    Returns
    -------
    DataFrame
        One row per workload with a companion: ``pure_windows``, ``pure_err_median_pct``,
        ``pure_err_sd_pct``, ``mixed_windows``, ``mixed_err_median_pct``, ``mixed_err_sd_pct``,
        ``mixed_mape_pct``, ``mixed_err_by_share`` (signed errors: predicted − measured);
        ``attrs["windows"]``: every window's signed error (``workload``, ``companion_share``, 0 for
        a pure window, ``window_err_pct``), for a plot.
    """
    t = cw.table
    idle = idle_arguments(idle_w, idle_temperature_c)
    y = t[schema.POWER_W].to_numpy(float)
    base = t[schema.WINDOW_KEPT].to_numpy(bool)
    counter = (t[schema.WINDOW_SOURCE] == "counter").to_numpy()
    share = t[schema.COMPANION_SHARE].to_numpy(float)

    alpha = math.nan if alpha_w_per_c is None or reference_temperature_c is None else float(alpha_w_per_c)
    t_ref = math.nan if reference_temperature_c is None else float(reference_temperature_c)
    temp_ok = np.isfinite(t[schema.TEMPERATURE_C].to_numpy(float)) | ~np.isfinite(alpha)
    base = base & temp_ok

    def fit(w):
        rows = np.flatnonzero(base & (t[schema.WORKLOAD] == w).to_numpy() & (share <= 0))
        setting, _, _ = select_setting(cw, rows, bin_mhz=bin_mhz, alpha_w_per_c=alpha,
                                       reference_temperature_c=t_ref, **idle)
        return rows[counter[rows]], fit_setting(cw, rows, setting, alpha_w_per_c=alpha,
                                                reference_temperature_c=t_ref, **idle)

    out, windows = [], []
    for w, c in companion_of.items():
        mixed = np.flatnonzero(base & counter & (t[schema.WORKLOAD] == w).to_numpy() & (share > 0))
        if not mixed.size:
            continue
        pure, own = fit(w)
        _, comp = fit(c)
        e_pure = 100 * (predict_setting(cw, pure, own) - y[pure]) / y[pure]
        e_mix = 100 * (predict_setting(with_companion_power(cw, mixed, comp), mixed, own) - y[mixed]) / y[mixed]
        by = np.round(share[mixed], 1)
        windows.append(pd.DataFrame({schema.WORKLOAD: w, schema.COMPANION_SHARE: np.r_[share[pure], share[mixed]],
                                     schema.WINDOW_ERR_PCT: np.r_[e_pure, e_mix]}))
        out.append({schema.WORKLOAD: w, schema.COMPANION_WORKLOAD: c, schema.PURE_WINDOWS: int(pure.size),
                    schema.PURE_ERR_MEDIAN_PCT: float(np.median(e_pure)), schema.PURE_ERR_SD_PCT: float(np.std(e_pure)),
                    schema.MIXED_WINDOWS: int(mixed.size), schema.MIXED_ERR_MEDIAN_PCT: float(np.median(e_mix)),
                    schema.MIXED_ERR_SD_PCT: float(np.std(e_mix)), schema.MIXED_MAPE_PCT: float(np.mean(np.abs(e_mix))),
                    schema.MIXED_ERR_BY_SHARE: ", ".join(f"{k:.1f}: {np.median(e_mix[by == k]):+.1f} % ({int((by == k).sum())})"
                                                         for k in np.unique(by))})
    table = pd.DataFrame(out)
    table.attrs["windows"] = pd.concat(windows, ignore_index=True) if windows else pd.DataFrame()
    return table


#: how the findings name the opt-in extrapolation rules when they were on
_RULES_WORDS = ("; with the opt-in extrapolation rules: P_static within 0 … the idle power, CV folds towards "
                "the band, the v2f knee down to the band's low edge")


def _figures(table: pd.DataFrame) -> str:
    done = table.loc[np.isfinite(table[schema.POWER_MAPE_PCT].to_numpy(float))]
    return ", ".join(f"{r[schema.WORKLOAD]} {r[schema.POWER_MAPE_PCT]:.2f} % ({r[schema.TEST_WINDOWS]} windows, "
                     f"{r[schema.TEST_MIXED]} mixed; band {r[schema.BAND_LO_MHZ]:.0f}–{r[schema.BAND_HI_MHZ]:.0f} MHz)"
                     for _, r in done.iterrows()) or "none"


def heldout_power_from_recording(recording, clocks: pd.DataFrame, *, alpha_w_per_c: float | None = None,
                                 reference_temperature_c: float | None = None,
                                 band_mhz: tuple[float, float] = DEFAULT_BAND_MHZ,
                                 extrapolation_rules: bool = False, joint_fit: bool = False
                                 ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """:func:`mixed_power_at_heldout_clocks` on a recording, both bands, and what it found in words.

    Builds the windows (:func:`~powermodels.natural_dvfs.clock_windows.clock_windows`), the
    ladder's companions (:func:`~powermodels.natural_dvfs.ladder_windows.companions`), measures
    the idle power and checks whether the pressure load's power is pinned over a counter window
    (:func:`~powermodels.natural_dvfs.clock_windows.pressure_power`).

    Parameters
    ----------
    recording : Recording
        A raw recording (:func:`powermodels.recording.read_recording`).
    clocks : DataFrame
        :func:`~powermodels.natural_dvfs.launch_clocks.attribute_clocks` of the recording.
    alpha_w_per_c, reference_temperature_c : float, optional
        α at constant clock and ``T_ref``.
    band_mhz : (float, float)
        The fixed held-out band (the issue's figure).
    extrapolation_rules : bool, default=False
        The three opt-in rules for a band outside the training clocks
        (:func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`; off by default:
        on the seven real ladder recordings they made 15 of 21 cells worse).
    joint_fit : bool, default=False
        The opt-in joint fit (:func:`mixed_power_at_heldout_clocks`).

    Returns
    -------
    (DataFrame, DataFrame, list of str)
        The fixed band's per-workload table, the relative band's, and the findings for the report.
    """
    from .clock_windows import clock_windows, idle_power, pressure_power
    from .ladder_windows import companions

    cw = clock_windows(recording, clocks)
    idle_w, idle_t = idle_power(recording)
    names = pd.unique(clocks[schema.WORKLOAD])
    companion_of = {w: c[2][0] for w, c in companions(recording, names).items() if len(c[2]) == 1}
    kw = dict(alpha_w_per_c=alpha_w_per_c, reference_temperature_c=reference_temperature_c, idle_w=idle_w,
              idle_temperature_c=idle_t, extrapolation_rules=extrapolation_rules, joint_fit=joint_fit)
    fixed = mixed_power_at_heldout_clocks(cw, companion_of, band_rule="fixed", band_mhz=band_mhz, **kw)
    rel = mixed_power_at_heldout_clocks(cw, companion_of, band_rule="relative", **kw)
    lines = []
    pp = pressure_power(recording)
    if len(pp):
        p = pp[schema.POWER_W].to_numpy(float)
        lo5, hi95 = np.percentile(p, [5, 95])
        lines.append(f"pressure load over {p.size} counter windows (after its first second): "
                     f"{np.median(p):.0f} W median, {lo5:.0f}–{hi95:.0f} W (5–95 %): the pressure's share of a "
                     f"window straddling its end is known only to about ±{(hi95 - lo5) / 2:.0f} W, so such "
                     "windows are dropped, not split.")
    if len(fixed):
        lines.append(f"power at held-out clocks {band_mhz[0]:.0f}–{band_mhz[1]:.0f} MHz (counter windows, "
                     "thesis eq. 4.1 over each window's probed clock trajectory — a mixed window as each load's "
                     "term over its own time, the companion fitted on its own windows —, setting chosen by CV on "
                     f"the training clocks{_RULES_WORDS if extrapolation_rules else ''}): {_figures(fixed)}. Second declared band, per workload the middle "
                     f"{100 * RELATIVE_BAND[0]:.0f}–{100 * RELATIVE_BAND[1]:.0f} % of its own window-clock range "
                     f"(not the issue's figure): {_figures(rel)}.")
    return fixed, rel, lines
