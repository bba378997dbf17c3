"""Transient response of a power reading to a step load (Yang §IV-B, artifact A2)."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval

from .. import schema
from ._series import COLUMN, FINITE, OPTIONAL_COLUMN, robust_update_period, series_from_input, table_column
from ._series import update_points

__all__ = ["RESPONSE_KINDS", "StepResponse", "rise_time"]

#: Yang Fig. 7's four kinds of transient response, by number.
RESPONSE_KINDS = {
    1: "instant",            # reading jumps at the next update
    2: "instant-slow-load",  # reading follows a load whose own power rises slowly
    3: "linear",             # reading ramps linearly (a long averaging window, e.g. 1 s)
    4: "logarithmic",        # concave rise over ~200 ms (Kepler/Maxwell)
}


def rise_time(t: np.ndarray, x: np.ndarray, onset_s: float, low: float = 0.1,
              high: float = 0.9, settle_fraction: float = 0.25, end_s: float | None = None):
    """10 → 90 % rise time of ``x`` after ``onset_s``.

    The baseline is the median before the onset, the final value the median
    over the last ``settle_fraction`` of ``[onset_s, end_s]``.

    Returns
    -------
    t_low, t_high : float
        First times at or after the onset at which the normalised rise
        reaches ``low`` and ``high`` (NaN when never reached).
    normalised : ndarray
        ``(x - baseline) / (final - baseline)``.
    """
    t = np.asarray(t, dtype=float)
    x = np.asarray(x, dtype=float)
    end_s = t[-1] if end_s is None else end_s
    before = x[t < onset_s]
    base = float(np.median(before)) if before.size else float(x[0])
    tail = x[(t >= end_s - settle_fraction * (end_s - onset_s)) & (t <= end_s)]
    final = float(np.median(tail)) if tail.size else float(x[-1])
    span = final - base
    r = (x - base) / span if abs(span) > 1e-12 else np.zeros_like(x)
    after = t >= onset_s

    def first(level):
        hit = np.flatnonzero(after & (r >= level))
        return float(t[hit[0]]) if hit.size else float("nan")

    return first(low), first(high), r


class StepResponse(BaseEstimator):
    """Delay, 10 → 90 % rise time and kind of response of a reading to a step.

    Yang §IV-B: run one long high period (a unit step, 3–6 s) after idle and
    time the reading's rise from 10 % to 90 % of its final value. The step's
    onset is where the known load first crosses half its range; the delay is
    the time from the onset to the 10 % crossing. The response is classified
    into Yang Fig. 7's kinds (:data:`RESPONSE_KINDS`):

    1. *instant*: the 10 → 90 % rise takes at most 1.5 update periods;
    2. *instant, slow load*: slower, but the reference power (when given)
       rises as slowly, so the reading just follows the load;
    3. *linear*: a ramp (a long boxcar window: the 1 s average field);
    4. *logarithmic*: a concave rise (the normalised reading at the middle
       of the 10–90 % span exceeds ``concave_threshold``; a linear ramp gives
       0.5, a first-order lag 0.70).

    Without a reference meter kind 2 cannot be told apart from kinds 3/4.

    Parameters
    ----------
    time_column, load_column, power_column, group_column : str or int
        As in :class:`BoxcarWindow`; with several runs the first one is used.
    reference_column : str or int or None, default=None
        Reference power column of a trace table (kind 2 needs it).
    settle_fraction : float, default=0.25
        Last fraction of the step used as the final value.
    concave_threshold : float, default=0.6

    Attributes
    ----------
    onset_s_ : float
        Time of the load step.
    delay_s_ : float
        Onset to the reading's 10 % crossing.
    rise_time_s_ : float
        10 → 90 % rise time of the reading.
    reference_rise_time_s_ : float
        Same for the reference power (NaN without one).
    update_period_s_ : float
    response_kind_ : int
        Yang's kind, a key of :data:`RESPONSE_KINDS`.
    response_kind_name_ : str
    midpoint_level_ : float
        Normalised reading halfway (in time) between the 10 and 90 % points.
    baseline_w_, final_w_ : float
        Reading before the step and at its end.
    n_features_in_ : int
    """

    _parameter_constraints: ClassVar[dict] = {
        "time_column": COLUMN, "load_column": COLUMN, "power_column": COLUMN, "group_column": OPTIONAL_COLUMN,
        "reference_column": OPTIONAL_COLUMN, "settle_fraction": [Interval(Real, 0, 1, closed="right")],
        "concave_threshold": FINITE,
    }

    def __init__(self, time_column=schema.T_S, load_column=schema.LOAD_ACTIVITY,
                 power_column=schema.POWER_INSTANT_W, group_column=schema.RUN_ID,
                 reference_column=None, settle_fraction=0.25, concave_threshold=0.6):
        self.time_column = time_column
        self.load_column = load_column
        self.power_column = power_column
        self.group_column = group_column
        self.reference_column = reference_column
        self.settle_fraction = settle_fraction
        self.concave_threshold = concave_threshold

    def fit(self, X, y=None):
        """Measure the response to the step in a trace.

        Parameters
        ----------
        X : DataFrame or array-like of shape (n_samples, n_features)
            A trace table, or an array ``[time_s, load]`` (an optional third
            column is taken as the reference power).
        y : array-like of shape (n_samples,), optional
            The reading (required with an array ``X``).

        Returns
        -------
        self
        """
        self._validate_params()
        t, load, reading, groups = series_from_input(
            self, X, y, time_column=self.time_column, load_column=self.load_column,
            power_column=self.power_column, group_column=self.group_column)
        ref = self._reference(X, groups)
        first = groups == groups[0]
        t, load, reading = t[first], load[first], reading[first]
        ref = None if ref is None else ref[first]

        lo, hi = float(load.min()), float(load.max())
        on = load >= lo + 0.5 * (hi - lo) if hi > lo else np.ones(load.size, bool)
        start = int(np.argmax(on))
        off = np.flatnonzero(~on[start:])
        end_s = float(t[start + off[0] - 1]) if off.size else float(t[-1])
        self.onset_s_ = onset = float(t[start])

        t10, t90, r = rise_time(t, reading, onset, settle_fraction=self.settle_fraction,
                                end_s=end_s)
        self.delay_s_ = t10 - onset
        self.rise_time_s_ = t90 - t10
        before = reading[t < onset]
        self.baseline_w_ = float(np.median(before)) if before.size else float(reading[0])
        tail = reading[(t >= end_s - self.settle_fraction * (end_s - onset)) & (t <= end_s)]
        self.final_w_ = float(np.median(tail)) if tail.size else float(reading[-1])
        if ref is not None:
            r10, r90, _ = rise_time(t, ref, onset, settle_fraction=self.settle_fraction,
                                    end_s=end_s)
            self.reference_rise_time_s_ = r90 - r10
        else:
            self.reference_rise_time_s_ = float("nan")
        idx = update_points(t, reading)
        self.update_period_s_ = (robust_update_period(t[idx])[0] if idx.size >= 2
                                 else float("nan"))
        if np.isfinite(t10) and np.isfinite(t90) and t90 > t10:
            mid = 0.5 * (t10 + t90)
            self.midpoint_level_ = float(np.interp(mid, t, r))
        else:
            self.midpoint_level_ = float("nan")
        self.response_kind_ = self._classify()
        self.response_kind_name_ = RESPONSE_KINDS[self.response_kind_]
        return self

    def _reference(self, X, groups):
        if self.reference_column is None:
            if not isinstance(X, pd.DataFrame):
                arr = np.asarray(X, dtype=float)
                if arr.ndim == 2 and arr.shape[1] >= 3:
                    t = arr[:, 0]
                    return arr[np.lexsort((t, groups)), 2]
            return None
        if not isinstance(X, pd.DataFrame):
            raise ValueError("reference_column needs a trace table (DataFrame) X")
        s = table_column(X, self.reference_column, "StepResponse: reference_column")
        v = s.to_numpy(dtype=float)
        if not np.all(np.isfinite(v)):
            raise ValueError(f"StepResponse: column {self.reference_column!r} has NaN values")
        t = table_column(X, self.time_column, "StepResponse: time_column").to_numpy(dtype=float)
        return v[np.lexsort((t, groups))]

    def _classify(self) -> int:
        rise, period = self.rise_time_s_, self.update_period_s_
        if not np.isfinite(rise) or (np.isfinite(period) and rise <= 1.5 * period):
            return 1
        ref_rise = self.reference_rise_time_s_
        if np.isfinite(ref_rise) and ref_rise >= 0.5 * rise:
            return 2
        if np.isfinite(self.midpoint_level_) and self.midpoint_level_ > self.concave_threshold:
            return 4
        return 3

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        return tags
