"""Options checked before anything is measured (issue 25 findings 1, 10, 12): one line naming the option."""

from __future__ import annotations

import pytest

from powermodels import cli


@pytest.mark.parametrize("argv, message", [
    (["characterize", "--device", "simulated", "--out", "X", "--seconds", "nan"],
     "argument --seconds: must be a finite number > 0 and <= 3600, got 'nan'"),  # failed after its probe
    (["characterize", "--device", "simulated", "--out", "X", "--seconds", "1e9"], "got '1e9'"),  # ran forever
    (["calibrate-instructions", "--device", "simulated", "--out", "X", "--fraction", "5"],
     "argument --fraction: must be a finite number > 0 and <= 1, got '5'"),
    (["demo", "--device", "simulated", "--index", "-1"], "argument --index: must be an integer >= 0, got '-1'"),
    (["measure", "--device", "simulated", "--index", "2.5"], "argument --index: must be an integer >= 0"),
    (["campaign", "x.json", "--out", "X", "--wait", "nan"], "argument --wait: must be a finite number >= 0"),
    # fit-twin: NaN failed after reading the recordings, naming an internal field; a negative knee was fitted
    (["fit-twin", "R", "--out", "t.json", "--instant-window-ms", "nan"],
     "argument --instant-window-ms: must be a finite number > 0, got 'nan'"),
    (["fit-twin", "R", "--out", "t.json", "--instant-window-ms", "20", "--instant-delay-ms", "-1"],
     "argument --instant-delay-ms: must be a finite number >= 0, got '-1'"),
    (["fit-twin", "R", "--out", "t.json", "--knee-mhz", "-1100"],
     "argument --knee-mhz: must be a finite number > 0, got '-1100'"),
    (["fit-twin", "R", "--out", "t.json", "--knee-mhz", "nan"], "argument --knee-mhz: must be a finite number > 0"),
])
def test_bad_numbers_are_usage_errors(capsys, argv, message):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


@pytest.mark.parametrize("argv, message", [
    (["measure", "--device", "simulated", "--index", "5"], "--index 5: the simulated GPU is one board, index 0"),
    (["measure", "--device", "simulated", "--problem-size", "abc"],
     "--problem-size describes a --source kernel's launch; give --source FILE or drop it"),
    (["measure", "--device", "simulated", "--grid-div-x", "2"], "--grid-div-x describes a --source kernel"),
    (["measure", "--device", "simulated", "--protocol-param", "window_s=1e9"], "more than max_duration_s=5"),
    (["measure", "--device", "simulated", "--protocol-param", "window_s=abc"],
     "window_s: expected a number, got 'abc'"),
    (["measure", "--device", "simulated", "--protocol-param", "min_updates=1e9"],
     "['min_updates'] must be an integer, got 1000000000.0"),
    (["characterize", "--device", "simulated", "--out", "X", "--step-seconds", "nan"],
     "--step-seconds must be >= 0.5 and <= 3600, got nan"),
])
def test_silently_accepted_options_are_refused(tmp_path, monkeypatch, capsys, argv, message, simulated_work):
    """Issue 25 #12: these ran (measuring something else than asked) or hung."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert simulated_work["seconds"] < 1  # refused before measuring (an unbounded run fails the fixture)


def test_dvfs_features_says_what_failed_in_its_exit_status(tmp_path, capsys):
    """Issue 25 #12: `--source /etc/passwd --ptx-only` exited 0 after "nvcc failed"."""
    rc = cli.main(["dvfs-features", "--out", str(tmp_path / "f"), "--source", "/etc/passwd", "--ptx-only"])
    out, err = capsys.readouterr()
    assert rc == 1 and "no PTX features collected" in err and err.count("\n") == 1


def test_dvfs_features_names_an_unknown_workload_before_running(tmp_path, capsys):
    """Issue 25 #12: `--workloads nope` reported "No such file or directory: 'ncu'"."""
    assert cli.main(["dvfs-features", "--out", str(tmp_path / "f"), "--workloads", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--workloads: 'nope' is not a workload spec" in err
    assert not (tmp_path / "f").exists()


def test_optimize_names_missing_columns_before_asking_for_p_max(tmp_path, capsys):
    """Issue 25 #12: `optimize --runs bad.csv` asked for --p-max-w before saying the columns are missing."""
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    assert cli.main(["optimize", "--runs", str(tmp_path / "bad.csv")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "column(s) ['kernel'" in err and "--p-max-w" not in err
