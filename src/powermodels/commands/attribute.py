"""``powermodels attribute``: per-instruction energy breakdown of a kernel (Wattchmen §3.5).

The calibration comes from ``powermodels calibrate-instructions`` (which measures the
microbenchmarks on this GPU) or is fitted here from a microbenchmark table.

Examples
--------
Attribute a profiled program with this GPU's calibration::

    powermodels calibrate-instructions --out cal
    powermodels attribute --calibration cal/instructions.pmcal --ncu python my_app.py

Fit a calibration from a microbenchmark table and attribute a profiled program::

    powermodels attribute --fit datasets/h200/wattchmen_microbench.parquet \\
        --save-calibration h200.pmcal --ncu python my_app.py

Attribute an instruction table (or an ncu raw CSV) with a saved calibration::

    powermodels attribute --calibration h200.pmcal --counts counts.csv
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import tempfile
from pathlib import Path

from . import COMMANDS

NAME = "attribute"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--calibration", help="calibration file holding a fitted InstructionEnergyModel")
    src.add_argument("--fit", help="instruction table (parquet/csv) of microbenchmarks to fit on")
    parser.add_argument("--save-calibration", help="with --fit: write the fitted model here")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--counts", help="instruction table (parquet/csv, op:* columns + time_s) "
                                       "or an ncu raw CSV (--page raw --print-metric-instances details)")
    what.add_argument("--ncu", nargs=argparse.REMAINDER, metavar="CMD ...",
                      help="profile this command with ncu --clock-control none; everything after "
                           "--ncu is the command (so put --ncu last; a leading -- is optional)")
    parser.add_argument("--whole", action="store_true",
                        help="with --ncu or an ncu CSV: one row for the whole profile, not one per kernel")
    parser.add_argument("--extension", choices=("bucket", "none"), default=None,
                        help="override the model's coverage extension")
    parser.add_argument("--top", type=int, default=10, help="opcodes to list per kernel")
    parser.add_argument("--output", help="write the per-opcode breakdown to this CSV")
    # `--ncu -- cmd ...`: argparse hands what follows `--` to a positional, not to --ncu
    parser.add_argument("ncu_rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def ncu_command(args) -> list[str] | None:
    """The command to profile (``--ncu CMD ...`` or ``--ncu -- CMD ...``); None without --ncu."""
    rest = list(getattr(args, "ncu_rest", None) or [])
    if args.ncu is None:
        if rest:
            raise ValueError(f"unexpected arguments {' '.join(rest)!r} (a command to profile goes after --ncu)")
        return None
    cmd = list(args.ncu) + rest
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise ValueError("--ncu: no command to profile (e.g. --ncu python3 my_app.py)")
    return cmd


def _read_table(path: str, per_kernel: bool = True, option: str = "--counts"):
    """An instruction table from parquet, CSV or an ncu raw CSV (``.gz`` too); errors name the file."""
    import gzip

    import pandas as pd

    from ..microbench.sass import instruction_table_from_ncu

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{option}: {p} does not exist")
    try:
        if p.suffix == ".parquet":
            return pd.read_parquet(p)
        text = gzip.open(p, "rt").read() if p.suffix == ".gz" else p.read_text()
        first = text.lstrip().splitlines()[0] if text.strip() else ""
        if '"Kernel Name"' in first or "Kernel Name" in first.split(","):
            return instruction_table_from_ncu(text, per_kernel=per_kernel)
        return pd.read_csv(io.StringIO(text))
    except ValueError as err:
        raise ValueError(f"{option}: {p}: {err}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{option}: {p} is not a parquet, CSV or ncu CSV file ({err})") from None


def _profile(cmd: list[str]) -> str:
    from ..microbench.sass import NCU_TABLE_METRICS, find_tool

    ncu = find_tool("ncu")
    if ncu is None:
        raise FileNotFoundError("--ncu: ncu (Nsight Compute) not found")
    with tempfile.TemporaryDirectory() as tmp:
        rep = os.path.join(tmp, "profile")
        prof = subprocess.run([ncu, "--clock-control", "none", "--metrics",
                               ",".join(NCU_TABLE_METRICS), "-o", rep, *cmd],
                              capture_output=True, text=True, check=False)
        if prof.returncode != 0 or not os.path.exists(rep + ".ncu-rep"):
            raise ValueError(f"--ncu: profiling failed (rc={prof.returncode}): {prof.stderr[-800:]}")
        out = subprocess.run([ncu, "-i", rep + ".ncu-rep", "--csv", "--page", "raw",
                              "--print-metric-instances", "details"],
                             capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise ValueError(f"--ncu: reading the report failed: {out.stderr[-800:]}")
    return out.stdout


def _model(args):
    from ..io import load_calibration, save_calibration
    from ..models.instruction import InstructionEnergyModel

    if args.calibration:
        model = load_calibration(args.calibration)
        if not isinstance(model, InstructionEnergyModel):
            raise ValueError(f"--calibration: {args.calibration} holds a {type(model).__name__}, "
                             "not an InstructionEnergyModel")
        return model
    p = Path(args.fit)
    if not p.is_file():
        raise FileNotFoundError(f"--fit: {p} does not exist")
    table = _read_table(str(p), option="--fit")
    from .. import schema

    if schema.ENERGY_J not in table.columns:
        raise ValueError(f"--fit: {p} has no {schema.ENERGY_J!r} column (measured energy per run); "
                         "is it a microbenchmark instruction table?")
    model = InstructionEnergyModel().fit(table)
    if args.save_calibration:
        save_calibration(model, args.save_calibration, {"source_table": str(p)})
        print(f"saved calibration to {args.save_calibration}")
    return model


def run(args) -> int:
    import numpy as np

    from .. import schema
    from ..microbench.sass import instruction_table_from_ncu

    cmd = ncu_command(args)
    if args.top < 0:
        raise ValueError(f"--top must be >= 0, got {args.top}")
    if args.output:
        from ._common import check_writable

        check_writable(args.output, "--output")
    if args.counts and not Path(args.counts).is_file():  # before fitting, not after
        raise FileNotFoundError(f"--counts: {args.counts} does not exist")
    model = _model(args)
    if args.extension is not None:
        model.extension = args.extension  # prediction-time option; the fit does not depend on it
    table = (_read_table(args.counts, per_kernel=not args.whole) if args.counts
             else instruction_table_from_ncu(_profile(cmd), per_kernel=not args.whole))
    measured = (table[schema.ENERGY_J].to_numpy(dtype=float) if schema.ENERGY_J in table.columns
                else np.full(len(table), np.nan))
    bd = model.breakdown(table)
    predicted = model.predict(table)
    coverage = model.coverage(table)
    name_col = schema.WORKLOAD if schema.WORKLOAD in bd.columns else "run"
    print(f"static+constant power {model.static_power_w_:.1f} W, {len(model.energies_)} fitted "
          f"opcode features, extension={model.extension}")
    for i, total in enumerate(predicted):
        part = bd[bd["run"] == i]
        label = part[name_col].iloc[0] if len(part) else i
        vs = (f" (measured {measured[i]:.4g} J: {100 * (total - measured[i]) / measured[i]:+.1f} %)"
              if np.isfinite(measured[i]) and measured[i] > 0 else "")
        print(f"\n{label}: predicted {total:.4g} J{vs}, instruction coverage {100 * coverage[i]:.0f} %")
        comp = part.groupby("component")["energy_j"].sum().sort_values(ascending=False)
        for k, v in comp.items():
            print(f"  {k:12s} {v:11.4g} J  {100 * v / max(total, 1e-300):5.1f} %")
        top = part[part["opcode"] != "STATIC"].sort_values("energy_j", ascending=False)
        print(f"  top opcodes ({min(args.top, len(top))} of {len(top)}):")
        for _, r in top.head(args.top).iterrows():
            print(f"    {r['opcode']:28s} {r['count']:11.4g} × {r['energy_per_instruction_j']:9.3g} J"
                  f" = {r['energy_j']:9.4g} J  [{r['source']}]")
    if args.output:
        bd.to_csv(args.output, index=False)
        print(f"\nwrote {args.output}")
    return 0
