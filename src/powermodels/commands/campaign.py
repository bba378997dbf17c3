"""``powermodels campaign``: a resumable sweep from a small JSON/TOML config file."""

from __future__ import annotations

NAME = "campaign"
HELP = "Run (or resume) a measurement campaign described by a JSON or TOML file."


def add_arguments(parser) -> None:
    parser.add_argument("config", help="campaign file (.json or .toml); see powermodels.harness.campaign")
    parser.add_argument("--out", required=True, help="output folder (an existing one is resumed)")
    parser.add_argument("--device", choices=("auto", "nvml", "simulated"),
                        help="override the file's device")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--max-runs", type=int, help="stop after this many new runs")


def run(args) -> int:
    from ..harness.campaign import load_campaign, load_spec, plan, run_campaign

    spec = load_spec(args.config)
    if args.device:
        spec.device = args.device
    runs = run_campaign(spec, args.out, progress=not args.no_progress, max_runs=args.max_runs)
    total = len(plan(spec))
    runs, _ = load_campaign(args.out)
    print(f"campaign: {len(runs)}/{total} runs finished in {args.out}")
    return 0
