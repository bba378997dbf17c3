"""Helpers several commands share: protocol parameters, output paths, devices, ``-- CMD``.

Kept apart from the commands that use them (``measure``, ``campaign``,
``attribute``, ``calibrate`` and the two private parts of ``measure``) so that
no command module imports another; the leading underscore keeps it out of the
command list.
"""

from __future__ import annotations

import dataclasses
import numbers
import sys
from pathlib import Path

__all__ = ["check_protocol_params", "check_writable", "open_any", "program_argv"]


def _power_columns() -> tuple[str, ...]:
    from .. import schema

    return (schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.POWER_USAGE_W)


def check_protocol_params(protocol: str, params: dict, what: str = "--param") -> dict:
    """``params`` if every one is known to ``protocol`` and a number where its default is one.

    Raises ValueError naming the parameter (unknown names, ``duration_s=abc``).
    """
    from ..measuring.protocols import PROTOCOLS

    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: unknown protocol {protocol!r}; known: {sorted(PROTOCOLS)}")
    fields = {f.name: f for f in dataclasses.fields(PROTOCOLS[protocol])}
    for key, value in params.items():
        if key not in fields:
            raise ValueError(f"{what} {key}: protocol {protocol!r} has no such parameter; "
                             f"known: {sorted(fields)}")
        default = fields[key].default
        numeric = isinstance(default, numbers.Real) and not isinstance(default, bool)
        if key == "random_state":  # None or an int
            numeric = value is not None
        if numeric and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
            raise ValueError(f"{what} {key}: expected a number, got {value!r}")
        if isinstance(default, str) and not isinstance(value, str):
            raise ValueError(f"{what} {key}: expected a name, got {value!r}")
        if key == "power_column" and value not in _power_columns():
            raise ValueError(f"{what} power_column: expected one of {list(_power_columns())}, got {value!r}")
    return params


def check_writable(path: str | None, option: str) -> None:
    """Fail before measuring when an output file cannot be written (missing folder)."""
    if path is None:
        return
    parent = Path(path).expanduser().resolve().parent
    if not parent.is_dir():
        raise FileNotFoundError(f"{option}: folder {str(parent)!r} does not exist")


def out_folder(path: str, option: str = "--out") -> Path:
    """``path`` as a command's output folder; fails at once, before any work, when it is a file
    (``mkdir`` would fail only after the work, with "File exists" and no option named)."""
    folder = Path(path).expanduser()
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{option} {str(path)!r} is a file, not a folder")
    return folder


def open_any(kind: str, index: int = 0, **simulated):
    """Open ``kind``; "auto" without a GPU gives the simulated GPU *with* ``simulated`` (seed, preset)."""
    from ..devices import nvml_available, open_device

    if kind == "auto":
        kind = "nvml" if nvml_available(index) else "simulated"
        what = "the NVIDIA GPU through NVML" if kind == "nvml" else "the simulated GPU (no NVIDIA GPU found)"
        print(f"powermodels: using {what}", file=sys.stderr)
    if kind == "simulated" and index != 0:  # silently measured board 0 before
        raise ValueError(f"--index {index}: the simulated GPU is one board, index 0")
    return open_device(kind, index=index, **(simulated if kind == "simulated" else {}))


def program_argv(args) -> list[str]:
    """The command after ``--`` (empty when none was given)."""
    rest = list(getattr(args, "program", None) or [])
    if rest and rest[0] == "--":
        rest = rest[1:]
    return rest
