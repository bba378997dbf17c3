"""The warm-up floor: a real series' worst second against its own trend (powermodels.warmup_floor)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import Recording, write_recording
from powermodels.twin.compare import compare_recordings
from powermodels.warmup_floor import SeriesTooShortError, minimax_fit, warmup_floor, warmup_floors

T0 = 5.0        # the series starts after 5 s of idle
RATE = 100      # launches per second, 10 ms each


def series_recording(energy_per_launch, uuid="GPU-0000aaaa-1111") -> Recording:
    """A hand-made recording: 5 s idle, then one series whose second k costs ``energy_per_launch[k]`` J a launch."""
    seconds = len(energy_per_launch)
    starts = T0 + np.arange(seconds * RATE) / RATE
    launches = pd.DataFrame({
        schema.WORKLOAD: "w", schema.RECORDING_PHASE: "thermal", schema.REPEAT: 0,
        schema.BATCH: np.arange(starts.size), schema.START_S: starts, schema.END_S: starts + 1.0 / RATE,
        schema.LAUNCHES: 1, schema.TIME_S: 1.0 / RATE})
    # the counter updates every 0.1 s; inside a second its energy grows evenly
    t = np.arange(0.0, T0 + seconds + 1e-9, 0.1)
    per_second = np.concatenate([np.full(int(T0), 70.0), RATE * np.asarray(energy_per_launch, float), [0.0]])
    power = per_second[np.minimum(np.floor(t - 1e-9).astype(int), len(per_second) - 1).clip(0)]
    counter = 1000.0 + np.concatenate([[0.0], np.cumsum(power[1:] * 0.1)])
    energy = pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: counter})
    phases = pd.DataFrame({
        schema.RECORDING_PHASE: ["thermal", "thermal"], schema.WORKLOAD: ["w", "w"], schema.REPEAT: [-1, 0],
        schema.PHASE_KIND: ["idle", "series"], schema.T0_S: [0.0, T0], schema.T1_S: [T0, T0 + seconds]})
    trace = pd.DataFrame({  # NVML's readings, not read by the floor: constant
        schema.T_S: t, schema.POWER_INSTANT_W: 400.0, schema.POWER_AVERAGE_W: 400.0,
        schema.SM_CLOCK_MHZ: np.full(t.size, 1980, dtype="int16"), schema.MEM_CLOCK_MHZ: np.full(t.size, 2619, dtype="int16"),
        schema.TEMPERATURE_C: np.full(t.size, 50, dtype="int16"), schema.THROTTLE_REASONS: np.zeros(t.size, dtype="int64"),
        schema.READ_S: 2e-5})
    prov = {"gpu": "hand-made", "uuid": uuid, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980}
    return Recording(trace, energy, launches, phases, prov)


def test_a_straight_series_has_no_floor_and_one_stray_second_is_its_floor():
    line = 1.0 + 0.002 * np.arange(25)
    assert warmup_floor(series_recording(line), "w") == pytest.approx(0.0, abs=1e-6)
    spiked = line.copy()
    spiked[12] *= 1.006  # one second 0.6 % high: the best smooth curve splits it, ~0.3 % each way
    floor = warmup_floor(series_recording(spiked), "w")
    assert 0.27 < floor < 0.31


def noisy_warm_up(seed=4):
    rng = np.random.default_rng(seed)
    return (1.0 + 0.01 * (1 - np.exp(-np.arange(25) / 6.0))) * (1 + 0.003 * rng.standard_normal(25))


def test_the_minimax_twin_scores_exactly_the_floor_and_least_squares_twins_no_less():
    real_seconds = noisy_warm_up()
    real = series_recording(real_seconds)
    floor = warmup_floor(real, "w", from_s=2.0)
    s = np.arange(25)
    values, error = minimax_fit(s[2:].astype(float), real_seconds[2:], 2)
    assert 100 * error == pytest.approx(floor)
    best = series_recording(np.concatenate([real_seconds[:2], values]))  # seconds 0-1 are not scored
    assert abs(compare_recordings(real, best, from_s=2.0).iloc[0][schema.CHECK_ERROR]) == pytest.approx(floor, rel=1e-6)
    for degree in (0, 1, 2):  # the least-squares curves of each degree, as twins: never below the floor
        twin = series_recording(np.polyval(np.polyfit(s[2:], real_seconds[2:], degree), s))
        assert abs(compare_recordings(real, twin, from_s=2.0).iloc[0][schema.CHECK_ERROR]) >= floor - 1e-6


@pytest.mark.parametrize(("y", "degree"), [(noisy_warm_up(7)[2:], 2),
                                           (1.0 + 2.0 * np.sin(np.linspace(0, 2.5, 23)) ** 2, 1),  # 1 to 3
                                           (np.linspace(1.0, 3.0, 23) ** 3, 0)])
def test_the_minimax_fit_equioscillates_and_no_nearby_polynomial_does_better(y, degree):
    t = np.arange(len(y), dtype=float)
    values, error = minimax_fit(t, y, degree)
    rel = values / y - 1
    assert np.max(np.abs(rel)) == pytest.approx(error, rel=1e-6)
    # Chebyshev: the best fit reaches ±error, alternating in sign, at degree + 2 points or more
    extremes = np.sign(rel[np.abs(np.abs(rel) - error) < 1e-7 * max(error, 1e-12) + 1e-9])
    assert 1 + np.count_nonzero(np.diff(extremes)) >= degree + 2
    coefs = np.polyfit(t, values, degree)
    rng = np.random.default_rng(0)
    for _ in range(300):  # small moves of the coefficients never lower the worst relative error
        moved = np.polyval(coefs * (1 + 1e-3 * rng.standard_normal(coefs.size)), t)
        assert np.max(np.abs(moved / y - 1)) >= error - 1e-9


def test_seconds_before_from_s_are_not_scored():
    line = 1.0 + 0.002 * np.arange(25)
    cold = line.copy()
    cold[0] *= 0.95  # a first second 5 % low, as a board-calibrated twin reads it
    assert warmup_floor(series_recording(cold), "w", from_s=2.0) == pytest.approx(0.0, abs=1e-6)
    assert warmup_floor(series_recording(cold), "w", from_s=0.0) > 1.0


def test_degree_zero_is_the_best_constant():
    rising = 1.0 + 0.002 * np.arange(25)
    scored = rising[2:]
    # the constant c that minimises max |c/y - 1| sits where c/min - 1 = 1 - c/max
    expected = 100 * (scored.max() - scored.min()) / (scored.max() + scored.min())
    assert warmup_floor(series_recording(rising), "w", degree=0) == pytest.approx(expected, rel=1e-3)
    assert warmup_floor(series_recording(rising), "w", degree=1) == pytest.approx(0.0, abs=1e-6)


def test_bad_input_is_one_clear_error():
    rec = series_recording(np.ones(4))
    with pytest.raises(SeriesTooShortError, match="2 whole seconds from second 2 on; a degree-2 polynomial needs 4"):
        warmup_floor(rec, "w")
    with pytest.raises(ValueError, match="no 'series' entry of workload 'other'"):
        warmup_floor(rec, "other")
    with pytest.raises(ValueError, match="degree must be 0 or more"):
        warmup_floor(rec, "w", degree=-1)
    gap = series_recording(np.ones(25))
    gap = replace(gap, launches=gap.launches[~gap.launches[schema.START_S].between(T0 + 10, T0 + 11, inclusive="left")])
    with pytest.raises(ValueError, match="without a launch"):  # reads a huge finite energy per launch otherwise
        warmup_floor(gap, "w")


def test_floors_of_many_recordings_leave_out_what_cannot_be_read():
    table = warmup_floors([series_recording(np.ones(25)), series_recording(np.ones(3), uuid="GPU-short")])
    assert list(table[schema.DEVICE_UUID]) == ["GPU-0000aaaa-1111"]
    with pytest.raises(ValueError, match="degree must be 0 or more"):  # a wrong argument is not a short series
        warmup_floors([series_recording(np.ones(25))], degree=-1)
    assert list(table.columns) == [schema.DEVICE_UUID, schema.RECORDING_NAME, schema.WORKLOAD,
                                   schema.WARMUP_FLOOR_PCT]


def test_script_prints_the_spread_and_writes_every_row(tmp_path, capsys):
    script = load_benchmark("warmup_floor")
    spiked = 1.0 + 0.002 * np.arange(25)
    spiked[12] *= 1.03  # a 3 % stray second: any smooth twin misses this row by about half of it
    folders = [write_recording(series_recording(np.ones(25)), tmp_path / "flat"),
               write_recording(series_recording(spiked, uuid="GPU-0000bbbb-2222"), tmp_path / "spiked")]
    assert script.main([*map(str, folders), "--out", str(tmp_path / "floors.csv"), "--plot", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").stat().st_size > 0
    out = capsys.readouterr().out
    assert "2 series on 2 boards" in out
    row = next(line for line in out.splitlines() if line.startswith("| w |")).split("|")
    assert int(row[2]) == 2 and int(row[3]) == 2 and int(row[7]) == 1  # series, boards, over 1 %
    written = pd.read_csv(tmp_path / "floors.csv")
    assert len(written) == 2 and written[schema.WARMUP_FLOOR_PCT].max() > 1.0
    # a folder that is not a recording: one line, exit 2
    assert script.main([str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err
