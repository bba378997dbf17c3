"""``powermodels measure``: a short summary, the full row on request, one-line errors before any run."""

from __future__ import annotations

import pandas as pd
import pytest

from powermodels import schema
from powermodels.cli import main


def test_measure_prints_a_short_summary_and_writes_the_row(tmp_path, capsys):
    out, trace = tmp_path / "row.parquet", tmp_path / "trace.parquet"
    assert main(["measure", "--device", "simulated", "--kernel", "stream_triad", "--protocol", "good_practice",
                 "--param", "trials=2", "--param", "random_state=0", "--out", str(out),
                 "--trace-out", str(trace)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0].startswith("stream_triad (block_size_x=256,vector_width=4) on Simulated")
    assert "protocol good_practice" in lines[0]
    assert any(line.startswith("  energy_j ") and "±" in line and "reference" in line for line in lines)
    assert len(lines) <= 8  # compact, not one line per field
    row = pd.read_parquet(out)
    schema.validate_run_table(row)
    assert row[schema.PROTOCOL].iloc[0] == "good_practice"
    assert len(pd.read_parquet(trace)) > 100
    assert f"wrote the run-table row to {out}" in text


def test_measure_full_prints_every_field(capsys):
    assert main(["measure", "--device", "simulated", "--protocol", "steady_state", "--full",
                 "--param", "idle_s=0.5", "--param", "measure_s=0.5"]) == 0
    text = capsys.readouterr().out
    for field in (schema.RUN_ID, schema.IDLE_POWER_W, schema.WALL_S, "nr_outer"):
        assert any(line.startswith(field) for line in text.splitlines()), field


@pytest.mark.parametrize("argv, message", [
    (["--kernel", "nope"], "unknown kernel 'nope'"),
    (["--kernel", "square_wave"], "--kernel square_wave is the sensor-characterisation load"),
    (["--config", "garbage"], "expected 'name=value'"),
    (["--kernel", "sgemm", "--config", "MWG=7"], "is invalid"),
    (["--protocol", "bogus"], "unknown protocol 'bogus'"),
    (["--protocol", "continuous", "--param", "duration_s=abc"], "--param duration_s: expected a number"),
    (["--protocol", "continuous", "--param", "nosuch=1"], "--param nosuch: the protocol has no such parameter"),
    (["--protocol-param", "window_s=abc"], "--protocol-param/--param window_s: expected a number"),
    (["--protocol-param", "nosuch=1"], "--protocol-param/--param nosuch: protocol 'counter' has no such"),
    (["--protocol", "continuous", "--tune", "nosuch=1"], "unknown parameter(s) ['nosuch'] for registry workload"),
    (["--source", "x.cu"], "--source needs --kernel NAME"),
    (["--source", "missing.cu", "--kernel", "k"], "file 'missing.cu' does not exist"),
    (["--callable", "nomodule_xyz:f"], "cannot import module 'nomodule_xyz'"),
    (["--callable", "json:dumps", "--source", "x.cu"], "give one workload"),
    (["--callable", "os:getcwd"], "has no simulated twin"),
    (["--out", "row.txt"], "--out: 'row.txt' must end in .parquet, .csv or .json"),
    (["--protocol", "naive", "--param", "power_column=bogus"], "--param power_column: expected one of"),
    (["--param", "noequals"], "--param: expected 'name=value'"),
    (["--protocol", "good_practice", "--param", "trials=0"], "trials must be >= 1"),
    (["--preset", "nope"], "preset must be one of"),
    (["--out", "/nonexistent-folder/row.parquet"], "--out: folder '/nonexistent-folder' does not exist"),
])
def test_measure_bad_input_is_one_line(argv, message, capsys):
    assert main(["measure", "--device", "simulated", *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("powermodels measure: error: ") and message in err[0], err


def test_measure_a_user_source_kernel_routes_tunables_and_protocol_params(tmp_path, capsys):
    from powermodels.workloads import kernels_dir

    out = tmp_path / "row.csv"
    assert main(["measure", "--device", "simulated", "--protocol", "good_practice",
                 "--source", str(kernels_dir() / "examples" / "matmul_tiled.cu"), "--kernel", "matmul_kernel",
                 "--param", "trials=2", "--param", "block_size_x=32", "--tune", "block_size_y=8",
                 "--config", "tile_size_x=4,tile_size_y=4", "--problem-size", "4096,4096",
                 "--grid-div-x", "block_size_x,tile_size_x", "--grid-div-y", "block_size_y,tile_size_y",
                 "--arg", '{"zeros": "float32", "size": 16}', "--simulated", '{"time_s": 0.004}',
                 "--out", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("matmul_kernel (tile_size_x=4,tile_size_y=4,block_size_y=8,block_size_x=32) on")
    row = pd.read_csv(out)
    assert row["block_size_x"].iloc[0] == 32 and row[schema.PROTOCOL].iloc[0] == "good_practice"
    assert row[schema.TIME_S].iloc[0] == pytest.approx(0.004)


def test_measure_a_callable_workload_object_to_json(tmp_path, capsys, monkeypatch):
    (tmp_path / "my_steps.py").write_text(
        "from powermodels.workloads import CallableWorkload, SimulatedTwin\n"
        "step = CallableWorkload(lambda: None, name='train_step', simulated=SimulatedTwin(time_s=0.01))\n")
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "row.json"
    assert main(["measure", "--device", "simulated", "--callable", "my_steps.py:step", "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("train_step on Simulated")
    row = pd.read_json(out)
    assert row[schema.KERNEL].iloc[0] == "train_step" and row[schema.PROTOCOL].iloc[0] == "counter"


@pytest.mark.parametrize("option", ["--trace-out", "--calibration"])
def test_measure_program_refuses_options_it_would_ignore(option, tmp_path, capsys):
    import sys

    value = str(tmp_path / ("trace.csv" if option == "--trace-out" else "cal.pmcal"))
    assert main(["measure", "--device", "simulated", option, value, "--repeats", "1", "--idle-s", "0",
                 "--simulated-activity", "0.5",
                 "--", sys.executable, "-c", "pass"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{option} does not apply to a program" in err[0], err


def test_measure_program_is_bounded_by_default(capsys, monkeypatch):
    """`measure -- CMD` waited forever for a program that never exits."""
    import sys

    from powermodels.workloads import program

    with pytest.raises(SystemExit):
        main(["measure", "--help"])
    assert f"(default {program.DEFAULT_TIMEOUT_S:g} s; 'none': no bound)" in " ".join(capsys.readouterr().out.split())
    monkeypatch.setattr(program, "DEFAULT_TIMEOUT_S", 0.4)  # the default, shortened for the test
    hang = ["--", sys.executable, "-c", "import time; time.sleep(30)"]
    common = ["measure", "--device", "simulated", "--repeats", "1", "--idle-s", "0", "--simulated-activity", "0.5"]
    assert main(common + hang) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did not exit within 0.4 s (the default bound): stopped with its process group" in err[0]
    assert main(common + ["--timeout-s", "0.3"] + hang) == 1
    assert "within 0.3 s: stopped" in capsys.readouterr().err
    assert main(common + ["--timeout-s", "none", "--", sys.executable, "-c", "import time; time.sleep(0.6)"]) == 0
    assert main(common + ["--no-check", "--timeout-s", "0.3"] + hang) == 0
    assert "(stopped at its --timeout-s bound)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(common + ["--timeout-s", "0"] + hang)
    assert "argument --timeout-s: must be a finite number > 0, got '0'" in capsys.readouterr().err
