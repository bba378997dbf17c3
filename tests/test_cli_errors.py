"""Every CLI error is one line naming the problem, a non-zero exit code, and no traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from powermodels import cli
from powermodels.commands import measure


class NVMLError_LibraryNotFound(Exception):  # named like pynvml's
    pass


def _failing(err):
    def run(args):
        raise err
    return run


@pytest.mark.parametrize("err, expected", [
    (ValueError("--seed must be >= 0, got -1"), "--seed must be >= 0, got -1"),
    (FileNotFoundError("campaign config 'x.json' does not exist"), "campaign config 'x.json' does not exist"),
    (OSError("Cannot save file into a non-existent directory: '/x'"), "non-existent directory"),
    (NVMLError_LibraryNotFound("NVML Shared Library Not Found"),
     "NVML: NVML Shared Library Not Found (no usable NVIDIA GPU/driver? --device simulated"),
    (TypeError("'>' not supported\nbetween"), "TypeError: '>' not supported between (unexpected; "
                                                "POWERMODELS_TRACEBACK=1 shows the traceback)"),
])
def test_errors_are_one_line(monkeypatch, capsys, err, expected):
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    monkeypatch.setattr(measure, "run", _failing(err))
    assert cli.main(["measure"]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("powermodels measure: error: ") and expected in lines[0]


def test_traceback_on_request(monkeypatch):
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    monkeypatch.setattr(measure, "run", _failing(TypeError("boom")))
    with pytest.raises(TypeError, match="boom"):
        cli.main(["measure"])


def test_interrupt_exits_130(monkeypatch, capsys):
    monkeypatch.setattr(measure, "run", _failing(KeyboardInterrupt()))
    assert cli.main(["measure"]) == 130
    assert "interrupted" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["characterize", "--device", "simulated", "--out", "X", "--seconds", "0.5"], "--seconds must be >= 1"),
    (["characterize", "--device", "simulated", "--out", "X", "--step-seconds", "0"], "--step-seconds must be"),
    (["characterize", "--device", "simulated", "--out", "X", "--preset", "nope"], "unknown preset 'nope'"),
    (["optimize", "--simulated", "--workload", "nope"], "--workload must be one of"),
    (["optimize", "--runs", "nope.parquet"], "nope.parquet does not exist"),
    (["demo", "--device", "simulated", "--seed", "-1"], "--seed must be >= 0"),
])
def test_bad_options_of_other_commands(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_a_closed_pipe_is_quiet():
    # `powermodels ... | head -1` with more output than the pipe holds: the writer gets EPIPE
    code = ("import sys; from powermodels import cli; from powermodels.commands import measure; "
            "measure.run = lambda args: [print('x' * 100) for _ in range(100_000)] and 0; "
            "sys.exit(cli.main(['measure']))")
    proc = subprocess.run(f"{sys.executable} -c \"{code}\" | head -1; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", capture_output=True, text=True, check=False)
    assert proc.stdout == "x" * 100 + "\n"
    assert proc.stderr == ""
    assert proc.returncode == 141


@pytest.mark.parametrize("argv, message", [
    (["demo", "--preset", "nope"], "powermodels demo: error: argument --preset: invalid choice: 'nope'"),
    (["campaign", "--out", "x"], "powermodels campaign: error: the following arguments are required: config"),
    (["nope"], "powermodels: error: argument COMMAND: invalid choice: 'nope'"),
    (["measure", "--seed", "abc"], "powermodels measure: error: argument --seed: invalid int value: 'abc'"),
])
def test_usage_errors_are_one_line(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message) and "--help)" in lines[0], lines


OUT_FOLDER_COMMANDS = {  # every command whose --out is a folder: the arguments before --out
    "characterize": ["characterize", "--device", "simulated"],
    "campaign": ["campaign", "{spec}"],
    "calibrate": ["calibrate", "--device", "simulated", "fp32"],
    "calibrate --from": ["calibrate", "--from", "{recording}"],
    "twin-compare": ["twin-compare", "--preset", "h100-sxm", "{recording}"],
    "calibrate-instructions": ["calibrate-instructions", "--device", "simulated"],
    "dvfs-features": ["dvfs-features", "--ptx-only"],
}


@pytest.mark.parametrize("command", sorted(OUT_FOLDER_COMMANDS))
def test_out_that_is_a_file_is_named(tmp_path, capsys, command):
    afile = tmp_path / "README.md"
    afile.write_text("")
    spec = tmp_path / "spec.json"
    spec.write_text('{"kernels": {"fp32": "default"}, "device": "simulated"}')
    recording = tmp_path / "recording"  # the --out check comes first: nothing is read
    argv = [a.format(spec=spec, recording=recording) for a in OUT_FOLDER_COMMANDS[command]]
    assert cli.main([*argv, "--out", str(afile)]) == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"--out {str(afile)!r} is a file, not a folder" in lines[0], lines
