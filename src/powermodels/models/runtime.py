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

import numpy as np
import pandas as pd
from sklearn.utils.validation import check_is_fitted

from .. import schema
from ._clock_curve import ClockCurveRegressor, fit_groups_table
from ._columns import DEPRECATED
from ._curvefit import fit_rational_batch

__all__ = ["RationalTimeModel", "fit_rational_time_batch"]

class RationalTimeModel(ClockCurveRegressor):
    """Thesis eq. 4.5: ``T(f) = a/(1 + b·f) + c/(1 + d·f)``, f in MHz.

    Parameters
    ----------
    clock_column : str or int, default="sm_clock_mhz"
        Column of ``X`` holding the core clock in MHz: a name (looked up in a
        DataFrame's columns) or a position. An ``X`` of a single column
        without names is that column. Other columns are ignored, text
        included (see ``docs/columns.md``).
    max_iter : int, default=200
        Levenberg–Marquardt iterations after the grid start (the ``b ≈ d``
        and ``d → ∞`` directions are flat, so convergence can be slow).
    frequency_column : str or int, default="deprecated"
        Deprecated old name of ``clock_column`` (removed in 0.3).

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

    _PARAMS = ("a_", "b_", "c_", "d_")
    _TARGET = "time"
    _batch_fit = staticmethod(fit_rational_batch)

    def __init__(self, clock_column=schema.SM_CLOCK_MHZ, max_iter=200, frequency_column=DEPRECATED):
        self.clock_column = clock_column
        self.max_iter = max_iter
        self.frequency_column = frequency_column

    def _set_params_from_row(self, row, sse, n):
        self.a_, self.b_, self.c_, self.d_ = (float(v) for v in row)
        self.rmse_ = float(np.sqrt(sse / max(n, 1)))

    def predict_at(self, frequency_mhz):
        """Modelled time at any clock(s), thesis eq. 4.5.

        Parameters
        ----------
        frequency_mhz : float or array-like
            Core clock(s), MHz.

        Returns
        -------
        time : float or ndarray
            Time in the unit of ``y``, of the shape of ``frequency_mhz``.
        """
        check_is_fitted(self, self._PARAMS)
        f = np.asarray(frequency_mhz, dtype=float)
        return self.a_ / (1.0 + self.b_ * f) + self.c_ / (1.0 + self.d_ * f)


def fit_rational_time_batch(frequency_mhz, time_s, groups, *, max_iter=200) -> pd.DataFrame:
    """Fit eq. 4.5 separately for every group, all groups at once.

    Parameters
    ----------
    frequency_mhz, time_s : array-like of shape (n_samples,)
        Clock (MHz) and measured time of every run.
    groups : array-like of shape (n_samples,)
        Configuration (kernel, config...) of every run.
    max_iter : int, default=200
        Levenberg–Marquardt iterations.

    Returns
    -------
    DataFrame
        Indexed by group: ``a``, ``b_per_mhz``, ``c``, ``d_per_mhz``,
        ``rmse``, ``n_samples``.
    """
    labels, params, rmse, n = fit_groups_table(fit_rational_batch, "frequency_mhz", frequency_mhz,
                                               "time_s", time_s, groups, max_iter=max_iter)
    return pd.DataFrame(
        {schema.FIT_TIME_A: params[:, 0], schema.FIT_TIME_B_PER_MHZ: params[:, 1],
         schema.FIT_TIME_C: params[:, 2], schema.FIT_TIME_D_PER_MHZ: params[:, 3],
         schema.FIT_RMSE: rmse, schema.N_SAMPLES: n},
        index=pd.Index(labels, name=schema.GROUP),
    )
