"""The sampler's chunked buffer: windows by time search, constant-cost trims, flat query cost."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from test_harness_sampler import FakeFastDevice

from powermodels import schema
from powermodels.measuring.ring_buffer import ChunkedColumns
from powermodels.measuring.sampler import Sampler


def _filled(n, chunk=64, retention=math.inf, max_rows=None, dt=1e-3):
    buf = ChunkedColumns({"t": float, "v": np.int64}, chunk, retention, max_rows)
    t = np.arange(n) * dt
    buf.extend([t, np.arange(n)])
    return buf, t


@pytest.mark.parametrize("n", [0, 1, 63, 64, 65, 640, 1000])
def test_window_matches_a_brute_force_scan_across_chunk_edges(n):
    buf, t = _filled(n)
    rng = np.random.default_rng(n)
    bounds = [(-1.0, 2.0), (0.0, 0.0), (0.063, 0.064), (0.064, 0.064), (0.5, 0.3)]
    bounds += [tuple(sorted(rng.uniform(-0.01, n * 1e-3 + 0.01, 2))) for _ in range(30)]
    for lo, hi in bounds:
        # the grid's own times, so exact equality at the bounds is exercised
        lo, hi = round(lo, 3), round(hi, 3)
        want = np.flatnonzero((t >= lo) & (t <= hi))
        got = buf.window(lo, hi)
        np.testing.assert_array_equal(got["v"], want)
        assert buf.count(lo, hi) == want.size
    assert len(buf) == n
    assert buf.last_time() == (t[-1] if n else -math.inf)


def test_append_row_by_row_equals_extend():
    a = ChunkedColumns({"t": float, "v": float}, 8)
    for i in range(30):
        a.append(i * 0.5, i * 2.0)
    b, _ = _filled(30, chunk=8, dt=0.5)
    np.testing.assert_array_equal(a.window()["t"], b.window()["t"])
    np.testing.assert_array_equal(a.window()["v"], 2.0 * b.window()["v"])


def test_trim_drops_whole_old_chunks_and_bounds_memory():
    # 10 s kept, 1 kHz for 100 s: at most 10 s + one chunk (+ the one being filled)
    buf, _ = _filled(100_000, chunk=1000, retention=10.0)
    assert 10_000 <= len(buf) <= 12_000
    assert buf.first_time() >= 100.0 - 10.0 - 1.0 - 1e-3 - 1.0
    assert buf.dropped == 100_000 - len(buf)
    capped, _ = _filled(100_000, chunk=1000, max_rows=5_000)
    assert len(capped) <= 6_000
    assert capped.nbytes() <= 7 * 1000 * 16


def test_clear_forgets_everything():
    buf, _ = _filled(500)
    buf.clear()
    assert len(buf) == 0 and buf.window()["t"].size == 0 and buf.last_time() == -math.inf


def _median_query_s(sampler, t_mid, repeats=15):
    costs = []
    for _ in range(repeats):  # CPU time of this thread: other processes on CI do not count
        t0 = time.thread_time()
        sampler.table(t_mid, t_mid + 1.0, run_id="w")
        costs.append(time.thread_time() - t0)
    return float(np.median(costs))


def _fill(sampler, n, period=5e-4):
    t = np.arange(n) * period
    ones = np.ones(n)
    sampler._readings.extend([t, 100 * ones, 90 * ones, 90 * ones, 40 * ones, 1980 * ones,
                              2619 * ones, np.zeros(n, np.int64)])
    sampler._energy.extend([t[::40], 0.05 * np.arange(t[::40].size)])
    return t


def test_window_query_cost_does_not_grow_with_the_buffer():
    """A 1 s window among 10k readings vs among 1M: an O(n) scan would cost ~100x more."""
    small, big = Sampler(FakeFastDevice()), Sampler(FakeFastDevice())
    _fill(small, 10_000)
    _fill(big, 1_000_000)
    # same 1 s window (2,000 rows), at the end of each buffer
    for s in (small, big):
        _median_query_s(s, 1.0, repeats=3)  # warm up
    c_small = _median_query_s(small, 3.5)
    c_big = _median_query_s(big, 498.5)
    trace = big.table(498.5, 499.5, run_id="w")
    assert len(trace) == 2001
    schema.validate_trace_table(trace, required=[schema.ENERGY_COUNTER_J])
    assert c_big < 5 * c_small, (c_small, c_big)
    assert big.rate_hz(498.5, 499.5) == pytest.approx(2000.0)
    assert big.rate_hz() == pytest.approx(2000.0)
