"""Kernel time as a function of the core clock (thesis eq. 4.5).

``T(f) = a/(1 + b·f) + c/(1 + d·f)``: two components that fall with the clock
at different rates (e.g. a compute-bound ~1/f part and a nearly constant
memory-bound part), so the curve drops fast at low clocks and flattens at high
ones. Needed to predict energy at clocks that were never measured (eq. 4.4).

Fitting a sum of two rational terms is notoriously start-sensitive (swap
symmetry, flat directions when ``b = d``). The fit here is a deterministic
multi-start: a grid over pairs ``b < d`` with ``(a, c) ≥ 0`` solved in closed
form at every pair, then a bounded Levenberg–Marquardt refinement on scaled
clock and time (``powermodels.models._curvefit``).
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._columns import _all_nonnegative, column_index, numeric_column
from ._curvefit import fit_rational_batch, pad_groups

__all__ = ["RationalTimeModel", "fit_rational_time_batch"]

_PARAMS = ("a_", "b_", "c_", "d_")


class RationalTimeModel(RegressorMixin, BaseEstimator):
    """Thesis eq. 4.5: ``T(f) = a/(1 + b·f) + c/(1 + d·f)``, f in MHz.

    Parameters
    ----------
    frequency_column : str or int, default=0
        Column of ``X`` holding the core clock in MHz (a name needs a
        DataFrame). Other columns are ignored.
    max_iter : int, default=200
        Levenberg–Marquardt iterations after the grid start (the ``b ≈ d``
        and ``d → ∞`` directions are flat, so convergence can be slow).

    Attributes
    ----------
    a_, c_ : float
        Amplitudes of the two components (unit of ``y``), ≥ 0.
    b_, d_ : float
        Their decay rates, 1/MHz, ``0 ≤ b_ ≤ d_``.
    rmse_ : float
        Root-mean-square residual (unit of ``y``).
    n_iter_ : int
        Levenberg–Marquardt iterations used.

    Examples
    --------
    >>> import numpy as np
    >>> f = np.linspace(600, 2000, 15)
    >>> t = 2e-4 + 3.0 / f                      # memory floor + compute part
    >>> model = RationalTimeModel().fit(f[:, None], t)
    >>> bool(np.allclose(model.predict_at([700, 1900]), 2e-4 + 3.0 / np.array([700, 1900]), rtol=1e-3))
    True
    """

    def __init__(self, frequency_column=0, max_iter=200):
        self.frequency_column = frequency_column
        self.max_iter = max_iter

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.target_tags.positive_only = True
        tags.regressor_tags.poor_score = True  # a 4-parameter curve of one column
        return tags

    def _frequency(self, X, reset: bool) -> np.ndarray:
        X_in = X
        X = validate_data(self, X, reset=reset, dtype="numeric")
        src = X_in if isinstance(X_in, pd.DataFrame) else X
        j = column_index(src, self.frequency_column, "frequency_column")
        _all_nonnegative(X)
        return numeric_column(src, j, "frequency_column", nonnegative=True, unit=" MHz")

    def fit(self, X, y):
        """Fit eq. 4.5 to clocks (column of ``X``, MHz) and times ``y``."""
        if not isinstance(self.max_iter, (int, np.integer)) or self.max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {self.max_iter!r}")
        X_in = X
        X, y = validate_data(self, X, y, y_numeric=True, dtype="numeric")
        j = column_index(X_in if isinstance(X_in, pd.DataFrame) else X, self.frequency_column,
                         "frequency_column")
        f = numeric_column(X, j, "frequency_column", nonnegative=True, unit=" MHz")
        _all_nonnegative(X)
        y = _check_time(y)
        params, sse, n_iter = fit_rational_batch(f[None], y[None], np.ones((1, f.size)),
                                                 max_iter=self.max_iter)
        self._set_params_from_row(params[0], sse[0], f.size)
        self.n_iter_ = int(n_iter)
        return self

    def _set_params_from_row(self, row, sse, n):
        self.a_, self.b_, self.c_, self.d_ = (float(v) for v in row)
        self.rmse_ = float(np.sqrt(sse / max(n, 1)))

    def predict_at(self, frequency_mhz):
        """Modelled time at any clock(s) ``frequency_mhz`` (scalar or array)."""
        check_is_fitted(self, _PARAMS)
        f = np.asarray(frequency_mhz, dtype=float)
        return self.a_ / (1.0 + self.b_ * f) + self.c_ / (1.0 + self.d_ * f)

    def predict(self, X):
        """Modelled time at the clocks in ``X``'s frequency column."""
        check_is_fitted(self, _PARAMS)
        return self.predict_at(self._frequency(X, reset=False))

    @classmethod
    def _batch_fit_groups(cls, template, X, y, codes, n_groups):
        """Fit one clone per group at once (fast path of GroupedEstimator)."""
        X_in = X
        X = validate_data(template, X, reset=True, dtype="numeric")
        j = column_index(X_in if isinstance(X_in, pd.DataFrame) else X, template.frequency_column,
                         "frequency_column")
        f = numeric_column(X, j, "frequency_column", nonnegative=True, unit=" MHz")
        _all_nonnegative(X)
        y = _check_time(np.asarray(y, dtype=float))
        mask, fp, yp = pad_groups(codes, n_groups, f, y)
        params, sse, n_iter = fit_rational_batch(fp, yp, mask, max_iter=template.max_iter)
        counts = mask.sum(axis=1)
        out = []
        for g in range(n_groups):
            est = copy.copy(template)  # params are scalars; clone() per group costs more than the fit
            est.n_features_in_ = template.n_features_in_
            if hasattr(template, "feature_names_in_"):
                est.feature_names_in_ = template.feature_names_in_
            est._set_params_from_row(params[g], sse[g], counts[g])
            est.n_iter_ = int(n_iter)
            out.append(est)
        return out


def _check_time(y) -> np.ndarray:
    y = np.asarray(y, dtype=float)
    if y.shape[0] < 2:
        raise ValueError(
            f"time has {y.shape[0]} sample{'s' if y.shape[0] != 1 else ''}, needs at least 2 "
            f"(n_samples = {y.shape[0]})"
        )
    if y.min() < 0:
        raise ValueError(f"time (y) has negative value {y.min():g}")
    return y


def fit_rational_time_batch(frequency_mhz, time_s, groups, *, max_iter=200) -> pd.DataFrame:
    """Fit eq. 4.5 separately for every group, all groups at once.

    Returns a DataFrame indexed by group with ``a``, ``b_per_mhz``, ``c``,
    ``d_per_mhz``, ``rmse`` and ``n_samples``.
    """
    f = np.asarray(frequency_mhz, dtype=float).ravel()
    t = np.asarray(time_s, dtype=float).ravel()
    g = np.asarray(groups).ravel()
    if not f.size == t.size == g.size:
        raise ValueError(f"frequency_mhz, time_s and groups differ in length: {f.size}, {t.size}, {g.size}")
    for name, arr in (("frequency_mhz", f), ("time_s", t)):
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} has NaN or infinite values")
        if arr.size and arr.min() < 0:
            raise ValueError(f"{name} has negative values")
    labels, codes = np.unique(g, return_inverse=True)
    mask, fp, tp = pad_groups(codes, labels.size, f, t)
    params, sse, _ = fit_rational_batch(fp, tp, mask, max_iter=max_iter)
    n = mask.sum(axis=1)
    return pd.DataFrame(
        {"a": params[:, 0], "b_per_mhz": params[:, 1], "c": params[:, 2], "d_per_mhz": params[:, 3],
         "rmse": np.sqrt(sse / np.maximum(n, 1)), "n_samples": n.astype(int)},
        index=pd.Index(labels, name="group"),
    )
