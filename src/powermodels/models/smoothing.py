"""Smoothing filters for trace matrices (thesis §4.3), vectorised across runs and time.

A trace matrix holds one run per row and one resampled time point per column
(:func:`powermodels.schema.validate_trace_matrix`). Every filter here works
along axis 1, so each row is filtered independently and the output has the
input's shape. They are stateless transformers: ``fit`` only validates and
records the number of time points (the shared plumbing is
:class:`~powermodels.models.trace_filter.TraceFilter`).

The three filters of thesis §4.3:

- :class:`MovingAverage` — boxcar mean over ``window`` samples (thesis eq. 4.8),
  with shrinking windows at the edges so the output keeps the input's shape.
- :class:`GHFilter` — the g-h (alpha-beta) filter of thesis §4.3.2; a linear
  time-invariant IIR filter, run with :func:`scipy.signal.lfilter`.
- :class:`KalmanFilter1D` — the scalar random-walk Kalman filter of thesis
  §4.3.3, with its closed-form gains (:func:`kalman_gains`) and the blocked
  recurrence it runs on (:func:`first_order_recurrence`). They live in
  :mod:`powermodels.models.kalman` (its docstring says how the filter is
  computed) and are re-exported here, so
  ``from powermodels.models.smoothing import KalmanFilter1D`` keeps working.

Results equal FilterPy's ``GHFilter.batch_filter`` and a ``KalmanFilter``
predict/update loop to ~1e-12 (see ``tests/models/test_models_smoothing.py``)
and run ~50× (g-h) to ~1,400–2,100× (Kalman) faster on 10^6 samples; a
compiled (numba) loop of the same recursion is faster still in most layouts
(ours 0.56–1.33× its speed, ``benchmarks/bench_filters.py``).
"""

from __future__ import annotations

import numbers
from typing import ClassVar

import numpy as np
from scipy.ndimage import uniform_filter1d
from scipy.signal import lfilter
from sklearn.utils._param_validation import Interval, StrOptions

from .kalman import KalmanFilter1D, first_order_recurrence, kalman_gains
from .trace_filter import FINITE, TraceFilter, check_real, initial_level

__all__ = ["GHFilter", "KalmanFilter1D", "MovingAverage", "first_order_recurrence", "kalman_gains"]


class MovingAverage(TraceFilter):
    """Boxcar moving average along time (thesis §4.3.1, eq. 4.8).

    Each output sample is the mean of the input samples inside a window of
    ``window`` samples. Near the ends of a row the window is cut to the
    samples that exist (the mean of fewer samples), so the output has the
    input's shape and a constant row is returned unchanged.

    Parameters
    ----------
    window : int, default=9
        Window length in samples; the thesis uses 9 (~80 ms of its data).
    align : {"centered", "trailing", "leading"}, default="centered"
        Where the window sits relative to output sample ``i``:

        - ``"centered"``: samples ``i - window//2 … i + (window-1)//2``
          (no delay; for an even window one more sample from the past);
        - ``"trailing"``: samples ``i - window + 1 … i`` (causal, usable in
          real time; delays a step by ``(window-1)/2`` samples);
        - ``"leading"``: samples ``i … i + window - 1``, exactly eq. 4.8 for
          ``i ≤ N - window + 1``.

    Attributes
    ----------
    n_features_in_ : int
        Number of time points seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a DataFrame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from powermodels.models.smoothing import MovingAverage
    >>> MovingAverage(window=3).fit_transform(np.array([[1.0, 2.0, 6.0, 2.0]]))
    array([[1.5       , 3.        , 3.33333333, 4.        ]])
    """

    _parameter_constraints: ClassVar[dict] = {
        "window": [Interval(numbers.Integral, 1, None, closed="left")],
        "align": [StrOptions({"centered", "trailing", "leading"})],
    }

    def __init__(self, window=9, align="centered"):
        self.window = window
        self.align = align

    def _check_params(self):
        self._validate_params()

    def _filter(self, Z: np.ndarray) -> np.ndarray:
        k = int(self.window)
        n = Z.shape[1]
        # Window of sample i is [i - before, i + after].
        before = {"centered": k // 2, "trailing": k - 1, "leading": 0}[self.align]
        after = k - 1 - before
        # scipy's origin shifts the centred window; with zero padding its mean is
        # sum / k, right wherever the window is whole: only the edge columns, whose
        # windows hold fewer real samples, are rescaled (no pass over the interior).
        out = uniform_filter1d(Z, k, axis=1, mode="constant", cval=0.0, origin=before - k // 2)
        i = np.r_[0:min(before, n), max(n - after, min(before, n)):n]
        counts = np.minimum(i + after, n - 1) - np.maximum(i - before, 0) + 1
        out[:, i] *= k / counts
        return out


class GHFilter(TraceFilter):
    """g-h (alpha-beta) filter along time (thesis §4.3.2), as FilterPy's ``GHFilter``.

    For each measurement ``z_k`` (FilterPy ``GHFilter.batch_filter``)::

        x_pred = x + dt * dx                # predict
        r      = z_k - x_pred               # residual
        dx     = dx + (h / dt) * r          # correct the rate
        x      = x_pred + g * r             # correct the level (the output)

    Eliminating ``dx`` gives the linear IIR filter
    ``X(z)/Z(z) = (g + (h - g) z⁻¹) / (1 + (g + h - 2) z⁻¹ + (1 - g) z⁻²)``,
    which is run with one :func:`scipy.signal.lfilter` call across all rows,
    its initial state (``zi``) set from ``x0`` and ``dx0``. It is stable for ``0 < g < 2`` and ``0 < h < 4 - 2g``, tracks a
    linear ramp without lag at steady state, and ``g = 1, h = 0`` is the
    identity. ``dt`` only enters through ``dx0`` (the output does not depend
    on it when ``dx0 = 0``).

    Parameters
    ----------
    g : float, default=0.2
        Level gain, ``0 < g < 2``. Larger follows the measurements more
        closely (less smoothing).
    h : float, default=0.02
        Rate gain, ``0 <= h < 4 - 2g``. Larger adapts the trend faster.
    dt : float, default=1.0
        Time step of the prediction (the thesis uses the mean sampling
        interval); in the units of ``dx0``.
    x0 : float or None, default=None
        Initial level; None uses the first sample of each row (thesis).
    dx0 : float, default=0.0
        Initial rate per unit of ``dt`` (thesis: 0, no initial trend).

    Attributes
    ----------
    n_features_in_ : int
        Number of time points seen in ``fit``.
    feature_names_in_ : ndarray of str
        Column names, when ``X`` was a DataFrame with string column names.

    Examples
    --------
    >>> import numpy as np
    >>> from powermodels.models.smoothing import GHFilter
    >>> GHFilter(g=0.5, h=0.1).fit_transform(np.array([[10.0, 12.0, 11.0, 13.0]]))
    array([[10.  , 11.  , 11.1 , 12.14]])
    """

    _parameter_constraints: ClassVar[dict] = {
        "g": [Interval(numbers.Real, 0, 2, closed="neither")],
        "h": [Interval(numbers.Real, 0, 4, closed="left")],  # and h < 4 - 2 g (stability), checked in fit
        "dt": [Interval(numbers.Real, 0, None, closed="neither")],
        "x0": [FINITE, None],
        "dx0": [FINITE],
    }

    def __init__(self, g=0.2, h=0.02, dt=1.0, x0=None, dx0=0.0):
        self.g = g
        self.h = h
        self.dt = dt
        self.x0 = x0
        self.dx0 = dx0

    def _check_params(self):
        self._validate_params()
        check_real("h", self.h, low=0.0, high=4.0 - 2.0 * float(self.g), high_open=True)

    def _filter(self, Z: np.ndarray) -> np.ndarray:
        g, h, dt, dx0 = float(self.g), float(self.h), float(self.dt), float(self.dx0)
        x_init = initial_level(self.x0, Z)
        b = np.array([g, h - g])
        a = np.array([1.0, g + h - 2.0, 1.0 - g])
        # Transposed direct form II state before the first sample, chosen so that
        # y[0] = x_pred + g (z[0] - x_pred) with x_pred = x0 + dt dx0, and the
        # difference equation then continues from y[-1] = x0 (one lfilter call).
        zi = np.stack([(1.0 - g) * (x_init + dt * dx0), -(1.0 - g) * x_init], axis=1)
        out, _ = lfilter(b, a, Z, axis=1, zi=zi)
        return out
