"""A workload's series against its bursts at the same clock and die temperature (powermodels.series_vs_bursts)."""

import numpy as np
import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import Recording, write_recording
from powermodels.series_vs_bursts import series_against_bursts, series_against_bursts_all

DT = 0.01  # trace and counter every 10 ms
#: (kind, start, end, die °C, power W, clock MHz): five bursts at 56-64 °C, then a 12 s series at 60 °C
PARTS = [("burst", 2.0, 2.9, 56, 590.0, 1980), ("burst", 4.0, 4.9, 58, 595.0, 1980),
         ("burst", 6.0, 6.9, 60, 600.0, 1980), ("burst", 8.0, 8.9, 61, 601.0, 1980),
         ("burst", 10.0, 10.9, 64, 610.0, 1980), ("series", 14.0, 26.0, 60, 612.0, 1980)]


def hand_made(parts=PARTS, uuid="GPU-0000aaaa-1111") -> Recording:
    """Idle at 40 °C and 80 W between the parts; each part holds its die, power and clock from start to end."""
    t = np.arange(0.0, 28.0, DT)
    die, power, clock = np.full(t.size, 40.0), np.full(t.size, 80.0), np.full(t.size, 345.0)
    for _, a, b, d, p, f in parts:
        inside = (t >= a) & (t < b)
        die[inside], power[inside], clock[inside] = d, p, f
    counter = 5000.0 + np.concatenate([[0.0], np.cumsum(power[:-1] * DT)])
    trace = pd.DataFrame({schema.T_S: t, schema.POWER_INSTANT_W: power, schema.POWER_AVERAGE_W: power,
                          schema.SM_CLOCK_MHZ: clock, schema.MEM_CLOCK_MHZ: 3201.0, schema.TEMPERATURE_C: die,
                          schema.THROTTLE_REASONS: 0, schema.READ_S: 2e-5})
    energy = pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: counter})
    phases = pd.DataFrame({schema.RECORDING_PHASE: ["natural"] * (len(parts) - 1) + ["thermal"],
                           schema.WORKLOAD: "gemm", schema.REPEAT: 0, schema.PHASE_KIND: [p[0] for p in parts],
                           schema.T0_S: [p[1] for p in parts], schema.T1_S: [p[2] for p in parts]})
    launches = pd.DataFrame({schema.WORKLOAD: "gemm", schema.RECORDING_PHASE: "thermal", schema.REPEAT: 0,
                             schema.BATCH: [0], schema.START_S: [14.0], schema.END_S: [26.0],
                             schema.LAUNCHES: [1000], schema.TIME_S: [0.012]})
    prov = {"gpu": "hand-made", "uuid": uuid, "power_limit_w": 700.0, "max_sm_clock_mhz": 1980}
    return Recording(trace, energy, launches, phases, prov)


def test_the_series_is_held_against_the_bursts_at_its_own_die_temperature():
    row = series_against_bursts(hand_made(), "gemm")
    # the bursts at 60 and 61 °C are matched (within 1.5 °C of the series' 60 °C); 56, 58 and 64 °C are not
    assert row[schema.BURSTS_MATCHED] == 2 and row[schema.TEMPERATURE_C] == pytest.approx(60.0)
    assert row[schema.BURST_POWER_W] == pytest.approx(600.5, abs=0.05)
    assert row[schema.SERIES_POWER_W] == pytest.approx(612.0, abs=0.05)
    assert row[schema.SERIES_BURST_GAP_PCT] == pytest.approx(100 * (612.0 / 600.5 - 1), abs=0.02)
    # a wider match takes the 58 °C burst too; a narrower one only the 60 °C burst
    assert series_against_bursts(hand_made(), "gemm", match_c=2.5)[schema.BURSTS_MATCHED] == 3
    assert series_against_bursts(hand_made(), "gemm", match_c=0.5)[schema.BURST_POWER_W] == pytest.approx(600.0, abs=0.05)


def test_a_board_without_hidden_state_reads_no_gap():
    # the same power at the same die in the series as in the bursts: what the twin's physics assumes
    same = [p if p[0] == "burst" else ("series", 14.0, 26.0, 60, 600.0, 1980) for p in PARTS]
    assert series_against_bursts(hand_made(same), "gemm", match_c=0.5)[schema.SERIES_BURST_GAP_PCT] == pytest.approx(
        0.0, abs=0.01)
    # matched over 60-61 °C the bursts' mean includes a degree of leakage: the window's own bias, here -0.08 %
    assert series_against_bursts(hand_made(same), "gemm")[schema.SERIES_BURST_GAP_PCT] == pytest.approx(
        100 * (600.0 / 600.5 - 1), abs=0.01)


def test_bursts_below_the_top_clock_and_unmatched_series_are_said_so():
    slow = [(k, a, b, d, p, 1800 if k == "burst" and d in (60, 61) else f) for k, a, b, d, p, f in PARTS]
    row = series_against_bursts(hand_made(slow), "gemm")
    assert row[schema.BURSTS_MATCHED] == 0 and np.isnan(row[schema.SERIES_BURST_GAP_PCT])
    capped = [(k, a, b, d, p, 1500 if k == "series" else f) for k, a, b, d, p, f in PARTS]
    with pytest.raises(ValueError, match="below the top clock"):
        series_against_bursts(hand_made(capped), "gemm")
    with pytest.raises(ValueError, match="no burst or no series of 'fma'"):
        series_against_bursts(hand_made(), "fma")
    with pytest.raises(ValueError, match="match_c must be positive"):
        series_against_bursts(hand_made(), "gemm", match_c=0.0)
    short = [*PARTS[:-1], ("series", 14.0, 16.0, 60, 612.0, 1980)]
    with pytest.raises(ValueError, match="shorter than 3 s"):
        series_against_bursts(hand_made(short), "gemm")
    table = series_against_bursts_all([hand_made(), hand_made(capped, uuid="GPU-capped")])
    assert list(table[schema.DEVICE_UUID]) == ["GPU-0000aaaa-1111"]
    assert len(table.attrs["left_out"]) == 1 and "below the top clock" in table.attrs["left_out"][0]


def test_script_prints_each_workload_and_writes_every_row(tmp_path, capsys):
    script = load_benchmark("series_vs_bursts")
    folders = [write_recording(hand_made(), tmp_path / "a"),
               write_recording(hand_made([p if p[0] == "burst" else ("series", 14.0, 26.0, 60, 600.0, 1980)
                                          for p in PARTS], uuid="GPU-0000bbbb-2222"), tmp_path / "b")]
    assert script.main([*map(str, folders), "--match-c", "0.5", "--out", str(tmp_path / "gaps.csv")]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| gemm |")).split("|")
    assert int(row[2]) == 2 and int(row[3]) == 2 and float(row[4]) == pytest.approx(0.0, abs=0.02)  # rows, boards, min
    assert float(row[6]) == pytest.approx(2.0, abs=0.02)  # max gap: 612 W against the 60 °C burst's 600 W
    written = pd.read_csv(tmp_path / "gaps.csv")
    assert len(written) == 2 and set(written[schema.DEVICE_UUID]) == {"GPU-0000aaaa-1111", "GPU-0000bbbb-2222"}
    assert script.main([str(tmp_path / "nothing")]) == 2
    assert "no such folder" in capsys.readouterr().err


def stepped(levels_w, *, alpha=1.5, uuid="GPU-0000cccc-3333", slow=()):
    """Bursts 2 s apart whose dies rise 55 → 60 °C; each draws 600 W + alpha·(die − 57.5) + its level, then a series."""
    dies = np.linspace(55.0, 60.0, len(levels_w))
    parts = [("burst", 2.0 + 2 * i, 2.9 + 2 * i, d, 600.0 + alpha * (d - 57.5) + lw, 1800 if i in slow else 1980)
             for i, (d, lw) in enumerate(zip(dies, levels_w, strict=True))]
    end = 2.0 + 2 * len(levels_w)
    return hand_made([*parts, ("series", end, end + 4.0, 58, 600.0, 1980)], uuid=uuid)


def test_burst_levels_bring_each_burst_to_the_median_die_and_read_its_level():
    from powermodels.series_vs_bursts import burst_levels

    # four bursts on one level, four 9 W (1.5 %) higher: the leakage slope taken out, only the step is left
    rec = stepped([0, 0, 0, 0, 9, 9, 9, 9])
    levels = burst_levels(rec, "gemm", alpha_w_per_c=1.5)
    assert list(levels[schema.T0_S]) == [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0]
    assert levels[schema.BURST_LEVEL_PCT].iloc[:4].to_numpy() == pytest.approx(100 * (600 / 604.5 - 1), abs=0.02)
    assert levels[schema.BURST_LEVEL_PCT].iloc[4:].to_numpy() == pytest.approx(100 * (609 / 604.5 - 1), abs=0.02)
    # without the slope the dies' 7.5 W rise stays in the levels
    as_read = burst_levels(rec, "gemm", alpha_w_per_c=0.0)[schema.BURST_LEVEL_PCT]
    assert as_read.iloc[-1] - as_read.iloc[4] == pytest.approx(100 * (3 * 1.5 * 5 / 7) / 604.5, abs=0.05)
    # a burst below the top clock is left out, not read as a level
    assert len(burst_levels(stepped([0] * 8, slow=(3,)), "gemm", alpha_w_per_c=1.5)) == 7


def test_level_persistence_tells_a_held_level_from_noise():
    from powermodels.series_vs_bursts import burst_levels, burst_levels_all, level_persistence

    held = level_persistence(burst_levels(stepped([0, 0, 0, 0, 9, 9, 9, 9]), "gemm", alpha_w_per_c=1.5))
    flipping = level_persistence(burst_levels(stepped([0, 9] * 4, uuid="GPU-flip"), "gemm", alpha_w_per_c=1.5))
    assert held[schema.LEVEL_LAG1_CORR].iloc[0] > 0.5 and flipping[schema.LEVEL_LAG1_CORR].iloc[0] < -0.9
    # the same two levels, the same spread: only the order tells them apart
    assert held[schema.LEVEL_SD_PCT].iloc[0] == pytest.approx(flipping[schema.LEVEL_SD_PCT].iloc[0], rel=1e-3)
    assert int(held[schema.BURST_COUNT].iloc[0]) == 8
    # too few bursts: left out
    few = burst_levels_all([stepped([0, 9, 0, 9]), stepped([0, 0, 0, 0, 9, 9, 9, 9], uuid="GPU-b")], alpha_w_per_c=1.5)
    assert list(level_persistence(few)[schema.DEVICE_UUID]) == ["GPU-b"]
    assert len(level_persistence(few, min_bursts=4)) == 2


def test_burst_levels_refuse_what_they_cannot_read():
    from powermodels.series_vs_bursts import burst_levels, burst_levels_all, level_persistence

    with pytest.raises(ValueError, match="alpha_w_per_c must be a finite slope"):
        burst_levels(stepped([0] * 6), "gemm", alpha_w_per_c=-1.0)
    with pytest.raises(ValueError, match="no burst of 'fma'"):
        burst_levels(stepped([0] * 6), "fma", alpha_w_per_c=1.5)
    with pytest.raises(ValueError, match="min_bursts must be at least 3"):
        level_persistence(burst_levels_all([stepped([0] * 6)], alpha_w_per_c=1.5), min_bursts=2)
    # levels that do not move have no correlation: NaN, not a warning
    from powermodels.series_vs_bursts import lag1_correlation

    assert np.isnan(lag1_correlation([0.0] * 8)) and np.isnan(lag1_correlation([1.0, 2.0]))
    assert lag1_correlation([0, 0, 1, 1, 0, 0, 1, 1]) == pytest.approx(1 / 6)  # as numpy.corrcoef reads it
    none_at_top = burst_levels(stepped([0] * 3, slow=(0, 1, 2)), "gemm", alpha_w_per_c=1.5)
    assert none_at_top.empty and schema.BURST_LEVEL_PCT in none_at_top.columns
    assert level_persistence(none_at_top).empty


def test_burst_levels_script_reads_real_and_twin_and_draws(tmp_path, capsys):
    script = load_benchmark("burst_levels")
    real = write_recording(stepped([0, 0, 0, 0, 9, 9, 9, 9]), tmp_path / "raw_recording_a")
    twin = write_recording(stepped([0] * 8, uuid="GPU-twin"), tmp_path / "preset" / "raw_recording_a" / "twin")
    assert script.main([str(real), "--alpha-w-per-c", "1.5", "--twin", str(twin), "--out", str(tmp_path / "l.csv"),
                        "--plot", str(tmp_path / "l.png"), "--show", "raw_recording_a"]) == 0
    out = capsys.readouterr().out
    rows = [line.split("|") for line in out.splitlines() if line.startswith("| gemm |")]
    # real, then twin: the real recording's levels spread (two levels 1.5 % apart, one step), the twin's do not
    assert len(rows) == 3 and float(rows[0][3]) > 0.5 and float(rows[1][3]) == pytest.approx(0.0, abs=0.01)
    assert rows[0][7].strip() == "1 of 7" and rows[1][7].strip() == "0 of 7"
    assert "real against twins (two-sided Mann-Whitney)" in out  # then one p per statistic (one recording each: 1)
    assert float(rows[2][2]) == pytest.approx(1.0)
    written = pd.read_csv(tmp_path / "l.csv")
    assert sorted(written["source"].unique()) == ["real", "twin"] and len(written) == 16
    assert set(written.loc[written["source"] == "twin", schema.RECORDING_NAME]) == {"preset/raw_recording_a"}
    assert (tmp_path / "l.png").stat().st_size > 0
    assert script.main([str(real), "--show", "raw_recording_b"]) == 2
    assert "not one of the recordings given" in capsys.readouterr().err
    short = write_recording(stepped([0, 9]), tmp_path / "short")
    assert script.main([str(short)]) == 2
    assert "no workload with enough top-clock bursts" in capsys.readouterr().err
