"""Validation workloads of the per-instruction energy calibration (CuPy, real GPUs).

Workloads that are not microbenchmarks, to check a calibrated table on the
user's GPU: two fixed sets (the ones the H200 figures of
``docs/instruction-energy.md`` were measured with) and any
:func:`~powermodels.workloads.as_workload` spec (a registry kernel
name, ``"module:function"``, ``"file.py:name"``). Each builder takes the CuPy
module and returns name → zero-argument step; CuPy is imported by the caller.
"""

from __future__ import annotations

import numpy as np

__all__ = ["TILED_SGEMM", "WORKLOAD_SETS", "build_workloads", "fresh_workloads",
           "heldout_workloads"]

TILED_SGEMM = r"""
extern "C" __global__ void tiled_sgemm(const float* A, const float* B, float* C, int n) {
  __shared__ float As[32][33], Bs[32][33];
  int tx = threadIdx.x, ty = threadIdx.y, row = blockIdx.y * 32 + ty, col = blockIdx.x * 32 + tx;
  float acc = 0.f;
  for (int t = 0; t < n; t += 32) {
    As[ty][tx] = A[row * n + t + tx];
    Bs[ty][tx] = B[(t + ty) * n + col];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 32; ++k) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}
"""


def heldout_workloads(cp) -> dict:
    """First held-out set (13 workloads, not microbenchmarks): name → zero-argument step.

    cuBLAS SGEMM/HGEMM/DGEMM, a tiled SGEMM, reduction, sort, FFT, STREAM triad,
    CSR SpMV, softmax, transpose, histogram, cumsum. ``cp`` is the CuPy module.
    """
    rs = cp.random.RandomState(0)
    w = {}

    def gemm(n, dtype):
        a = rs.uniform(-1, 1, (n, n)).astype(dtype)
        b = rs.uniform(-1, 1, (n, n)).astype(dtype)
        c = cp.empty((n, n), dtype=dtype)
        return lambda: cp.matmul(a, b, out=c)

    w["cublas_sgemm_4096"] = gemm(4096, cp.float32)
    w["cublas_hgemm_8192"] = gemm(8192, cp.float16)
    w["cublas_dgemm_4096"] = gemm(4096, cp.float64)

    n = 2048
    tiled = cp.RawKernel(TILED_SGEMM, "tiled_sgemm")
    ta, tb = rs.uniform(-1, 1, (n, n), dtype=cp.float32), rs.uniform(-1, 1, (n, n), dtype=cp.float32)
    tc = cp.empty((n, n), dtype=cp.float32)
    w["tiled_sgemm_2048"] = lambda: tiled((n // 32, n // 32), (32, 32), (ta, tb, tc, np.int32(n)))

    x = rs.uniform(0, 1, 2**28, dtype=cp.float32)
    w["reduction_sum_256M"] = lambda: x.sum()
    xs = rs.uniform(0, 1, 2**24, dtype=cp.float32)
    w["sort_16M"] = lambda: cp.sort(xs)
    xf = (rs.uniform(0, 1, 2**24) + 1j * rs.uniform(0, 1, 2**24)).astype(cp.complex64)
    w["fft_16M"] = lambda: cp.fft.fft(xf)
    triad = cp.ElementwiseKernel("T b, T c, T s", "T a", "a = b + s * c", "pm_triad")
    tb_, tc_, ta_ = (rs.uniform(0, 1, 2**26, dtype=cp.float32) for _ in range(3))
    w["stream_triad_64M"] = lambda: triad(tb_, tc_, np.float32(3.0), ta_)

    import cupyx.scipy.sparse as sp
    rows, per_row = 2**21, 16
    indptr = cp.arange(0, rows * per_row + 1, per_row, dtype=cp.int32)
    indices = rs.randint(0, rows, rows * per_row).astype(cp.int32)
    data = rs.uniform(0, 1, rows * per_row, dtype=cp.float32)
    mat = sp.csr_matrix((data, indices, indptr), shape=(rows, rows))
    vec = rs.uniform(0, 1, rows, dtype=cp.float32)
    w["spmv_csr_2M"] = lambda: mat @ vec
    sm = rs.uniform(-4, 4, (4096, 8192), dtype=cp.float32)

    def softmax():
        e = cp.exp(sm - sm.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    w["softmax_4096x8192"] = softmax
    tr = rs.uniform(0, 1, (8192, 8192), dtype=cp.float32)
    w["transpose_8192"] = lambda: cp.ascontiguousarray(tr.T)
    bins = rs.randint(0, 1024, 2**26).astype(cp.int32)
    w["histogram_64M"] = lambda: cp.bincount(bins, minlength=1024)
    cs = rs.uniform(0, 1, 2**26, dtype=cp.float32)
    w["cumsum_64M"] = lambda: cp.cumsum(cs)
    return w


def fresh_workloads(cp) -> dict:
    """Second held-out set, added after the model was frozen (never used to choose settings).

    Library kernels and code paths the first set does not have: strided-batched
    GEMM, GEMV, an FP16 fused elementwise kernel, an LU solve (cuSOLVER), a 2-D
    convolution, transcendentals, argsort, a random gather + scatter and an einsum.
    A workload whose construction fails is left out (and said so), not the set.
    """
    rs = cp.random.RandomState(1)
    w = {}

    def add(name, build):
        try:
            w[name] = build()
        except Exception as err:  # e.g. a missing cupyx module on the machine
            print(f"{name}: not built ({type(err).__name__}: {err})", flush=True)

    def batched_sgemm():
        a, b = (rs.uniform(-1, 1, (64, 1024, 1024), dtype=cp.float32) for _ in range(2))
        c = cp.empty((64, 1024, 1024), dtype=cp.float32)
        return lambda: cp.matmul(a, b, out=c)

    def sgemv():
        a = rs.uniform(-1, 1, (16384, 16384), dtype=cp.float32)
        x = rs.uniform(-1, 1, 16384, dtype=cp.float32)
        return lambda: cp.matmul(a, x)

    def fp16_fused():
        a, b, c = (rs.uniform(0, 1, 2**26, dtype=cp.float32).astype(cp.float16) for _ in range(3))

        @cp.fuse(kernel_name="pm_fp16_fused")
        def f(a, b, c):
            return a * b + c * a - b * c

        return lambda: f(a, b, c)

    def lu_solve():
        n = 4096
        a = rs.uniform(-1, 1, (n, n), dtype=cp.float32) + n * cp.eye(n, dtype=cp.float32)
        rhs = rs.uniform(-1, 1, (n, 256), dtype=cp.float32)
        return lambda: cp.linalg.solve(a, rhs)

    def conv2d():
        from cupyx.scipy import ndimage

        img = rs.uniform(0, 1, (4096, 4096), dtype=cp.float32)
        k = rs.uniform(0, 1, (7, 7), dtype=cp.float32)
        return lambda: ndimage.convolve(img, k)

    def transcendental():
        kern = cp.ElementwiseKernel("float32 x", "float32 y",
                                    "y = expf(-x * x) * sinf(3.0f * x) + logf(1.0f + x)",
                                    "pm_transcendental")
        x = rs.uniform(0, 4, 2**26, dtype=cp.float32)
        y = cp.empty_like(x)
        return lambda: kern(x, y)

    def argsort():
        x = rs.uniform(0, 1, 2**24, dtype=cp.float32)
        return lambda: cp.argsort(x)

    def gather_scatter():
        n = 2**26
        src = rs.uniform(0, 1, n, dtype=cp.float32)
        gidx = rs.randint(0, n, n).astype(cp.int64)
        sidx = rs.permutation(n).astype(cp.int64)
        buf, dst = cp.empty(n, dtype=cp.float32), cp.empty(n, dtype=cp.float32)

        def step():
            cp.take(src, gidx, out=buf)   # random gather
            dst[sidx] = buf               # random scatter (a permutation)
        return step

    def einsum():
        a, b = (rs.uniform(-1, 1, (8192, 8192), dtype=cp.float32) for _ in range(2))
        return lambda: cp.einsum("ij,ij->i", a, b)

    add("batched_sgemm_64x1024", batched_sgemm)
    add("sgemv_16384", sgemv)
    add("fp16_fused_64M", fp16_fused)
    add("lu_solve_4096x256", lu_solve)
    add("conv2d_7x7_4096", conv2d)
    add("transcendental_64M", transcendental)
    add("argsort_16M", argsort)
    add("gather_scatter_64M", gather_scatter)
    add("einsum_rowdot_8192", einsum)
    return w


#: Fixed sets: "heldout" (the first set; the model's settings were chosen looking at its
#: errors) and "fresh" (added afterwards as a clean test set).
WORKLOAD_SETS = {"heldout": heldout_workloads, "fresh": fresh_workloads}


def build_workloads(cp, specs) -> tuple[dict, list[str]]:
    """Steps for ``specs``: set names (``"heldout"``, ``"fresh"``) and workload specs.

    Returns
    -------
    steps : dict
        name → zero-argument step (a set contributes its members' names).
    problems : list of str
        Specs that could not be built (the others are kept).
    """
    from ..workloads import as_workload

    steps, problems = {}, []
    for spec in specs:
        if spec in WORKLOAD_SETS:
            steps.update(WORKLOAD_SETS[spec](cp))
            continue
        try:
            prepared = as_workload(spec).prepare()
            steps[spec] = prepared.launch
        except Exception as err:  # one broken workload must not lose the others
            problems.append(f"{spec}: {type(err).__name__}: {err}")
    return steps, problems
