"""Power-cap settling needs the power at the enforced limit (issue 19, session 4's real H100 rows)."""

import math

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.measuring.protocols import make_protocol
from powermodels.measuring.runner import make_runner
from powermodels.thermal.spans import (SPAN_COLUMNS, cap_power_held, cap_settled, enforced_power_limit_w,
                                       extend_until_settled)
from powermodels.workloads import CallableWorkload, SimulatedTwin

LIMIT_W = 700.0  # the session-4 board's (GPU-a2b20798) enforced limit


def flat_spans(energy_j, time_s, seconds, start_s=0.0, span_s=0.1):
    """Counter spans of a load that reads a constant energy per launch (no trend)."""
    rows = []
    for t0 in np.arange(start_s, start_s + seconds - 1e-9, span_s):
        n = span_s / time_s
        rows.append((t0, t0 + span_s, n, energy_j, energy_j / time_s, time_s, 65.0, 1700.0, 1.0))
    return pd.DataFrame(rows, columns=list(SPAN_COLUMNS))


# session 4 (datasets/h100-2026-11-25-session4/thermal/thermal_rows.csv): the capped bf16 GEMM's counter
# rows, flat and declared settled, and the 12 s reference at the limit
SESSION4_UNSETTLED = [(1.2070, 1.4119e-3), (1.1989, 1.4384e-3), (1.1697, 1.4668e-3)]  # 855, 833, 797 W
SESSION4_REFERENCE = (1.0603, 1.5181e-3)                                             # 698 W


@pytest.mark.parametrize("energy_j, time_s", SESSION4_UNSETTLED)
def test_a_flat_load_above_the_limit_is_not_settled(energy_j, time_s):
    spans = flat_spans(energy_j, time_s, 2.0)
    assert cap_settled(spans)                                   # the old rule: flat, so settled
    assert not cap_settled(spans, power_limit_w=LIMIT_W)        # 797–855 W is not a 700 W cap held
    assert not cap_power_held(spans, LIMIT_W)


def test_the_reference_at_the_limit_is_settled_and_an_unknown_limit_does_not_apply():
    spans = flat_spans(*SESSION4_REFERENCE, 2.0)
    assert cap_settled(spans, power_limit_w=LIMIT_W)
    assert cap_power_held(spans, math.nan) and cap_power_held(spans, None)


def test_replayed_session4_load_is_extended_to_the_bound_and_marked_transient():
    energy_j, time_s = SESSION4_UNSETTLED[0]
    clock = {"end": 1.0}

    def run_more():
        t0 = clock["end"]
        clock["end"] += 0.5
        return np.column_stack([np.arange(t0, clock["end"], time_s), np.arange(t0, clock["end"], time_s) + time_s])

    first = np.column_stack([np.arange(0, 1.0, time_s), np.arange(0, 1.0, time_s) + time_s])
    trace = _trace_of(energy_j / time_s, 12.0)
    out, _, settle, transient = extend_until_settled(run_more, lambda e: trace[trace[schema.T_S] <= e], first, 0.0,
                                                     power_limit_w=LIMIT_W)
    assert transient and 5.0 <= settle < 5.6 and len(out) > len(first)
    # without a known limit: flat over two 1 s windows is all the rule can ask (settled after 1 s more)
    clock["end"] = 1.0
    _, _, settle, transient = extend_until_settled(run_more, lambda e: trace[trace[schema.T_S] <= e], first, 0.0)
    assert not transient and 0.9 <= settle <= 1.6


def _trace_of(power_w, seconds, period_s=0.1):
    t = np.arange(0.0, seconds, period_s) + 0.05
    return pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: power_w * t, schema.TEMPERATURE_C: 65.0,
                         schema.SM_CLOCK_MHZ: 1700.0, schema.THROTTLE_REASONS: 0x4})


def test_real_h100_continuous_capped_load_reaches_the_limit(datasets):
    """The shared raw recording (GPU-14ab84a0, 700 W): on a continuous load the controller holds the
    limit within ~1 s, so the limit criterion still settles there within the 5 s bound."""
    import json

    folder = datasets / "h100" / "thermal_2026-11-25"
    trace = pd.read_parquet(folder / "trace.parquet")
    launches = pd.read_parquet(folder / "launches.parquet")
    meta = {m["workload"]: m for m in json.loads((folder / "series.json").read_text())["series"]}
    w = "torch_bf16_matmul_8192"
    tr = trace[trace[schema.RUN_ID] == w]
    iv = launches[launches[schema.WORKLOAD] == w][[schema.START_S, schema.END_S]].to_numpy()
    start = meta[w]["load_start_s"] + 0.3
    shown = {"end": start + 1.2}

    def run_more():
        lo = shown["end"]
        shown["end"] += 0.1
        return iv[(iv[:, 0] >= lo) & (iv[:, 0] < shown["end"])]

    first = iv[(iv[:, 0] >= start) & (iv[:, 0] < start + 1.2)]
    _, _, settle, transient = extend_until_settled(run_more, lambda e: tr[tr[schema.T_S] <= e], first, start,
                                                   power_limit_w=700.0)
    assert not transient and settle <= 5.0


def test_simulated_capped_row_is_at_the_limit_or_transient():
    """The twin's cap controller (h100-sxm) swings 660–740 W over its first 8 s from idle: a row
    that says it settled must be at the simulated board's limit."""
    from powermodels.twin.preset import load_preset

    w = CallableWorkload(lambda: None, simulated=SimulatedTwin(time_s=2 * 8192**3 / 650e12, activity=1.0,
                                                               mem_activity=0.8), name="bf16")
    with make_runner(load_preset("h100-sxm").gpu(seed=0)) as runner:
        limit = enforced_power_limit_w(runner.device)
        assert limit == pytest.approx(700.0)
        runner.idle(30.0)
        row = make_protocol("counter", alpha_w_per_c=0.0).measure(runner, w).row
    assert row[schema.THROTTLE_POWER_CAP_FRACTION] > 0.5
    assert row[schema.TRANSIENT] or abs(row[schema.POWER_W] / limit - 1) <= 0.02
    assert row[schema.TRANSIENT] or row[schema.SETTLE_S] > 0


def test_an_unreadable_limit_is_nan():
    class NoLimit:
        def power_limits_w(self):
            raise RuntimeError("not supported")

    assert math.isnan(enforced_power_limit_w(NoLimit()))
