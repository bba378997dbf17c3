"""covered_time (attach_load, overlap_fraction) equals the samples x launches sum, in linear time."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.sensor._coverage import covered_time
from powermodels.sensor.correction import overlap_fraction
from powermodels.sensor.report import attach_load


def _brute(a, b, iv):
    a, b = np.asarray(a)[:, None], np.asarray(b)[:, None]
    return np.clip(np.minimum(b, iv[None, :, 1]) - np.maximum(a, iv[None, :, 0]), 0, None).sum(1)


@pytest.mark.parametrize("overlapping", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_covered_time_equals_the_pairwise_sum(seed, overlapping):
    rng = np.random.default_rng(seed)
    if overlapping:
        s = rng.uniform(1e4, 1e4 + 10, 60)
        iv = np.column_stack([s, s + rng.uniform(0, 0.5, 60)])
    else:
        edges = np.sort(rng.uniform(1e4, 1e4 + 10, 120))
        iv = edges.reshape(-1, 2)[rng.permutation(60)]  # disjoint, in any order
    a = np.sort(rng.uniform(1e4 - 1, 1e4 + 11, 500))
    b = a + rng.uniform(0, 0.3, 500)
    np.testing.assert_allclose(covered_time(a, b, iv), _brute(a, b, iv), atol=1e-9)
    assert covered_time(a, b, np.empty((0, 2))).sum() == 0


def test_attach_load_and_overlap_fraction_are_linear_in_the_trace():
    t = 100.0 + np.arange(200_000) * 5e-4          # 100 s at 2 kHz
    starts = 100.0 + np.arange(10_000) * 0.01       # 10,000 launches of 5 ms
    iv = np.column_stack([starts, starts + 0.005])
    trace = pd.DataFrame({schema.T_S: t, schema.POWER_INSTANT_W: 300.0})
    t0 = time.perf_counter()
    out = attach_load(trace, iv)
    elapsed = time.perf_counter() - t0
    # pairwise would be 2e9 overlaps (16 GB); the time search takes well under a second
    assert elapsed < 2.0, elapsed
    load = out[schema.LOAD_ACTIVITY].to_numpy()
    assert load[1:].mean() == pytest.approx(0.5, abs=1e-3)
    k = slice(1000, 1040)
    np.testing.assert_allclose(load[k], np.clip(_brute(t[k] - 5e-4, t[k], iv) / 5e-4, 0, 1), atol=1e-9)
    f = overlap_fraction(t[k] - 5e-4, t[k], iv)
    np.testing.assert_allclose(f, load[k], atol=1e-9)


def test_launch_ending_before_it_starts_is_refused():
    # A launch [s, e] with e < s used to count as nothing (pairwise clip); the cumulative
    # form would subtract its negative length from its neighbours' coverage instead.
    iv = np.array([[0.0, 1.0], [1.6, 1.2], [2.0, 3.0]])
    with pytest.raises(ValueError, match="ends before it starts"):
        covered_time(np.array([0.5, 1.0]), np.array([1.5, 2.5]), iv)
    trace = pd.DataFrame({schema.T_S: np.arange(0.0, 3.5, 0.5)})
    with pytest.raises(ValueError, match="ends before it starts"):
        attach_load(trace, iv)
