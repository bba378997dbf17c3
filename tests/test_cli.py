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


def test_the_command_table_lists_every_command_module():
    import importlib
    import pkgutil

    from powermodels import commands

    modules = {i.name for i in pkgutil.iter_modules(commands.__path__) if not i.name.startswith("_")}
    assert {c.module for c in commands.COMMANDS.values()} == modules
    for name, command in commands.COMMANDS.items():
        module = importlib.import_module(f"powermodels.commands.{command.module}")
        assert module.NAME == name and module.HELP == command.help
        assert callable(module.add_arguments) and callable(module.run)


def test_help_imports_no_command_module_and_a_command_only_its_own():
    code = ("import sys; from powermodels.cli import main\n"
            "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('powermodels.commands.')))\n"
            "print(any(m.split('.')[0] in ('pandas', 'numpy') for m in sys.modules))")
    help_ = subprocess.run([sys.executable, "-c", code, "--help"], capture_output=True, text=True, check=True)
    lines = help_.stdout.strip().splitlines()
    assert all(f" {name} " in help_.stdout for name in ("measure", "campaign", "demo", "restore"))
    assert lines[-2:] == ["[]", "False"], lines[-2:]
    restore = subprocess.run([sys.executable, "-c", code, "restore", "--help"], capture_output=True,
                             text=True, check=True)
    assert restore.stdout.strip().splitlines()[-2] == "['powermodels.commands.restore']"


def test_build_parser_still_knows_every_command():
    parser = cli.build_parser()
    args = parser.parse_args(["measure", "--kernel", "fp32", "--device", "simulated"])
    assert args.command == "measure" and callable(args._run)


def test_the_simulated_demo_never_imports_pandas():
    # the demo's start-up budget (issue 23: <= 0.4 s on 2 cores) has no room for pandas (~0.15 s)
    code = ("import io, sys, contextlib; from powermodels.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(['demo', '--device', 'simulated'])\n"
            "print(rc, 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "False"], out


def test_help_lists_the_commands_in_alphabetical_order():
    from powermodels.commands import COMMANDS

    assert list(COMMANDS) == sorted(COMMANDS)
