"""Per-kernel breakdown of an external program through Nsight Compute (``ncu --clock-control none``).

The energy counter gives a program's whole energy; which kernels its GPU time
went to comes from ``ncu``: every launch's ``gpu__time_duration.sum``, summed
per kernel name. ncu replays and serialises the kernels, so the profiled run
is slower than a normal one and is never the run whose energy is measured;
the breakdown is of GPU *time*, not energy (ncu has no energy metric).
``--clock-control none`` is always passed (DESIGN.md ◆: ncu would otherwise
lock the clocks to base, a settings change on a lent GPU).
"""

from __future__ import annotations

import subprocess

import pandas as pd

from .. import schema
from .profiling import ncu_launches

__all__ = ["DURATION_METRIC", "kernel_breakdown", "kernel_breakdown_command", "parse_kernel_breakdown"]

#: Kernel duration metric; ``--print-units base`` makes ncu report it in nanoseconds.
DURATION_METRIC = "gpu__time_duration.sum"


def kernel_breakdown_command(argv: list[str], *, ncu: str = "ncu") -> list[str]:
    """The ncu command line that times every kernel launch of ``argv`` (clocks left alone)."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"ncu: the program must be a non-empty list of strings, got {argv!r}")
    return [ncu, "--clock-control", "none", "--csv", "--print-units", "base",
            "--metrics", DURATION_METRIC, *argv]


def parse_kernel_breakdown(text: str) -> pd.DataFrame:
    """Per-kernel launches, GPU time and time share from ``ncu --csv --print-units base`` output.

    Parameters
    ----------
    text : str
        ncu's stdout (program output and ``==PROF==`` lines are skipped).

    Returns
    -------
    pandas.DataFrame
        One row per kernel name, most time first: ``kernel``, ``launches``,
        ``time_s`` (summed over its launches) and ``time_share`` (of the sum
        over all kernels).

    Raises
    ------
    ValueError
        When the output has no launches or no ``gpu__time_duration.sum`` metric.
    """
    launches = ncu_launches(text)
    rows = []
    for launch in launches:
        ns = launch["metrics"].get(DURATION_METRIC)
        if ns is None:
            raise ValueError(f"ncu output: launch {launch['id']} of {launch['kernel']!r} has no "
                             f"{DURATION_METRIC} metric")
        rows.append({schema.KERNEL: launch["kernel"], schema.TIME_S: ns * 1e-9})
    table = pd.DataFrame(rows).groupby(schema.KERNEL, sort=False).agg(
        **{schema.LAUNCHES: (schema.TIME_S, "size"), schema.TIME_S: (schema.TIME_S, "sum")})
    total = table[schema.TIME_S].sum()
    table[schema.TIME_SHARE] = table[schema.TIME_S] / total if total > 0 else float("nan")
    return table.sort_values(schema.TIME_S, ascending=False).reset_index()


def kernel_breakdown(workload, *, ncu: str | None = None) -> pd.DataFrame:
    """Run ``workload`` (a ProgramWorkload) once under ncu and return :func:`parse_kernel_breakdown`."""
    from .sass import find_tool

    tool = ncu or find_tool("ncu")
    if tool is None:
        raise FileNotFoundError("ncu (Nsight Compute) not found: the per-kernel breakdown needs it")
    cmd = kernel_breakdown_command([workload.executable, *workload.argv[1:]], ncu=tool)
    done = subprocess.run(cmd, env=workload.env, cwd=workload.cwd, capture_output=True, text=True,
                          timeout=workload.timeout_s, check=False)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        raise ValueError(f"ncu: profiling {workload.command!r} failed with code {done.returncode}: {tail[0][:300]}")
    return parse_kernel_breakdown(done.stdout)
