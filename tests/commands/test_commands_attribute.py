"""``powermodels attribute`` on a synthetic calibration table and a captured ncu CSV."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.cli import main

SAMPLE = Path(__file__).parents[1] / "harness" / "data" / "ncu_sample.csv"


def _micro_table(path: Path) -> Path:
    rng = np.random.default_rng(0)
    ops = ["FADD", "IADD3", "LDG.E", "STG.E", "BRA"]
    e = np.array([150, 300, 4000, 8000, 400]) * 1e-12
    counts = np.eye(len(ops)) * 1e10 + rng.uniform(0, 1e8, (len(ops), len(ops)))
    counts = np.vstack([counts, counts * rng.uniform(0.5, 1.5, (len(ops), 1))])
    time = rng.uniform(0.01, 0.02, len(counts))
    df = pd.DataFrame({schema.WORKLOAD: [f"m{i}" for i in range(len(counts))],
                       schema.TIME_S: time, schema.ENERGY_J: time * 140 + counts @ e,
                       schema.STATIC_POWER_W: 140.0})
    for j, op in enumerate(ops):
        df[schema.OPCODE_PREFIX + op] = counts[:, j]
    df.to_parquet(path)
    return path


def test_attribute_fits_saves_and_reads_an_ncu_csv(tmp_path, capsys):
    table = _micro_table(tmp_path / "micro.parquet")
    cal = tmp_path / "model.pmcal"
    out = tmp_path / "breakdown.csv"
    assert main(["attribute", "--fit", str(table), "--save-calibration", str(cal),
                 "--counts", str(SAMPLE), "--output", str(out)]) == 0
    text = capsys.readouterr().out
    assert "mb_fadd: predicted" in text and "FADD" in text
    bd = pd.read_csv(out)
    assert {"opcode", "component", "energy_j", "source"} <= set(bd.columns)
    # reuse the saved calibration on the whole profile as one row
    assert main(["attribute", "--calibration", str(cal), "--counts", str(SAMPLE),
                 "--whole"]) == 0
    assert "all: predicted" in capsys.readouterr().out


def test_attribute_errors(tmp_path, capsys):
    table = _micro_table(tmp_path / "micro.parquet")
    assert main(["attribute", "--fit", str(table), "--counts", str(tmp_path / "nope.csv")]) == 1
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["attribute", "--counts", str(SAMPLE)])  # no model source


@pytest.mark.parametrize("argv", [
    ["--ncu", "python3", "-c", "import cupy; print(1)"],         # the command's own options
    ["--ncu", "--", "python3", "-c", "import cupy; print(1)"],   # with the optional --
])
def test_attribute_ncu_takes_the_rest_of_the_command_line(tmp_path, monkeypatch, capsys, argv):
    from powermodels.commands import attribute

    seen = {}

    def fake_profile(cmd):
        seen["cmd"] = cmd
        return SAMPLE.read_text()

    monkeypatch.setattr(attribute, "_profile", fake_profile)
    table = _micro_table(tmp_path / "micro.parquet")
    assert main(["attribute", "--fit", str(table), "--top", "2", *argv]) == 0
    assert seen["cmd"] == ["python3", "-c", "import cupy; print(1)"]
    assert "mb_fadd: predicted" in capsys.readouterr().out


def test_attribute_ncu_without_a_command_and_stray_arguments(tmp_path, capsys):
    table = _micro_table(tmp_path / "micro.parquet")
    assert main(["attribute", "--fit", str(table), "--ncu"]) == 1
    assert "--ncu: no command to profile" in capsys.readouterr().err
    assert main(["attribute", "--fit", str(table), "--counts", str(SAMPLE), "junk"]) == 1
    assert "unexpected arguments 'junk'" in capsys.readouterr().err


def test_attribute_compares_with_the_measured_energy_and_names_bad_files(tmp_path, capsys):
    table = _micro_table(tmp_path / "micro.parquet")
    assert main(["attribute", "--fit", str(table), "--counts", str(table), "--top", "1"]) == 0
    m0 = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("m0: predicted"))
    assert re.search(r"\(measured [0-9.e+-]+ J: [-+][0-9.]+ %\)", m0), m0
    notes = tmp_path / "notes.md"
    notes.write_text("# not a table\n\n| a | b | c |\nx,y\n1,2,3,4,5\n")
    assert main(["attribute", "--fit", str(table), "--counts", str(notes)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--counts: {notes}" in err[0]
    assert main(["attribute", "--fit", str(notes), "--counts", str(table)]) == 1
    assert "--fit" in capsys.readouterr().err
