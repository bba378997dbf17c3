"""α without the warm-up's own host gaps, shrunk toward the board's prior (issue 19, session 4's real H100)."""

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.measuring.alpha_warmup import learn_alpha
from powermodels.measuring.graphs import run_launches
from powermodels.measuring.runner import make_runner
from powermodels.thermal.alpha import board_prior, shrunk_alpha
from powermodels.thermal.heldout import implied_alpha, rescore_rows, state_figures
from powermodels.thermal.normalise import AlphaEstimate
from powermodels.thermal.spans import continuous_spans, counter_spans

SESSION4 = "h100-2026-11-25-session4"


def true_alpha(gpu, clock_mhz=1980.0):
    p = gpu.physics
    return p.leakage_w * float(p.relative_voltage(clock_mhz)) * p.leakage_per_c


@pytest.mark.parametrize("gap_s", [0.02, 0.1])
def test_the_warm_ups_own_trace_reads_do_not_bias_alpha(gap_s):
    """On a real GPU the warm-up idles while the host reads the trace between its load pieces; on the
    simulated GPU such gaps turned the true 0.90 W/°C into 1.19 (20 ms) and 3.47 W/°C (100 ms)."""
    with make_runner("simulated") as runner:
        read = runner.trace

        def trace_then_idle(start_s, end_s, run_id="run"):
            out = read(start_s, end_s, run_id=run_id)
            runner.idle(gap_s)
            return out

        runner.trace = trace_then_idle
        runner.idle(30.0)
        first = run_launches(runner, "sgemm", None, int(1.3 / runner.launch_time_s("sgemm")))
        runner.idle(gap_s)
        warm = learn_alpha(runner, "sgemm", continue_from=first)
        truth = true_alpha(runner.gpu)
    assert warm.alpha is not None, warm.reason
    assert warm.alpha.alpha_w_per_c == pytest.approx(truth, rel=0.1)


def test_continuous_spans_drop_gaps_and_the_restart_after_them():
    t = np.arange(0.0, 3.0, 0.001)
    iv = np.column_stack([t, t + 0.001])
    iv = iv[(iv[:, 0] < 1.0) | (iv[:, 0] >= 1.1)]          # a 100 ms pause at 1.0 s
    counter = np.arange(0.05, 3.0, 0.1)
    trace = pd.DataFrame({schema.T_S: counter, schema.ENERGY_COUNTER_J: 600.0 * counter,
                          schema.TEMPERATURE_C: 50.0, schema.SM_CLOCK_MHZ: 1980.0})
    spans = counter_spans(trace, iv, updates_per_span=1)
    kept = continuous_spans(spans, iv)
    starts = kept[schema.START_S].to_numpy()
    assert len(kept) < len(spans)
    assert not np.any((starts > 0.95) & (starts < 1.1 + 0.35))  # the gap and the 0.35 s after it
    assert np.any(starts < 0.9) and np.any(starts >= 1.45)


def test_a_vague_warm_up_moves_to_the_prior_and_a_precise_one_keeps_its_value():
    # session 4, cupy fp32 GEMM, first run: learned 3.67 ± 1.56 W/°C at 634 W (0.59 %/°C)
    vague = AlphaEstimate(3.6704, 1.5572, "learned", power_w=634.26, sm_clock_mhz=1980.0)
    prior = board_prior([], 634.26, 1980.0)
    assert prior.source == "assumed"
    row = shrunk_alpha(vague, prior)
    assert 100 * row.alpha_w_per_c / 634.26 == pytest.approx(0.313, abs=0.005)
    assert row.uncertainty_w_per_c < min(vague.uncertainty_w_per_c, prior.uncertainty_w_per_c)
    precise = AlphaEstimate(0.9, 0.045, "learned", power_w=400.0, sm_clock_mhz=1980.0)
    assert shrunk_alpha(precise, board_prior([], 400.0, 1980.0)).alpha_w_per_c == pytest.approx(0.9, rel=0.01)


def test_the_board_pool_is_the_prior_once_there_is_one():
    fits = [AlphaEstimate(1.2, 0.1, "learned", sm_clock_mhz=1980.0, power_w=500.0, reference_temperature_c=50.0)]
    prior = board_prior(fits, 500.0, 1980.0)
    assert prior.pooled == 1 and 1.2 < prior.alpha_w_per_c < 1.21  # the pool, pulled a little up to 1.25 W/°C
    assert board_prior(fits, 500.0, 1980.0, exclude=fits[0]).source == "assumed"


def rows_of(datasets, run):
    rows = pd.read_csv(datasets / SESSION4 / run / "thermal_rows.csv")
    return rows[rows[schema.THERMAL_STATE].isin(["cold", "warm", "hot", "reference"])]


def test_held_out_session4_fp32_gemm_meets_both_targets_with_the_shrunk_alpha(datasets):
    """Real H100 GPU-a2b20798 (held out: nothing was fitted to it). The rows' own learned α gave a
    3.47 % spread at T_ref; the same rows re-scored with the shrunk α meet 1 % / 2 %."""
    for run in ("thermal", "thermal_repeat"):
        rows = rows_of(datasets, run)
        fp32 = rows[rows[schema.WORKLOAD] == "cupy_matmul_fp32_4096"]
        new, alphas = rescore_rows(rows)
        figures = state_figures(new[new[schema.WORKLOAD] == "cupy_matmul_fp32_4096"])
        assert state_figures(fp32)["spread_pct"] > 1.4                       # as recorded: missed
        assert figures["spread_pct"] < 1.0 and abs(figures["worst_vs_ref_pct"]) < 2.0
        lo, hi = implied_alpha(fp32)["meets_pct_per_c"]
        rel = 100 * alphas["cupy_matmul_fp32_4096"].alpha_w_per_c / float(fp32[schema.POWER_W].iloc[0])
        assert lo <= rel <= hi


def test_held_out_table_marks_the_unsettled_capped_rows_and_counts_what_met(datasets):
    from powermodels.thermal.heldout import heldout_table

    table = heldout_table(rows_of(datasets, "thermal"), power_limit_w=700.0)
    capped = table[table["regime"] == "power_capped"].iloc[0]
    assert capped["capped_rows_at_limit"] == "0/3"            # 797–855 W: none at the 700 W limit
    both = pd.concat([table, heldout_table(rows_of(datasets, "thermal_repeat"), power_limit_w=700.0)])
    fixed = both[both["regime"] == "fixed_clock"]
    assert (int(fixed["recorded_meets"].sum()), int(fixed["now_meets"].sum()), len(fixed)) == (3, 5, 8)
