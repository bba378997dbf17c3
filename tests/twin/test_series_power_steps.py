"""benchmarks/series_power_steps.py: a series' power falling a few seconds in while its die warms."""

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import Recording, write_recording

IDLE_S = 5.0      # each series follows 5 s of idle
SERIES_S = 10.0
POLL_S = 0.01     # NVML's trace
COUNTER_S = 0.1   # the energy counter's update period


def two_series_recording(step_w: float, capped_clock_mhz: int = 1500, warming_c_per_s: float = 1.0) -> Recording:
    """Idle, a top-clock series at 640 W that drops by ``step_w`` from 2.5 s in, idle, a capped series at 690 W.

    The die warms from 50 °C by ``warming_c_per_s`` through each series; the second series runs at
    ``capped_clock_mhz``. NVML's power readings are 100 W off the counter's (only the counter is to be read).
    """
    t = np.arange(0.0, 2 * (IDLE_S + SERIES_S) + 1e-9, POLL_S)
    starts = (IDLE_S, 2 * IDLE_S + SERIES_S)
    power = np.full(t.size, 80.0)
    clock = np.full(t.size, 345.0)
    die = np.full(t.size, 40.0)
    for k, t0 in enumerate(starts):
        inside = (t >= t0) & (t < t0 + SERIES_S)
        power[inside] = 690.0 if k else np.where(t[inside] < t0 + 2.5, 640.0, 640.0 - step_w)
        clock[inside] = capped_clock_mhz if k else 1980.0
        die[inside] = 50.0 + warming_c_per_s * (t[inside] - t0)
    trace = pd.DataFrame({
        schema.T_S: t, schema.POWER_INSTANT_W: power + 100.0, schema.POWER_AVERAGE_W: power + 100.0,
        schema.SM_CLOCK_MHZ: clock.astype("int16"), schema.MEM_CLOCK_MHZ: np.full(t.size, 3201, dtype="int16"),
        schema.TEMPERATURE_C: die.astype("int16"), schema.THROTTLE_REASONS: np.zeros(t.size, dtype="int64"),
        schema.READ_S: 2e-5})
    tc = np.arange(0.0, t[-1] + 1e-9, COUNTER_S)
    per_poll = np.interp(tc, t, np.concatenate([[0.0], np.cumsum(power[:-1] * POLL_S)]))
    energy = pd.DataFrame({schema.T_S: tc, schema.ENERGY_COUNTER_J: 1000.0 + per_poll})
    names = ("fp32", "bf16")
    phases = pd.DataFrame({
        schema.RECORDING_PHASE: "thermal", schema.WORKLOAD: [n for n in names for _ in range(2)],
        schema.REPEAT: [-1, 0, -1, 0], schema.PHASE_KIND: ["idle", "series"] * 2,
        schema.T0_S: [0.0, starts[0], starts[0] + SERIES_S, starts[1]],
        schema.T1_S: [starts[0], starts[0] + SERIES_S, starts[1], starts[1] + SERIES_S]})
    launches = pd.DataFrame({
        schema.WORKLOAD: list(names), schema.RECORDING_PHASE: "thermal", schema.REPEAT: 0, schema.BATCH: [0, 1],
        schema.START_S: list(starts), schema.END_S: [s + SERIES_S for s in starts], schema.LAUNCHES: 1000,
        schema.TIME_S: SERIES_S / 1000})
    prov = {"gpu": "hand-made", "uuid": "GPU-5eed0000-1111", "power_limit_w": 700.0, "max_sm_clock_mhz": 1980}
    return Recording(trace, energy, launches, phases, prov)


def test_a_drop_while_the_die_warms_is_read_from_the_counter_and_flagged():
    script = load_benchmark("series_power_steps")
    steps = script.series_power_steps(two_series_recording(step_w=12.8))
    # the capped series is left out: its power follows the controller, not the die
    assert steps[schema.WORKLOAD].tolist() == ["fp32"]
    row = steps.iloc[0]
    assert row["early_w"] == pytest.approx(640.0, rel=1e-3)
    assert row["later_w"] == pytest.approx(627.2, rel=1e-3)
    assert row["power_change_pct"] == pytest.approx(-2.0, abs=0.02)
    # the second a calibration reads (0.2-1.2 s) is before the step too
    assert row["calibration_w"] == pytest.approx(640.0, rel=1e-3)
    assert row["calibration_change_pct"] == pytest.approx(-2.0, abs=0.02)
    assert row["die_change_c"] > 2.0 and bool(row["step"])
    # the same drop with the die held, or warming less than asked for, is not a step
    assert not script.series_power_steps(two_series_recording(step_w=12.8, warming_c_per_s=0.0))["step"].any()
    assert not script.series_power_steps(two_series_recording(step_w=12.8), min_warming_c=5.0)["step"].any()
    # one stray high clock sample does not make the top-clock series look capped
    stray = two_series_recording(step_w=12.8)
    stray.trace.loc[10, schema.SM_CLOCK_MHZ] = 2100
    assert script.series_power_steps(stray)[schema.WORKLOAD].tolist() == ["fp32"]
    # a small drop is not a step, nor is a drop below the threshold asked for
    assert not script.series_power_steps(two_series_recording(step_w=1.0))["step"].any()
    assert not script.series_power_steps(two_series_recording(step_w=12.8), drop_pct=2.5)["step"].any()


def test_the_script_prints_the_steps_and_refuses_bad_input_in_one_line(tmp_path, capsys):
    script = load_benchmark("series_power_steps")
    folder = write_recording(two_series_recording(step_w=12.8), tmp_path / "rec")
    out = tmp_path / "steps.csv"
    assert script.main([str(folder), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 top-clock series on 1 boards" in printed and "GPU-5eed0000-1111 | fp32" in printed
    assert pd.read_csv(out)["step"].tolist() == [True]
    assert script.main([str(folder), "--drop-pct", "-1"]) == 2
    err = capsys.readouterr().err
    assert "drop_pct" in err and "Traceback" not in err
    assert script.main([str(tmp_path / "missing")]) == 2
    assert "missing" in capsys.readouterr().err
