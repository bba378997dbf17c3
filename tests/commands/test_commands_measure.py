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
    (["--protocol", "continuous", "--param", "nosuch=1"], "--param nosuch: protocol 'continuous' has no such"),
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
