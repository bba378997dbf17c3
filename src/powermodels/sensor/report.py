"""Characterise every reading of a sensor from recorded traces, and report it.

:func:`characterize_traces` takes the traces of Yang's experiments — square
waves at several periods around the update period, and one long step — and
fits, for each power field (instant, average, usage) and for the energy
counter, the update period (:class:`UpdatePeriod`), the boxcar window and
delay (:class:`BoxcarWindow`: jointly on the square waves for a reading
that rises within two update periods; on the step for a slow, long-window
reading, whose window the square waves alias), the step response
(:class:`StepResponse`) and, with a reference meter, the steady-state gain
and offset (:class:`SteadyStateGain`). The result is one row per field
(Yang Fig. 14's columns). :func:`write_report` writes it as markdown with
plots. Nothing here touches a device: the ``characterize`` command records
the traces.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from ..reporting import markdown_table
from ._coverage import covered_time
from ._series import counter_power
from .gain import SteadyStateGain
from .transient import StepResponse
from .update_period import UpdatePeriod
from .window import BoxcarWindow

__all__ = ["FIELDS", "Characterization", "attach_load", "attach_loads", "characterize_traces",
           "write_report"]

#: The readings characterised, in report order.
FIELDS = (schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.POWER_USAGE_W,
          schema.ENERGY_COUNTER_J)


@dataclass
class Characterization:
    """What :func:`characterize_traces` found.

    Attributes
    ----------
    table : DataFrame
        One row per field: :data:`schema.SENSOR_FIELD`,
        :data:`schema.UPDATE_PERIOD_S`, :data:`schema.WINDOW_S`,
        :data:`schema.WINDOW_LO_S`, :data:`schema.WINDOW_HI_S` (the
        window's identifiability interval, ``BoxcarWindow.window_interval_s_``),
        :data:`schema.DELAY_S`, :data:`schema.SAMPLED_FRACTION`,
        :data:`schema.RISE_TIME_S`, :data:`schema.RESPONSE_KIND`,
        :data:`schema.GAIN`, :data:`schema.OFFSET_W`.
    estimators : dict
        ``{field: {"update": UpdatePeriod, "window": BoxcarWindow, "step":
        StepResponse, "gain": SteadyStateGain or None}}``, fitted.
    skipped : dict
        ``{field: reason}`` for fields the traces do not carry.
    """

    table: pd.DataFrame
    estimators: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)

    def row(self, field_name: str) -> dict:
        """The table's row of one field, as a dict."""
        hit = self.table[self.table[schema.SENSOR_FIELD] == field_name]
        if hit.empty:
            raise ValueError(f"field {field_name!r} was not characterised "
                             f"({self.skipped.get(field_name, 'not in the traces')})")
        return hit.iloc[0].to_dict()

    def warnings(self) -> list[str]:
        """One line per field whose window the traces do not identify (a wide interval)."""
        out = []
        for name, est in self.estimators.items():
            win = est["window"]
            if win.interval_is_wide():
                lo, hi = win.window_interval_s_
                out.append(f"warning: {name}: window {win.window_s_ * 1e3:.1f} ms not identified: the fit "
                           f"is as good from {lo * 1e3:.1f} to {hi * 1e3:.1f} ms; read it as that interval, or record longer "
                           "runs (characterize --seconds, --step-seconds for a long window)")
        return out


def attach_load(trace: pd.DataFrame, intervals, amplitude: float = 1.0) -> pd.DataFrame:
    """A copy of ``trace`` whose :data:`schema.LOAD_ACTIVITY` is the known load.

    For a real GPU, where the harness knows when its square-wave or step
    kernel ran but the trace has no load column: the load at a sample is
    ``amplitude`` times the share of the time since the previous sample that
    the launches in ``intervals`` (``[start_s, end_s]`` rows) covered.
    """
    iv = np.asarray(intervals, dtype=float).reshape(-1, 2)
    if not 0 <= amplitude <= 1:
        raise ValueError(f"amplitude must be in [0, 1], got {amplitude}")
    if schema.T_S not in trace.columns:
        raise ValueError(f"trace: column {schema.T_S!r} is missing")
    t = trace[schema.T_S].to_numpy(dtype=float)
    lo = np.concatenate([[t[0] - (t[1] - t[0] if t.size > 1 else 1e-3)], t[:-1]])
    cover = covered_time(lo, t, iv)  # by time search: linear in the trace, not samples x launches
    out = trace.copy()
    out[schema.LOAD_ACTIVITY] = np.clip(amplitude * cover / np.maximum(t - lo, 1e-12), 0.0, 1.0)
    return out


def attach_loads(traces: pd.DataFrame, loads: pd.DataFrame, amplitude: float = 1.0) -> pd.DataFrame:
    """:func:`attach_load` for every run, its launches taken from a table of on-phases.

    ``loads`` holds one row per launch: :data:`schema.RUN_ID`,
    :data:`schema.START_S`, :data:`schema.END_S` (the harness's
    ``*_loads.parquet``). A run without rows gets zero load.
    """
    for name, df, cols in (("loads", loads, (schema.RUN_ID, schema.START_S, schema.END_S)),
                           ("traces", traces, (schema.RUN_ID,))):
        for c in cols:
            if c not in df.columns:
                raise ValueError(f"{name}: column {c!r} is missing")
    runs = [attach_load(g, loads.loc[loads[schema.RUN_ID] == run, [schema.START_S, schema.END_S]].to_numpy(),
                        amplitude)
            for run, g in traces.groupby(schema.RUN_ID, sort=False)]
    return pd.concat(runs, ignore_index=True)


def _field_traces(square: pd.DataFrame, step: pd.DataFrame, name: str):
    """The traces for one field: power fields as they are, the counter as ΔE/Δt."""
    if name != schema.ENERGY_COUNTER_J:
        return square, step, name
    return counter_power(square), counter_power(step), schema.COUNTER_POWER_W


def characterize_traces(square: pd.DataFrame, step: pd.DataFrame, *,
                        load_column=schema.LOAD_ACTIVITY, reference_column=None,
                        fields=FIELDS, max_window_s: float = 1.5,
                        max_delay_s: float = 0.2,
                        delay_spread_s: float | None = None) -> Characterization:
    """Fit update period, window, delay, rise time (and gain) for every field.

    Parameters
    ----------
    square : DataFrame
        Trace table of the square-wave runs (one ``run_id`` per load period;
        Yang uses 2/3, 3/4, 4/5, 6/5, 5/4, 4/3 of the update period).
    step : DataFrame
        Trace table of one step: idle (≥ 1.5 s, after at least as much idle
        before the trace starts), ≥ 3 s at full load, ≥ 1 s idle.
    load_column : str, default=schema.LOAD_ACTIVITY
        The known load in both traces.
    reference_column : str, optional
        Reference power (meter). When given, the window is fitted against it
        (Yang Fig. 12: same minimum as the square wave) and gain/offset are
        fitted; without it gain and offset are NaN.
    fields : sequence of str
        Readings to characterise; absent or all-NaN ones are skipped.
    max_window_s, max_delay_s : float
        Search bounds of :class:`BoxcarWindow`. For a fast reading (fitted
        on the square waves) they are tightened to two update periods and
        half an update period: the square waves' periods are 2/3 … 4/3 of
        the update period, so a longer delay aliases onto a shorter one
        (one load period later), and the shorter bounds shrink the start of
        every run that is discarded (``discard_s`` = window + delay bound).
    delay_spread_s : float or None, default=None
        Per-run delay freedom of the square-wave fit (:class:`BoxcarWindow`),
        for a real GPU whose load times are re-synchronised per run; the
        delay may then also go down to ``-delay_spread_s`` (a sync offset,
        not a physical delay). None: a tenth of the update period (10 ms
        on a 100 ms sensor), what the H200's traces need (docs/sensor.md,
        "Robust fit"); 0 fits one delay for all runs.

    Returns
    -------
    Characterization
    """
    for df in (square, step):
        schema.validate_trace_table(df, required=[load_column])
    rows, fitted, skipped = [], {}, {}
    for name in fields:
        if name not in square.columns or square[name].isna().all():
            skipped[name] = "not in the traces (NaN or missing)"
            continue
        sq, st, col = _field_traces(square, step, name)
        sq = sq.dropna(subset=[col])
        st = st.dropna(subset=[col])
        load = reference_column or load_column
        both = pd.concat([sq, st.assign(**{schema.RUN_ID: st[schema.RUN_ID].astype(str) + ":step"})],
                         ignore_index=True)
        try:
            up = UpdatePeriod(power_column=col).fit(sq)
            resp = StepResponse(load_column=load_column, power_column=col,
                                reference_column=reference_column).fit(st)
            if resp.rise_time_s_ > 2 * up.update_period_s_:
                # a long window: square waves alias inside it, the step's ramp
                # pins it down (Yang Fig. 14 reads the 1 s average off the step)
                # keep the last 0.5 s of idle before the onset: earlier updates
                # average load from before the trace (the step must follow a
                # long idle; the characterize command idles 2 s)
                t0 = float(st[schema.T_S].min())
                win = BoxcarWindow(load_column=load, power_column=col,
                                   discard_s=max(0.0, resp.onset_s_ - t0 - 0.5),
                                   max_window_s=max_window_s, max_delay_s=max_delay_s).fit(st)
            else:
                period = up.update_period_s_
                spread = 0.1 * period if delay_spread_s is None else float(delay_spread_s)
                win = BoxcarWindow(load_column=load, power_column=col,
                                   max_window_s=min(max_window_s, 2 * period),
                                   max_delay_s=min(max_delay_s, period / 2), min_delay_s=-spread,
                                   delay_spread_s=spread).fit(sq)
        except ValueError as err:
            skipped[name] = str(err)
            continue
        gain = None
        if reference_column is not None:
            try:
                gain = SteadyStateGain(reference_column=reference_column, power_column=col,
                                       settle_s=max(0.5, win.window_s_ + win.delay_s_ + 0.2),
                                       window_s=win.window_s_, delay_s=win.delay_s_).fit(both)
            except ValueError as err:
                skipped[f"{name}:gain"] = str(err)
        fitted[name] = {"update": up, "window": win, "step": resp, "gain": gain}
        rows.append({
            schema.SENSOR_FIELD: name,
            schema.UPDATE_PERIOD_S: up.update_period_s_,
            schema.WINDOW_S: win.window_s_,
            schema.WINDOW_LO_S: win.window_interval_s_[0],
            schema.WINDOW_HI_S: win.window_interval_s_[1],
            schema.DELAY_S: win.delay_s_,
            schema.SAMPLED_FRACTION: min(1.0, win.window_s_ / up.update_period_s_),
            schema.RISE_TIME_S: resp.rise_time_s_,
            schema.RESPONSE_KIND: resp.response_kind_name_,
            schema.GAIN: gain.gain_ if gain is not None else np.nan,
            schema.OFFSET_W: gain.offset_w_ if gain is not None else np.nan,
        })
    if not rows:
        raise ValueError(f"characterize_traces: no field could be characterised: {skipped}")
    return Characterization(pd.DataFrame(rows), fitted, skipped)


def _ms(table: pd.DataFrame) -> pd.DataFrame:
    """The table with times in milliseconds, for people."""
    t = table.copy()
    times = (schema.UPDATE_PERIOD_S, schema.WINDOW_S, schema.WINDOW_LO_S, schema.WINDOW_HI_S,
             schema.DELAY_S, schema.RISE_TIME_S)
    for c in times:
        t[c] = t[c] * 1e3
    return t.rename(columns={c: c[:-2] + " [ms]" for c in times})


def write_report(result: Characterization, out_dir, square: pd.DataFrame, step: pd.DataFrame,
                 *, title: str = "Sensor characterisation", notes: str = "") -> Path:
    """Write ``report.md``, ``characterization.csv`` and, with matplotlib, PNG plots.

    Plots: measured vs emulated (z-normalised) readings per field (Yang
    Fig. 11), the loss over window size (Fig. 12) and the step response
    (Fig. 7).

    Returns
    -------
    Path
        The markdown file.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    result.table.to_csv(out / "characterization.csv", index=False)
    lines = [f"# {title}", "", markdown_table(_ms(result.table)), "",
             f"`{schema.WINDOW_LO_S}`–`{schema.WINDOW_HI_S}`: windows that fit within tolerance "
             "of the best (`BoxcarWindow.window_interval_s_`).", ""]
    lines += [f"**{w}**" for w in result.warnings()] + ([""] if result.warnings() else [])
    if result.skipped:
        lines += ["Skipped:", ""] + [f"- `{k}`: {v}" for k, v in result.skipped.items()] + [""]
    if notes:
        lines += [notes, ""]
    plots = _plots(result, out, square, step)
    if plots:
        lines += [f"![{p.stem}]({p.name})" for p in plots]
    else:
        lines += ["(matplotlib is not installed: no plots)"]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _plots(result: Characterization, out: Path, square, step) -> list[Path]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    paths = []

    def save(fig, name):
        fig.tight_layout()
        paths.append(out / name)
        fig.savefig(paths[-1], dpi=90)
        plt.close(fig)

    names = list(result.estimators)
    fig, axes = plt.subplots(len(names), 1, figsize=(9, 2.4 * len(names)), squeeze=False)
    for ax, name in zip(axes[:, 0], names, strict=True):
        win = result.estimators[name]["window"]
        sq, _, col = _field_traces(square, step, name)
        sq = sq.dropna(subset=[col])
        first = sq[sq[schema.RUN_ID] == sq[schema.RUN_ID].iloc[0]]
        cmp = win.comparison(first)
        ax.step(cmp[schema.T_S], cmp[schema.POWER_W], where="post", label="measured (z)")
        ax.step(cmp[schema.T_S], cmp[schema.REFERENCE_POWER_W], where="post", ls="--",
                label=f"emulated, window {win.window_s_ * 1e3:.1f} ms")
        ax.set_title(f"{name}: run {first[schema.RUN_ID].iloc[0]}", fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("time [s]")
    save(fig, "emulated_vs_measured.png")

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name in names:
        win = result.estimators[name]["window"]
        curve = win.loss_curve_
        line, = ax.semilogx(curve[:, 0] * 1e3, curve[:, 1], label=name)
        # the identifiability interval: windows that fit within tolerance of the best
        ax.axvspan(*(np.asarray(win.window_interval_s_) * 1e3), color=line.get_color(), alpha=0.12)
    ax.set_xlabel("boxcar window [ms]")
    ax.set_ylabel("loss (MSE of z-scores)")
    ax.legend(fontsize=7)
    save(fig, "loss_curve.png")

    fig, ax = plt.subplots(figsize=(8, 3.5))
    t0 = None
    for name in names:
        _, st, col = _field_traces(square, step, name)
        st = st.dropna(subset=[col])
        onset = result.estimators[name]["step"].onset_s_
        t0 = onset if t0 is None else t0
        ax.step(st[schema.T_S] - onset, st[col], where="post", label=name)
    ref = schema.REFERENCE_POWER_W
    if t0 is not None and ref in step.columns and step[ref].notna().any():
        ax.plot(step[schema.T_S] - t0, step[ref], lw=0.5, alpha=0.5, label="reference")
    ax.set_xlabel("time since the step [s]")
    ax.set_ylabel("W")
    ax.legend(fontsize=7)
    save(fig, "step_response.png")
    return paths
