"""Restrictions through Kernel Tuner 1.5's real search-space builder (python-constraint2).

The H100 run of 2026-11-24 failed inside Kernel Tuner's builder on a lambda
restriction (``TypeError: r() takes 0 positional arguments but 4 were given``):
Kernel Tuner 1.5 re-reads a lambda's source instead of calling it, calls a
dict function with positional values next to strings, and python-constraint2
misreads many valid strings. These tests build spaces with Kernel Tuner's own
``Searchspace`` (what ``tune_kernel`` calls) and run ``tune_kernel`` itself
with its C backend on the CPU, and compare with a plain enumeration.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import shutil

import numpy as np
import pytest

pytest.importorskip("kernel_tuner")
pytest.importorskip("constraint")  # python-constraint2, Kernel Tuner's builder

from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_tuner.searchspace import Searchspace

from powermodels.devices.simulated import SimulatedGPU
from powermodels.workloads import Expression, SimulatedTwin
from powermodels.integrations.kernel_tuner import PowerModelsObserver
from powermodels.integrations.kernel_tuner_restrictions import kernel_tuner_restrictions, native_string

TUNE = {"block_size_x": [16, 32, 64], "block_size_y": [1, 2, 4, 8, 16, 32],
        "tile_size_x": [1, 2, 4, 8], "tile_size_y": [1, 2, 4, 8]}
MAX_THREADS = 1024
ALL = [dict(zip(TUNE, v, strict=True)) for v in itertools.product(*TUNE.values())]


def kt_space(restrictions) -> list[tuple]:
    """The configurations Kernel Tuner 1.5 builds (its default framework and solver, as tune_kernel)."""
    with contextlib.redirect_stdout(io.StringIO()):  # "added default block size restriction ..."
        space = Searchspace(TUNE, restrictions, MAX_THREADS)
    return sorted(tuple(c) for c in space.list)


def enumerated(*predicates) -> list[tuple]:
    """The same space by brute force, with Kernel Tuner's default block-size limit."""
    def ok(c):
        return c["block_size_x"] * c["block_size_y"] <= MAX_THREADS and all(p(c) for p in predicates)
    return sorted(tuple(c.values()) for c in ALL if ok(c))


def expression(text):
    e = Expression(text, TUNE)

    def holds(c):
        try:
            return bool(e(c))
        except ZeroDivisionError:
            return False
    return holds


# a sample of the user workloads' configurations, as gpu_user_workloads.py's tuner part chooses them
CHOSEN = {(32, 8, 2, 4), (64, 16, 1, 4), (16, 16, 8, 1), (64, 32, 1, 2)}


def chosen_key(p):
    return tuple(p[k] for k in TUNE)


def in_sample(p):
    """A plain function of the configuration dict (Kernel Tuner's documented callable form)."""
    return chosen_key(p) in CHOSEN


MATMUL = ["block_size_x == block_size_y * tile_size_y", "block_size_x * block_size_y <= 1024",
          "4 * block_size_x * block_size_x * (1 + tile_size_x) <= 48 * 1024"]


def test_the_benchmarks_lambda_with_captured_names_and_strings():
    # the failing form of 2026-11-24: a lambda over captured names, inside a call, beside strings
    restrictions = kernel_tuner_restrictions(
        [*MATMUL, lambda p: chosen_key(p) in CHOSEN], TUNE)
    want = enumerated(*(expression(t) for t in MATMUL), in_sample)
    assert want == sorted(c for c in CHOSEN if c != (64, 32, 1, 2))  # 2,048 threads
    assert kt_space(restrictions) == want


@pytest.mark.parametrize("text", [
    "not (tile_size_x == tile_size_y)", "abs(tile_size_x - tile_size_y) <= 2", "ceil(block_size_x / 3) > 10",
    "(block_size_x if tile_size_x > 2 else block_size_y) >= 8", "(block_size_x > 16) == (tile_size_x > 2)",
    "max(tile_size_x, 32) - block_size_y == block_size_x", "tile_size_x >= -block_size_y",
    "block_size_x / tile_size_y >= tile_size_y", "block_size_x % 32 == 0 or tile_size_x > 2", "True",
])
def test_strings_python_constraint2_misreads_are_evaluated_by_us(text):
    assert not native_string(text, TUNE)
    restrictions = kernel_tuner_restrictions([text, *MATMUL[:1]], TUNE)
    assert kt_space(restrictions) == enumerated(expression(text), expression(MATMUL[0]))


def in_sample_by_name(block_size_x, block_size_y, tile_size_x, tile_size_y):
    """Kernel Tuner 1.5's own style: parameters named after the tunables."""
    return (block_size_x, block_size_y, tile_size_x, tile_size_y) in CHOSEN


@pytest.mark.parametrize("form", ["single", "list", "beside strings", "pair", "lambda alone", "by name",
                                  "kernel tuner tuple"])
def test_callable_forms(form):
    restrictions = {"single": in_sample, "list": [in_sample], "beside strings": [*MATMUL, in_sample],
                    "pair": [("in the sample", in_sample)], "lambda alone": lambda p: chosen_key(p) in CHOSEN,
                    "by name": [MATMUL[1], in_sample_by_name],
                    "kernel tuner tuple": (lambda x, y, tx, ty: (x, y, tx, ty) in CHOSEN, list(TUNE)),
                    }[form]
    extra = [expression(t) for t in MATMUL] if form == "beside strings" else []
    assert kt_space(kernel_tuner_restrictions(restrictions, TUNE)) == enumerated(in_sample, *extra)


def test_one_parameter_and_kernel_tuners_keyword_call():
    (f,) = kernel_tuner_restrictions(lambda p: p["n"] % 3 == 0, {"n": [1, 2, 3, 6]})
    assert f(3) and not f(2) and f(n=6)  # python-constraint2 passes values; check_restriction names them
    with contextlib.redirect_stdout(io.StringIO()):
        space = Searchspace({"n": [1, 2, 3, 6]}, [f], MAX_THREADS)
    assert sorted(space.list) == [(3,), (6,)]


def test_errors_name_the_restriction():
    with pytest.raises(ValueError, match="unknown name"):
        kernel_tuner_restrictions(["block_size_z < 4"], TUNE)
    with pytest.raises(ValueError, match="restriction 1"):
        kernel_tuner_restrictions(["block_size_x < 64", 42], TUNE)
    with pytest.raises(ValueError, match="no parameters"):
        kernel_tuner_restrictions("x < 1", {})
    assert kernel_tuner_restrictions(None, TUNE) == []
    # a duplicate string is passed once (Kernel Tuner refuses duplicates)
    assert kernel_tuner_restrictions([MATMUL[0], MATMUL[0] + " "], TUNE) == [MATMUL[0]]


# -- strings python-constraint2 parses natively: a random sample of the subset ------------------

_names = st.sampled_from(list(TUNE))
_numbers = st.sampled_from([1, 2, 3, 16, 32, 100, 1024]).map(str)
_terms = st.recursive(_names | _numbers, lambda inner: st.tuples(inner, st.sampled_from(["+", "*"]), inner)
                      .map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"), max_leaves=4)
_compare = st.tuples(_terms, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), _terms).map(" ".join)
_member = st.tuples(_terms, st.sampled_from(["in", "not in"]),
                    st.lists(st.sampled_from([1, 2, 4, 8, 16, 32]), min_size=1, max_size=3)).map(
    lambda t: f"{t[0]} {t[1]} ({', '.join(map(str, t[2]))},)")
_conditions = st.recursive(_compare | _member, lambda inner: st.tuples(inner, st.sampled_from(["and", "or"]), inner)
                           .map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"), max_leaves=3)


@settings(max_examples=40, deadline=None)
@given(_conditions)
def test_native_strings_build_the_enumerated_space(text):
    restrictions = kernel_tuner_restrictions([text], TUNE)
    want = enumerated(expression(text))
    if not native_string(text, TUNE):  # no parameter in it: evaluated by us
        assert callable(restrictions[0])
    else:
        assert restrictions == [text]
    if not want:  # python-constraint2 raises on an empty space; nothing to compare
        return
    assert kt_space(restrictions) == want


# -- tune_kernel end to end: Kernel Tuner's C backend on the CPU, the observer on the simulated GPU -----

C_SOURCE = """
extern "C" float tiled(float *c, float *a, int n) {
    for (int i = 0; i < n; i++) c[i] = a[i] * tile_size_x + block_size_y;
    return (float)(0.05 * block_size_x / tile_size_x + 0.01 * tile_size_y);  /* the 'time' (ms): the twin's */
}
"""
TWIN = SimulatedTwin(time_s="5e-5 * block_size_x / tile_size_x + 1e-5 * tile_size_y",
                     activity="0.5 + 0.05 * tile_size_x")


@pytest.mark.skipif(shutil.which("g++") is None, reason="Kernel Tuner's C backend needs g++")
def test_tune_kernel_with_string_and_callable_restrictions_and_the_observer(tmp_path, monkeypatch):
    from kernel_tuner import tune_kernel

    monkeypatch.chdir(tmp_path)  # the C backend writes temp_*.c/.so into the cwd
    tune = {"block_size_x": [16, 32, 64], "block_size_y": [1, 2, 4], "tile_size_x": [1, 2, 4],
            "tile_size_y": [1, 2]}
    keep = {(16, 2, 2, 1), (32, 1, 4, 2), (64, 4, 1, 1), (64, 2, 4, 2), (32, 4, 2, 1)}
    strings = ["block_size_x * block_size_y <= 128",            # python-constraint2 parses it
               "block_size_x % (16 * tile_size_y) == 0"]         # it would not: evaluated by us
    restrictions = kernel_tuner_restrictions(
        [*strings, lambda p: tuple(p[k] for k in tune) in keep], tune)
    gpu = SimulatedGPU(seed=3)
    obs = PowerModelsObserver(gpu, simulated=TWIN)
    n = np.int32(256)
    a = np.arange(n, dtype=np.float32)
    results, _ = tune_kernel("tiled", C_SOURCE, n, [np.zeros_like(a), a, n], tune, lang="C",
                             restrictions=restrictions, observers=[obs], quiet=True, iterations=2)
    obs.close()
    got = {tuple(r[k] for k in tune) for r in results}
    # (64, 4, 1, 1): 256 threads > 128; (32, 1, 4, 2): 32 % 32 == 0 but kept; the others pass
    assert got == {(16, 2, 2, 1), (32, 1, 4, 2), (64, 2, 4, 2), (32, 4, 2, 1)}
    for r in results:
        assert r["powermodels_power"] > 300 and r["powermodels_energy"] > 0
        assert r["powermodels_energy"] == pytest.approx(r["powermodels_power"] * r["time"] / 1e3, rel=0.05)
    # Kernel Tuner benchmarks the first configuration once more before the others (a warm-up):
    # the observer measures that run too, so every configuration it reports was measured
    assert [p for p, _, _ in obs.windows[1:]] == [{k: r[k] for k in tune} for r in results]
    assert obs.windows[0][0] == obs.windows[1][0]
