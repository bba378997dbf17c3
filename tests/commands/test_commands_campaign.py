"""``powermodels campaign``: summary table at the end, Ctrl-C says how to resume, resume finishes."""

from __future__ import annotations

import json

import pytest

from powermodels.cli import main
from powermodels.commands import campaign as campaign_cmd

SPEC = {"kernels": {"fp32": "default", "stream_triad": "default"}, "protocol": "good_practice",
        "protocol_params": {"trials": 2, "random_state": 0}, "repeats": 2, "device": "simulated"}


def _spec(tmp_path, **changes):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({**SPEC, **changes}))
    return path


def test_campaign_prints_a_summary_of_the_run_table(tmp_path, capsys):
    assert main(["campaign", str(_spec(tmp_path)), "--out", str(tmp_path / "c"), "--no-progress"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"campaign: 4/4 runs finished in {tmp_path / 'c'}"
    header = lines[2].split()
    assert header[:4] == ["kernel", "config", "protocol", "runs"]
    assert {"time_ms", "power_w", "energy_j", "vs_reference_%"} <= set(header)
    rows = [line.split() for line in lines[3:]]
    assert [r[0] for r in rows] == ["fp32", "stream_triad"]
    assert all(r[3] == "2" for r in rows)  # two repeats per config
    assert all(abs(float(r[-1])) < 10 for r in rows)  # good practice is close to the truth


def test_campaign_interrupted_says_how_to_resume_and_resumes(tmp_path, monkeypatch, capsys):
    import powermodels.campaigns as hc

    real = hc.run_campaign

    def interrupted(spec, out, **kw):
        real(spec, out, **{**kw, "max_runs": 1})
        raise KeyboardInterrupt

    monkeypatch.setattr(hc, "run_campaign", interrupted)
    spec, out = _spec(tmp_path), tmp_path / "c"
    assert main(["campaign", str(spec), "--out", str(out), "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "campaign interrupted: 1/4 runs saved" in err and "again to resume" in err
    monkeypatch.setattr(hc, "run_campaign", real)
    assert main(["campaign", str(spec), "--out", str(out), "--no-progress"]) == 0
    assert "4/4 runs finished" in capsys.readouterr().out


@pytest.mark.parametrize("changes, message", [
    ({"kernels": {"nope": "default"}}, "unknown kernel 'nope'"),
    ({"protocol_params": {"trials": "two"}}, "'protocol_params'['trials'] must be an integer, got 'two'"),
    ({"protocol_params": {"nosuch": 1}}, "unknown parameter(s) ['nosuch']"),
    ({"repeats": 0}, "'repeats' must be an integer >= 1 and <= 10000, got 0"),
])
def test_campaign_bad_spec_is_one_line(tmp_path, capsys, changes, message):
    assert main(["campaign", str(_spec(tmp_path, **changes)), "--out", str(tmp_path / "c")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_campaign_missing_file_and_bad_max_runs(tmp_path, capsys):
    assert main(["campaign", str(tmp_path / "nope.json"), "--out", str(tmp_path / "c")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["campaign", str(_spec(tmp_path)), "--out", str(tmp_path / "c"), "--max-runs", "-1"]) == 1
    assert "--max-runs must be >= 0" in capsys.readouterr().err


def test_text_table_aligns_text_left_and_numbers_right():
    import pandas as pd

    t = pd.DataFrame({"kernel": ["a", "long"], "x": [1.5, 10.25]})
    text = campaign_cmd.text_table(t, {"x": "{:.2f}".format}, left=("kernel",))
    assert text.splitlines() == ["kernel      x", "a        1.50", "long    10.25"]
