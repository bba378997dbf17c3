"""``powermodels measure -- CMD ARGS...``: the external-program branch of ``measure``.

Kept out of :mod:`powermodels.commands.measure` (which adds these options and
calls :func:`run_program` when a command follows ``--``) so each module keeps
one job; the leading underscore keeps the CLI from listing it as a command.
"""

from __future__ import annotations

import argparse
import math
import sys

from ..cli_options import option_integer, option_number
from ._common import check_writable, open_any, program_argv

__all__ = ["add_program_arguments", "program_argv", "run_program", "write_table"]

NO_BOUND = "none"  # --timeout-s none: wait for the program however long it runs


def _timeout_option(text: str) -> float:
    """``--timeout-s``: seconds > 0, or ``none`` (no bound: ``inf``)."""
    return math.inf if text.strip().lower() == NO_BOUND else option_number(above=0)(text)


def add_program_arguments(parser) -> None:
    """The options of the program branch, and the command after ``--``."""
    group = parser.add_argument_group("external program (powermodels measure -- CMD ARGS...)")
    group.add_argument("--repeats", type=option_integer(minimum=1, maximum=10_000), default=3, help="runs of the program (default 3)")
    group.add_argument("--idle-s", type=float, default=2.0,
                       help="idle gap before each run; gives the idle power (default 2 s)")
    group.add_argument("--no-check", action="store_true",
                       help="record a non-zero exit code instead of failing")
    group.add_argument("--timeout-s", type=_timeout_option, default=None, metavar="S|none",
                       help="stop a run that has not exited after S seconds, with its process group "
                            "(default 3600 s; 'none': no bound)")
    group.add_argument("--ncu-breakdown", action="store_true",
                       help="one more run under ncu --clock-control none: GPU time per kernel")
    group.add_argument("--simulated-activity", type=float, default=None, metavar="A",
                       help="simulated GPU: the core activity (0..1) the program's twin applies")
    # `-- cmd ...`: argparse hands what follows `--` to this positional
    parser.add_argument("program", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def write_table(table, path: str) -> None:
    """Write a table as parquet, CSV or JSON (records) by the file's suffix."""
    lower = path.lower()
    if lower.endswith(".csv"):
        table.to_csv(path, index=False)
    elif lower.endswith(".json"):
        table.to_json(path, orient="records", indent=1)
    elif lower.endswith(".parquet"):
        table.to_parquet(path, index=False)
    else:
        raise ValueError(f"--out: {path!r} must end in .parquet, .csv or .json")


def _fmt(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "n/a"


def _clock(r) -> str:
    """A run's SM clock and where it came from (a program's: NVML's reading as a sensor)."""
    from .. import schema

    f, u = float(r.get(schema.SM_CLOCK_MHZ, math.nan)), float(r.get(schema.CLOCK_UNCERTAINTY_MHZ, math.nan))
    period = float(r.get(schema.CLOCK_READING_PERIOD_S, math.nan))
    lag = float(r.get(schema.CLOCK_READING_LAG_S, math.nan))
    if not math.isfinite(period):
        how = str(r.get(schema.CLOCK_SOURCE, "NVML reading"))
    elif period > 0:
        how = f"NVML reading as a sensor: {period * 1e3:.0f} ms updates, values up to {lag * 1e3:.0f} ms late"
    else:
        how = "NVML reading, live on this simulated GPU"
    return f"SM {_fmt(f, '.0f')} ± {_fmt(u, '.0f')} MHz ({how})"


def summary_lines(m, device_name: str) -> list[str]:
    """The program's runs and medians as a few readable lines."""
    from .. import schema

    t = m.table
    lines = [f"program {t[schema.COMMAND].iloc[0]} on {device_name}, {len(t)} run(s)"]
    for _, r in t.iterrows():
        lines.append(f"  run {int(r[schema.REPEAT]) + 1}: {r[schema.ENERGY_J]:.4g} ± "
                     f"{r[schema.ENERGY_UNCERTAINTY_J]:.2g} J in {r[schema.TIME_S]:.3f} s "
                     f"({r[schema.POWER_W]:.1f} W; idle {_fmt(r[schema.IDLE_POWER_W], '.1f')} W, "
                     f"above idle {_fmt(r[schema.ENERGY_ABOVE_IDLE_J], '.4g')} J), "
                     f"exit code {int(r[schema.EXIT_CODE])}; {_clock(r)}"
                     + (" (stopped at its --timeout-s bound)" if r.get(schema.TIMED_OUT, False) else ""))
    lines.append(f"  median: {_fmt(m.energy_j, '.4g')} J, {_fmt(m.time_s, '.3f')} s, "
                 f"{_fmt(m.power_w, '.1f')} W")
    if m.kernels is not None:
        lines.append("  GPU time per kernel (ncu --clock-control none; a separate, slower run):")
        for _, k in m.kernels.head(10).iterrows():
            lines.append(f"    {k[schema.TIME_SHARE] * 100:5.1f} %  {k[schema.TIME_S] * 1e3:9.3f} ms  "
                         f"{int(k[schema.LAUNCHES]):6d} launch(es)  {k[schema.KERNEL]}")
    return lines


def run_program(args) -> int:
    """Measure the program after ``--`` with :func:`powermodels.measuring.program.measure_program`."""
    from ..measuring.program import ProgramWorkload, measure_program
    from ..workloads.program import DEFAULT_TIMEOUT_S

    argv = program_argv(args)
    if not argv:
        raise ValueError("measure --: no command after '--' (e.g. powermodels measure -- ./app --n 10)")
    for option, value in (("--trace-out", getattr(args, "trace_out", None)),
                          ("--calibration", getattr(args, "calibration", None))):
        if value:  # would be silently ignored: the program branch writes neither
            raise ValueError(f"measure --: {option} does not apply to a program "
                             "(only to --kernel/--source/--callable workloads)")
    if args.repeats < 1:
        raise ValueError(f"--repeats must be >= 1, got {args.repeats}")
    if not (math.isfinite(args.idle_s) and args.idle_s >= 0):
        raise ValueError(f"--idle-s must be >= 0, got {args.idle_s}")
    out = getattr(args, "out", None)
    check_writable(out, "--out")
    if out and not out.lower().endswith((".parquet", ".csv", ".json")):
        raise ValueError(f"--out: {out!r} must end in .parquet, .csv or .json")
    timeout_s = DEFAULT_TIMEOUT_S if args.timeout_s is None else args.timeout_s
    workload = ProgramWorkload(argv, simulated=args.simulated_activity,
                               timeout_s=None if timeout_s == math.inf else timeout_s)
    device = open_any(args.device, args.index, seed=args.seed, preset=args.preset)
    m = measure_program(workload, device, repeats=args.repeats, idle_s=args.idle_s,
                        check=not args.no_check, ncu=args.ncu_breakdown,
                        progress=lambda line: print(f"powermodels: {line}", file=sys.stderr))
    print("\n".join(summary_lines(m, device.info.name)))
    if out:
        write_table(m.table, out)
        print(f"wrote {len(m.table)} run-table row(s) to {out}")
    return 0
