"""The ``powermodels`` command line: the sub-commands of :data:`powermodels.commands.COMMANDS`.

The parser is built from that table of names and one-line helps; a command's
module (its options and its ``run``) is imported only when that command runs,
so ``powermodels --help`` and every command start without importing the others.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable

from .commands import COMMANDS


class _Version(argparse.Action):
    """``--version``: the package version, read (importlib.metadata, ~20 ms) only when asked."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__

        print(f"powermodels {__version__}")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (and a pointer to --help), not the whole usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The ``powermodels`` parser; the options of ``commands`` only (default: of every command).

    Every sub-command is listed with its help either way; the module of a
    command not in ``commands`` is not imported (its options are unknown to
    this parser).
    """
    parser = _Parser(
        prog="powermodels",
        description="Trustworthy GPU energy from the built-in NVML power sensor.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = set(COMMANDS) if commands is None else set(commands)
    for name, command in COMMANDS.items():
        p = sub.add_parser(name, help=command.help, description=command.help)
        if name in wanted:
            module = importlib.import_module(f"{__package__}.commands.{command.module}")
            module.add_arguments(p)
            p.set_defaults(_run=module.run)
    return parser


def _command_of(argv: list[str]) -> list[str]:
    """The sub-command named in ``argv`` (its first word that is no option), as a list of 0 or 1."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return [first] if first in COMMANDS else []


#: set to 1 to see the traceback of an unexpected error instead of one line
DEBUG_ENV = "POWERMODELS_TRACEBACK"


def _one_line(err: BaseException) -> str:
    """The error as one line: user errors as they are, NVML and unexpected errors with their kind."""
    text = " ".join(str(err).split()) or type(err).__name__
    if type(err).__name__.startswith("NVMLError"):
        return (f"NVML: {text} (no usable NVIDIA GPU/driver? --device simulated runs without one)")
    if isinstance(err, (ValueError, OSError)):
        return text
    return f"{type(err).__name__}: {text} (unexpected; {DEBUG_ENV}=1 shows the traceback)"


def _warning_line(message, category, filename, lineno, file=None, line=None) -> str:
    """A warning as one line: its kind and message (the library's source line means nothing here)."""
    return f"powermodels: {category.__name__}: {' '.join(str(message).split())}\n"


def main(argv: list[str] | None = None) -> int:
    import warnings

    argv = sys.argv[1:] if argv is None else list(argv)
    previous, warnings.formatwarning = warnings.formatwarning, _warning_line
    try:
        return _main(argv)
    finally:
        warnings.formatwarning = previous


def _main(argv: list[str]) -> int:
    parser = build_parser(_command_of(argv))
    args = parser.parse_args(argv)
    if getattr(args, "_run", None) is None:
        parser.print_help()
        return 2
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("powermodels: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `powermodels ... | head`: the reader left; stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except Exception as err:  # every error is one line naming the problem; no traceback
        if os.environ.get(DEBUG_ENV):
            raise
        print(f"powermodels {args.command}: error: {_one_line(err)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
