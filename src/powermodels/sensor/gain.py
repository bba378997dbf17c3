"""Steady-state gain and offset of a reading against a reference (Yang §IV-B b, artifact A3)."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from .. import schema
from ._series import COLUMN, FINITE, NON_NEGATIVE, OPTIONAL_COLUMN, series_from_input, update_points
from .window import boxcar_mean, cumulative_integral

__all__ = ["SteadyStateGain"]


class SteadyStateGain(BaseEstimator):
    """``reading = gain · reference + offset`` at steady state.

    Yang §IV-B b (Figs. 8–9): hold several constant load levels, average the
    reading and the reference meter over the settled part of each, and fit a
    line. Here every update of the reading whose reference stayed flat from
    ``settle_s`` before to ``lookahead_s`` after it (standard deviation at
    most ``max_ripple`` of the reference's range) is one point: the reading
    against the mean reference over the reading's own window (``window_s``,
    ``delay_s`` from :class:`BoxcarWindow`) widened by ``lookahead_s`` on
    both sides, so a slow drift (temperature) biases neither. Looking ahead keeps a lagging
    reference (the energy counter: ΔE/Δt is published up to an update
    period late) from pairing a reading taken after a load change with a
    reference value from before it. The fit is ordinary least squares. With
    ``settle_s=0`` every update counts and the reference is taken at the
    update time (for a reading without averaging lag).

    Parameters
    ----------
    time_column : str or int, default=schema.T_S
    reference_column : str or int, default=schema.REFERENCE_POWER_W
        The reference power (external meter; the simulated meter in CI).
    power_column : str or int, default=schema.POWER_INSTANT_W
    group_column : str or int or None, default=schema.RUN_ID
    settle_s : float, default=1.5
        How long the reference must have been flat (longer than the reading's
        window plus delay: 1 s + on Hopper's average field).
    max_ripple : float, default=0.02
    lookahead_s : float, default=0.3
        How long after the update the reference must stay flat as well.
    window_s, delay_s : float, default=0.0
        The reading's boxcar window and delay (as fitted by
        :class:`BoxcarWindow`: the delay may be slightly negative).

    Attributes
    ----------
    gain_ : float
    offset_w_ : float
    n_points_ : int
        Steady updates used.
    residual_w_ : float
        RMS residual of the line, watts.
    n_features_in_ : int
    """

    _parameter_constraints: ClassVar[dict] = {
        "time_column": COLUMN, "reference_column": COLUMN, "power_column": COLUMN,
        "group_column": OPTIONAL_COLUMN, "settle_s": NON_NEGATIVE, "max_ripple": NON_NEGATIVE,
        "lookahead_s": NON_NEGATIVE, "window_s": NON_NEGATIVE,
        "delay_s": FINITE,  # a fitted delay may be slightly negative on a real GPU (a clock offset)
    }

    def __init__(self, time_column=schema.T_S, reference_column=schema.REFERENCE_POWER_W,
                 power_column=schema.POWER_INSTANT_W, group_column=schema.RUN_ID,
                 settle_s=1.5, max_ripple=0.02, lookahead_s=0.3, window_s=0.0, delay_s=0.0):
        self.time_column = time_column
        self.reference_column = reference_column
        self.power_column = power_column
        self.group_column = group_column
        self.settle_s = settle_s
        self.max_ripple = max_ripple
        self.lookahead_s = lookahead_s
        self.window_s = window_s
        self.delay_s = delay_s

    @classmethod
    def _check_instance(cls):
        # sklearn's random data is never steady: compare at the update times
        return cls(settle_s=0.0)

    def fit(self, X, y=None):
        """Fit gain and offset.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            A trace table, or an array ``[time_s, reference_power_w]``.
        y : array-like of shape (n_samples,), optional
            The reading (required with an array ``X``).

        Returns
        -------
        self
        """
        self._validate_params()
        t, ref, reading, groups = series_from_input(
            self, X, y, time_column=self.time_column, load_column=self.reference_column,
            power_column=self.power_column, group_column=self.group_column)
        span = float(np.ptp(ref)) or 1.0
        xs, ys = [], []
        for g in np.unique(groups):
            m = groups == g
            tg, rg, vg = t[m], ref[m], reading[m]
            idx = update_points(tg, vg)
            if self.settle_s == 0:
                idx = np.arange(tg.size)
                xs.append(rg)
                ys.append(vg)
                continue
            idx = idx[(tg[idx] >= tg[0] + self.settle_s)
                      & (tg[idx] <= tg[-1] - self.lookahead_s)]
            if idx.size == 0:
                continue
            u = tg[idx] + self.lookahead_s
            span_s = self.settle_s + self.lookahead_s
            C = cumulative_integral(tg, rg)
            C2 = cumulative_integral(tg, rg ** 2)
            mean = boxcar_mean(C, u, span_s, 0.0)
            var = np.maximum(boxcar_mean(C2, u, span_s, 0.0) - mean ** 2, 0.0)
            steady = np.sqrt(var) <= self.max_ripple * span
            # the reference over the reading's own window, widened both ways
            paired = boxcar_mean(C, u - self.delay_s,
                                 self.window_s + 2 * self.lookahead_s, 0.0)
            xs.append(paired[steady])
            ys.append(vg[idx][steady])
        x = np.concatenate(xs) if xs else np.zeros(0)
        yv = np.concatenate(ys) if ys else np.zeros(0)
        # two levels at least a fifth of the reference's range apart
        if x.size < 2 or np.ptp(x) < 0.2 * span:
            raise ValueError(
                f"{type(self).__name__}: needs steady readings at two or more load levels "
                f"(found {x.size} steady update(s)); hold each level longer than settle_s")
        A = np.column_stack([x, np.ones_like(x)])
        (gain, offset), *_ = np.linalg.lstsq(A, yv, rcond=None)
        self.gain_ = float(gain)
        self.offset_w_ = float(offset)
        self.residual_w_ = float(np.sqrt(np.mean((A @ [gain, offset] - yv) ** 2)))
        self.n_points_ = int(x.size)
        return self

    def correct(self, reading):
        """Map readings onto the reference scale: ``(reading - offset) / gain``."""
        check_is_fitted(self)
        return (np.asarray(reading, dtype=float) - self.offset_w_) / self.gain_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags
