"""CLI sub-commands, one module each, listed in :data:`COMMANDS`.

Each module defines ``NAME`` (the sub-command), ``HELP`` (one line, taken from
:data:`COMMANDS`), ``add_arguments(parser)`` and ``run(args) -> int``.
:mod:`powermodels.cli` builds its parser from :data:`COMMANDS` alone, so
``powermodels --help`` imports no command module and ``powermodels X`` imports
only ``X``'s (start-up stays short). A new command adds its module here and
one line to :data:`COMMANDS` (``tests/test_cli.py`` checks the two agree).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["COMMANDS", "Command"]


class Command(NamedTuple):
    """Where a sub-command lives and its one-line help."""

    module: str
    help: str


#: sub-command -> (module in this package, one-line help)
COMMANDS: dict[str, Command] = {
    "attribute": Command(
        "attribute",
        "Energy breakdown of a kernel per opcode and component from its SASS counts "
        "(Wattchmen).",
    ),
    "calibrate": Command(
        "calibrate",
        "Calibrate power and time vs clock and temperature (thesis ch. 4): natural "
        "DVFS by default, locked clocks with --allow-clock-changes, or refit a "
        "recording with --from DIR.",
    ),
    "calibrate-instructions": Command(
        "calibrate_instructions",
        "Measure microbenchmarks, profile with ncu and fit the per-instruction energy"
        " table.",
    ),
    "campaign": Command(
        "campaign",
        "Run (or resume) a measurement campaign described by a JSON or TOML file.",
    ),
    "characterize": Command(
        "characterize",
        "Characterise the built-in power sensor (update period, window, delay, rise "
        "time, gain).",
    ),
    "demo": Command(
        "demo",
        "Show what the power sensor reports vs the truth (simulated GPU without a "
        "GPU).",
    ),
    "dvfs-features": Command(
        "dvfs_features",
        "Collect static PTX and ncu runtime features of workloads (DSO Tables I-II).",
    ),
    "fit-twin": Command(
        "fit_twin",
        "Fit a simulated GPU (twin preset JSON) to raw recordings.",
    ),
    "measure": Command(
        "measure",
        "Measure a workload — a registry kernel, your CUDA source, a Python callable "
        "or a program (-- CMD) — with a protocol (counter by default; naive, "
        "continuous, good_practice, steady_state).",
    ),
    "optimize": Command(
        "optimize",
        "Recommend core/memory clocks for a kernel under a slowdown limit (DSO DVFS "
        "model).",
    ),
    "restore": Command(
        "restore",
        "Restore GPU clocks/power limits left changed by a killed powermodels "
        "process.",
    ),
    "twin-compare": Command(
        "twin_compare",
        "Replay a raw recording on a twin preset; table and plots real vs twin.",
    ),
}
