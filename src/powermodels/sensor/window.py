"""Boxcar averaging window and delay of a power reading (Yang §IV-C, artifact A4)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import minimize
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .. import schema
from ._series import robust_update_period, series_from_input, update_points

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


def _z(x: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance along the last axis (constant rows become 0)."""
    m = x.mean(axis=-1, keepdims=True)
    s = x.std(axis=-1, keepdims=True)
    return np.divide(x - m, s, out=np.zeros_like(x), where=s > 1e-12 * (np.abs(m) + 1))


class BoxcarWindow(BaseEstimator):
    """Averaging window and delay of a power reading, fitted by emulation.

    Yang §IV-C: from the known load (the square wave the benchmark ran, or a
    reference meter when one exists) emulate the reading a sensor with a
    boxcar window ``w`` ending ``d`` before each update would publish,
    z-normalise emulated and measured readings so that only the shape
    counts, and minimise their mean squared difference with Nelder-Mead.
    The loss is evaluated first on a grid of windows and delays (which gives
    the loss curve over window size, Yang Fig. 12, and a start that avoids
    the aliasing minima at multiples of the load period); Nelder-Mead then
    refines the best grid point. Several runs (e.g. the load periods 2/3 ...
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
    discard_s : float or None, default=None
        Updates in the first ``discard_s`` seconds of each run are not
        compared (Yang discards the first second). The default,
        ``max_window_s + max_delay_s``, keeps only updates whose window lies
        inside the run for every window and delay tried, so the load before
        the run (unknown) never enters the emulation.
    n_windows : int, default=60
        Points of the (geometric) window grid.

    Attributes
    ----------
    window_s_ : float
        Boxcar averaging window in seconds.
    delay_s_ : float
        Time from the window's end to the update that publishes it.
    update_period_s_ : float
        Update period of the reading (as :class:`UpdatePeriod`).
    sampled_fraction_ : float
        ``min(1, window_s_ / update_period_s_)``: the share of the time the
        reading sees (Yang: 25 % on A100/H100).
    loss_ : float
        Final loss (MSE of z-scores, 0 = perfect, 1 = no better than flat).
    loss_curve_ : ndarray of shape (n_windows, 2)
        Window size and the smallest loss over delays, for plotting.
    n_updates_ : int
        Number of updates compared.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> t = np.arange(0, 6, 1e-3)
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

    def __init__(self, time_column=schema.T_S, load_column=schema.LOAD_ACTIVITY,
                 power_column=schema.POWER_INSTANT_W, group_column=schema.RUN_ID,
                 max_window_s=1.5, max_delay_s=0.2, discard_s=None, n_windows=60):
        self.time_column = time_column
        self.load_column = load_column
        self.power_column = power_column
        self.group_column = group_column
        self.max_window_s = max_window_s
        self.max_delay_s = max_delay_s
        self.discard_s = discard_s
        self.n_windows = n_windows

    @classmethod
    def _check_instance(cls):
        # sklearn's random "traces" last a few seconds of time: keep every update
        return cls(discard_s=0.0)

    def _validate_params(self):
        if not self.max_window_s > 0:
            raise ValueError(f"max_window_s must be > 0, got {self.max_window_s}")
        if not self.max_delay_s >= 0:
            raise ValueError(f"max_delay_s must be >= 0, got {self.max_delay_s}")
        if self.discard_s is not None and not self.discard_s >= 0:
            raise ValueError(f"discard_s must be >= 0 or None, got {self.discard_s}")
        if int(self.n_windows) < 3:
            raise ValueError(f"n_windows must be >= 3, got {self.n_windows}")

    def _discard(self) -> float:
        if self.discard_s is None:
            return float(self.max_window_s + self.max_delay_s)
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
                runs.append((cumulative_integral(tg, lg), tu[keep], rg[idx][keep]))
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
        n_d = int(min(200, max(10, np.ceil(self.max_delay_s / max(dt, 1e-4)) + 1)))
        delays = np.linspace(0.0, self.max_delay_s, n_d)
        losses = self._grid_loss(runs, windows, delays)
        i, j = np.unravel_index(np.argmin(losses), losses.shape)
        self.loss_curve_ = np.column_stack([windows, losses.min(axis=1)])
        x0 = np.array([windows[i], delays[j]])
        dw = windows[min(i + 1, len(windows) - 1)] - windows[max(i - 1, 0)]
        dd = max(delays[1] - delays[0], 1e-4) if len(delays) > 1 else 1e-3
        res = minimize(
            lambda p: float(self._loss(runs, p[0], p[1])), x0, method="Nelder-Mead",
            bounds=[(w_lo, self.max_window_s), (0.0, self.max_delay_s)],
            options={"initial_simplex": x0 + np.array([[0, 0], [dw / 2, 0], [0, dd]]),
                     "xatol": 1e-5, "fatol": 1e-9, "maxiter": 400})
        best = res.x if res.fun <= losses[i, j] else x0
        self.window_s_ = float(best[0])
        self.delay_s_ = float(best[1])
        self.loss_ = float(min(res.fun, losses[i, j]))
        pooled = [np.diff(u) for u in all_updates]
        d = np.concatenate(pooled) if pooled else np.zeros(0)
        d = d[d > 0]
        self.update_period_s_ = (robust_update_period(np.concatenate([[0.0], np.cumsum(d)]))[0]
                                 if d.size else float("nan"))
        self.sampled_fraction_ = (float(min(1.0, self.window_s_ / self.update_period_s_))
                                  if self.update_period_s_ > 0 else float("nan"))
        self.n_updates_ = int(sum(r[1].size for r in runs))
        return self

    @staticmethod
    def _loss(runs, window_s, delay_s):
        err, n = 0.0, 0
        for C, u, v in runs:
            e = boxcar_mean(C, u, window_s, delay_s)
            err += float(np.sum((_z(e) - _z(v)) ** 2))
            n += u.size
        return err / max(n, 1)

    @staticmethod
    def _grid_loss(runs, windows, delays):
        total = np.zeros((windows.size, delays.size))
        n = 0
        for C, u, v in runs:
            end = u[None, :] - delays[:, None]
            c_end, zv = C(end), _z(v)[None, :]
            for i, w in enumerate(windows):  # one window at a time bounds the memory
                e = (c_end - C(end - w)) / w
                total[i] += np.sum((_z(e) - zv) ** 2, axis=-1)
            n += u.size
        return total / max(n, 1)

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
        rows = [pd.DataFrame({schema.T_S: u,
                              schema.POWER_W: _z(v),
                              schema.REFERENCE_POWER_W: _z(boxcar_mean(C, u, self.window_s_,
                                                                       self.delay_s_))})
                for C, u, v in runs]
        return pd.concat(rows, ignore_index=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags
