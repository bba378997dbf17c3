"""``powermodels measure``: one workload configuration under one protocol.

The workload is a registry kernel (``--kernel``), a user's CUDA source
(``--source FILE --kernel NAME``), a Python callable (``--callable
module:function``) or a program (``-- CMD ...``); see
:mod:`powermodels.commands._workload_args` for how ``--tune``,
``--protocol-param`` and ``--param`` are told apart.

Prints a short summary (time, power, energy per launch, the reference where
the device knows it, conditions); ``--out`` writes the full run-table row,
``--full`` prints it.
"""

from __future__ import annotations

import math

from . import COMMANDS
from ..cli_options import option_integer
from ._common import check_protocol_params, check_writable, open_any

NAME = "measure"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    from ._measure_program import add_program_arguments
    from ._workload_args import add_workload_arguments

    add_workload_arguments(parser)
    parser.add_argument("--protocol", default="counter",
                        help="counter (default: energy counter, ~1 s; good_practice where the GPU has no "
                             "counter) | naive | continuous | good_practice | steady_state")
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--index", type=option_integer(minimum=0), default=0, help="GPU index (nvml)")
    parser.add_argument("--seed", type=int, default=0, help="simulated GPU seed")
    parser.add_argument("--preset", default="hopper", help="simulated GPU sensor preset")
    parser.add_argument("--out", help="write the run-table row to this file (.parquet, .csv or .json)")
    parser.add_argument("--trace-out", help="write the trace table to this file (.parquet, .csv or .json)")
    parser.add_argument("--full", action="store_true", help="print every field of the run-table row")
    parser.add_argument("--calibration", metavar="FILE",
                        help="a `powermodels calibrate` file: also report power and energy at its reference "
                             "clock and temperature (warns when it extrapolates)")
    parser.add_argument("--allow-other-device", action="store_true",
                        help="use --calibration even if it was made on another GPU model")
    parser.add_argument("--ref-temperature", "--reference-temperature", dest="ref_temperature", metavar="C",
                        type=_ref_temperature,
                        help="report energy_at_ref_j / power_at_ref_w at this die temperature (thesis eq. 4.7); "
                             "default: the calibration's T_ref, else the one learned with α")
    parser.add_argument("--launch", default="auto", type=_launch,
                        help="auto (short kernels in CUDA graphs: the GPU's cost) | as-called (a plain loop of "
                             "calls, as your program makes them: host gaps included)")
    parser.add_argument("--no-learn-alpha", dest="learn_alpha", action="store_false",
                        help="never run the ≤ 10 s warm-up that learns α the first time (use the board's "
                             "pool or the assumed α instead)")
    add_program_arguments(parser)  # `-- CMD ...` (last: it takes the rest of the command line)


def _ref_temperature(text: str) -> float:
    """argparse ``type=`` of ``--ref-temperature``: a die temperature, else one line naming the value."""
    import argparse

    from ..thermal.normalise import check_reference_temperature

    try:
        return check_reference_temperature(text, "reference temperature")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("reference temperature: ")) from None


def _launch(text: str) -> str:
    import argparse

    from ..thermal.launch import check_launch_mode

    if text == "auto":
        return text
    try:
        mode = check_launch_mode(text)
    except ValueError:
        mode = ""
    if mode != "as_called":
        raise argparse.ArgumentTypeError(f"expected auto or as-called, got {text!r}")
    return mode


def thermal_params(args, protocol: str, calibration=None) -> dict:
    """The counter protocol's thermal parameters from ``--ref-temperature``, ``--launch``,
    ``--no-learn-alpha`` and a calibration's α and T_ref (the file's α: ``alpha_source = file``)."""
    given = {"ref_temperature": args.ref_temperature is not None, "launch": args.launch != "auto",
             "learn_alpha": not args.learn_alpha}
    if protocol != "counter":
        used = [f"--{k.replace('_', '-')}" if k != "learn_alpha" else "--no-learn-alpha" for k, v in given.items() if v]
        if used:
            raise ValueError(f"{', '.join(used)}: only the counter protocol reports a figure at a reference "
                             f"temperature and a launch mode (this is {protocol})")
        return {}
    params = {"learn_alpha": bool(args.learn_alpha)}
    if args.launch != "auto":
        params["launch"] = args.launch
    if calibration is not None:
        from ..thermal.row import alpha_from_calibration

        alpha, t_ref = alpha_from_calibration(*calibration)
        if alpha is not None:
            params.update(alpha_w_per_c=alpha.alpha_w_per_c, alpha_uncertainty_w_per_c=alpha.uncertainty_w_per_c,
                          alpha_source="file")
        if t_ref is not None:
            params["reference_temperature_c"] = t_ref
    if args.ref_temperature is not None:
        params["reference_temperature_c"] = args.ref_temperature
    return params


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
    config = f" ({row[schema.CONFIG]})" if row.get(schema.CONFIG) else ""
    lines = [f"{row[schema.KERNEL]}{config} on {row[schema.DEVICE]}, protocol {row[schema.PROTOCOL]}"]
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
    source = row.get(schema.CLOCK_SOURCE)
    how = ("" if source is None else f" ({'probed on the GPU' if source == 'probe' else 'NVML reading'}"
           f" ± {get(schema.CLOCK_UNCERTAINTY_MHZ):.0f})")
    lines.append(f"  {'conditions':14s} {get(schema.TEMPERATURE_C):.1f} °C, SM {get(schema.SM_CLOCK_MHZ):.0f} MHz{how}, "
                 f"memory {get(schema.MEM_CLOCK_MHZ):.0f} MHz")
    if math.isfinite(get(schema.ENERGY_AT_REF_J)):
        lines += thermal_summary(row, get)
    if schema.CORRECTED_ENERGY_J in row:
        lines.append(f"  {'calibrated':14s} {get(schema.CORRECTED_POWER_W):.1f} W, "
                     f"{get(schema.CORRECTED_ENERGY_J):.4g} J per launch at {get(schema.REFERENCE_CLOCK_MHZ):.0f} MHz "
                     f"and {get(schema.REFERENCE_TEMPERATURE_C):.1f} °C ({row[schema.CORRECTION_POWER_CURVE]} "
                     f"power curve, {row[schema.CORRECTION_TIME_SOURCE]})")
    return lines


def thermal_summary(row: dict, get) -> list[str]:
    """The row's thermal state and its figure at the reference temperature, as two or three lines."""
    from .. import schema

    alpha, power = get(schema.CORRECTION_ALPHA_W_PER_C), get(schema.POWER_W)
    lines = [f"  {schema.ENERGY_AT_REF_J:14s} {get(schema.ENERGY_AT_REF_J):.4g} ± "
             f"{get(schema.ENERGY_AT_REF_UNCERTAINTY_J):.2g} J per launch at {get(schema.REFERENCE_TEMPERATURE_C):.1f} °C "
             f"(die {get(schema.TEMPERATURE_START_C):.0f} → {get(schema.TEMPERATURE_END_C):.0f} °C; α "
             f"{alpha:.3g} ± {get(schema.ALPHA_UNCERTAINTY_W_PER_C):.2g} W/°C = {100 * alpha / power:.2f} %/°C, "
             f"{row.get(schema.ALPHA_SOURCE)}, {row.get(schema.ALPHA_REGIME)})"]
    launch = f"  {schema.LAUNCH_MODE:14s} {row.get(schema.LAUNCH_MODE)}"
    if row.get(schema.LAUNCH_BOUND):
        launch += " (launch bound: the host's gaps take over 20 % of the time per launch)"
    lines.append(launch)
    if row.get(schema.TRANSIENT) or get(schema.SETTLE_S) > 0:
        state = "did not settle (transient)" if row.get(schema.TRANSIENT) else "settled"
        lines.append(f"  {'power cap':14s} the controller {state} after {get(schema.SETTLE_S):.1f} s more load")
    return lines


def run(args) -> int:
    import pandas as pd

    from ..measuring.protocols import make_protocol
    from ..measuring.runner import make_runner
    from ._common import program_argv
    from ._measure_program import run_program, write_table
    from ._workload_args import check_table_path, protocol_fields, workload_from_args

    if program_argv(args):
        if args.source or args.callable or args.kernel:
            raise ValueError("give one workload: a program (-- CMD) or --kernel/--source/--callable")
        return run_program(args)
    fields = protocol_fields(args.protocol)
    workload, config, params = workload_from_args(args, fields)  # before opening the GPU
    params = check_protocol_params(args.protocol, params, what="--protocol-param/--param")
    thermal_params(args, args.protocol)  # a thermal option with another protocol fails before the GPU opens
    for path, option in ((args.out, "--out"), (args.trace_out, "--trace-out")):
        check_table_path(path, option)
        check_writable(path, option)
    device = open_any(args.device, args.index, seed=args.seed, preset=args.preset)
    with make_runner(device) as runner:
        calibration = None
        if args.calibration:  # before measuring: a wrong file fails fast
            from ..workflows.calibration_apply import load_for_device

            calibration = load_for_device(args.calibration, runner.device_name,
                                          allow_other_device=args.allow_other_device)
        protocol = make_protocol(args.protocol, **{**params, **thermal_params(args, args.protocol, calibration)})
        m = protocol.measure(runner, workload, config)
    if calibration is not None:
        from ..workflows.calibration_apply import correct_row

        m.row = correct_row(m.row, *calibration)
    table = m.run_table()
    if args.out:
        write_table(table, args.out)
    if args.trace_out:
        write_table(m.trace, args.trace_out)
    if args.full:
        with pd.option_context("display.max_rows", None):
            print(table.T.to_string(header=False))
    else:
        print("\n".join(summary(m.row)))
    for path, what in ((args.out, "run-table row"), (args.trace_out, f"trace ({len(m.trace)} readings)")):
        if path:
            print(f"wrote the {what} to {path}")
    return 0
