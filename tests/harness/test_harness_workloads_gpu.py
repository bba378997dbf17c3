"""User workloads on a real GPU: NVRTC compile, answer check, launches, timing detection (needs a GPU)."""

from __future__ import annotations

import numpy as np
import pytest

from powermodels.workloads import CallableWorkload, SourceKernel, WorkloadError, kernels_dir

pytestmark = pytest.mark.gpu

EXAMPLE = kernels_dir() / "examples" / "matmul_tiled.cu"
N = 256


def _matmul(answer=True, **kw):
    rng = np.random.default_rng(0)
    a = rng.random((N, N), dtype=np.float32)
    b = rng.random((N, N), dtype=np.float32)
    ref = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32).ravel()
    return SourceKernel(
        EXAMPLE, "matmul_kernel",
        {"block_size_x": [16, 32], "block_size_y": [2, 4, 8, 16], "tile_size_x": [1, 2, 4], "tile_size_y": [1, 2, 4, 8]},
        restrictions=["block_size_x == block_size_y * tile_size_y"],
        arguments=[np.zeros(N * N, np.float32), a.ravel(), b.ravel()], problem_size=(N, N),
        grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"],
        compiler_options=[f"-DWIDTH={N}"], answer=[ref, None, None] if answer else None, atol=1e-2, **kw)


def test_source_kernel_compiles_runs_and_matches_numpy_on_every_config():
    k = _matmul()
    for config in k.search_space():
        prepared = k.prepare(config)  # checks the answer, raises WorkloadError otherwise
        assert prepared.check() < 1e-2


def test_source_kernel_wrong_answer_and_compile_error_are_workload_errors(tmp_path):
    k = _matmul()
    k.answer[0] = k.answer[0] + 1.0
    with pytest.raises(WorkloadError, match="argument 0 differs from the answer"):
        k.prepare()
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void k(float *a) { a[0] = undefined_name; }')
    with pytest.raises(WorkloadError, match="does not compile"):
        SourceKernel(broken, "k", arguments=[np.zeros(4, np.float32)]).prepare()


def test_a_configuration_the_gpu_cannot_launch_is_a_workload_error():
    k = SourceKernel('extern "C" __global__ void fill(float *a) { a[threadIdx.x] = 1.0f; }', "fill",
                     {"block_size_x": [256, 2048]}, arguments=[np.zeros(2048, np.float32)], problem_size=2048)
    assert k.prepare({"block_size_x": 256}).check() == 0.0
    with pytest.raises(WorkloadError, match=r"\(block_size_x=2048\) failed to run with grid \(1, 1, 1\)"):
        k.prepare({"block_size_x": 2048})  # more threads per block than any GPU has


def test_cupy_runner_launches_a_source_kernel_and_a_callable():
    import cupy as cp

    from powermodels.measuring.runner import make_runner

    a = cp.ones((2048, 2048), cp.float32)
    with make_runner("nvml") as runner:
        iv = runner.run(_matmul(answer=False), None, 5)
        assert iv.shape == (5, 2) and np.all(iv[:, 1] > iv[:, 0])
        fn = CallableWorkload(lambda: a @ a, name="cupy_matmul")
        iv = runner.run(fn, None, 5)
        assert runner.prepared(fn).timing == "events" and np.all(iv[:, 1] > iv[:, 0])


def test_timing_detection_sees_work_on_another_stream():
    import cupy as cp

    a = cp.ones((4096, 4096), cp.float32)
    side = cp.cuda.Stream(non_blocking=True)

    def elsewhere():
        with side:
            a @ a

    assert CallableWorkload(lambda: a @ a).prepare().timing == "events"
    assert CallableWorkload(elsewhere).prepare().timing == "synchronize"


def test_timing_detection_with_pytorch_streams():
    torch = pytest.importorskip("torch")
    a = torch.ones((4096, 4096), device="cuda", dtype=torch.bfloat16)
    assert CallableWorkload(lambda: a @ a).prepare().timing == "events"
    # a blocking side stream made current while preparing: its work is not on CuPy's stream
    with torch.cuda.stream(torch.cuda.Stream()):
        assert CallableWorkload(lambda: a @ a).prepare().timing == "synchronize"


def test_measure_a_cupy_callable_with_the_default_protocol():
    import cupy as cp

    import powermodels

    a = cp.ones((4096, 4096), cp.float32)
    m = powermodels.measure(CallableWorkload(lambda: a @ a, name="mm"), device="nvml")
    assert m.row["energy_j"] > 0 and m.row["time_s"] > 0
