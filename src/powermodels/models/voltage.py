"""Piecewise-linear relative voltage V(f), shared by the frequency and DVFS models.

NVML reports no voltage, so the models use the shape Kernel Tuner's
``energy.py`` uses: V is constant below a knee ("ridge") frequency and
rises linearly above it (thesis §4.1.1, eq. 4.1; DSO eq. 1 needs V(f) too).
"""

from __future__ import annotations

import numpy as np

__all__ = ["relative_voltage"]


def relative_voltage(f_mhz, knee_mhz: float, slope_per_ghz: float) -> np.ndarray:
    """Relative voltage: 1 below ``knee_mhz``, ``1 + slope·(f − knee)/1000`` above.

    Parameters
    ----------
    f_mhz : array-like
        Core clock(s) in MHz.
    knee_mhz : float
        Frequency where voltage starts to rise.
    slope_per_ghz : float
        Relative voltage increase per GHz above the knee (≥ 0).

    Returns
    -------
    ndarray
        V(f) / V_min, same shape as ``f_mhz``.
    """
    f = np.asarray(f_mhz, dtype=float)
    return 1.0 + slope_per_ghz * np.maximum(f - knee_mhz, 0.0) / 1000.0
