"""Boxcar averaging window and delay of a power reading (Yang §IV-C, artifact A4)."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.ndimage import minimum_filter, minimum_filter1d
from scipy.optimize import minimize
from scipy.stats import f as f_dist
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted

from .. import schema
from ._series import COLUMN, FINITE, NON_NEGATIVE, OPTIONAL_COLUMN, period_from_intervals, series_from_input
from ._series import update_points

__all__ = ["BoxcarWindow", "boxcar_mean", "cumulative_integral"]


def cumulative_integral(t: np.ndarray, x: np.ndarray):
    """A callable ``C(s)``: the integral of ``x`` from ``t[0]`` to ``s``.

    A sample ``x[k]`` is taken as the mean over ``(t[k-1], t[k]]`` — what
    the trace's load column holds (the share of the last sample interval
    the load ran) and, near enough, a fast meter's reading. Outside the
    trace the first and last values are held (the load before the trace is
    taken to be its first value), so a window reaching before the trace
    start stays defined and the loss of :class:`BoxcarWindow` stays
    continuous in the window and delay.
    """
    t = np.asarray(t, dtype=float)
    x = np.asarray(x, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(x[1:] * np.diff(t))])

    def C(s):
        s = np.asarray(s, dtype=float)
        out = np.interp(s, t, c)
        out = np.where(s < t[0], x[0] * (s - t[0]), out)
        return np.where(s > t[-1], c[-1] + x[-1] * (s - t[-1]), out)

    return C


def boxcar_mean(C, t_eval, window_s, delay_s):
    """Mean of the integrand of ``C`` over ``[t - delay - window, t - delay]``.

    This is the emulated reading of a sensor that publishes, at time ``t``,
    the boxcar average of the power over the window ending ``delay`` before.
    """
    w = np.maximum(np.asarray(window_s, dtype=float), 1e-9)
    end = np.asarray(t_eval, dtype=float) - delay_s
    return (C(end) - C(end - w)) / w


#: Identifiability interval of the window: every window whose profile loss is within
#: ``L_min · (1 + max(INTERVAL_RTOL, F/dof)) + INTERVAL_ATOL`` of the best (see ``BoxcarWindow``).
INTERVAL_RTOL = 0.1
INTERVAL_ATOL = 0.002


def _z(x: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance along the last axis (constant rows become 0)."""
    m = x.mean(axis=-1, keepdims=True)
    d = x - m
    s = np.sqrt(np.mean(d * d, axis=-1, keepdims=True))
    return np.divide(d, s, out=np.zeros_like(x), where=s > 1e-12 * (np.abs(m) + 1))


class BoxcarWindow(BaseEstimator):
    """Averaging window and delay of a power reading, fitted by emulation.

    Yang §IV-C: from the known load (the square wave the benchmark ran, or a
    reference meter when one exists) emulate the reading a sensor with a
    boxcar window ``w`` ending ``d`` before each update would publish,
    z-normalise emulated and measured readings so that only the shape
    counts, and minimise their mean squared difference with Nelder-Mead.
    The loss is evaluated first on a grid of windows and delays (which gives
    the loss curve over window size, Yang Fig. 12, and starts that avoid
    the aliasing minima at multiples of the load period); Nelder-Mead then
    refines the ``n_starts`` best local minima of the grid and keeps the best.
    The loss has several basins (a one-sample window near the true window's
    middle; delays a load period apart), so a grid point that is best by a
    hair need not lead to the best refined fit. On short real traces these
    spurious basins can even be the global minimum: keep the delay bound
    under a load period and give enough updates (see ``characterize_traces``
    and docs/sensor.md, "Robust fit"). Several runs (e.g. the load periods 2/3 ...
    4/3 of the update period) are fitted jointly, each normalised on its own.

    Parameters
    ----------
    time_column : str or int, default=schema.T_S
    load_column : str or int, default=schema.LOAD_ACTIVITY
        The known load: activity of the square wave, or
        :data:`schema.REFERENCE_POWER_W` from a meter.
    power_column : str or int, default=schema.POWER_INSTANT_W
        The reading to characterise (ignored when ``y`` is given).
    group_column : str or int or None, default=schema.RUN_ID
    max_window_s : float, default=1.5
        Largest window considered.
    max_delay_s : float, default=0.2
        Largest delay considered.
    min_delay_s : float, default=0.0
        Smallest delay considered. A physical delay is never negative, but on
        a real GPU the load's times (CUDA events mapped onto the host clock)
        and the reading's (host poll times) can be offset by a few ms, which
        shows up as a slightly negative delay; allowing it keeps the right
        basin inside the search box instead of on its edge.
    discard_s : float or None, default=None
        Updates in the first ``discard_s`` seconds of each run are not
        compared (Yang discards the first second). The default,
        ``max_window_s + max_delay_s``, keeps only updates whose window lies
        inside the run for every window and delay tried, so the load before
        the run (unknown) never enters the emulation.
    n_windows : int, default=60
        Points of the (geometric) window grid.
    n_starts : int, default=4
        Nelder-Mead runs, one from each of the lowest local minima of the grid
        loss; the lowest result is kept.
    delay_spread_s : float, default=0.0
        How far each run's delay may differ from the shared one. On a real
        GPU the load's times come from CUDA events mapped onto the host clock,
        re-synchronised per run; a few ms of sync error per run then looks like
        a different delay per run and spoils a joint fit. With a spread, the
        window stays shared and every run gets its own delay within
        ``delay_s_ ± delay_spread_s`` (keep it well under half the shortest
        load period, or a delay of one load period aliases back in).

    Attributes
    ----------
    window_s_ : float
        Boxcar averaging window in seconds.
    delay_s_ : float
        Time from the window's end to the update that publishes it (the mean
        of ``run_delays_s_`` with a ``delay_spread_s``).
    run_delays_s_ : ndarray
        Delay of every run compared (all equal without a spread).
    update_period_s_ : float
        Update period of the reading (as :class:`UpdatePeriod`).
    sampled_fraction_ : float
        ``min(1, window_s_ / update_period_s_)``: the share of the time the
        reading sees (Yang: 25 % on A100/H100).
    loss_ : float
        Final loss (MSE of z-scores, 0 = perfect, 1 = no better than flat).
    loss_curve_ : ndarray of shape (n_windows, 2)
        Window size and the smallest loss over delays (the profile loss), for
        plotting.
    window_interval_s_ : tuple of float
        ``(lo, hi)``: the smallest and largest window of the grid whose
        profile loss ``L(w)`` (``loss_curve_``) is within tolerance of the
        best, ``L(w) <= L_min · (1 + max(0.1, F/dof)) + 0.002``, widened to
        hold ``window_s_``. ``F/dof`` is the profile-likelihood (F-test)
        tolerance at 95 %: ``F`` the 95 % quantile of F(1, dof), ``dof`` the
        updates compared less the parameters fitted (window, each run's
        delay, each run's z-normalisation mean and scale); it dominates on
        short traces, where the fit has nearly as many parameters as data.
        The 10 % floor stands for what the residual is mostly made of on a
        real GPU — per-run load-timing error and sensor behaviour off the
        boxcar model, not independent noise — for which the F-test alone is
        overconfident (two recordings of one H200 give 27.9 and 32.4 ms);
        0.002 (correlation within 0.001) covers a near-perfect fit.
        With fewer residual degrees of freedom than parameters (a few
        updates per run: the per-run delays and normalisations follow the
        data, and the loss drops to ~0 for any window) the interval is the
        whole search range. A wide interval means the
        traces do not pin the window down: record longer runs. The point
        estimate stays the profile minimum: the profile is asymmetric (a
        sharp rise once the window smears the load's half-period, a flat
        side below), so the interval's centre would move with the tolerance
        and, on a flat profile, land on windows no better supported.
    n_updates_ : int
        Number of updates compared.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> t = np.arange(0, 6, 1e-4)                        # sampled at 10 kHz
    >>> load = (np.floor(t / 0.035) % 2).astype(float)   # 70 ms square wave
    >>> C = cumulative_integral(t, load)
    >>> upd = np.floor(t / 0.1) * 0.1                    # 100 ms updates
    >>> reading = boxcar_mean(C, upd, 0.025, 0.0)         # 25 ms window
    >>> est = BoxcarWindow(max_window_s=0.3).fit(np.c_[t, load], reading)
    >>> round(est.window_s_, 3), round(est.sampled_fraction_, 2)
    (0.025, 0.25)
    """

    # Blob data sorted by its first column (time) gives a reading that changes
    # once or twice: nothing to characterise, so fit raises a ValueError.
    _expected_failed_checks = {  # noqa: RUF012 (read-only, per sklearn convention)
        name: "sklearn's blob data, sorted by time, is not a varying load (reading changes < 3 times)"
        for name in ("check_pipeline_consistency", "check_estimators_pickle")
    }

    _parameter_constraints: ClassVar[dict] = {
        "time_column": COLUMN, "load_column": COLUMN, "power_column": COLUMN, "group_column": OPTIONAL_COLUMN,
        "max_window_s": [Interval(Real, 0, None, closed="neither")], "max_delay_s": NON_NEGATIVE,
        "discard_s": [*NON_NEGATIVE, None], "n_windows": [Interval(Integral, 3, None, closed="left")],
        "delay_spread_s": NON_NEGATIVE, "min_delay_s": FINITE,  # <= max_delay_s, checked in fit
        "n_starts": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, time_column=schema.T_S, load_column=schema.LOAD_ACTIVITY,
                 power_column=schema.POWER_INSTANT_W, group_column=schema.RUN_ID,
                 max_window_s=1.5, max_delay_s=0.2, discard_s=None, n_windows=60,
                 delay_spread_s=0.0, min_delay_s=0.0, n_starts=4):
        self.time_column = time_column
        self.load_column = load_column
        self.power_column = power_column
        self.group_column = group_column
        self.max_window_s = max_window_s
        self.max_delay_s = max_delay_s
        self.discard_s = discard_s
        self.n_windows = n_windows
        self.delay_spread_s = delay_spread_s
        self.min_delay_s = min_delay_s
        self.n_starts = n_starts

    @classmethod
    def _check_instance(cls):
        # sklearn's random "traces" last a few seconds of time: keep every update
        return cls(discard_s=0.0)

    def _validate_params(self):
        super()._validate_params()  # each parameter alone (_parameter_constraints)
        if not self.min_delay_s <= self.max_delay_s:
            raise ValueError(f"min_delay_s must be <= max_delay_s ({self.max_delay_s}), "
                             f"got {self.min_delay_s}")

    def _discard(self) -> float:
        if self.discard_s is None:
            return float(self.max_window_s + max(self.max_delay_s, 0.0))
        return float(self.discard_s)

    def _runs(self, X, y, reset):
        t, load, reading, groups = series_from_input(
            self, X, y, time_column=self.time_column, load_column=self.load_column,
            power_column=self.power_column, group_column=self.group_column, reset=reset)
        runs, all_updates = [], []
        for g in np.unique(groups):
            m = groups == g
            tg, lg, rg = t[m], load[m], reading[m]
            idx = update_points(tg, rg)
            # the update happened between the last old and the first new sample
            tu = 0.5 * (tg[idx - 1] + tg[idx])
            if idx.size >= 2:
                all_updates.append(tu)
            keep = tu >= tg[0] + self._discard()
            if keep.sum() >= 2:
                # the measured side of the loss, z-normalised once
                runs.append((cumulative_integral(tg, lg), tu[keep], _z(rg[idx][keep])))
        return t, runs, all_updates

    def fit(self, X, y=None):
        """Fit window and delay to a trace of a known, varying load.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            A trace table, or an array ``[time_s, load]``.
        y : array-like of shape (n_samples,), optional
            The reading (required with an array ``X``).

        Returns
        -------
        self
        """
        self._validate_params()
        t, runs, all_updates = self._runs(X, y, reset=True)
        if not runs:
            raise ValueError(
                f"{type(self).__name__}: the reading changed fewer than 3 times after the "
                f"first {self._discard():g} s of each run (discard_s); need a longer trace "
                "of a varying load")
        dt = np.diff(t)
        dt = float(np.median(dt[dt > 0])) if (dt > 0).any() else 1e-3
        w_lo = min(max(dt, 1e-4), self.max_window_s / 2)
        windows = np.geomspace(w_lo, self.max_window_s, int(self.n_windows))
        span = self.max_delay_s - self.min_delay_s
        n_d = int(min(200, max(10, np.ceil(span / max(dt, 1e-4)) + 1)))
        delays = np.linspace(self.min_delay_s, self.max_delay_s, n_d)
        per_run = self._grid_loss(runs, windows, delays)  # (runs, windows, delays), weighted
        dd = max(delays[1] - delays[0], 1e-4)
        k = round(self.delay_spread_s / dd)
        if k > 0:  # each run takes its best delay within ± spread of the shared one
            per_run = minimum_filter1d(per_run, size=2 * k + 1, axis=2, mode="nearest")
        losses = per_run.sum(axis=0) / max(sum(r[1].size for r in runs), 1)
        self.loss_curve_ = np.column_stack([windows, losses.min(axis=1)])
        n_params = 1 + (len(runs) if k > 0 else 1) + 2 * len(runs)
        # Nelder-Mead from the best few local minima of the grid, not just the
        # best point: the grid's best basin (one-sample window, a delay one
        # load period off) need not hold the best refined fit.
        fits = [self._refine(runs, windows, delays, i, j, k, w_lo, dd)
                for i, j in self._grid_minima(losses, int(self.n_starts))]
        loss, best = min(fits, key=lambda f: f[0])
        self.window_s_ = float(best[0])
        self.run_delays_s_ = (np.asarray(best[1:], dtype=float) if k > 0
                              else np.full(len(runs), float(best[1])))
        self.delay_s_ = float(self.run_delays_s_.mean())
        self.loss_ = float(loss)
        self.update_period_s_ = (period_from_intervals(np.concatenate([np.diff(u) for u in all_updates]))
                                 if all_updates else float("nan"))
        self.sampled_fraction_ = (float(min(1.0, self.window_s_ / self.update_period_s_))
                                  if self.update_period_s_ > 0 else float("nan"))
        self.n_updates_ = int(sum(r[1].size for r in runs))
        self.window_interval_s_ = self._interval(self.n_updates_, n_params, w_lo)
        return self

    def _interval(self, n: int, n_params: int, w_lo: float) -> tuple[float, float]:
        """Windows whose profile loss is within tolerance of the best (``window_interval_s_``)."""
        dof = n - n_params
        if dof < n_params:  # so few updates that the fit follows them: nothing is identified
            return float(w_lo), float(self.max_window_s)
        w, loss = self.loss_curve_[:, 0], self.loss_curve_[:, 1]
        best = min(self.loss_, float(loss.min()))
        tol = max(INTERVAL_RTOL, float(f_dist.ppf(0.95, 1, dof)) / dof)
        inside = np.r_[w[loss <= best * (1 + tol) + INTERVAL_ATOL], self.window_s_]
        return float(inside.min()), float(inside.max())

    def interval_is_wide(self) -> bool:
        """Whether ``window_interval_s_`` leaves the window unidentified.

        Wide: ``hi/lo > 2`` (the window unknown within a factor of two), the
        sampled fraction ``min(1, window / update period)`` unknown within
        0.5 (a window of 0.5 ms and one of 60 ms on a 100 ms sensor), or the
        interval reaching an end of the searched windows (not bounded by
        the data on that side: e.g. a best fit on ``max_window_s``).
        """
        check_is_fitted(self)
        lo, hi = self.window_interval_s_
        seen = np.minimum(1.0, np.array([lo, hi]) / self.update_period_s_)
        grid = self.loss_curve_[:, 0]
        return bool(hi > 2 * lo or seen[1] - seen[0] > 0.5 or lo <= grid[0] or hi >= grid[-1])

    @staticmethod
    def _grid_minima(losses: np.ndarray, n: int) -> list[tuple[int, int]]:
        """Indices of the ``n`` lowest local minima of the (window, delay) grid loss."""
        is_min = losses <= minimum_filter(losses, size=3, mode="nearest")
        cand = np.argwhere(is_min)
        order = np.argsort(losses[is_min], kind="stable")
        return [tuple(int(v) for v in cand[o]) for o in order[:max(n, 1)]]

    def _refine(self, runs, windows, delays, i, j, k, w_lo, dd):
        """Nelder-Mead from grid point ``(i, j)``; returns ``(loss, [window, delay(s)])``."""
        dw = windows[min(i + 1, len(windows) - 1)] - windows[max(i - 1, 0)]
        if k > 0:
            lo = max(self.min_delay_s, delays[j] - self.delay_spread_s)
            hi = min(self.max_delay_s, delays[j] + self.delay_spread_s)
            d0 = [float(np.clip(self._best_delay(r, windows[i], delays, lo, hi), lo, hi)) for r in runs]
            x0 = np.array([windows[i], *d0])
            bounds = [(w_lo, self.max_window_s)] + [(lo, hi)] * len(runs)
        else:
            x0 = np.array([windows[i], delays[j]])
            bounds = [(w_lo, self.max_window_s), (self.min_delay_s, self.max_delay_s)]

        def f(p):
            return float(self._loss(runs, p[0], p[1:] if k > 0 else p[1]))

        simplex = np.vstack([x0, x0 + np.diag(np.r_[dw / 2, np.full(x0.size - 1, dd)])])
        res = minimize(f, x0, method="Nelder-Mead", bounds=bounds,
                       options={"initial_simplex": simplex, "xatol": 1e-5, "fatol": 1e-9,
                                "maxiter": 400 * x0.size})
        start = f(x0)
        return (float(res.fun), res.x) if res.fun <= start else (start, x0)

    @staticmethod
    def _best_delay(run, window_s, delays, lo, hi):
        C, u, zv = run
        ok = delays[(delays >= lo) & (delays <= hi)]
        if ok.size == 0:
            return lo
        losses = [np.sum((_z(boxcar_mean(C, u, window_s, d)) - zv) ** 2) for d in ok]
        return float(ok[int(np.argmin(losses))])

    @staticmethod
    def _loss(runs, window_s, delay_s):
        err, n = 0.0, 0
        delays = np.broadcast_to(np.asarray(delay_s, dtype=float), (len(runs),))
        for (C, u, zv), d in zip(runs, delays, strict=True):
            e = boxcar_mean(C, u, window_s, d)
            err += float(np.sum((_z(e) - zv) ** 2))
            n += u.size
        return err / max(n, 1)

    @staticmethod
    def _grid_loss(runs, windows, delays):
        """Summed squared z-score error of every run on the (window, delay) grid."""
        total = np.zeros((len(runs), windows.size, delays.size))
        for r, (C, u, zv) in enumerate(runs):
            end = u[None, :] - delays[:, None]
            c_end = C(end)
            for i, w in enumerate(windows):  # one window at a time bounds the memory
                e = (c_end - C(end - w)) / w
                total[r, i] = np.sum((_z(e) - zv) ** 2, axis=-1)
        return total

    def comparison(self, X, y=None) -> pd.DataFrame:
        """Measured and emulated readings at every update, both z-normalised.

        For the report's plot of emulated vs measured traces (Yang Fig. 11).

        Returns
        -------
        DataFrame
            Columns :data:`schema.T_S`, :data:`schema.POWER_W` (measured, z)
            and :data:`schema.REFERENCE_POWER_W` (emulated, z).
        """
        check_is_fitted(self)
        _, runs, _ = self._runs(X, y, reset=False)
        delays = (self.run_delays_s_ if len(self.run_delays_s_) == len(runs)
                  else np.full(len(runs), self.delay_s_))
        rows = [pd.DataFrame({schema.T_S: u,
                              schema.POWER_W: zv,
                              schema.REFERENCE_POWER_W: _z(boxcar_mean(C, u, self.window_s_, d))})
                for (C, u, zv), d in zip(runs, delays, strict=True)]
        return pd.concat(rows, ignore_index=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags
