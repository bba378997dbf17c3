"""The CLI discovers its sub-commands and fails cleanly."""

from __future__ import annotations

import subprocess
import sys

from powermodels import cli


def test_help_lists_commands(capsys):
    assert cli.main([]) == 2
    out = capsys.readouterr().out
    assert "usage: powermodels" in out


def test_version():
    proc = subprocess.run([sys.executable, "-m", "powermodels.cli", "--version"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert proc.stdout.startswith("powermodels ")
