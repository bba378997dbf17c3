"""The ``powermodels`` command line: sub-commands discovered in :mod:`powermodels.commands`."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys

from . import __version__, commands


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{info.name}")


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line (and a pointer to --help), not the whole usage block."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="powermodels",
        description="Trustworthy GPU energy from the built-in NVML power sensor.",
    )
    parser.add_argument("--version", action="version", version=f"powermodels {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


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


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
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
