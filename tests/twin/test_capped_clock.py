"""The clock under the power cap: fitted from a long capped series or read before the first series, and pooled over
boards (twin-made boards)."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.board_calibration import (
    board_levels,
    calibrated_preset,
    capped_clock_before_series,
    pooled_preset,
    probed_cycles_before,
)
from powermodels.devices.simulated import SimulatedWorkload
from powermodels.twin import fit_controller as fit_controller_module
from powermodels.twin.fit_controller import (
    capped_clock_reading,
    capped_spans,
    fit_capped_clock,
    scaled_core,
    settled_capped_series,
)
from powermodels.twin.preset import TwinWorkload
from powermodels.twin.replay import replay

from .test_twin_board import board
from .test_twin_board import schedule as board_schedule

#: boards whose capped load needs this much more core power than the preset's at the same uncapped power
CAP_SCALES = {"GPU-a": 1.0, "GPU-b": 1.06, "GPU-c": 1.12}


def capped_board():
    """``board()`` with a load (activity 1) that the power limit caps, at a clock well above the V(f) knee."""
    b = board()
    bf16 = TwinWorkload(SimulatedWorkload("bf16", core_work=1.5e-3 * 1980, activity=1.0, mem_activity=0.5), 0.0, 1)
    # the windowed-mean controller of the raw presets (h200-raw's gains): the settled clock is where it holds the mean
    physics = replace(b.physics, power_limit_w=650.0, cap_window_s=1.0, cap_proportional=10.0, cap_headroom_w=36.0,
                      cap_offset_w=-3.0, clock_period_s=0.015)
    return replace(b, physics=physics, workloads={**b.workloads, "bf16": bf16})


def schedule() -> pd.DataFrame:
    """An uncapped gemm series, then 10 s of the capped load (its settled part from 13 s)."""
    return board_schedule((("thermal", "-", -1, "idle", 0.0, 5.0), ("thermal", "gemm", 0, "series", 5.0, 8.0),
                           ("thermal", "-", -1, "idle", 8.0, 11.0), ("thermal", "bf16", 0, "series", 11.0, 21.0),
                           ("thermal", "-", -1, "idle", 21.0, 23.0)))


def settled_clock(rec) -> float:
    t = rec.trace
    inside = t.loc[(t[schema.T_S] >= 13.0) & (t[schema.T_S] <= 21.0), schema.SM_CLOCK_MHZ]
    return float(inside.mean())


@pytest.fixture(scope="module")
def recordings():
    recs = []
    for seed, (uuid, k) in enumerate(CAP_SCALES.items()):
        rec = replay(schedule(), scaled_core(capped_board(), k), seed=seed, poll_s=2e-3, start_temperature_c=40.0)
        rec.provenance["uuid"] = uuid
        recs.append(rec)
    return recs


def test_the_series_runs_capped_and_the_boards_settle_apart(recordings):
    assert settled_capped_series(recordings[0]) == [(11.0, 21.0)]
    clocks = [settled_clock(r) for r in recordings]
    assert clocks[0] > clocks[1] + 10 > clocks[2] + 20  # more core power at the cap: a lower clock


def test_settled_window_recovers_the_core_scale(recordings):
    report = {}
    fitted = fit_capped_clock(capped_board(), recordings[1], window="settled", report=report)
    assert report["capped_clock"]["window"] == "settled"
    assert report["capped_clock"]["core_scale"] == pytest.approx(1.06, abs=0.02)
    again = replay(schedule(), fitted, seed=5, poll_s=2e-3, start_temperature_c=40.0)
    assert settled_clock(again) == pytest.approx(settled_clock(recordings[1]), abs=6.0)
    # the uncapped load's power is kept: its activity took the core's factor back
    gemm = fitted.workloads["gemm"].workload
    assert gemm.activity * fitted.physics.core_w_per_ghz == pytest.approx(0.45 * 230.0, rel=1e-9)


def test_settled_falls_back_to_the_spans_without_a_long_capped_series():
    short = schedule()
    short.loc[3, schema.T1_S] = 15.0  # a 4 s capped series: no settled part after SETTLE_S + 3 s
    rec = replay(short, scaled_core(capped_board(), 1.06), seed=2, poll_s=2e-3, start_temperature_c=40.0)
    assert settled_capped_series(rec) == []
    preset, report = capped_board(), {}
    # no pressure entry either: nothing capped to match, the preset comes back as it was
    assert fit_capped_clock(preset, rec, window="settled", report=report) is preset and report == {}
    with pytest.raises(ValueError, match="window"):
        fit_capped_clock(capped_board(), rec, window="middle")


def test_board_levels_read_the_cap_scale_and_the_pool_takes_the_median(recordings):
    levels = board_levels(capped_board(), recordings, thermal=False, cap=True)
    per = levels.drop_duplicates(schema.RECORDING_NAME).set_index(schema.DEVICE_UUID)[schema.CAP_CORE_SCALE]
    assert per.to_dict() == pytest.approx(CAP_SCALES, abs=0.02)
    pooled = pooled_preset(capped_board(), levels, thermal=False)
    assert pooled.fit["pooled_boards"]["cap_boards"] == 3
    assert pooled.physics.core_w_per_ghz == pytest.approx(230.0 * per["GPU-b"]
                                                          * pooled.fit["pooled_boards"]["dynamic_scale"], rel=1e-9)
    replayed = replay(schedule(), pooled, seed=7, poll_s=2e-3, start_temperature_c=40.0)
    assert settled_clock(replayed) == pytest.approx(settled_clock(recordings[1]), abs=6.0)
    # without the column the pool leaves the capped clock alone, as before
    plain = pooled_preset(capped_board(), levels.drop(columns=[schema.CAP_CORE_SCALE]), thermal=False)
    assert "cap_boards" not in plain.fit["pooled_boards"]
    assert np.isclose(plain.physics.core_w_per_ghz, 230.0 * plain.fit["pooled_boards"]["dynamic_scale"])


def test_fit_twin_and_its_controller_fit_take_the_settled_window(recordings):
    from powermodels.twin.fit import fit_twin
    from powermodels.twin.fit_cap_choice import fit_cap_controller

    report = {}
    fitted = fit_cap_controller(capped_board(), recordings[2], controller="step", capped_clock="settled",
                                report=report)
    assert report["capped_clock"]["window"] == "settled"
    assert fitted.physics.core_w_per_ghz / 230.0 == pytest.approx(1.12, abs=0.03)
    with pytest.raises(ValueError, match="capped_clock"):
        fit_twin([], capped_clock="middle")  # refused before any work


def natural_then_series() -> pd.DataFrame:
    """A capped ``pressure`` entry (a raw recording's natural part), then the uncapped and the capped series."""
    return board_schedule((("natural", "-", -1, "idle", 0.0, 5.0), ("natural", "bf16", 0, "pressure", 5.0, 9.0),
                           ("thermal", "-", -1, "idle", 9.0, 12.0), ("thermal", "gemm", 0, "series", 12.0, 15.0),
                           ("thermal", "-", -1, "idle", 15.0, 18.0), ("thermal", "bf16", 0, "series", 18.0, 28.0),
                           ("thermal", "-", -1, "idle", 28.0, 30.0)))


def test_the_capped_clock_is_read_before_the_first_series_and_the_series_stay_out(monkeypatch):
    rec = replay(natural_then_series(), scaled_core(capped_board(), 1.06), seed=3, poll_s=2e-3,
                 start_temperature_c=40.0)
    held_out = []
    # every call that holds something out (the settled clock fit's own call, on the twin's replay, holds out nothing)
    monkeypatch.setattr(fit_controller_module, "capped_spans",
                        lambda r, h=(): (held_out.append(h) if len(h) else None) or capped_spans(r, h))
    fitted = capped_clock_before_series(capped_board(), rec)
    read = fitted.fit["board_capped_clock"]
    assert fitted.name == capped_board().name + "+cap@" + rec.provenance["uuid"]  # a twin's whole stand-in UUID
    # the target is NVML's reading over the pressure entry from 1 s in; the series (18-28 s) are not read
    assert held_out == [[(12.0, 15.0), (18.0, 28.0)]] and capped_spans(rec, held_out[0]) == [(5.0, 9.0)]
    assert read["real_reading_mhz"] == pytest.approx(capped_clock_reading([rec], [5.0], [4.0]), rel=1e-12)
    # ... and the twin is matched where the warm-up rows are scored: its settled clock over the capped series
    assert read["window"] == "settled" and read["core_scale"] > 1.0
    again = replay(natural_then_series(), fitted, seed=5, poll_s=2e-3, start_temperature_c=40.0)
    settled = again.trace.loc[(again.trace[schema.T_S] >= 20.0) & (again.trace[schema.T_S] <= 28.0),
                              schema.SM_CLOCK_MHZ].mean()
    assert settled == pytest.approx(read["real_reading_mhz"], abs=6.0)
    # the uncapped load keeps its power; calibrated_preset(cap=True) is the same step
    assert fitted.workloads["gemm"].workload.activity * fitted.physics.core_w_per_ghz == pytest.approx(0.45 * 230.0)
    via = calibrated_preset(capped_board(), rec, cap="clock")
    assert via.physics.core_w_per_ghz == pytest.approx(fitted.physics.core_w_per_ghz, rel=1e-9)
    # a recording with no capped entry before its series: nothing to read, said so
    late = replay(schedule(), capped_board(), seed=4, poll_s=2e-3, start_temperature_c=40.0)
    with pytest.raises(ValueError, match=r"no capped pressure entry of 1\.5 s or more before its first series"):
        capped_clock_before_series(capped_board(), late)
    # a cap controller without an averaging window has no settled clock to fit
    windowless = replace(capped_board(), physics=replace(capped_board().physics, cap_window_s=0.0))
    with pytest.raises(ValueError, match="no averaging window"):
        capped_clock_before_series(windowless, rec)


def test_the_capped_clock_can_be_fitted_at_the_recordings_ambient():
    # the board ran 12 °C cooler than the preset's constant ambient: in the warmer die of a replay at the preset's
    # ambient more of the cap goes to leakage, so the fit reaches the board's clock with too little core power
    cool = replace(scaled_core(capped_board(), 1.06), ambient_c=capped_board().ambient_c - 12.0)
    rec = replay(natural_then_series(), cool, seed=3, poll_s=2e-3, start_temperature_c=cool.ambient_c + 8.0)
    at_preset = capped_clock_before_series(capped_board(), rec)
    at_recorded = capped_clock_before_series(capped_board(), rec, ambient="recorded")
    read = at_recorded.fit["board_capped_clock"]
    assert read["replay_ambient"] == "recorded" and at_preset.fit["board_capped_clock"]["replay_ambient"] == "preset"
    assert read["replay_ambient_c"] == pytest.approx(cool.ambient_c, abs=1.5)  # read through the thermal network
    assert at_preset.fit["board_capped_clock"]["replay_ambient_c"] == capped_board().ambient_c
    assert at_recorded.ambient_c == capped_board().ambient_c  # the replays' ambient is not kept in the preset
    # the same target, matched in a cooler die: a smaller core factor, nearer the board's own 1.06
    assert read["real_reading_mhz"] == pytest.approx(at_preset.fit["board_capped_clock"]["real_reading_mhz"])
    assert abs(read["core_scale"] - 1.06) < abs(at_preset.fit["board_capped_clock"]["core_scale"] - 1.06)
    via = calibrated_preset(capped_board(), rec, cap="clock", cap_ambient="recorded")
    assert via.physics.core_w_per_ghz == pytest.approx(at_recorded.physics.core_w_per_ghz, rel=1e-12)
    with pytest.raises(ValueError, match="ambient must be 'preset' or 'recorded'"):
        capped_clock_before_series(capped_board(), rec, ambient="initial")


def test_twin_compare_calibrate_cap_notes_the_factor_read(tmp_path):
    from powermodels.cli import main
    from powermodels.recording import write_recording
    from powermodels.twin.preset import save_preset

    rec = replay(natural_then_series(), scaled_core(capped_board(), 1.06), seed=3, poll_s=2e-3,
                 start_temperature_c=40.0)
    folder = write_recording(rec, tmp_path / "rec")
    preset_file = save_preset(capped_board(), tmp_path / "b.json")
    assert main(["twin-compare", str(folder), "--preset", str(preset_file), "--out", str(tmp_path / "cmp"),
                 "--calibrate-cap", "clock", "--cap-seeds", "1"]) == 0
    note = (tmp_path / "cmp" / "comparison.md").read_text()
    assert "board capped clock: core x 1.0" in note and "the 2 series held out" in note


def with_probed_launches(rec, ratios: dict[str, float]):
    """``rec`` with a timed, clock-probed ``bf16`` launch every 10 ms in each entry named in ``ratios``.

    Each launch takes the preset's time at its probed clock × the entry kind's ratio (``"pressure"``,
    ``"series"``), as a board whose GEMM needs that many more cycles would.
    """
    work = capped_board().workloads["bf16"].workload
    mem = capped_board().physics.mem_clocks_mhz[0]
    launches, probes = [rec.launches], []
    for kind, ratio in ratios.items():
        entry = rec.phases.loc[(rec.phases[schema.PHASE_KIND] == kind) & (rec.phases[schema.WORKLOAD] == "bf16")].iloc[0]
        starts = np.arange(float(entry[schema.T0_S]) + 0.05, float(entry[schema.T1_S]) - 0.05, 0.01)
        clocks = np.linspace(1500.0, 1700.0, len(starts))
        times = np.array([work.time_s(f, mem) for f in clocks]) * ratio
        launches.append(pd.DataFrame({schema.WORKLOAD: "bf16", schema.RECORDING_PHASE: entry[schema.RECORDING_PHASE],
                                      schema.REPEAT: 0, schema.BATCH: np.arange(len(starts)), schema.START_S: starts,
                                      schema.END_S: starts + times, schema.LAUNCHES: 1, schema.TIME_S: times}))
        probes.append(pd.DataFrame({schema.T_S: starts + 1e-4, schema.WORKLOAD: "bf16",
                                    schema.BATCH: np.arange(len(starts)), schema.PROBE_CLOCK_MHZ: clocks,
                                    schema.PROBE_CYCLES: 40000, schema.PROBE_ELAPSED_NS: 20000}))
    return replace(rec, launches=pd.concat(launches, ignore_index=True),
                   probes=pd.concat(probes, ignore_index=True))


def test_cycles_from_the_probed_pressure_before_the_series_only():
    rec = replay(natural_then_series(), scaled_core(capped_board(), 1.06), seed=3, poll_s=2e-3,
                 start_temperature_c=40.0)
    # the pressure's launches take 2 % more cycles than the preset's; the held-out series' 10 % more: not read
    probed = with_probed_launches(rec, {"pressure": 1.02, "series": 1.10})
    fitted = capped_clock_before_series(capped_board(), probed, cycles="probes")
    read = fitted.fit["board_capped_clock"]
    assert read["workload"] == "bf16" and read["probed_time_ratio"] == pytest.approx(1.02, rel=1e-9)
    assert read["probed_launches"] == len(probed.launches.loc[probed.launches[schema.START_S] < 12.0]) > 300
    before = capped_board().workloads["bf16"].workload
    assert fitted.workloads["bf16"].workload.core_work == pytest.approx(before.core_work * 1.02, rel=1e-9)
    # the clock is then matched with those cycles: the same target as with the preset's cycles
    plain = capped_clock_before_series(capped_board(), probed).fit["board_capped_clock"]
    assert read["real_reading_mhz"] == pytest.approx(plain["real_reading_mhz"], rel=1e-12)
    for cap in ("probes", True):  # True is "probes"
        via = calibrated_preset(capped_board(), probed, cap=cap)
        assert via.workloads["bf16"].workload.core_work == pytest.approx(before.core_work * 1.02, rel=1e-9)


def test_cycles_from_probes_refuse_a_recording_whose_pressure_was_not_probed():
    rec = replay(natural_then_series(), capped_board(), seed=3, poll_s=2e-3, start_temperature_c=40.0)
    with pytest.raises(ValueError, match="--probe-pressure"):
        capped_clock_before_series(capped_board(), with_probed_launches(rec, {"series": 1.0}), cycles="probes")
    with pytest.raises(ValueError, match="--probe-pressure"):  # no probes.parquet at all
        capped_clock_before_series(capped_board(), replace(rec, probes=None), cycles="probes")
    no_bf16 = replace(capped_board(), workloads={k: w for k, w in capped_board().workloads.items() if k != "bf16"})
    with pytest.raises(ValueError, match="has no workload 'bf16'"):
        probed_cycles_before(no_bf16, with_probed_launches(rec, {"pressure": 1.0}), "bf16", 12.0)
    with pytest.raises(ValueError, match="cycles must be"):
        capped_clock_before_series(capped_board(), rec, cycles="series")
    with pytest.raises(ValueError, match="cap must be"):
        calibrated_preset(capped_board(), rec, cap="both")


def test_twin_compare_calibrate_cap_probes_says_what_recording_it_needs(tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.recording import write_recording
    from powermodels.twin.preset import save_preset

    rec = replay(natural_then_series(), capped_board(), seed=3, poll_s=2e-3, start_temperature_c=40.0)
    folder = write_recording(rec, tmp_path / "rec")
    preset_file = save_preset(capped_board(), tmp_path / "b.json")
    assert main(["twin-compare", str(folder), "--preset", str(preset_file), "--out", str(tmp_path / "cmp"),
                 "--calibrate-cap"]) != 0  # "probes" with no value
    err = capsys.readouterr().err
    assert "no probed bf16 launch before its first series" in err and "--probe-pressure" in err
    assert "Traceback" not in err and not (tmp_path / "cmp" / "comparison.csv").exists()


def test_settled_cap_power_is_the_counter_s_1s_mean_past_the_start():
    from powermodels.twin.fit_controller import fit_cap_gains, settled_cap_power

    rec = replay(natural_then_series(), capped_board(), seed=2, poll_s=2e-3, start_temperature_c=40.0)
    # the twin's controller holds the 1 s mean near its budget, the limit plus its offset (650 - 3 W)
    settled = settled_cap_power(rec, [(18.0, 23.0)])
    assert abs(settled - 647.0) < 5.0
    assert np.isnan(settled_cap_power(rec, [(18.0, 19.9)]))  # under five 1 s means past 1.7 s
    report = {}
    fit_cap_gains(capped_board(), rec, grid=[(10.0, 0.0, 0.0)], report=report)
    spans = report["cap_gains"]["spans"]
    assert report["cap_gains"]["cap_offset_w"] == pytest.approx(settled_cap_power(rec, spans) - 650.0, rel=1e-12)


def test_pressure_vs_series_script_reads_both_ratios_apart(tmp_path, capsys):
    from benchmark_scripts import load_benchmark
    from powermodels.recording import write_recording
    from powermodels.twin.preset import save_preset

    rec = replay(natural_then_series(), scaled_core(capped_board(), 1.06), seed=3, poll_s=2e-3,
                 start_temperature_c=40.0)
    # the replay's own bf16 launches out: each probed launch below is the only one of its batch, as on a GPU
    rec = replace(rec, provenance={**rec.provenance, "uuid": "GPU-0123abcd-0000"},
                  launches=rec.launches.loc[rec.launches[schema.WORKLOAD] != "bf16"])
    preset_file = str(save_preset(capped_board(), tmp_path / "b.json"))
    script = load_benchmark("pressure_vs_series")
    probed = write_recording(with_probed_launches(rec, {"pressure": 1.02, "series": 1.10}), tmp_path / "probed")
    assert script.main([str(probed), "--preset", preset_file, "--scale", "none", "--thermal", "none"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "0123abcd" in line).split("|")
    # board, entries, power, clock, settled power, then the two ratios and their gap (%)
    assert float(row[6]) == pytest.approx(1.02, rel=1e-4) and float(row[7]) == pytest.approx(1.10, rel=1e-4)
    assert float(row[8]) == pytest.approx(100 * (1.02 / 1.10 - 1), abs=0.01)
    # then the probed clocks and the die temperatures of each part, read from the trace
    die = rec.trace[schema.TEMPERATURE_C]
    series = rec.phase_rows(kind="series", workload="bf16")
    in_series = np.zeros(len(die), bool)
    for a, b in series[[schema.T0_S, schema.T1_S]].to_numpy(float):
        in_series |= rec.trace[schema.T_S].between(a + 0.5, b, inclusive="left").to_numpy()
    assert float(row[12]) == pytest.approx(float(die[in_series].median()))
    assert die.min() <= float(row[11]) <= die.max()
    # and the launch rates: a probed launch every 10 ms from 0.05 s into each entry to 0.05 s before its end,
    # read from 0.5 s in (the script's skip, on both parts), so (L - 0.55) / (L - 0.5) × 100 per second
    length = float((series[schema.T1_S] - series[schema.T0_S]).iloc[0])
    assert float(row[14]) == pytest.approx(100 * (length - 0.55) / (length - 0.5), rel=2e-3)
    pressure = rec.phase_rows(kind="pressure", workload="bf16")
    spans = (pressure[schema.T1_S] - pressure[schema.T0_S]).to_numpy(float)
    assert float(row[13]) == pytest.approx(100 * (spans - 0.55).sum() / (spans - 0.5).sum(), rel=2e-3)
    # the series' first seconds, as long as the pressure entry: launches all through them, and the probed clock
    # (rising 1500 -> 1700 MHz over each entry here) lower than over the whole series
    assert float(row[16]) == pytest.approx(100.0, rel=2e-3)
    assert float(row[15]) < float(row[10]) - 20
    # a recording whose pressure was not probed: one line, no traceback
    plain = write_recording(with_probed_launches(rec, {"series": 1.0}), tmp_path / "plain")
    assert script.main([str(plain), "--preset", preset_file, "--scale", "none", "--thermal", "none"]) == 2
    err = capsys.readouterr().err
    assert "--probe-pressure" in err and "Traceback" not in err
    (probed / "probes.parquet").unlink()  # no probes file at all: the same one line
    assert script.main([str(probed), "--preset", preset_file, "--scale", "none", "--thermal", "none"]) == 2
    assert "no probes.parquet" in capsys.readouterr().err
