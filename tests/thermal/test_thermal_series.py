"""Cold / warm / hot of a warm-up, raw and at the reference temperature: simulated and real H100 data."""

import json

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.measuring.graphs import run_launches
from powermodels.measuring.runner import make_runner
from powermodels.thermal.series import series_states, settled_window


def spread(values):
    v = np.asarray(values, float)
    return (v.max() - v.min()) / v.mean()


def test_simulated_warmup_states_agree_once_normalised():
    with make_runner("simulated") as runner:
        runner.idle(30.0)
        iv = run_launches(runner, "sgemm", None, int(22.0 / runner.launch_time_s("sgemm")))
        trace = runner.trace(iv[0, 0] - 1.0, iv[-1, 1])
    table, alpha = series_states(trace, iv, load_start_s=float(iv[0, 0]))
    states = table[table[schema.THERMAL_STATE] != "reference"]
    ref = table[table[schema.THERMAL_STATE] == "reference"].iloc[0]
    assert alpha is not None and alpha.source == "learned"
    assert spread(states[schema.ENERGY_J]) > 0.02                 # the raw figure moves with temperature
    assert spread(states[schema.ENERGY_AT_REF_J]) < 0.005          # the normalised one does not
    assert np.allclose(states[schema.ENERGY_AT_REF_J] / ref[schema.ENERGY_AT_REF_J], 1.0, atol=0.005)
    assert (states[schema.TEMPERATURE_END_C] >= states[schema.TEMPERATURE_START_C]).all()


@pytest.fixture
def h100_warmups(datasets):
    folder = datasets / "h100" / "thermal_2026-11-25"
    trace = pd.read_parquet(folder / "trace.parquet")
    launches = pd.read_parquet(folder / "launches.parquet")
    meta = json.loads((folder / "series.json").read_text())["series"]
    out = {}
    for m in meta:
        w = m["workload"]
        la = launches[launches[schema.WORKLOAD] == w]
        if int(la[schema.LAUNCHES].iloc[0]) != 1:
            continue  # batched (the triad): per-batch energy, covered by the benchmark
        out[w] = (trace[trace[schema.RUN_ID] == w], la[[schema.START_S, schema.END_S]].to_numpy(), m["load_start_s"])
    return out


@pytest.mark.parametrize("workload", ["cupy_fp32_matmul_4096", "cupy_fma_loop"])
def test_real_h100_fixed_clock_states_within_one_percent(h100_warmups, workload):
    trace, iv, start = h100_warmups[workload]
    table, alpha = series_states(trace, iv, load_start_s=start)
    states = table[table[schema.THERMAL_STATE] != "reference"]
    ref = table[table[schema.THERMAL_STATE] == "reference"].iloc[0]
    assert alpha.regime == "fixed_clock" and alpha.alpha_w_per_c > 0
    assert spread(states[schema.ENERGY_J]) > 0.01                  # real: 2.1 % and 1.7 % raw
    assert spread(states[schema.ENERGY_AT_REF_J]) < 0.01
    assert np.all(np.abs(states[schema.ENERGY_AT_REF_J] / ref[schema.ENERGY_AT_REF_J] - 1) < 0.02)


def test_real_h100_capped_window_waits_for_the_controller(h100_warmups):
    trace, iv, start = h100_warmups["torch_bf16_matmul_8192"]
    moved, settle, transient = settled_window(trace, iv, start + 0.3)
    assert not transient and 0.5 < settle <= 5.0 and moved == pytest.approx(start + 0.3 + settle)
    fp32_trace, fp32_iv, fp32_start = h100_warmups["cupy_fp32_matmul_4096"]
    assert settled_window(fp32_trace, fp32_iv, fp32_start + 0.3) == (fp32_start + 0.3, 0.0, False)


def replay(trace, iv, start, first_s, step_s=0.1):
    """run_more / trace_until over a recorded warm-up: the launches appear as time goes on."""
    shown = {"end": start + first_s}

    def run_more():
        lo = shown["end"]
        shown["end"] += step_s
        return iv[(iv[:, 0] >= lo) & (iv[:, 0] < shown["end"])]

    def trace_until(end):
        return trace[trace[schema.T_S] <= end]

    return iv[(iv[:, 0] >= start) & (iv[:, 0] < start + first_s)], run_more, trace_until


def test_extension_waits_for_the_real_cap_controller_and_leaves_fixed_clock_alone(h100_warmups):
    from powermodels.thermal.spans import extend_until_settled

    trace, iv, start = h100_warmups["torch_bf16_matmul_8192"]
    first, run_more, trace_until = replay(trace, iv, start + 0.3, 1.2)
    out, _, settle, transient = extend_until_settled(run_more, trace_until, first, start + 0.3)
    assert not transient and 0.5 < settle <= 5.0 and len(out) > len(first)
    trace, iv, start = h100_warmups["cupy_fp32_matmul_4096"]
    first, run_more, trace_until = replay(trace, iv, start + 0.3, 1.2)
    out, _, settle, transient = extend_until_settled(run_more, trace_until, first, start + 0.3)
    assert (settle, transient) == (0.0, False) and len(out) == len(first)


def test_extension_is_bounded_and_marks_the_row_transient(h100_warmups):
    from powermodels.thermal.spans import extend_until_settled

    trace, iv, start = h100_warmups["torch_bf16_matmul_8192"]
    first, run_more, trace_until = replay(trace, iv, start, 1.0)
    out, _, settle, transient = extend_until_settled(run_more, trace_until, first, start, max_settle_s=0.5,
                                                     tolerance=1e-5)
    assert transient and 0.5 <= settle < 0.8
