"""Least-squares core of the per-instruction energy model (Wattchmen §3.1).

:func:`solve_energies` is the column-scaled, lightly ridged non-negative solve;
:func:`identifiability` says which fitted energies the rows pin down. Both keep
memory linear in the number of rows (no full SVD: a 10,000 × 300 design matrix
used to need a 10,000 × 10,000 ``U``).
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import lsq_linear, nnls

__all__ = ["FREE_TOL", "identifiability", "solve_energies"]

#: Null-space component above which a fitted energy is flagged unidentifiable.
FREE_TOL = 0.1


def solve_energies(A: np.ndarray, d: np.ndarray, w: np.ndarray, *, alpha: float,
                   free_last: bool, solver: str = "nnls"):
    """Non-negative ``argmin ‖√w (A x − d)‖² + alpha · Σ_j (s̄/s_j)(s_j x_j)²`` (Wattchmen §3.1).

    Parameters
    ----------
    A : ndarray of shape (n_rows, n_features)
        Design matrix (instruction counts per run; last column the run time
        when the static power is fitted).
    d : ndarray of shape (n_rows,)
        Dynamic energy per run (J).
    w : ndarray of shape (n_rows,)
        Row weights.
    alpha : float
        Ridge weight; ``s_j`` is the column norm and ``s̄`` its median, so among
        always-co-occurring opcodes the penalty is minimised by equal energies.
    free_last : bool
        The last column (the static power) is not shrunk.
    solver : {"nnls", "bvls"}
        ``scipy.optimize.nnls`` (``lsq_linear(method="bvls")`` if it does not
        converge) or bvls directly.

    Returns
    -------
    coef : ndarray of shape (n_features,)
        Solution in the units of ``A``'s columns.
    scaled : ndarray of shape (n_rows, n_features)
        The column-scaled, weighted design matrix (for :func:`identifiability`).
    solver_used : str
        "nnls" or "bvls".
    """
    # Column scaling: counts span 1e3..1e11, so solve for scaled energies.
    scale = np.linalg.norm(A, axis=0)
    scale[scale == 0] = 1.0
    sw = np.sqrt(w)
    As = A / scale * sw[:, None]
    ds = d * sw
    ridge = np.sqrt(alpha * np.median(scale) / scale) if len(scale) else np.zeros(0)
    if free_last and len(ridge):
        ridge[-1] = 0.0
    x_scaled, used = _nnls(np.vstack([As, np.diag(ridge)]),
                           np.concatenate([ds, np.zeros(len(ridge))]), solver)
    return x_scaled / scale, As, used


def _nnls(A, d, solver):
    if A.shape[1] == 0:
        return np.zeros(0), solver
    if solver == "nnls":
        try:
            x, _ = nnls(A, d, maxiter=50 * A.shape[1] + 100)
            return x, "nnls"
        except RuntimeError:  # did not converge: bounded-variable least squares instead
            pass
    res = lsq_linear(A, d, bounds=(0.0, np.inf), method="bvls")
    return np.maximum(res.x, 0.0), "bvls"


def identifiability(As: np.ndarray) -> tuple[int, np.ndarray]:
    """Numerical rank of ``As`` and, per column, whether it is free (not identifiable).

    A column is free when the norm of its component in the null space of
    ``As`` exceeds :data:`FREE_TOL` (1: fully free). With ``V_r`` the first
    ``rank`` right singular vectors, that norm is ``√(1 − ‖V_r[:, j]‖²)``, so
    only the row space is needed: a thin SVD (of the QR factor ``R`` when
    there are more rows than columns), memory linear in the rows.

    Parameters
    ----------
    As : ndarray of shape (n_rows, n_features)
        Column-scaled design matrix.

    Returns
    -------
    rank : int
    free : ndarray of bool, shape (n_features,)
    """
    m, n = As.shape
    if As.size == 0:
        return 0, np.zeros(n, bool)
    core = np.linalg.qr(As, mode="r") if m > n else As
    _, sv, vt = np.linalg.svd(core, full_matrices=False)
    tol = sv.max(initial=0.0) * max(m, n) * np.finfo(float).eps
    rank = int((sv > tol).sum())
    row_space = np.sum(vt[:rank] ** 2, axis=0)
    null_norm = np.sqrt(np.clip(1.0 - row_space, 0.0, None))
    return rank, null_norm > FREE_TOL
