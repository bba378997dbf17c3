"""The thin identifiability check equals the full-SVD null-space test it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from powermodels.models.instruction_solve import FREE_TOL, identifiability


def _full_svd(As):
    _, sv, vt = np.linalg.svd(As, full_matrices=True)
    tol = sv.max(initial=0.0) * max(As.shape) * np.finfo(float).eps
    rank = int((sv > tol).sum())
    null = vt[rank:]
    free = np.linalg.norm(null, axis=0) > FREE_TOL if len(null) else np.zeros(As.shape[1], bool)
    return rank, free


@pytest.mark.parametrize("shape, tied", [((40, 12), ()), ((40, 12), ((2, 3), (5, 9))),
                                         ((8, 20), ()), ((8, 20), ((0, 1),)), ((12, 12), ((4, 7),))])
def test_rank_and_free_columns_match_the_full_svd(shape, tied):
    rng = np.random.default_rng(sum(shape) + len(tied))
    A = rng.poisson(3.0, shape).astype(float)
    for a, b in tied:  # columns that always occur together cannot be separated
        A[:, b] = 2 * A[:, a]
    As = A / np.linalg.norm(A, axis=0)
    rank, free = identifiability(As)
    rank_full, free_full = _full_svd(As)
    assert rank == rank_full
    np.testing.assert_array_equal(free, free_full)
    for a, b in tied:
        assert free[a] and free[b]
    if shape[0] >= shape[1] and not tied:
        assert not free.any()


def test_memory_stays_linear_in_rows():
    import tracemalloc

    rng = np.random.default_rng(0)
    As = rng.random((20000, 50))
    tracemalloc.start()
    identifiability(As)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # a full SVD's U alone would be 20000² × 8 B = 3.2 GB; the thin path needs a few copies of As
    assert peak < 4 * As.nbytes
