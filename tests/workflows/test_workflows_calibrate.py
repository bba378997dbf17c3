"""powermodels calibrate end to end on the simulated GPU: locked clocks and natural DVFS."""

from __future__ import annotations

import numpy as np
import pytest

from powermodels import schema
from powermodels.cli import main
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import SimulatedGPU
from powermodels.workflows import calibration_apply
from powermodels.workflows.calibrate import calibrate, save
from powermodels.workflows.calibration_fit import group_key
from powermodels.workflows.calibration_report import write_report


@pytest.fixture(scope="module")
def locked():
    gpu = SimulatedGPU(seed=0)
    run = calibrate(["fp32", "stream_triad"], gpu, allow_clock_changes=True,
                    clocks=[1110, 1350, 1590, 1830, 1980], point_s=0.3)
    return gpu, run


def test_locked_clock_sweep_restores_the_clocks_and_fits_every_curve(locked):
    gpu, run = locked
    assert gpu.current_settings().sm_clock_mhz is None  # the guard put the default back
    requested = run.points[schema.SM_CLOCK_REQUESTED_MHZ]
    sweep = run.points.loc[run.points[schema.CALIBRATION_PHASE] == "sweep"]
    assert np.allclose(sweep[schema.SM_CLOCK_MHZ], sweep[schema.SM_CLOCK_REQUESTED_MHZ], atol=1.0)
    assert set(requested.unique()) >= {1110, 1980}
    ident = run.calibration.identifiability
    assert ident["identified"].all()
    assert run.calibration.temperature.alpha_w_per_c_ > 0


def test_time_model_predicts_the_held_out_clock_band(locked):
    _, run = locked
    v = run.calibration.validation
    assert len(v) == 2
    assert (v["time_mape_rational_pct"] < 2.0).all() and (v["time_mape_selected_pct"] < 2.0).all()
    assert (v["energy_error_pct"].abs() < 3.0).all()


def test_calibration_file_corrects_a_measurement(locked, tmp_path):
    _, run = locked
    path = save(run, tmp_path / "cal.pmcal")
    models, meta = calibration_apply.load(path)
    calibration_apply.check_device(meta, run.device["device"])
    f_ref = meta["reference_clock_mhz"]
    sweep = run.points.loc[(run.points[schema.CALIBRATION_PHASE] == "sweep")
                           & (run.points[schema.KERNEL] == "fp32")]
    low, ref = sweep.iloc[0].to_dict(), sweep.iloc[-1].to_dict()
    out = calibration_apply.correct_row(low, models, meta)
    # the 1110 MHz point moved to f_ref: within 2 % of the point measured there, after temperature
    expected = ref[schema.POWER_W] - run.calibration.temperature.alpha_w_per_c_ * (
        ref[schema.TEMPERATURE_C] - meta["reference_temperature_c"])
    assert ref[schema.SM_CLOCK_MHZ] == pytest.approx(f_ref, abs=1)
    assert out[calibration_apply.CORRECTED_POWER_W] == pytest.approx(expected, rel=0.02)
    with pytest.raises(ValueError, match="another|allow_other_device"):
        calibration_apply.check_device(meta, "NVIDIA H100 80GB HBM3")


def test_report_has_tables_and_plots(locked, tmp_path):
    pytest.importorskip("matplotlib")
    _, run = locked
    report = write_report(run, tmp_path)
    text = report.read_text()
    assert "What the data identify" in text and "Per-config vs global" in text
    for name in ("power_vs_clock.png", "time_vs_clock.png", "temperature_slope.png", "points.parquet"):
        assert (tmp_path / name).stat().st_size > 0


#: a simulated board whose controller moves the clock like the H100's (10 ms steps, ~5 GHz/s
#: recovery: datasets/h100-2026-11-25-raw), with a 400 W limit these kernels reach
H100_LIKE = dict(power_limit_w=400, control_step_s=0.01, clock_recovery_mhz_per_s=5000)


def test_natural_dvfs_changes_nothing_and_says_what_it_cannot_identify():
    gpu = SimulatedGPU(seed=1, physics=GPUPhysics(**H100_LIKE))
    before = gpu.current_settings()
    run = calibrate(["fp32", "stream_triad"], gpu, cycles=4, pressure_s=0.6, burst_s=0.3, series_s=1.0,
                    cool_s=1.0)
    assert gpu.current_settings() == before
    launches = run.launches
    assert launches[schema.SM_CLOCK_MHZ].max() - launches[schema.SM_CLOCK_MHZ].min() > 150
    assert set(launches[schema.CLOCK_SOURCE]) == {"probe"} and launches[schema.CLOCK_KEPT].all()
    assert run.recording is not None and len(run.recording.probes) > len(run.recording.launches)
    assert (run.clocks["dropped"] > 0).any()  # launches inside a clock step are not fitted on
    ident = run.calibration.identifiability
    assert set(ident["quantity"]) == {"power", "time", "temperature"}
    missing = ident.loc[~ident["identified"]]
    assert (missing["reason"].str.len() > 20).all()  # every gap is explained
    fp32 = ident.set_index([schema.GROUP, "quantity"]).loc[
        (group_key("fp32", launches.loc[launches[schema.WORKLOAD].str.startswith("fp32"), schema.CONFIG].iloc[0]
                   or "block_size_x=1024,nr_outer=64,nr_inner=1024"), "time")]
    assert fp32["identified"]


def test_cli_calibrate_writes_file_and_report(tmp_path, capsys):
    rc = main(["calibrate", "fp32", "--device", "simulated", "--allow-clock-changes",
               "--clocks", "1200,1500,1800,1980", "--out", str(tmp_path), "--no-plots"])
    out = capsys.readouterr().out
    assert rc == 0
    assert (tmp_path / "calibration.pmcal").is_file() and (tmp_path / "report.md").is_file()
    assert "power" in out and "fitted over 1200–1980 MHz" in out


def test_cli_calibrate_bad_clocks_is_one_line(tmp_path, capsys):
    rc = main(["calibrate", "fp32", "--device", "simulated", "--allow-clock-changes",
               "--clocks", "fast", "--out", str(tmp_path)])
    assert rc != 0
    assert "--clocks" in capsys.readouterr().err


def test_powermodels_measure_with_calibration(locked, tmp_path):
    import powermodels

    _, run = locked
    path = save(run, tmp_path / "cal.pmcal")
    m = powermodels.measure("fp32", device=SimulatedGPU(seed=3), calibration=path)
    row = m.row
    assert np.isfinite(row[schema.CORRECTED_ENERGY_J]) and row[schema.CORRECTED_POWER_W] > 0
    assert row[schema.REFERENCE_CLOCK_MHZ] == run.calibration.reference_clock_mhz
    assert row[schema.CORRECTION_POWER_CURVE] == "per-config"
    # the row's figure at the reference temperature uses the file's α and T_ref (no warm-up)
    temperature = run.calibration.temperature
    assert row[schema.ALPHA_SOURCE] == "file"
    assert row[schema.CORRECTION_ALPHA_W_PER_C] == pytest.approx(temperature.alpha_w_per_c_)
    assert row[schema.ALPHA_UNCERTAINTY_W_PER_C] == pytest.approx(temperature.alpha_stderr_w_per_c_)
    assert row[schema.REFERENCE_TEMPERATURE_C] == pytest.approx(run.calibration.reference_temperature_c)
    with pytest.raises(ValueError, match="allow_other_device"):
        powermodels.measure("fp32", device=SimulatedGPU(preset="volta"), calibration=path)
    m = powermodels.measure("fp32", device=SimulatedGPU(preset="volta"), calibration=path,
                            allow_other_device=True)
    assert schema.CORRECTED_ENERGY_J in m.row


def test_cli_measure_with_calibration(locked, tmp_path, capsys):
    _, run = locked
    path = save(run, tmp_path / "cal.pmcal")
    assert main(["measure", "--kernel", "fp32", "--device", "simulated", "--calibration", str(path)]) == 0
    out = capsys.readouterr().out
    assert "calibrated" in out and f"at {run.calibration.reference_clock_mhz:.0f} MHz" in out
    rc = main(["measure", "--kernel", "fp32", "--device", "simulated", "--preset", "volta",
               "--calibration", str(path)])
    assert rc != 0 and "--allow-other-device" in capsys.readouterr().err


def test_cli_simulated_power_limit_refused_when_auto_finds_a_gpu(tmp_path, capsys, monkeypatch):
    import powermodels.commands.calibrate as command

    monkeypatch.setattr(command, "_has_gpu", lambda index: True)
    rc = main(["calibrate", "fp32", "--simulated-power-limit", "400", "--out", str(tmp_path)])
    assert rc != 0 and "--device simulated" in capsys.readouterr().err


@pytest.mark.parametrize("option, value, expect", [
    ("--reference-temperature", "nan", "reference_temperature_c must be a finite number >= -40 and <= 150, got nan"),
    ("--reference-clock", "-5", "reference_clock_mhz must be a finite number > 0, got -5.0"),
    ("--min-span", "-1", "min_span_mhz must be a finite number >= 0, got -1.0"),
    ("--burst-s", "inf", "burst_s must be a finite number > 0 and <= 600, got inf"),
    ("--cycles", "1000000000", "cycles must be an integer >= 2 and <= 1000, got 1000000000"),
])
def test_cli_calibrate_bad_options_refused_before_measuring(tmp_path, capsys, monkeypatch, option, value,
                                                            expect):
    """Issue 25 #10/#12: --reference-temperature nan failed after all the measuring; --min-span -1 ran."""
    def never(*args, **kwargs):
        raise AssertionError("measured before checking the options")

    monkeypatch.setattr("powermodels.workflows.calibrate.make_runner", never)
    rc = main(["calibrate", "fp32", "--device", "simulated", "--out", str(tmp_path), "--no-plots",
               option, value])
    err = capsys.readouterr().err
    assert rc != 0 and expect in err and err.count("\n") == 1
    assert not (tmp_path / "calibration.pmcal").exists()
