"""``powermodels campaign``: a resumable sweep from a small JSON/TOML config file.

Example config (JSON)::

    {"kernels": {"fp32": "default", "sgemm": {"sample": 2, "seed": 0}},
     "protocol": "good_practice", "protocol_params": {"trials": 2},
     "repeats": 2, "device": "simulated"}

Your own workloads go in a ``workloads`` list — a CUDA source with its
tunables and restrictions, a ``module:function`` callable, a program — each
with its ``configs`` (``kernels/examples/matmul_campaign.toml``;
:mod:`powermodels.workloads.spec`, ``docs/workloads.md``)::

    {"workloads": [{"source": "vec.cu", "kernel": "vector_add", "configs": "all",
                    "tune_params": {"block_size_x": [128, 256, 512]},
                    "arguments": [{"zeros": "float32", "size": 1000000}, ...],
                    "problem_size": 1000000, "simulated": {"time_s": 0.001}},
                   {"callable": "steps.py:train_step", "simulated": {"time_s": 0.05}}]}

Ctrl-C stops after the run in progress is saved; the same command resumes.
At the end a summary of the run table is printed (medians over repeats).
"""

from __future__ import annotations

import sys
from pathlib import Path

from . import COMMANDS
from ..cli_options import option_number

NAME = "campaign"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("config", help="campaign file (.json or .toml); see powermodels.campaigns")
    parser.add_argument("--out", required=True, help="output folder (an existing one is resumed)")
    parser.add_argument("--device", choices=("auto", "nvml", "simulated"),
                        help="override the file's device")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    for flag, text in (
            ("--allow-code-outside", "a spec is code: let its callables import .py files outside the "
                                     "spec's folder (refused without it)"),
            ("--restart", "--out holds runs of another spec: move them to previous-<time>/ and measure "
                          "anew (without it such a folder is refused)")):
        parser.add_argument(flag, action="store_true", help=text)
    parser.add_argument("--max-runs", type=int, help="stop after this many new runs")
    parser.add_argument("--cluster", metavar="local|local-cuda|tcp://ADDRESS",
                        help="run on a Dask cluster, one worker per GPU (needs the [distributed] extra; "
                             "see docs/scale-out.md)")
    parser.add_argument("--per-gpu", action="store_true",
                        help="with --cluster: every run on every GPU of the cluster (compare boards)")
    parser.add_argument("--workers", type=int,
                        help="with --cluster local: number of workers (default: CPU cores; simulated GPU only)")
    parser.add_argument("--exclusive", action="store_true",
                        help="stop when another process is on the GPU (default: warn and count it on the row)")
    parser.add_argument("--wait", type=option_number(minimum=0), default=0.0, metavar="SECONDS",
                        help="wait this long for another campaign using --out (default: fail at once)")


def summary_table(runs, per_board: bool = False):
    """Medians over repeats per (kernel, config, protocol[, board]), with the error against the reference."""
    import numpy as np
    import pandas as pd

    from .. import schema

    keys = [schema.KERNEL, schema.CONFIG, schema.PROTOCOL]
    if runs.empty:
        return pd.DataFrame()
    has_clock = (schema.SM_CLOCK_REQUESTED_MHZ in runs.columns
                 and runs[schema.SM_CLOCK_REQUESTED_MHZ].notna().any())
    if has_clock:
        keys.append(schema.SM_CLOCK_REQUESTED_MHZ)
    if per_board and schema.DEVICE_UUID in runs.columns:
        keys.append(schema.DEVICE_UUID)  # --per-gpu: one line per board
    g = runs.groupby(keys, sort=True, dropna=False)
    out = pd.DataFrame({
        "runs": g.size(),
        "time_ms": g[schema.TIME_S].median() * 1e3,
        schema.POWER_W: g[schema.POWER_W].median(),
        schema.ENERGY_J: g[schema.ENERGY_J].median(),
    })
    if schema.REFERENCE_ENERGY_J in runs.columns and np.isfinite(runs[schema.REFERENCE_ENERGY_J]).any():
        ref = g[schema.REFERENCE_ENERGY_J].median()
        out["vs_reference_%"] = 100.0 * (out[schema.ENERGY_J] - ref) / ref
    return out.reset_index()


def text_table(table, formats: dict, left: tuple = ()) -> str:
    """``table`` as aligned text: ``left`` columns left-aligned, the rest right-aligned."""
    cols = [str(c) for c in table.columns]
    cells = [[formats.get(c, str)(v) for v in table[c]] for c in table.columns]
    widths = [max([len(h)] + [len(x) for x in col]) for h, col in zip(cols, cells, strict=True)]

    def line(items):
        return "  ".join(x.ljust(w) if c in left else x.rjust(w)
                         for c, x, w in zip(cols, items, widths, strict=True)).rstrip()

    return "\n".join([line(cols)] + [line(row) for row in zip(*cells, strict=True)])


def _print_summary(runs, total: int, out_dir: str, per_board: bool = False) -> None:
    table = summary_table(runs, per_board)
    print(f"campaign: {len(runs)}/{total} runs finished in {out_dir}")
    if table.empty:
        return
    from .. import schema

    fmt = {"time_ms": "{:.4g}".format, schema.POWER_W: "{:.1f}".format, schema.ENERGY_J: "{:.4g}".format,
           "vs_reference_%": "{:+.1f}".format, schema.SM_CLOCK_REQUESTED_MHZ: "{:.0f}".format}
    print("medians over repeats:")
    print(text_table(table, fmt, left=(schema.KERNEL, schema.CONFIG, schema.PROTOCOL)))
    _print_boards(out_dir)


def _print_boards(out_dir: str) -> None:
    """What the campaign recorded about its boards (several GPUs, or a board probe), in two lines."""
    import json

    meta_path = Path(out_dir) / "metadata.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    boards = meta.get("boards")
    if boards and boards["configurations_on_several_boards"]:
        print(f"boards: {len(boards['devices'])}; {boards['configurations_on_several_boards']} configuration(s) "
              f"measured on several: spread median {boards['board_spread_pct_median']:.2f} %, max "
              f"{boards['board_spread_pct_max']:.2f} % ({boards['beyond_k_sigma']} beyond "
              f"{boards['k']:g}σ of the measurement)")
    fit = meta.get("board_normalisation")
    if fit:
        gains = ", ".join(f"{uuid} {gain:.4f}" for uuid, gain in fit["gain"].items() if uuid != fit["reference"])
        print(f"board probe ({fit['model']}, {len(fit['probe'])} configuration(s)): gains vs {fit['reference']}: "
              f"{gains or 'one board only'}; powermodels.campaigns.boards.load_normalised_runs(out) applies them")


def run(args) -> int:
    from ..campaigns import load_runs, load_spec, plan, run_campaign
    from ._common import check_protocol_params, out_folder

    if args.max_runs is not None and args.max_runs < 0:
        raise ValueError(f"--max-runs must be >= 0, got {args.max_runs}")
    out_folder(args.out)
    spec = load_spec(args.config, allow_code_outside=args.allow_code_outside)
    check_protocol_params(spec.protocol, dict(spec.protocol_params), what="protocol_params:")
    if args.device:
        spec.device = args.device
    if args.exclusive:
        spec.exclusive = True
    if not args.wait >= 0:
        raise ValueError(f"--wait must be >= 0 seconds, got {args.wait}")
    if (args.per_gpu or args.workers is not None) and not args.cluster:
        raise ValueError("--per-gpu and --workers need --cluster")
    if args.workers is not None and args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    total = len(plan(spec))
    executor = None
    if args.cluster:  # the Dask executor (the [distributed] extra); campaigns never import it themselves
        from ..integrations.dask_cluster import DaskExecutor

        executor = DaskExecutor(args.cluster, per_gpu=args.per_gpu, workers=args.workers)
    try:
        runs = run_campaign(spec, args.out, progress=not args.no_progress, max_runs=args.max_runs,
                            lock_wait_s=args.wait, executor=executor, restart=args.restart)
    except KeyboardInterrupt:  # the run table only (no trace is read); no folder yet: nothing saved
        saved = len(load_runs(args.out)) if Path(args.out).is_dir() else 0
        print(f"\ncampaign interrupted: {saved}/{total} runs saved in {args.out}; run the same "
              "command again to resume", file=sys.stderr)
        return 130
    from .. import schema

    boards = runs[schema.DEVICE_UUID].nunique() if len(runs) and schema.DEVICE_UUID in runs else 1
    if args.per_gpu:
        total *= boards  # every run on every GPU
    several = boards > 1
    _print_summary(runs, total, args.out, per_board=bool(args.per_gpu or several))  # medians per board
    return 0
