"""RationalTimeModel (thesis eq. 4.5)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import curve_fit

from powermodels.models.runtime import RationalTimeModel, fit_rational_time_batch


def _t(f, a, b, c, d):
    return a / (1 + b * f) + c / (1 + d * f)


@pytest.mark.parametrize(
    "params",
    [(2e-3, 0.0, 4e-2, 5e-2), (5e-3, 1e-4, 1e-1, 2e-2), (1e-3, 0.0, 1.0, 1.0)],
)
def test_recovers_curve(params):
    rng = np.random.default_rng(0)
    f = np.repeat(np.arange(600.0, 2001.0, 100.0), 2)
    t = _t(f, *params) * (1 + rng.normal(0, 0.002, f.size))
    m = RationalTimeModel().fit(f[:, None], t)
    grid = np.linspace(600, 2000, 50)
    np.testing.assert_allclose(m.predict_at(grid), _t(grid, *params), rtol=0.01)
    assert 0 <= m.b_ <= m.d_ and m.a_ >= 0 and m.c_ >= 0


def test_at_least_as_good_as_curve_fit_from_naive_start():
    rng = np.random.default_rng(3)
    f = np.arange(500.0, 2001.0, 75.0)
    t = _t(f, 3e-3, 2e-4, 2e-1, 1e-2) * (1 + rng.normal(0, 0.003, f.size))
    m = RationalTimeModel().fit(f[:, None], t)
    sse_ours = np.sum((m.predict_at(f) - t) ** 2)
    try:
        p, _ = curve_fit(_t, f, t, p0=[t.max(), 1e-3, t.min(), 1e-3], bounds=(0, np.inf), maxfev=20000)
        sse_cf = np.sum((_t(f, *p) - t) ** 2)
    except RuntimeError:
        sse_cf = np.inf
    # c/(1+d f) with d → ∞ is a flat valley (≈ (c/d)/f); within 1 % of the best SSE is the same curve
    assert sse_ours <= sse_cf * 1.01


def test_batch_equals_single():
    f = np.tile(np.arange(600.0, 2001.0, 200.0), 3)
    g = np.repeat(["x", "y", "z"], 8)
    t = _t(f, 1e-3, 0, np.array([1.0, 2.0, 3.0])[np.searchsorted(["x", "y", "z"], g)], 1e-2)
    table = fit_rational_time_batch(f, t, g)
    single = RationalTimeModel().fit(f[g == "y", None], t[g == "y"])
    assert table.loc["y", "c"] == pytest.approx(single.c_, rel=1e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="1 sample"):
        RationalTimeModel().fit([[1000.0]], [1.0])
    with pytest.raises(ValueError, match="negative"):
        RationalTimeModel().fit([[1000.0], [1200.0]], [1.0, -1.0])
    with pytest.raises(ValueError, match="clock_column=3"):
        RationalTimeModel(clock_column=3).fit([[1000.0], [1200.0]], [1.0, 2.0])
