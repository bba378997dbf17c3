"""benchmarks/warmup_miss_split.py: a twin's warm-up miss split into its power and its launches per second."""

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import Recording, write_recording
from powermodels.warmup_split import warmup_miss_split

IDLE_S = 5.0
SERIES_S = 25


def steady_series(power_w: float, launches_per_s: int, die_c: float, *, name: str = "w",
                  provenance: dict | None = None, first_second_w: float | None = None) -> Recording:
    """5 s idle at 80 W, then one 25 s series at ``power_w`` with ``launches_per_s`` whole launches each second.

    ``first_second_w``: the series' first second draws this instead.
    """
    starts = IDLE_S + (np.arange(SERIES_S * launches_per_s) + 0.5) / launches_per_s
    launches = pd.DataFrame({
        schema.WORKLOAD: name, schema.RECORDING_PHASE: "thermal", schema.REPEAT: 0,
        schema.BATCH: np.arange(starts.size), schema.START_S: starts - 0.4 / launches_per_s,
        schema.END_S: starts + 0.4 / launches_per_s, schema.LAUNCHES: 1, schema.TIME_S: 0.8 / launches_per_s})
    t = np.arange(0.0, IDLE_S + SERIES_S + 1e-9, 0.1)
    power = np.where(t <= IDLE_S, 80.0, power_w)
    if first_second_w is not None:
        power[(t > IDLE_S) & (t <= IDLE_S + 1.0)] = first_second_w
    counter = 500.0 + np.concatenate([[0.0], np.cumsum(power[1:] * 0.1)])
    phases = pd.DataFrame({
        schema.RECORDING_PHASE: "thermal", schema.WORKLOAD: name, schema.REPEAT: [-1, 0],
        schema.PHASE_KIND: ["idle", "series"], schema.T0_S: [0.0, IDLE_S], schema.T1_S: [IDLE_S, IDLE_S + SERIES_S]})
    trace = pd.DataFrame({
        schema.T_S: t, schema.POWER_INSTANT_W: power, schema.POWER_AVERAGE_W: power,
        schema.SM_CLOCK_MHZ: np.full(t.size, 1980, dtype="int16"),
        schema.MEM_CLOCK_MHZ: np.full(t.size, 3201, dtype="int16"),
        schema.TEMPERATURE_C: np.full(t.size, die_c).astype("int16"),
        schema.THROTTLE_REASONS: np.zeros(t.size, dtype="int64"), schema.READ_S: 2e-5})
    prov = {"gpu": "hand-made", "uuid": "GPU-feed0000-2222", "power_limit_w": 700.0, "max_sm_clock_mhz": 1980,
            **(provenance or {})}
    return Recording(trace, pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: counter}), launches, phases, prov)


def test_power_and_rate_factors_multiply_to_the_energy_per_launch_error():
    real = steady_series(400.0, 200, 50)
    # 2 % more power and 1 % more launches a second: (1.02 / 1.01) - 1 = +0.99 % a launch
    twin = steady_series(408.0, 202, 48)
    row = warmup_miss_split(real, twin).iloc[0]
    assert row[schema.POWER_ERROR_PCT] == pytest.approx(2.0, abs=1e-6)
    assert row[schema.LAUNCH_RATE_ERROR_PCT] == pytest.approx(1.0, abs=1e-6)
    assert row[schema.ENERGY_PER_LAUNCH_ERROR_PCT] == pytest.approx(100 * (1.02 / 1.01 - 1), abs=1e-6)
    assert row[schema.WARMUP_WORST_PCT] == pytest.approx(100 * (1.02 / 1.01 - 1), abs=1e-6)
    assert row[schema.DIE_DIFFERENCE_C] == pytest.approx(-2.0)
    assert row[schema.DEVICE_UUID] == "GPU-feed0000-2222"
    # a miss in the series' first second only: the warm-up row (from second 2) does not see it, from_s=0 does
    early = steady_series(400.0, 200, 50, first_second_w=420.0)
    assert warmup_miss_split(real, early).iloc[0][schema.WARMUP_WORST_PCT] == pytest.approx(0.0, abs=1e-6)
    assert warmup_miss_split(real, early, from_s=0).iloc[0][schema.WARMUP_WORST_PCT] == pytest.approx(5.0, abs=1e-6)
    # a workload that only one of the two ran is left out; a bad first second is refused
    assert warmup_miss_split(real, steady_series(400.0, 200, 50, name="other")).empty
    with pytest.raises(ValueError, match="from_s"):
        warmup_miss_split(real, twin, from_s=-1)


def test_the_script_pairs_each_twin_with_its_real_recording_by_name(tmp_path, capsys):
    script = load_benchmark("warmup_miss_split")
    real = write_recording(steady_series(400.0, 200, 50), tmp_path / "raw_recording_feed0000")
    out = tmp_path / "cmp"
    write_recording(steady_series(396.0, 200, 50, provenance={"schedule_from": "raw_recording_feed0000"}), out / "twin")
    assert script.main([str(out), "--real", str(real), "--out", str(tmp_path / "split.csv")]) == 0
    printed = capsys.readouterr().out
    assert "1 series on 1 boards" in printed
    assert pd.read_csv(tmp_path / "split.csv")[schema.POWER_ERROR_PCT].iloc[0] == pytest.approx(-1.0, abs=1e-6)
    # a twin of a recording not given: one line naming it, no traceback
    assert script.main([str(out), "--real", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "raw_recording_feed0000" in err and "Traceback" not in err
    # two real recordings of one folder name: the pairing would be ambiguous
    other = write_recording(steady_series(400.0, 200, 50), tmp_path / "elsewhere" / "raw_recording_feed0000")
    assert script.main([str(out), "--real", str(real), str(other)]) == 2
    assert "same folder name" in capsys.readouterr().err


def test_drift_tells_a_twins_level_from_its_warming(tmp_path, capsys):
    from powermodels.board_pair import board_pair, warmup_drift

    real = steady_series(400.0, 200, 50)
    # a twin 1 % low throughout: a level, no drift
    level = warmup_drift(board_pair(real, steady_series(396.0, 200, 50))).iloc[0]
    assert level[schema.DRIFT_A_PCT] == pytest.approx(0.0, abs=1e-9)
    assert level[schema.DRIFT_B_PCT] == pytest.approx(0.0, abs=1e-9)
    assert level[schema.EARLY_DIFF_PCT] == pytest.approx(-1.0, abs=1e-6)
    assert level[schema.LATE_DIFF_PCT] == pytest.approx(-1.0, abs=1e-6)
    # a twin whose first seconds read low but that ends on the board: the gap closes, the twin rises
    warming = steady_series(400.0, 200, 50)
    tr = warming.trace
    early = (tr[schema.T_S] > IDLE_S + 2.0) & (tr[schema.T_S] <= IDLE_S + 5.0)
    tr.loc[early, [schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W]] = 396.0
    counter = 500.0 + np.concatenate([[0.0], np.cumsum(tr[schema.POWER_INSTANT_W].to_numpy()[1:] * 0.1)])
    warming.energy[schema.ENERGY_COUNTER_J] = counter
    rise = warmup_drift(board_pair(real, warming)).iloc[0]
    assert rise[schema.EARLY_DIFF_PCT] == pytest.approx(-1.0, abs=1e-6)
    assert rise[schema.LATE_DIFF_PCT] == pytest.approx(0.0, abs=1e-6)
    assert rise[schema.DRIFT_B_PCT] == pytest.approx(400.0 / 396.0 * 100 - 100, abs=1e-6)
    with pytest.raises(ValueError, match="no second in"):
        warmup_drift(board_pair(real, warming), late=(40, 45))
    # the script's --drift writes the rows and prints their summary
    script = load_benchmark("warmup_miss_split")
    path = write_recording(real, tmp_path / "raw_recording_feed0000")
    out = tmp_path / "cmp"
    write_recording(steady_series(396.0, 200, 50, provenance={"schedule_from": "raw_recording_feed0000"}), out / "twin")
    assert script.main([str(out), "--real", str(path), "--drift", str(tmp_path / "drift.csv")]) == 0
    assert "twin rises more" in capsys.readouterr().out
    written = pd.read_csv(tmp_path / "drift.csv")
    assert written[schema.RECORDING_NAME].tolist() == ["raw_recording_feed0000"]
    assert written[schema.LATE_DIFF_PCT].iloc[0] == pytest.approx(-1.0, abs=1e-6)


def run_with_option(tmp_path, capsys, real: Recording, make_twin, args, option: str):
    """Run the script on ``real`` and a twin ``make_twin(*args)`` that replayed it, with ``option`` writing a CSV.

    Returns what it printed and the CSV it wrote (checked to name the real recording on every row)."""
    script = load_benchmark("warmup_miss_split")
    path = write_recording(real, tmp_path / "raw_recording_feed0000")
    out = tmp_path / "cmp"
    write_recording(make_twin(*args, provenance={"schedule_from": "raw_recording_feed0000"}), out / "twin")
    csv = tmp_path / "rows.csv"
    assert script.main([str(out), "--real", str(path), option, str(csv)]) == 0
    written = pd.read_csv(csv)
    assert set(written[schema.RECORDING_NAME]) == {"raw_recording_feed0000"}
    return capsys.readouterr().out, written


def warming_series(slope_per_c: float, *, rise_c: int = 5, provenance: dict | None = None) -> Recording:
    """:func:`steady_series` whose die climbs ``rise_c`` whole degrees over the series, its power following it by
    ``slope_per_c`` (relative, per °C) at a constant launch rate."""
    rec = steady_series(400.0, 200, 50, provenance=provenance)
    tr = rec.trace
    in_series = tr[schema.T_S] > IDLE_S
    die = 50 + np.floor((tr[schema.T_S] - IDLE_S).clip(lower=0) / SERIES_S * (rise_c + 1)).clip(upper=rise_c)
    tr[schema.TEMPERATURE_C] = np.where(in_series, die, 50).astype("int16")
    power = np.where(in_series, 400.0 * (1 + slope_per_c * (tr[schema.TEMPERATURE_C] - 50)), 80.0)
    tr[schema.POWER_INSTANT_W] = power
    tr[schema.POWER_AVERAGE_W] = power
    rec.energy[schema.ENERGY_COUNTER_J] = 500.0 + np.concatenate([[0.0], np.cumsum(power[1:] * 0.1)])
    return rec


def test_warmup_slope_reads_each_boards_energy_against_its_own_die(tmp_path, capsys):
    from powermodels.board_pair import board_pair, warmup_temperature_slope

    real = warming_series(0.002)
    twin = warming_series(0.004)
    row = warmup_temperature_slope(board_pair(real, twin)).iloc[0]
    # the fitted slope over the mean energy: 0.2 and 0.4 %/°C, give or take the mean's own rise and the seconds
    # that straddle a degree step (~4 %)
    assert row[schema.WARMUP_SLOPE_A_PCT_PER_C] == pytest.approx(0.2, rel=0.05)
    assert row[schema.WARMUP_SLOPE_B_PCT_PER_C] == pytest.approx(0.4, rel=0.05)
    assert row[schema.DIE_SPAN_A_C] >= 4
    # a die that never moves has no slope, not a slope of zero
    flat = warmup_temperature_slope(board_pair(real, steady_series(400.0, 200, 50))).iloc[0]
    assert np.isnan(flat[schema.WARMUP_SLOPE_B_PCT_PER_C])
    assert flat[schema.DIE_SPAN_B_C] == 0
    with pytest.raises(ValueError, match="a slope needs three"):
        warmup_temperature_slope(board_pair(real, twin), seconds=(40, 45))
    # the script's --slopes writes every row and prints how many series read below their twin
    printed, written = run_with_option(tmp_path, capsys, real, warming_series, (0.004,), "--slopes")
    assert "real below twin" in printed
    assert written[schema.RECORDING_NAME].tolist() == ["raw_recording_feed0000"]
    assert written[schema.WARMUP_SLOPE_B_PCT_PER_C].iloc[0] == pytest.approx(0.4, rel=0.05)


def cooling_series(cool_c_per_s: float, *, provenance: dict | None = None) -> Recording:
    """:func:`steady_series` (die 60 °C) followed by 10 s idle whose die falls by ``cool_c_per_s`` each second down
    to 40 °C (stepping half a second before each whole second, so that every whole second reads the new step)."""
    rec = steady_series(400.0, 200, 60, provenance=provenance)
    end = IDLE_S + SERIES_S
    t_more = np.arange(end + 0.1, end + 10.0 + 1e-9, 0.1)
    more = rec.trace.iloc[[-1] * t_more.size].reset_index(drop=True)
    more[schema.T_S] = t_more
    more[[schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W]] = 80.0
    more[schema.TEMPERATURE_C] = np.maximum(60 - cool_c_per_s * np.floor(t_more - end + 0.5), 40).astype("int16")
    rec.trace = pd.concat([rec.trace, more], ignore_index=True)
    counter = rec.energy[schema.ENERGY_COUNTER_J].iloc[-1] + 8.0 * np.arange(1, t_more.size + 1)
    rec.energy = pd.concat([rec.energy, pd.DataFrame({schema.T_S: t_more, schema.ENERGY_COUNTER_J: counter})],
                           ignore_index=True)
    rec.phases = pd.concat([rec.phases, pd.DataFrame({
        schema.RECORDING_PHASE: ["thermal"], schema.WORKLOAD: ["-"], schema.REPEAT: [1], schema.PHASE_KIND: ["idle"],
        schema.T0_S: [end], schema.T1_S: [end + 10.0]})], ignore_index=True)
    return rec


def test_cooling_prints_where_a_twin_cools_faster_than_its_board(tmp_path, capsys):
    # the twin falls 4 °C a second where the board falls 2: 2 °C cooler at second 1, 4 °C at second 2
    printed, written = run_with_option(tmp_path, capsys, cooling_series(2.0), cooling_series, (4.0,), "--cooling")
    assert "twin ≥ 1.5 °C cooler at 2 s" in printed
    diff = (written[schema.TEMPERATURE_B_C] - written[schema.TEMPERATURE_A_C]).to_numpy()
    assert diff[:2].tolist() == [-2.0, -4.0]
    table = load_benchmark("warmup_miss_split").cooling_summary(written)
    assert table.loc[table[schema.WORKLOAD] == "all", "2 s"].item() == -4.0
    assert table.loc[table[schema.WORKLOAD] == "all", "twin ≥ 1.5 °C cooler at 2 s"].item() == 1
