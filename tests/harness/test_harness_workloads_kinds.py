"""User workloads: safe restrictions, source kernels (grid, defines, nvcc), callables, conversions."""

from __future__ import annotations

import contextlib
import shutil
import textwrap
import types

import numpy as np
import pytest

from powermodels import workloads as W
from powermodels.workloads import (
    CallableWorkload,
    Expression,
    SimulatedTwin,
    SourceKernel,
    WorkloadError,
    as_workload,
)

EXAMPLE = W.kernels_dir() / "examples" / "matmul_tiled.cu"
TUNE = {"block_size_x": [16, 32, 64], "block_size_y": [1, 2, 4, 8, 16, 32],
        "tile_size_x": [1, 2, 4, 8], "tile_size_y": [1, 2, 4, 8]}
RESTRICT = ["block_size_x == block_size_y * tile_size_y", "block_size_x * block_size_y <= 1024",
            "4 * block_size_x * block_size_x * (1 + tile_size_x) <= 48 * 1024"]


def matmul(**kw) -> SourceKernel:
    n = 256
    args = dict(tune_params=TUNE, restrictions=RESTRICT, problem_size=(4096, 4096),
                arguments=[np.zeros(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32)],
                grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=["block_size_y", "tile_size_y"])
    args.update(kw)
    return SourceKernel(EXAMPLE, "matmul_kernel", **args)


# -- restriction expressions ---------------------------------------------------------------------


def test_expressions_allow_arithmetic_and_refuse_code():
    e = Expression("bx*tx <= 1024 and bx % 32 == 0 or tx in (1, 2)", names=["bx", "tx"])
    assert e({"bx": 256, "tx": 4}) is True and e({"bx": 48, "tx": 4}) is False
    assert Expression("1 < a <= 4")({"a": 4}) and not Expression("1 < a <= 4")({"a": 1})
    assert Expression("max(a, 2) ** 2 // 3")({"a": 5}) == 8
    for bad, match in [("__import__('os').system('x')", "call of .*is not allowed"), ("open('f')", "call of 'open'"),
                       ("a.real", "Attribute is not allowed"), ("a[0]", "Subscript"),
                       ("lambda: 1", "Lambda"), ("a +", "invalid syntax"), ("2 ** 10000", "too large")]:
        with pytest.raises(ValueError, match=match):
            Expression(bad, names=["a"])({"a": 1})
    with pytest.raises(ValueError, match=r"unknown name\(s\) \['bz'\]"):
        Expression("bz > 1", names=["bx"])


def fits(block_size_x, tile_size_x):
    """Kernel Tuner 1.5's style: the parameters are tunable names, called with their values."""
    return block_size_x * tile_size_x <= 128


@pytest.mark.parametrize("form", [
    lambda p: p["block_size_x"] * p["tile_size_x"] <= 128,                      # the configuration dict
    fits,                                                                        # tunables by name
    (lambda bx, tx: bx * tx <= 128, ["block_size_x", "tile_size_x"]),            # Kernel Tuner's tuple
    (lambda bx, tx: bx * tx <= 128, ("block_size_x", "tile_size_x"), "bx*tx<=128"),  # ... with its source
    lambda *values: values[0] * values[2] <= 128,                               # every value, in order
    ("fits in 128", lambda p: p["block_size_x"] * p["tile_size_x"] <= 128),      # powermodels' pair
])
def test_restrictions_in_every_form_kernel_tuner_users_write(form):
    k = matmul(restrictions=[*RESTRICT, form])
    want = [c for c in matmul().search_space() if c["block_size_x"] * c["tile_size_x"] <= 128]
    assert k.search_space() == want and 0 < len(want) < 36
    alone = matmul(restrictions=form)                       # a single restriction, not in a list
    assert alone.search_space() == matmul(restrictions="block_size_x * tile_size_x <= 128").search_space()
    assert len(alone.search_space()) == 9 * 6 * 4          # (bx, tx) pairs within 128, every by and ty


def test_a_callable_of_unknown_parameters_is_named():
    def odd(a, b):
        return a < b

    with pytest.raises(ValueError, match=r"restriction 0 \('odd'\): its parameters \['a', 'b'\]"):
        W.make_restrictions([odd], TUNE)
    with pytest.raises(ValueError, match=r"names \['bz'\] are not tunable parameters"):
        W.make_restrictions([(lambda x: x, ["bz"])], TUNE)


# -- source kernels without a GPU ----------------------------------------------------------------


def test_source_kernel_search_space_grid_and_defines_follow_kernel_tuner():
    k = matmul()
    space = k.search_space()
    assert len(space) == 36 and len(k.search_space(restrict=False)) == 288
    assert all(c["block_size_x"] == c["block_size_y"] * c["tile_size_y"] for c in space)
    c = {"block_size_x": 32, "block_size_y": 8, "tile_size_x": 4, "tile_size_y": 4}
    assert k.block(c) == (32, 8, 1)
    assert k.grid(c) == (32, 128, 1)  # ceil(4096 / (32*4)), ceil(4096 / (8*4))
    d = k.defines(c)
    assert d["tile_size_x"] == "4" and d["grid_size_y"] == "128" and d["block_size_z"] == "1"
    assert d["kernel_tuner"] == "1"
    assert k.config_id(c) == "block_size_x=32,block_size_y=8,tile_size_x=4,tile_size_y=4"
    assert k.parse_config(k.config_id(c)) == c
    assert k.default == space[0]
    with pytest.raises(ValueError, match="is invalid: block_size_x == block_size_y"):
        k.validate_config({**c, "tile_size_y": 2})
    # defaults of Kernel Tuner: block 256 when block_size_x is not tuned, grid_div_x = block_size_x
    v = SourceKernel("__global__ void add(float *a, int n) {}", "add", {"unroll": [1, 2]},
                     problem_size="1000 * unroll", arguments=[np.zeros(4, np.float32), np.int32(4)])
    assert v.block() == (256, 1, 1) and v.grid({"unroll": 2}) == (8, 1, 1)


@pytest.mark.parametrize("kwargs, match", [
    ({"kernel_name": "nope"}, r"no __global__ function 'nope' in .*found: \['matmul_kernel'\]"),
    ({"restrictions": ["block_size_x > 1000"]}, "reject all 288 configurations"),
    ({"restrictions": ["open('x')"]}, "call of 'open'"),
    ({"arguments": [np.zeros(3, np.float32), 5]}, "argument 1 is a Python int; pass a NumPy scalar"),
    ({"tune_params": {"block_size_x": []}}, "has no values"),
    ({"tune_params": {"kernel": [1]}}, r"tunable parameter\(s\) \['kernel'\] have the names of run-table"),
])
def test_source_kernel_bad_input_is_one_clear_error(kwargs, match):
    kernel = kwargs.pop("kernel_name", "matmul_kernel")
    with pytest.raises(ValueError, match=match):
        k = SourceKernel(EXAMPLE, kernel, **{**dict(tune_params=TUNE, restrictions=RESTRICT), **kwargs})
        k.search_space()
    with pytest.raises(ValueError, match="does not exist"):
        SourceKernel("missing.cu", "k")


def test_source_kernel_answer_check_names_the_argument():
    k = matmul(answer=[np.zeros(256, np.float32), None, None], atol=1e-3)
    assert k.compare([np.full(256, 5e-4, np.float32), None, None]) == pytest.approx(5e-4)
    with pytest.raises(WorkloadError, match="argument 0 differs from the answer by 0.5 > atol 0.001"):
        k.compare([np.full(256, 0.5, np.float32), None, None], "cfg")
    strict = matmul(answer=[None, None, None], verify=lambda answer, result, atol: False)
    with pytest.raises(WorkloadError, match="verify rejected"):
        strict.compare([None, None, None])


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_source_kernel_compile_check_with_nvcc(tmp_path):
    k = matmul()
    k.compile_check(k.search_space()[-1])  # the largest tiles compile
    broken = tmp_path / "broken.cu"
    broken.write_text('extern "C" __global__ void k(float *a) { a[0] = undefined_name; }')
    with pytest.raises(WorkloadError, match=r"'k' \(\) does not compile: .*undefined_name"):
        SourceKernel(broken, "k").compile_check()


# -- callables ----------------------------------------------------------------------------------


def test_callable_binds_setup_output_once_and_tears_down():
    calls, torn = [], []
    w = CallableWorkload(lambda x, scale=1: calls.append(x * scale), args=(2,),
                         setup=lambda: {"scale": 10}, teardown=torn.append, name="scaled")
    args, kwargs, state = w.bind()
    assert args == (2,) and kwargs == {"scale": 10} and state == {"scale": 10}
    assert w.config_id({}) == "" and w.search_space() == [{}]
    with pytest.raises(ValueError, match="no simulated twin"):
        w.simulated()
    tuned = CallableWorkload(lambda n: None, tune_params={"n": [1, 2, 4]}, restrictions="n > 1",
                             simulated=SimulatedTwin(time_s="1e-3 * n"))
    assert tuned.search_space() == [{"n": 2}, {"n": 4}]
    assert tuned.simulated({"n": 4}).time_s(1980, 2619) == pytest.approx(4e-3)


def test_callable_that_raises_is_a_one_line_workload_error():
    def boom():
        raise RuntimeError("out of memory")

    with pytest.raises(WorkloadError, match="callable 'boom' raised RuntimeError: out of memory"):
        CallableWorkload(boom).prepare()  # the warm-up call, before any timing
    with pytest.raises(WorkloadError, match="setup raised ZeroDivisionError"):
        CallableWorkload(boom, setup=lambda: 1 / 0).prepare()


def test_as_workload_converts_names_callables_and_files(tmp_path):
    assert as_workload("sgemm") is as_workload("sgemm") and as_workload("sgemm").kind == "registry"
    (tmp_path / "user_mod.py").write_text(textwrap.dedent("""
        from powermodels.workloads import CallableWorkload, SimulatedTwin

        def step():
            pass

        def needs(x):
            pass

        workload = CallableWorkload(step, name="ready", simulated=SimulatedTwin(time_s=1e-3))
    """))
    assert as_workload("user_mod.py:step", base_dir=tmp_path).name == "step"
    assert as_workload("user_mod.py:workload", base_dir=tmp_path).name == "ready"
    assert as_workload(print).kind == "callable"
    for bad, match in [("nope", "neither a registry kernel"), ("no_such_module_xyz:f", "cannot import"),
                       ("user_mod.py:missing", "has no attribute 'missing'"), (3.0, "cannot use a float"),
                       ("user_mod.py:needs", r"needs argument\(s\) \['x'\]")]:
        with pytest.raises(ValueError, match=match):
            as_workload(bad, base_dir=tmp_path)


def test_twins_from_tables_and_bad_twins():
    twin = SimulatedTwin.from_dict({"time_s": "2e-3 / bx", "memory_bound": True, "t0_s": 1e-5})
    sim = twin.workload("w", {"bx": 2})
    assert sim.time_s(1980, 2619) == pytest.approx(1e-3)
    assert sim.time_s(1980, 1309.5) == pytest.approx(1e-5 + 2 * (1e-3 - 1e-5))  # scales with memory clock
    rational = SimulatedTwin(rational=(1e-3, 0.0, 0.0, 0.0)).workload("r")
    assert rational.time_s(1000, 2619) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="unknown key"):
        SimulatedTwin.from_dict({"time": 1})
    with pytest.raises(ValueError, match="exactly one of time_s"):
        SimulatedTwin()
    with pytest.raises(ValueError, match="time_s must be > 0"):
        SimulatedTwin(time_s=0).workload("w")


def test_cupy_runner_keeps_the_last_prepared_configurations_and_closes_the_rest():
    from powermodels.measuring.runner import CupyRunner

    closed = []

    class Fake(W.Prepared):
        def __init__(self, n):
            self.n = n

        def launch(self, stream=None):
            pass

        def close(self):
            closed.append(self.n)

    class Tunable(CallableWorkload):
        def prepare(self, config=None):
            return Fake(self.validate_config(config or {})["n"])

    w = Tunable(lambda n: None, tune_params={"n": [1, 2, 3]})
    runner = CupyRunner.__new__(CupyRunner)  # the cache alone: no GPU, no sampler
    runner._prepared, runner.keep_prepared = {}, 2
    runner.device = types.SimpleNamespace(cuda_device=contextlib.nullcontext)  # no CUDA device to select
    first = runner.prepared(w, {"n": 1})
    runner.prepared(w, {"n": 2})
    assert runner.prepared(w, "n=1") is first  # cached, and now the most recent
    runner.prepared(w, {"n": 3})
    assert closed == [2] and sorted(k[1] for k in runner._prepared) == ["n=1", "n=3"]
