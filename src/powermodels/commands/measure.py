"""``powermodels measure``: one kernel configuration under one protocol.

Prints a short summary (time, power, energy per launch, the reference where
the device knows it, conditions); ``--out`` writes the full run-table row,
``--full`` prints it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import sys
from pathlib import Path

NAME = "measure"
HELP = ("Measure one kernel configuration with a protocol (counter by default; naive, continuous, "
        "good_practice, steady_state).")


def _param(text: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"--param: expected 'name=value', got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def _power_columns() -> tuple[str, ...]:
    from .. import schema

    return (schema.POWER_INSTANT_W, schema.POWER_AVERAGE_W, schema.POWER_USAGE_W)


def check_protocol_params(protocol: str, params: dict, what: str = "--param") -> dict:
    """``params`` if every one is known to ``protocol`` and a number where its default is one.

    Raises ValueError naming the parameter (unknown names, ``duration_s=abc``).
    """
    from ..harness.protocols import PROTOCOLS

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


def open_any(kind: str, index: int = 0, **simulated):
    """Open ``kind``; "auto" without a GPU gives the simulated GPU *with* ``simulated`` (seed, preset)."""
    from ..devices import nvml_available, open_device

    if kind == "auto":
        kind = "nvml" if nvml_available(index) else "simulated"
        what = "the NVIDIA GPU through NVML" if kind == "nvml" else "the simulated GPU (no NVIDIA GPU found)"
        print(f"powermodels: using {what}", file=sys.stderr)
    return open_device(kind, index=index, **(simulated if kind == "simulated" else {}))


def add_arguments(parser) -> None:
    parser.add_argument("--kernel", default="fp32", help="kernel name (fp32, sgemm, stream_copy, stream_triad)")
    parser.add_argument("--config", default="", help="configuration 'p1=v1,p2=v2' (defaults for the rest)")
    parser.add_argument("--protocol", default="counter",
                        help="counter (default: energy counter, ~1 s; good_practice where the GPU has no "
                             "counter) | naive | continuous | good_practice | steady_state")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="protocol parameter, e.g. --param duration_s=0.5 (repeatable)")
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--index", type=int, default=0, help="GPU index (nvml)")
    parser.add_argument("--seed", type=int, default=0, help="simulated GPU seed")
    parser.add_argument("--preset", default="hopper", help="simulated GPU sensor preset")
    parser.add_argument("--out", help="write the run-table row to this parquet file")
    parser.add_argument("--trace-out", help="write the trace table to this parquet file")
    parser.add_argument("--full", action="store_true", help="print every field of the run-table row")


def _vs(value: float, reference: float, unit: str) -> str:
    if not (math.isfinite(value) and math.isfinite(reference) and reference):
        return ""
    return f"   (reference {reference:.4g} {unit}: {100 * (value - reference) / reference:+.1f} %)"


def summary(row: dict) -> list[str]:
    """A run-table row as a few readable lines, labelled with the run table's column names."""
    from .. import schema

    def get(key):
        v = row.get(key, math.nan)
        return float(v) if v is not None else math.nan

    n, t = int(row[schema.LAUNCHES]), get(schema.TIME_S)
    lines = [f"{row[schema.KERNEL]} ({row[schema.CONFIG]}) on {row[schema.DEVICE]}, "
             f"protocol {row[schema.PROTOCOL]}"]
    lines.append(f"  {schema.TIME_S:14s} {t * 1e3:.4g} ms per launch, {n} launch{'es' if n != 1 else ''} "
                 f"(wall time {get(schema.WALL_S):.2f} s)")
    power = get(schema.POWER_W)
    lines.append(f"  {schema.POWER_W:14s} {power:.1f} W" + _vs(power, get(schema.REFERENCE_POWER_W), "W"))
    energy, unc = get(schema.ENERGY_J), get(schema.ENERGY_UNCERTAINTY_J)
    pm = f" ± {unc:.2g}" if math.isfinite(unc) else ""
    lines.append(f"  {schema.ENERGY_J:14s} {energy:.4g}{pm} J per launch"
                 + _vs(energy, get(schema.REFERENCE_ENERGY_J), "J"))
    if math.isfinite(get(schema.IDLE_POWER_W)):
        lines.append(f"  {schema.IDLE_POWER_W:14s} {get(schema.IDLE_POWER_W):.1f} W")
    lines.append(f"  {'conditions':14s} {get(schema.TEMPERATURE_C):.1f} °C, SM {get(schema.SM_CLOCK_MHZ):.0f} MHz, "
                 f"memory {get(schema.MEM_CLOCK_MHZ):.0f} MHz")
    return lines


def run(args) -> int:
    import pandas as pd

    from ..harness.protocols import make_protocol
    from ..harness.runner import make_runner
    from ..harness.workloads import parse_config, validate_config

    if args.kernel == "square_wave":  # registered for the runner's square_wave/step, not a workload
        raise ValueError("--kernel square_wave is the sensor-characterisation load, not a workload to "
                         "measure; see `powermodels characterize` and `powermodels demo`")
    params = check_protocol_params(args.protocol, dict(_param(p) for p in args.param))
    protocol = make_protocol(args.protocol, **params)
    validate_config(args.kernel, parse_config(args.kernel, args.config))  # before opening the GPU
    check_writable(args.out, "--out")
    check_writable(args.trace_out, "--trace-out")
    device = open_any(args.device, args.index, seed=args.seed, preset=args.preset)
    with make_runner(device) as runner:
        m = protocol.measure(runner, args.kernel, args.config)
    table = m.run_table()
    if args.out:
        table.to_parquet(args.out, index=False)
    if args.trace_out:
        m.trace.to_parquet(args.trace_out, index=False)
    if args.full:
        with pd.option_context("display.max_rows", None):
            print(table.T.to_string(header=False))
    else:
        print("\n".join(summary(m.row)))
    for path, what in ((args.out, "run-table row"), (args.trace_out, f"trace ({len(m.trace)} readings)")):
        if path:
            print(f"wrote the {what} to {path}")
    return 0
