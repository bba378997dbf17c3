"""The ``powermodels calibrate`` report: markdown tables and plots of the fits.

``report.md`` holds what was identified (and why not), the fitted parameters, the held-out clock
band validation, the per-config vs global comparison (thesis §5.7) and the temperature slope;
``power_vs_clock.png``, ``time_vs_clock.png`` and ``temperature_slope.png`` show the data with
the fitted curves (with matplotlib; without it the report says so). The measured tables are
written beside it as parquet, so the fit can be redone without the GPU.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from ..natural_dvfs.power_target import power_target, power_target_line
from ..reporting import markdown_table
from .calibrate import CalibrationRun
from .calibration_fit import group_key

__all__ = ["write_report"]


def _power_rows(run: CalibrationRun) -> pd.DataFrame:
    if len(run.points):
        return run.points.loc[run.points[schema.CALIBRATION_PHASE] == "sweep"]
    return run.samples


def _time_rows(run: CalibrationRun) -> pd.DataFrame:
    if len(run.points):
        return run.points.loc[run.points[schema.CALIBRATION_PHASE] == "sweep"]
    return run.launches


def _parameters(run: CalibrationRun) -> pd.DataFrame:
    cal = run.calibration
    rows = []
    for name, grouped in (("power (eq. 4.1)", cal.power_models), ("time (eq. 4.5)", cal.time_models),
                          ("time (DSO eq. 2)", cal.dvfs_time_models)):
        if grouped is None:
            continue
        for g, est in grouped.estimators_.items():
            if hasattr(est, "p_static_w_"):
                text = (f"P_static={est.p_static_w_:.1f} W, a={est.a_:.4g} W/MHz, knee={est.knee_mhz_:.0f} MHz, "
                        f"rmse={est.rmse_w_:.2f} W")
            elif hasattr(est, "b_"):
                text = f"a={est.a_:.4g}, b={est.b_:.3g}/MHz, c={est.c_:.4g}, d={est.d_:.3g}/MHz, rmse={est.rmse_:.3g} s"
            else:
                text = f"t0={est.t0_:.3g} s, alpha={est.alpha_:.4g} s·MHz, beta={est.beta_:.4g} s·MHz"
            rows.append({"model": name, schema.GROUP: g, "parameters": text})
    return pd.DataFrame(rows)


def write_report(run: CalibrationRun, out_dir, *, plots: bool = True) -> Path:
    """Write ``report.md``, the measured tables and (with matplotlib) the plots into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cal = run.calibration
    for name, table in (("points", run.points), ("launches", run.launches), ("samples", run.samples)):
        if len(table):
            table.to_parquet(out / f"{name}.parquet", index=False)
    lines = [f"# Calibration on {run.device.get('device')}", "",
             f"Reference clock {cal.reference_clock_mhz:.0f} MHz, reference temperature "
             f"{cal.reference_temperature_c:.1f} °C; calibrated clocks {cal.clock_range_mhz[0]:.0f}–"
             f"{cal.clock_range_mhz[1]:.0f} MHz, temperatures {cal.temperature_range_c[0]:.1f}–"
             f"{cal.temperature_range_c[1]:.1f} °C.", "",
             *(["## What this recording can and cannot identify", "", *[f"- {x}" for x in run.findings], ""]
               if run.findings else []),
             *(["## The clock of each launch", "",
                "Timed batches per workload and clock source: kept for the fits (their clock is known) "
                "or dropped, with the main reason.", "", markdown_table(run.clocks, float_format=".0f"), ""]
               if len(run.clocks) else []),
             "## What the data identify", "",
             markdown_table(cal.identifiability, float_format=".0f"), ""]
    params = _parameters(run)
    if len(params):
        lines += ["## Fitted models", "", markdown_table(params), ""]
    if len(cal.validation):
        lines += ["## Held-out clock band", "",
                  "Each configuration's time and power models refitted without the middle of its clock "
                  "range and scored there (MAPE %; train_rows/test_rows: launches, power_test_rows: power "
                  "samples in the band). Time curves are fitted to one point per clock step; "
                  "time_form_cv is the form (eq. 4.5 'rational' or DSO eq. 2 'dso') chosen by "
                  "leave-one-clock-out CV on the training clocks only (time_cv_mape_pct), with "
                  "the fewest launches a fitted clock point needs (time_min_launches), "
                  "time_mape_selected_pct its held-out MAPE; energy = fitted power × the chosen time "
                  "form at the band's clocks vs measured."
                  + (" Its power columns score the constant-clock counter blocks inside this band; the "
                     "held-out power target is the next section's (counter windows in a fixed band)."
                     if len(run.power_clock) else ""), "", markdown_table(cal.validation, float_format=".3g"), ""]
    if len(run.power_clock):
        lines += ["## Power at held-out clocks (windows with a moving clock)", "",
                  "Thesis eq. 4.1 fitted on energy-counter windows (and, where the CV chose them, instant "
                  "readings) over each window's probed clock trajectory, without the windows whose mean clock "
                  "lies in the band or that spend any time in it; power_mape_pct: the counter windows in the band "
                  "(held out), first. A window shared with the ladder's pressure load (mixed) is predicted as each "
                  "load's eq. 4.1 power over its own time, the companion fitted on its own windows outside the "
                  "band: it is a test window in the band (test_mixed) and a training window outside it "
                  "(train_mixed). form/temperature/sources/p_static were chosen by leave-one-clock-bin-out CV on "
                  "the training windows only (cv_mape_pct). Windows overlapping a pressure phase are dropped "
                  "(dropped_pressure).", "", "**Issue 26's figure, fixed band:**", "",
                  power_target_line(power_target(run.power_clock)), "",
                  markdown_table(run.power_clock, float_format=".3g"), ""]
    if len(run.power_clock_relative):
        lines += ["**Second declared figure, a band per workload** (the middle 40–60 % of the workload's own "
                  "window-clock range, the time band's rule; declared before its score, not the issue's "
                  "target):", "", markdown_table(run.power_clock_relative, float_format=".3g"), ""]
    if len(cal.comparison):
        lines += ["## Per-config vs global (thesis §5.7)", "", markdown_table(cal.comparison, float_format=".3g"), ""]
    if cal.temperature is not None:
        t = cal.temperature
        lines += ["## Temperature slope (eq. 4.6)", "",
                  f"alpha = {t.alpha_w_per_c_:.3f} W/°C, 95 % CI [{t.alpha_ci_w_per_c_[0]:.3f}, "
                  f"{t.alpha_ci_w_per_c_[1]:.3f}], r = {t.correlation_:.3f}, over {t.n_groups_} constant-clock "
                  "group(s).", ""]
    if cal.notes:
        lines += ["## Notes", "", *[f"- {n}" for n in cal.notes], ""]
    if plots:
        try:
            _plots(run, out)
            lines += ["![power vs clock](power_vs_clock.png)", "", "![time vs clock](time_vs_clock.png)", ""]
            if cal.temperature is not None:
                lines += ["![temperature slope](temperature_slope.png)", ""]
        except ImportError:
            lines += ["(matplotlib is not installed: no plots; `pip install powermodels[plot]`)", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path


def _plots(run: CalibrationRun, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cal = run.calibration
    power_rows, power_label = _power_rows(run), "power (W)"
    if cal.temperature is not None and power_rows is not None and len(power_rows):
        # the curves were fitted to power at T_ref (eq. 4.7): show the data the same way
        power_rows = power_rows.copy()
        power_rows[schema.POWER_W] = power_rows[schema.POWER_W] - cal.temperature.alpha_w_per_c_ * (
            power_rows[schema.TEMPERATURE_C] - cal.reference_temperature_c)
        power_label = f"power at {cal.reference_temperature_c:.0f} °C (W)"
    for name, rows, target, grouped, ylabel, scale in (
            ("power_vs_clock", power_rows, schema.POWER_W, cal.power_models, power_label, 1.0),
            ("time_vs_clock", _time_rows(run), schema.TIME_S, cal.time_models, "time per launch (ms)", 1e3)):
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
        if rows is not None and len(rows):
            for (k, c), g in rows.groupby([schema.KERNEL, schema.CONFIG], sort=False):
                key = group_key(k, c)
                pts = ax.plot(g[schema.SM_CLOCK_MHZ], g[target] * scale, "o" if len(g) < 50 else ".",
                              ms=5 if len(g) < 50 else 3, alpha=0.6, label=k)[0]
                if grouped is not None and key in grouped.estimators_:
                    f = np.linspace(g[schema.SM_CLOCK_MHZ].min(), g[schema.SM_CLOCK_MHZ].max(), 100)
                    ax.plot(f, grouped.estimators_[key].predict_at(f) * scale, "-", color=pts.get_color())
        ax.set_xlabel("SM clock (MHz)")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{ylabel.split(' (')[0]} vs clock: data (dots) and fits (lines)")
        if ax.get_legend_handles_labels()[0]:  # nothing to label when no rows were kept
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / f"{name}.png")
        plt.close(fig)
    if cal.temperature is not None:
        rows = run.points.loc[run.points[schema.CALIBRATION_PHASE] == "ramp"] if len(run.points) else run.samples
        fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
        alpha = cal.temperature.alpha_w_per_c_
        # α is one slope with one intercept per group (eq. 4.6 pooled within groups), so each
        # workload's points get the slope through their own mean: one line through the mean of
        # all workloads (an H200's fp32 at 350 W and sgemm at 525 W) would fit neither
        by = schema.WORKLOAD if schema.WORKLOAD in rows else None
        for name, g in (rows.groupby(by, sort=False) if by else [("", rows)]):
            pts = ax.plot(g[schema.TEMPERATURE_C], g[schema.POWER_W], ".", ms=3, alpha=0.5,
                          label=str(name)[:40] or None)[0]
            t = np.linspace(g[schema.TEMPERATURE_C].min(), g[schema.TEMPERATURE_C].max(), 10)
            ax.plot(t, float(g[schema.POWER_W].mean()) + alpha * (t - float(g[schema.TEMPERATURE_C].mean())),
                    "-", color=pts.get_color())
        lo, hi = cal.temperature.alpha_ci_w_per_c_
        ax.set_title(f"alpha = {alpha:.3f} W/°C, 95 % CI [{lo:.3f}, {hi:.3f}] (lines: that slope per workload)",
                     fontsize=9)
        ax.set_xlabel("temperature (°C)")
        ax.set_ylabel("power (W)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / "temperature_slope.png")
        plt.close(fig)
