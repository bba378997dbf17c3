"""The ``powermodels`` command line: sub-commands discovered in :mod:`powermodels.commands`."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__, commands


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            yield importlib.import_module(f"{commands.__name__}.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    except (ValueError, FileNotFoundError, PermissionError) as err:
        print(f"powermodels {args.command}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
