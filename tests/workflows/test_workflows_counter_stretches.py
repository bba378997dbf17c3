"""Counter windows: a stretch of launches ends at a real pause, not at a host hiccup between batches."""

from types import SimpleNamespace

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.natural_dvfs.counter_windows import counter_windows


def _series(gaps_at: dict[float, float]):
    """10 s of 2 ms batches at 1,980 MHz with gaps ``{time: length}``, a counter updating every 100 ms."""
    starts, t = [], 0.0
    while t < 10.0:
        starts.append(t)
        t += 0.002
        for at, gap in gaps_at.items():
            if abs(t - at) < 1e-3:
                t += gap
    starts = np.array(starts)
    clocks = pd.DataFrame({schema.WORKLOAD: "w", schema.START_S: starts, schema.END_S: starts + 0.002,
                           schema.CLOCK_KEPT: True, schema.SM_CLOCK_MHZ: 1980.0,
                           schema.RECORDING_PHASE: "thermal"})
    reads = np.arange(0.0, 10.5, 0.005)
    energy = pd.DataFrame({schema.T_S: reads, schema.ENERGY_COUNTER_J: 500.0 * np.floor(reads / 0.1) * 0.1})
    trace = pd.DataFrame({schema.T_S: reads, schema.TEMPERATURE_C: 40.0 + reads})
    return SimpleNamespace(energy=energy, trace=trace), clocks


def test_a_tenths_of_a_ms_gap_does_not_start_a_new_stretch():
    # the H100 and H200 25 s thermal series each have a few 0.3-0.4 ms gaps between batches
    rec, clocks = _series({3.0: 0.0004, 6.0: 0.0003})
    w = counter_windows(rec, clocks)
    assert w[schema.STRETCH].nunique() == 1
    assert w[schema.SINCE_START_S].max() > 9.0  # α keeps all but the first settle seconds
    # a real pause (here 100 ms) does start one
    rec, clocks = _series({5.0: 0.1})
    w = counter_windows(rec, clocks)
    assert w[schema.STRETCH].nunique() == 2 and w[schema.SINCE_START_S].max() < 5.5


def test_alpha_leaves_out_blocks_at_the_power_cap():
    """At the cap the controller holds the power: power vs temperature there is not leakage."""
    from powermodels.workflows.recording_calibration import at_power_cap

    blocks = pd.DataFrame({schema.WINDOW_START_S: [0.0, 1.0, 2.0], schema.WINDOW_END_S: [1.0, 2.0, 3.0],
                           schema.POWER_W: [500.0, 695.0, 699.0]})
    t = np.arange(0.0, 3.0, 0.01)
    reasons = np.where(t >= 2.0, 0x4, 0)  # SW power cap from 2 s on
    rec = SimpleNamespace(trace=pd.DataFrame({schema.T_S: t, schema.THROTTLE_REASONS: reasons}),
                          provenance={"power_limit_w": 700.0})
    assert at_power_cap(blocks, rec).tolist() == [False, False, True]
    # a trace that kept only the rows where a reading changes (what gpu_natural_dvfs.py commits)
    # gives the same answer: here the cap holds 1.3–2.8 s, so the last block is capped for 80 % of
    # its time but keeps only two rows (the change at 2.8 s and the last poll), both uncapped:
    # counting rows called it uncapped
    from powermodels.recording import downsample_trace

    reasons = np.where(t >= 2.8, 0, np.where(t >= 1.3, 0x4, 0))
    full = pd.DataFrame({schema.T_S: t, schema.THROTTLE_REASONS: reasons})
    rec = SimpleNamespace(trace=full, provenance={"power_limit_w": 700.0})
    expected = at_power_cap(blocks, rec).tolist()
    assert expected == [False, True, True]
    rec = SimpleNamespace(trace=downsample_trace(full), provenance={"power_limit_w": 700.0})
    assert at_power_cap(blocks, rec).tolist() == expected
    # no clock-event reasons recorded: the counter power against the limit
    rec = SimpleNamespace(trace=pd.DataFrame({schema.T_S: t}), provenance={"power_limit_w": 700.0})
    assert at_power_cap(blocks, rec).tolist() == [False, True, True]
