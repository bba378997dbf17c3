"""``powermodels characterize``: how does this GPU's power sensor behave? (Yang §IV)

Runs Yang's experiments on the chosen device — a fast square wave to find
the update period (artifact A1), square waves at 2/3 … 4/3 of that period
(A4), one long step after a long idle (A2/A3) — records the traces through
the harness's runner (the simulated GPU, or CuPy + the background NVML
sampler on a real GPU: the square-wave kernel of ``kernels/square_wave.cu``),
and writes the characterisation of every reading with plots.
Never changes any GPU setting.
"""

from __future__ import annotations

import sys

from . import COMMANDS
from ._common import out_folder
from ..cli_options import option_integer, option_number
# the experiments live in the sensor package (the twin runs them too); ``record`` stays importable here
from ..sensor.experiments import FRACTIONS, record  # noqa: F401

NAME = "characterize"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--index", type=option_integer(minimum=0), default=0, help="GPU index (nvml)")
    parser.add_argument("--preset", default="hopper",
                        help="simulated sensor preset (volta, turing, ga100, hopper, ada)")
    parser.add_argument("--seed", type=option_integer(minimum=0), default=0, help="simulated GPU seed")
    parser.add_argument("--reference-meter", action="store_true",
                        help="simulated GPU: record its 5 kHz reference meter (gain/offset)")
    # Yang's 9 s: with per-run delays free, shorter runs leave the instant window
    # poorly identified (4 s: 17.5 ms on the simulated Hopper, 59.8 ms once on the H200).
    parser.add_argument("--seconds", type=option_number(above=0, maximum=3600), default=9.0,
                        help="length of each square-wave run (default: Yang's 9 s)")
    parser.add_argument("--step-seconds", type=float, default=3.0, help="length of the step")
    # issue 15: Yang's periods phase-lock with the update period (3-6 load phases per run);
    # many short pulses at random offsets and incommensurate square waves pin the instant
    # window down (docs/sensor.md, "A window that repeats")
    parser.add_argument("--design", default="yang", choices=("yang", "mixed", "pulses", "golden"),
                        help="load for the window fit: yang (six square waves, --seconds each); "
                             "or, --seconds in all: mixed (golden + pulses, the most repeatable on "
                             "the simulated GPU), pulses (10 ms pulses at random gaps), golden (two "
                             "square waves incommensurate with the update period)")
    parser.add_argument("--delay-spread", type=float, default=None,
                        help="let each square-wave run's delay differ by up to this many seconds "
                             "(real GPU: load times are re-synchronised per run); default: a "
                             "tenth of the measured update period, 0 for one shared delay")
    parser.add_argument("--out", required=True, help="output folder (report.md, CSV, plots, traces)")


def run(args) -> int:
    from .. import schema
    from ..devices import nvml_available, open_device
    from ..measuring.runner import make_runner
    from ..sensor.report import characterize_traces, write_report

    if args.seconds < 1.0:  # shorter runs hold too few sensor updates to fit a window
        raise ValueError(f"--seconds must be >= 1, got {args.seconds:g}")
    if not 0.5 <= args.step_seconds <= 3600:  # NaN fails here too
        raise ValueError(f"--step-seconds must be >= 0.5 and <= 3600, got {args.step_seconds:g}")
    if args.delay_spread is not None and not args.delay_spread >= 0:
        raise ValueError(f"--delay-spread must be >= 0, got {args.delay_spread:g}")
    if args.seed < 0:
        raise ValueError(f"--seed must be >= 0, got {args.seed}")
    kind = args.device
    if kind == "auto":
        kind = "nvml" if nvml_available(args.index) else "simulated"
        print(f"powermodels characterize: using the {'NVIDIA GPU' if kind == 'nvml' else 'simulated GPU'}",
              file=sys.stderr)
    out = out_folder(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if kind == "simulated":
        from ..devices.simulated import PRESETS

        if args.preset not in PRESETS:
            raise ValueError(f"--preset: unknown preset {args.preset!r} (have {sorted(PRESETS)})")
        device = open_device("simulated", seed=args.seed, preset=args.preset,
                             reference_meter=args.reference_meter)
        sample = min(1e-3, PRESETS[args.preset].update_period_s / 50)
        runner = make_runner(device, sample_period_s=sample)
    else:
        try:
            import cupy  # noqa: F401
        except ImportError as err:
            raise ValueError("--device nvml needs CuPy to run the square-wave kernel "
                             "(pip install 'powermodels[gpu]')") from err
        device = open_device("nvml", index=args.index)
        runner = make_runner(device)
    with runner:
        square, step, probe = record(runner, seconds=args.seconds, step_seconds=args.step_seconds,
                                     log=lambda m: print(m, file=sys.stderr),
                                     design=getattr(args, "design", "yang"))
    for name, df in (("square", square), ("step", step), ("probe", probe)):
        df.to_parquet(out / f"trace_{name}.parquet", index=False)
    ref = schema.REFERENCE_POWER_W
    reference = ref if ref in square.columns and square[ref].notna().all() else None
    result = characterize_traces(square, step, reference_column=reference,
                                 delay_spread_s=args.delay_spread)
    info = device.info
    notes = (f"Device: {info.name} ({info.kind}"
             + (f", preset {args.preset}, seed {args.seed}" if kind == "simulated" else
                f", driver {info.driver}") + ").\n"
             f"Command: `powermodels characterize --device {args.device} --preset {args.preset} "
             f"--seed {args.seed}{' --reference-meter' if args.reference_meter else ''} "
             f"--seconds {args.seconds:g} --step-seconds {args.step_seconds:g} "
             f"--design {getattr(args, 'design', 'yang')} "
             + ("" if args.delay_spread is None else f"--delay-spread {args.delay_spread:g} ")
             + f"--out {args.out}`.")
    path = write_report(result, out, square, step, title=f"Sensor characterisation: {info.name}",
                        notes=notes)
    print(result.table.to_string(index=False))
    for line in result.warnings():
        print(line, file=sys.stderr)
    print(f"report: {path}", file=sys.stderr)
    return 0
