"""Start-up time of the CLI: ``powermodels --help`` and ``powermodels demo``, median of N runs.

Each run is a fresh interpreter (``python -c "from powermodels.cli import main; ..."``, what the
``powermodels`` console script does), timed from the parent with ``time.perf_counter`` around
``subprocess.run``; stdout is discarded. Several source trees can be compared in one table
(``--tree before=/path/to/old/src --tree after=src``): the runs alternate between the trees, so
a load that comes and goes on a shared machine hits both alike.

    PYTHONPATH=src python benchmarks/bench_startup.py --runs 15 \
        --tree before=/work/main/src --tree after=src

Goals (issue 23, on a 2-core machine): ``--help`` <= 0.1 s, ``demo`` <= 0.4 s. The demo runs on the
simulated GPU (no NVIDIA GPU on this machine; on one with a GPU it would measure the real one).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENTRY = "import sys; from powermodels.cli import main; sys.exit(main(sys.argv[1:]))"
COMMANDS = {"--help": ["--help"], "demo": ["demo"], "import powermodels": None}
GOALS_S = {"--help": 0.1, "demo": 0.4}


def one_run(src: str, argv: list[str] | None) -> float:
    """Seconds from starting the interpreter to its exit, for ``powermodels *argv`` (None: bare import)."""
    env = {**os.environ, "PYTHONPATH": src, "POWERMODELS_TRACEBACK": "1"}
    code = ["-c", "import powermodels"] if argv is None else ["-c", ENTRY, *argv]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *code], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} with PYTHONPATH={src} exited {proc.returncode}: {proc.stderr[-500:]}")
    return elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=11, help="runs per command and tree (default 11)")
    parser.add_argument("--tree", action="append", metavar="LABEL=SRC",
                        help="a source tree to time (repeatable); default: this checkout's src")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be >= 1, got {args.runs}")
    here = str(Path(__file__).resolve().parents[1] / "src")
    trees = dict(t.split("=", 1) for t in (args.tree or [f"this={here}"]))
    for label, src in trees.items():
        if not (Path(src) / "powermodels" / "cli.py").is_file():
            parser.error(f"--tree {label}={src}: no powermodels/cli.py there")
    times: dict[tuple[str, str], list[float]] = {(c, t): [] for c in COMMANDS for t in trees}
    for label, src in trees.items():  # warm the file cache and the .pyc files once
        for command in COMMANDS.values():
            one_run(src, command)
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            for label, src in trees.items():
                times[name, label].append(one_run(src, command))
    print(f"median of {args.runs} runs (min–max), seconds; {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
    head = f"{'command':20s}" + "".join(f"{label:>22s}" for label in trees) + f"{'goal':>8s}"
    print(head)
    print("-" * len(head))
    for name in COMMANDS:
        cells = ""
        for label in trees:
            t = times[name, label]
            cells += f"{statistics.median(t):>10.3f} ({min(t):.2f}–{max(t):.2f})"
        goal = f"{GOALS_S[name]:.1f}" if name in GOALS_S else ""
        print(f"{name:20s}{cells}{goal:>8s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
