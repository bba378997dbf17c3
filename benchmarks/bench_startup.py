"""Start-up time of the CLI: ``powermodels --help`` and ``powermodels demo``, median of N runs.

Each run is a fresh interpreter (``python -c "from powermodels.cli import main; ..."``, what the
``powermodels`` console script does), timed from the parent: wall time (``time.perf_counter``
around ``subprocess.run``) and the child's CPU time (user + system, ``getrusage`` of the waited
child). Start-up is single-threaded, so on an idle machine wall ≈ CPU; on a loaded shared one the
CPU time is the steadier figure. stdout is discarded. Several source trees can be compared in one table
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
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ENTRY = "import sys; from powermodels.cli import main; sys.exit(main(sys.argv[1:]))"
COMMANDS = {"--help": ["--help"], "demo": ["demo"], "import powermodels": None}
GOALS_S = {"--help": 0.1, "demo": 0.4}


def one_run(src: str, argv: list[str] | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one interpreter running ``powermodels *argv`` (None: a bare import)."""
    env = {**os.environ, "PYTHONPATH": src, "POWERMODELS_TRACEBACK": "1"}
    code = ["-c", "import powermodels"] if argv is None else ["-c", ENTRY, *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *code], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{argv} with PYTHONPATH={src} exited {proc.returncode}: {proc.stderr[-500:]}")
    return elapsed, cpu


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
    times: dict[tuple[str, str], list[tuple[float, float]]] = {(c, t): [] for c in COMMANDS for t in trees}
    for label, src in trees.items():  # warm the file cache and the .pyc files once
        for command in COMMANDS.values():
            one_run(src, command)
    for _ in range(args.runs):
        for name, command in COMMANDS.items():
            for label, src in trees.items():
                times[name, label].append(one_run(src, command))
    print(f"median of {args.runs} runs, seconds: wall (min–max) and the child's CPU time; "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; python {sys.version.split()[0]}")
    head = f"{'command':20s}" + "".join(f"{label + ' wall':>20s}{label + ' CPU':>12s}" for label in trees)
    head += f"{'goal':>7s}"
    print(head)
    print("-" * len(head))
    for name in COMMANDS:
        cells = ""
        for label in trees:
            wall = [w for w, _ in times[name, label]]
            cpu = [c for _, c in times[name, label]]
            cells += f"{statistics.median(wall):>8.3f} ({min(wall):.2f}–{max(wall):.2f}){statistics.median(cpu):>12.3f}"
        goal = f"{GOALS_S[name]:.1f}" if name in GOALS_S else ""
        print(f"{name:20s}{cells}{goal:>7s}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
