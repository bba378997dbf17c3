"""``powermodels calibrate``: measure and fit the thesis calibration, write a calibration file + report."""

from __future__ import annotations

import sys

from . import COMMANDS
from ._common import out_folder

NAME = "calibrate"
HELP = COMMANDS[NAME].help



def _fewest(r) -> str:
    """The CV's minimum launches per fitted clock point, where it left some points out."""
    m = getattr(r, "time_min_launches", 1)
    return f" on clock points of ≥ {m:.0f} launches" if m == m and m > 1 else ""

def add_arguments(parser) -> None:
    parser.add_argument("workloads", nargs="*", metavar="WORKLOAD",
                        help="registry kernel (fp32, sgemm, ...), optionally NAME:p=v,p=v for a "
                             "configuration, or module:function (a Python callable)")
    parser.add_argument("--from", dest="from_dir", metavar="DIR",
                        help="refit a recording without a GPU: a raw recording folder (trace/energy/"
                             "launches/phases parquet, provenance.json, optional probes.parquet) or an "
                             "older calibrate folder (launches.parquet + samples.parquet)")
    parser.add_argument("--clock-reference", metavar="WORKLOAD", default="auto",
                        help="--from: workload whose time gives its own launches' clock where there are "
                             "no probes ('auto': the one whose time is most nearly ∝ 1/clock; 'none')")
    parser.add_argument("--power-extrapolation-rules", action="store_true",
                        help="--from: score power at the held-out clock band with three opt-in rules for a band "
                             "outside the training clocks (P_static within 0..the idle power, CV folds towards "
                             "the band, the v2f knee down to the band's low edge). Off by default: on the seven "
                             "real ladder recordings of 2026-11-27 they made 15 of 21 held-out cells worse "
                             "(docs/calibration.md, 'Extrapolating to the band')")
    parser.add_argument("--power-joint-fit", action="store_true",
                        help="--from: also fit every load at once with the board's voltage curve shared "
                             "(natural_dvfs.joint_power) and take it for a load where its CV on the training "
                             "windows beats the load's own fit. Off by default: on seven real ladder recordings "
                             "it made 12 of 28 held-out cells worse and 8 better (docs/calibration.md, 'One fit "
                             "over every load')")
    parser.add_argument("--out", required=True, help="folder for calibration.pmcal, report.md, plots, tables")
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--index", type=int, default=0, help="GPU index (nvml)")
    parser.add_argument("--seed", type=int, default=0, help="simulated GPU seed")
    parser.add_argument("--preset", default="hopper", help="simulated GPU sensor preset")
    parser.add_argument("--simulated-power-limit", type=float, metavar="W",
                        help="simulated GPU: its built-in power limit (a property of the simulated "
                             "board, like a lower-TDP model; not a setting change)")
    parser.add_argument("--allow-clock-changes", action="store_true",
                        help="lock clocks for a sweep and a thermal ramp (your own machine only; "
                             "restored afterwards, also after SIGTERM; `powermodels restore` after SIGKILL)")
    parser.add_argument("--clocks", help="locked clocks, comma-separated MHz (default: 8 supported clocks)")
    parser.add_argument("--pressure", default="default",
                        help="natural DVFS: load run before each burst: 'default' (bf16 tensor-core "
                             "GEMM), 'none', or a workload")
    parser.add_argument("--cycles", type=int, default=8, help="natural DVFS: pressure/burst cycles per workload")
    parser.add_argument("--pressure-s", type=float, default=1.0, help="natural DVFS: longest pressure, s")
    parser.add_argument("--burst-s", type=float, default=0.5, help="natural DVFS: workload burst, s")
    parser.add_argument("--series-s", type=float, default=10.0,
                        help="natural DVFS: per workload, seconds back to back from cool (for alpha; 0: none)")
    parser.add_argument("--cool-s", type=float, default=10.0, help="natural DVFS: idle before each series, s")
    parser.add_argument("--hot-s", type=float, default=0.0,
                        help="natural DVFS: then this long of the pressure load and each series again, from a "
                             "warmer heatsink (alpha needs two temperatures at one clock; 0: none)")
    parser.add_argument("--no-probe", action="store_true",
                        help="natural DVFS: no on-GPU clock probe (clocks then come from NVML's lagging reading)")
    parser.add_argument("--reference-clock", type=float, metavar="MHZ", help="report at this clock")
    parser.add_argument("--reference-temperature", type=float, metavar="C", help="report at this temperature")
    parser.add_argument("--min-span", type=float, default=150.0, metavar="MHZ",
                        help="fit a curve only over at least this clock span")
    parser.add_argument("--no-plots", action="store_true", help="report without PNG plots")


def _workload_arg(text: str):
    """``NAME`` or ``NAME:p=v,...`` (registry) or ``module:function`` (a callable)."""
    from .. import workloads

    if ":" in text:
        head, tail = text.split(":", 1)
        if head in workloads.KERNELS:
            return head, tail
        return text, None
    return text, None


def _open(args):
    from ._common import open_any

    simulated = {"seed": args.seed, "preset": args.preset}
    if args.simulated_power_limit is not None and args.device == "auto" and _has_gpu(args.index):
        raise ValueError("--simulated-power-limit applies to the simulated GPU only; this host has an "
                         "NVIDIA GPU: add --device simulated")
    if args.simulated_power_limit is not None:
        from ..devices.physics import GPUPhysics

        simulated["physics"] = GPUPhysics(power_limit_w=args.simulated_power_limit)
    elif args.device == "nvml" or (args.device == "auto" and _has_gpu(args.index)):
        simulated = {}
    return open_any(args.device, args.index, **simulated)


def _has_gpu(index: int) -> bool:
    from ..devices import nvml_available

    return nvml_available(index)


def _from(args) -> int:
    from ..workflows import calibration_report
    from ..workflows.calibrate import save
    from ..workflows.recording_calibration import calibrate_from

    if args.workloads:
        raise ValueError("--from refits a recording: give no WORKLOAD (the recording names its own)")
    if args.power_joint_fit and args.power_extrapolation_rules:  # the joint fit has no such rules: refused, not ignored
        raise ValueError("--power-joint-fit and --power-extrapolation-rules are two different opt-in fits; give one")
    out = out_folder(args.out)
    reference = None if args.clock_reference == "none" else args.clock_reference
    result = calibrate_from(args.from_dir, clock_reference=reference, min_span_mhz=args.min_span,
                            reference_clock_mhz=args.reference_clock,
                            reference_temperature_c=args.reference_temperature,
                            power_extrapolation_rules=args.power_extrapolation_rules,
                            power_joint_fit=args.power_joint_fit)
    out.mkdir(parents=True, exist_ok=True)
    path = save(result, out / "calibration.pmcal")
    report = calibration_report.write_report(result, out, plots=not args.no_plots)
    print(f"calibration refitted from {args.from_dir} ({result.device.get('device')}, no GPU used)")
    _summary(result)
    print(f"wrote {path} and {report}")
    return 0


def _summary(result) -> None:
    cal = result.calibration
    for line in result.findings:
        print(f"  {line}")
    for r in result.clocks.itertuples(index=False):
        print(f"  {r.workload:<28} clock from {r.clock_source:<11} kept {r.kept}/{r.batches} batches"
              + (f" ({r.kept_clock_lo_mhz:.0f}–{r.kept_clock_hi_mhz:.0f} MHz)" if r.kept else ""))
    for r in cal.identifiability.itertuples(index=False):
        status = "fitted" if r.identified else "NOT identified"
        span = "" if r.distinct_clocks == 0 else f" over {r.clock_lo_mhz:.0f}–{r.clock_hi_mhz:.0f} MHz"
        print(f"  {r.group:<28} {r.quantity:<12} {status}{span}")
    for r in cal.validation.itertuples(index=False):
        print(f"  {r.group:<28} held-out {r.band_lo_mhz:.0f}–{r.band_hi_mhz:.0f} MHz: time MAPE "
              f"{r.time_mape_selected_pct:.3g} % ({r.time_form_cv}{_fewest(r)}, chosen by CV on the training clocks; "
              f"{r.test_rows} launches), power MAPE {r.power_mape_pct:.3g} % "
              f"({r.power_test_rows} windows)")
    if cal.temperature is not None:
        t = cal.temperature
        print(f"  alpha = {t.alpha_w_per_c_:.3f} W/°C, 95 % CI [{t.alpha_ci_w_per_c_[0]:.3f}, "
              f"{t.alpha_ci_w_per_c_[1]:.3f}] (T_ref {cal.reference_temperature_c:.1f} °C)")
    for note in cal.notes:
        print(f"  note: {note}")


def run(args) -> int:
    from ..workflows import calibration_report
    from ..workflows.calibrate import calibrate, save

    if args.from_dir:
        return _from(args)
    for flag, on in (("--power-extrapolation-rules", args.power_extrapolation_rules),
                     ("--power-joint-fit", args.power_joint_fit)):
        if on:  # refused, not ignored: the live path's own figure would read as the option's
            raise ValueError(f"{flag} applies to --from DIR (a recording refitted); "
                             "record first, then refit the recording with it")
    if not args.workloads:
        raise ValueError("calibrate: give at least one WORKLOAD (or --from DIR to refit a recording)")

    clocks = None
    if args.clocks:
        try:
            clocks = [float(c) for c in args.clocks.split(",") if c.strip()]
        except ValueError:
            raise ValueError(f"--clocks: expected comma-separated MHz, got {args.clocks!r}") from None
    if args.simulated_power_limit is not None and args.device == "nvml":
        raise ValueError("--simulated-power-limit applies to the simulated GPU only")
    pressure = None if args.pressure == "none" else ("default" if args.pressure == "default"
                                                    else _workload_arg(args.pressure)[0])
    out = out_folder(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from ..termination import terminate_raises

    device = _open(args)
    # natural DVFS writes its recording as it goes; SIGTERM/SIGHUP raise inside, so a killed run
    # flushes what it has (locked clocks: the settings guard restores either way)
    with terminate_raises():
        try:
            result = calibrate([_workload_arg(w) for w in args.workloads], device,
                               allow_clock_changes=args.allow_clock_changes, clocks=clocks, pressure=pressure,
                               cycles=args.cycles, pressure_s=args.pressure_s, burst_s=args.burst_s,
                               series_s=args.series_s, cool_s=args.cool_s, hot_s=args.hot_s,
                               probe=not args.no_probe,
                               reference_clock_mhz=args.reference_clock,
                               reference_temperature_c=args.reference_temperature, min_span_mhz=args.min_span,
                               progress=lambda line: print(f"  {line}", file=sys.stderr),
                               recording_dir=None if args.allow_clock_changes else out / "recording")
        finally:
            device.close()
    path = save(result, out / "calibration.pmcal")
    report = calibration_report.write_report(result, out, plots=not args.no_plots)
    cal = result.calibration
    ident = cal.identifiability
    print(f"calibration of {len(args.workloads)} workload(s) on {result.device['device']} "
          f"({'locked clocks' if args.allow_clock_changes else 'natural DVFS, no setting changed'})")
    if result.recording is not None:
        print(f"  recording (re-analyse with `powermodels calibrate --from {out / 'recording'} --out DIR`)")
        _summary(result)
        print(f"wrote {path}, {report} and {out / 'recording'}")
        return 0
    for r in ident.itertuples(index=False):
        status = "fitted" if r.identified else "NOT identified"
        span = "" if r.distinct_clocks == 0 else f" over {r.clock_lo_mhz:.0f}–{r.clock_hi_mhz:.0f} MHz"
        print(f"  {r.group:<28} {r.quantity:<12} {status}{span}")
    if cal.temperature is not None:
        print(f"  alpha = {cal.temperature.alpha_w_per_c_:.3f} W/°C (T_ref {cal.reference_temperature_c:.1f} °C)")
    for note in cal.notes:
        print(f"  note: {note}")
    print(f"wrote {path} and {report}")
    return 0
