"""Loads that identify the instant reading's boxcar window, compared on one footing.

Yang §IV-C fits the window from square waves at 2/3 … 4/3 of the update
period (what ``powermodels characterize`` records by default). Those periods
are rational multiples of the update period, so a run's updates land on only
3–6 distinct phases of the load: the emulated reading is known at a handful
of points of its trapezoid, and windows that differ by a few ms fit the same
points (the simulated Hopper's 25 ms window comes back with an interval of
7–28 ms from 3 s runs). The designs here differ only in the load:

``yang``
    Yang's six square waves, 2/3 … 4/3 × the update period, 50 % duty.
``square20``
    Yang's 20 ms square wave (10 ms on, 10 ms off; artifact A1).
``square43``
    One square wave of 4/3 × the update period.
``golden``
    Two square waves whose periods are the update period times ``1/φ`` and
    ``2 − 1/φ`` (φ the golden ratio; 61.8 ms and 138.2 ms on 100 ms):
    the update/load ratio is irrational, so the updates sweep every phase of
    the load (equidistributed), and the two periods break each other's
    aliases.
``pulses``
    FinGraV-style: many short pulses (``pulse_s``, default a tenth of the
    update period) at random gaps, so each update sees a pulse at a random
    offset — the time binning of many short runs by their offset to the
    update, done implicitly by the fit (each update is one binned sample of
    the window's response to the pulse, FinGraV §IV "time binning").
``mixed``
    Half ``golden``, half ``pulses``: the pulses give the sharpest loss, the
    golden waves the smallest spread when the load's power does not follow
    its recorded times (:class:`ShapedLoadRunner`); together they repeat
    best in the worst case (``benchmarks/gpu_sensor_window.py compare``).

Every design is fitted by the same :class:`~powermodels.sensor.window.BoxcarWindow`
with the bounds :func:`~powermodels.sensor.report.characterize_traces` uses
for a fast reading (windows ≤ 2 update periods, delays within half an update
period, each run's delay free within ± a tenth of it), so the comparison is
of the loads alone. :func:`design_metrics` gives the estimate, its
identifiability interval and the sharpness of the profile loss at ±3 ms.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from .report import attach_load
from .window import BoxcarWindow

__all__ = ["DESIGNS", "ShapedLoadRunner", "design_metrics", "fit_design", "load_plan", "record_design",
           "repeatability"]

#: The load designs, in report order.
DESIGNS = ("yang", "square20", "square43", "golden", "pulses", "mixed")

PHI = (1 + 5 ** 0.5) / 2
YANG_FRACTIONS = (2 / 3, 3 / 4, 4 / 5, 6 / 5, 5 / 4, 4 / 3)


def load_plan(design: str, update_period_s: float, seconds: float, *, pulse_s: float | None = None,
              seed: int = 0) -> list[tuple[str, list[tuple[float, float]]]]:
    """The runs of one design: ``[(run_id, [(on_s, off_s), ...]), ...]``.

    Each run is a list of on/off phases played back to back; ``seconds`` is
    the load time of the whole design, shared between its runs (so designs
    are compared at equal length).

    Parameters
    ----------
    design : str
        One of :data:`DESIGNS`.
    update_period_s : float
        The reading's update period (from the probe: :class:`UpdatePeriod`).
    seconds : float
        Total load time of the design (all runs together).
    pulse_s : float, optional
        Pulse length of ``pulses``; default a tenth of the update period.
    seed : int
        Seeds the pulse gaps.
    """
    if design not in DESIGNS:
        raise ValueError(f"design must be one of {DESIGNS}, got {design!r}")
    if not update_period_s > 0:
        raise ValueError(f"update_period_s must be > 0, got {update_period_s}")
    if not seconds > 0:
        raise ValueError(f"seconds must be > 0, got {seconds}")
    u = float(update_period_s)

    def square(run_id, period, total):
        n = max(4, int(np.ceil(total / period)))
        return run_id, [(period / 2, period / 2)] * n

    if design == "yang":
        each = seconds / len(YANG_FRACTIONS)
        return [square(f"square-{f:.3f}", f * u, each) for f in YANG_FRACTIONS]
    if design == "square20":
        return [square("square-20ms", 0.02, seconds)]
    if design == "square43":
        return [square("square-1.333", 4 / 3 * u, seconds)]
    if design == "golden":
        return [square(f"golden-{f:.4f}", f * u, seconds / 2) for f in (1 / PHI, 2 - 1 / PHI)]
    if design == "mixed":
        return (load_plan("golden", u, seconds / 2)
                + load_plan("pulses", u, seconds / 2, pulse_s=pulse_s, seed=seed))
    on = 0.1 * u if pulse_s is None else float(pulse_s)
    if not 0 < on < u:
        raise ValueError(f"pulse_s must be in (0, update period), got {on}")
    rng = np.random.default_rng([seed, 15])
    phases, t = [], 0.0
    while t < seconds:
        # gaps longer than the window bound's half so that neighbouring pulses rarely
        # share an update's window; random, so offsets to the update grid are uniform
        off = float(rng.uniform(0.5 * u, 1.5 * u))
        phases.append((on, off))
        t += on + off
    return [(f"pulses-{on * 1e3:.0f}ms", phases)]


def record_design(runner, design: str, update_period_s: float, seconds: float, *,
                  pulse_s: float | None = None, seed: int = 0, before_s: float = 0.5,
                  after_s: float = 0.3, sync_error_s: float = 0.0,
                  timing_error_s: float = 0.0) -> pd.DataFrame:
    """Play one design on ``runner`` and return its trace table with the known load.

    Square waves go through ``runner.square_wave`` (timed on-phases); the
    pulses through ``runner.step(on)`` and ``runner.idle(off)``, one at a time. The load
    column is the share of each sample interval the load ran
    (:func:`~powermodels.sensor.report.attach_load`).

    Parameters
    ----------
    sync_error_s : float, default=0
        Simulation only: shift each run's load times by a random offset,
        uniform in ``± sync_error_s`` (what a per-run CUDA-event to host-clock
        mapping gets wrong on a real GPU), to test a design's robustness to it.
    timing_error_s : float, default=0
        Simulation only: move every recorded on-phase start and end by its
        own random offset, uniform in ``± timing_error_s`` (launch jitter and
        a kernel's power not starting and stopping with its events).
    """
    rng = np.random.default_rng([seed, 16])
    runs = []
    for run_id, phases in load_plan(design, update_period_s, seconds, pulse_s=pulse_s, seed=seed):
        a, _ = runner.idle(before_s)
        if len({p for p in phases}) == 1:
            on, off = phases[0]
            iv = np.asarray(runner.square_wave(on, off, len(phases)), dtype=float).reshape(-1, 2)
        else:
            # one timed load, then the gap: a real runner's square_wave does not wait out the
            # last off-phase, so it cannot time a lone pulse's gap
            rows = []
            for on, off in phases:
                rows.append(runner.step(on))
                runner.idle(off)
            iv = np.asarray(rows, dtype=float).reshape(-1, 2)
        _, b = runner.idle(after_s)
        if sync_error_s > 0:
            iv = iv + rng.uniform(-sync_error_s, sync_error_s)
        if timing_error_s > 0:
            iv = iv + rng.uniform(-timing_error_s, timing_error_s, size=iv.shape)
            iv[:, 1] = np.maximum(iv[:, 1], iv[:, 0])
        runs.append(attach_load(runner.trace(a, b, run_id=run_id), iv))
    return pd.concat(runs, ignore_index=True)


def fit_design(traces: pd.DataFrame, update_period_s: float, *, power_column=schema.POWER_INSTANT_W,
               delay_spread_s: float | None = None) -> BoxcarWindow:
    """The window fit of ``characterize_traces`` for a fast reading, on any design's traces."""
    u = float(update_period_s)
    spread = 0.1 * u if delay_spread_s is None else float(delay_spread_s)
    return BoxcarWindow(power_column=power_column, max_window_s=2 * u, max_delay_s=u / 2,
                        min_delay_s=-spread, delay_spread_s=spread).fit(traces)


def sharpness(est: BoxcarWindow, delta_s: float = 0.003) -> float:
    """Relative rise of the profile loss ``delta_s`` either side of the estimate.

    ``min(L(w − δ), L(w + δ)) / L(w) − 1`` on the loss curve (interpolated in
    log-window): how strongly the traces reject a window ``δ`` off. A flat
    side gives ~0 even when the other side is steep.
    """
    w, loss = est.loss_curve_[:, 0], est.loss_curve_[:, 1]
    lw = np.log(w)
    at = [float(np.interp(np.log(max(est.window_s_ + s, w[0])), lw, loss))
          for s in (-delta_s, 0.0, delta_s)]
    base = max(min(at[1], est.loss_), 1e-12)
    return float(min(at[0], at[2]) / base - 1.0)


def design_metrics(est: BoxcarWindow) -> dict:
    """One row: window, interval, delay, loss, sharpness at ±3 ms, updates compared."""
    lo, hi = est.window_interval_s_
    return {"window_ms": est.window_s_ * 1e3, "lo_ms": lo * 1e3, "hi_ms": hi * 1e3,
            "delay_ms": est.delay_s_ * 1e3, "loss": est.loss_,
            "sharpness_3ms": sharpness(est), "n_updates": est.n_updates_,
            "wide": est.interval_is_wide()}


def repeatability(windows_ms, tol_ms: float = 3.0) -> dict:
    """Median of repeated estimates, the largest deviation from it, and whether all are within ``tol_ms``."""
    w = np.asarray(windows_ms, dtype=float)
    if w.size == 0 or not np.isfinite(w).all():
        raise ValueError("repeatability: need finite window estimates")
    med = float(np.median(w))
    dev = float(np.max(np.abs(w - med)))
    return {"median_ms": med, "max_dev_ms": dev, "within": bool(dev <= tol_ms), "n": int(w.size)}


class ShapedLoadRunner:
    """A simulated runner whose on-phases do not draw power as their events say (``--mismatch``).

    Each on-phase ramps up over ``ramp_s`` (quarter, half, three-quarter load)
    and leaves a tail of ``tail_s`` at ``tail`` of full load after its end,
    while the recorded interval says full load from start to end: the H200's
    kernel power ramps within a launch and its reading between kernels sits
    above idle ("active idle", docs/sensor.md), which a fit from activity
    cannot know. Wraps a :class:`~powermodels.measuring.runner.SimulatedRunner`;
    for testing a design, never for measuring.
    """

    def __init__(self, runner, ramp_s=0.003, tail_s=0.005, tail=0.1):
        self.r, self.ramp_s, self.tail_s, self.tail = runner, ramp_s, tail_s, tail

    def idle(self, seconds):
        return self.r.idle(seconds)

    def trace(self, a, b, run_id="run"):
        return self.r.trace(a, b, run_id=run_id)

    def step(self, duration_s, amplitude=1.0):
        ramp = min(self.ramp_s, duration_s / 2)
        start = None
        for k in (1, 2, 3):
            a, _ = self.r.step(ramp / 3, amplitude * k / 4)
            start = a if start is None else start
        _, end = self.r.step(duration_s - ramp, amplitude)
        self.r.step(self.tail_s, amplitude * self.tail)
        return start, end

    def square_wave(self, on_s, off_s, periods, amplitude=1.0):
        rows = []
        for _ in range(periods):
            rows.append(self.step(on_s, amplitude))
            self.r.idle(max(off_s - self.tail_s, 0.0))
        return np.asarray(rows)
