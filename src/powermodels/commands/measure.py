"""``powermodels measure``: one kernel configuration under one protocol."""

from __future__ import annotations

import json
import sys

NAME = "measure"
HELP = "Measure one kernel configuration with a protocol (naive, continuous, good_practice, steady_state)."


def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep:
        raise ValueError(f"--param: expected 'name=value', got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def add_arguments(parser) -> None:
    parser.add_argument("--kernel", default="fp32", help="kernel name (fp32, sgemm, stream_copy, stream_triad)")
    parser.add_argument("--config", default="", help="configuration 'p1=v1,p2=v2' (defaults for the rest)")
    parser.add_argument("--protocol", default="continuous",
                        help="naive | continuous | good_practice | steady_state")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="protocol parameter, e.g. --param duration_s=0.5 (repeatable)")
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--index", type=int, default=0, help="GPU index (nvml)")
    parser.add_argument("--seed", type=int, default=0, help="simulated GPU seed")
    parser.add_argument("--preset", default="hopper", help="simulated GPU sensor preset")
    parser.add_argument("--out", help="write the run-table row to this parquet file")
    parser.add_argument("--trace-out", help="write the trace table to this parquet file")


def run(args) -> int:
    from ..devices import open_device
    from ..harness.protocols import make_protocol
    from ..harness.runner import make_runner

    protocol = make_protocol(args.protocol, **dict(_param(p) for p in args.param))
    kwargs = {"seed": args.seed, "preset": args.preset} if args.device == "simulated" else {}
    device = open_device(args.device, index=args.index, **kwargs)
    with make_runner(device) as runner:
        m = protocol.measure(runner, args.kernel, args.config)
    table = m.run_table()
    if args.out:
        table.to_parquet(args.out, index=False)
    if args.trace_out:
        m.trace.to_parquet(args.trace_out, index=False)
    print(table.T.to_string(header=False), file=sys.stdout)
    return 0
