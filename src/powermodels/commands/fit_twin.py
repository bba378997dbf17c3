"""``powermodels fit-twin``: fit a simulated GPU (a twin preset) to raw recordings.

Identifies the board's physics and sensors and each recorded workload
(:func:`powermodels.twin.fit.fit_twin`) and writes a preset JSON file that
``twin-compare --preset FILE`` and :func:`powermodels.twin.load_preset` read.
``--hold-out-series WORKLOAD`` leaves that workload's back-to-back series and
the cooling after it out of the fit, to validate on them.
"""

from __future__ import annotations

from . import COMMANDS
from ..cli_options import option_number

NAME = "fit-twin"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("recordings", nargs="+", metavar="RECORDING", help="raw recording folder(s)")
    parser.add_argument("--out", required=True, help="preset JSON file to write")
    parser.add_argument("--name", default=None, help="preset name (default: the file's stem)")
    parser.add_argument("--clock-workload", default=None,
                        help="workload whose time is proportional to 1/clock (default: the one named *fma*)")
    parser.add_argument("--instant-window-ms", type=option_number(above=0), default=None,
                        help="instant-reading window from `powermodels characterize` (ms)")
    parser.add_argument("--instant-delay-ms", type=option_number(minimum=0), default=0.0,
                        help="instant-reading delay from `powermodels characterize` (ms)")
    parser.add_argument("--knee-mhz", type=option_number(above=0), default=1100.0, help="V(f) knee (MHz), default 1100")
    parser.add_argument("--workload-time", action="append", default=[], metavar="NAME=T_S[:SHARE]",
                        help="time per launch at the top clock (and its clock-bound share, default 1) of a "
                             "workload the recordings do not time, e.g. a pressure load")
    parser.add_argument("--cap-controller", choices=("auto", "step", "period"), default="auto",
                        help="power-cap controller fitted: on each 1 ms step's power, on the mean over its clock "
                             "period, or both with the one that better replays the recording's cap rows kept "
                             "(default auto; docs/twin.md)")
    parser.add_argument("--capped-clock", choices=("spans", "settled"), default="spans",
                        help="capped clock the core coefficient is fitted to: the capped spans' first seconds "
                             "(default, the shipped presets') or where each capped series settles, from 2 s to its "
                             "end (docs/twin.md session 16)")
    parser.add_argument("--load-temperature-slope", action="store_true",
                        help="also fit μ, the loads' own temperature slope (a load's power above idle rises "
                             "(1 + μ·ΔT) beside the leakage's α); opt-in: docs/twin.md session 10")
    parser.add_argument("--hold-out-series", action="append", default=[], metavar="WORKLOAD",
                        help="leave this workload's series and the idle after it out of the fit")


def run(args) -> int:
    from pathlib import Path

    from ..recording import read_recording
    from ..twin.fit import fit_twin, series_holdout
    from ..twin.preset import save_preset

    recs = [read_recording(p, probes=False) for p in args.recordings]
    window = None
    if args.instant_window_ms is not None:
        window = {"window_s": args.instant_window_ms / 1e3, "delay_s": args.instant_delay_ms / 1e3,
                  "source": "--instant-window-ms/--instant-delay-ms"}
    times = {}
    for spec in args.workload_time:
        name, sep, value = spec.partition("=")
        t_s, _, share = value.partition(":")
        try:
            times[name] = {"t_fast_s": float(t_s), "clock_share": float(share or 1.0)}
        except ValueError:
            raise ValueError(f"--workload-time {spec!r}: expected NAME=T_S[:SHARE] with numbers") from None
        if not sep or not name or not times[name]["t_fast_s"] > 0 or not 0 <= times[name]["clock_share"] <= 1:
            raise ValueError(f"--workload-time {spec!r}: expected NAME=T_S[:SHARE], T_S > 0, 0 <= SHARE <= 1")
    holdout = [span for w in args.hold_out_series for span in series_holdout(recs[0], w)]
    out = Path(args.out)
    preset = fit_twin(recs, name=args.name or out.stem, clock_workload=args.clock_workload,
                      sensor_window=window, knee_mhz=args.knee_mhz, holdout=holdout,
                      workload_times=times, cap_controller=args.cap_controller, capped_clock=args.capped_clock,
                      dynamic_per_c="fit" if args.load_temperature_slope else 0.0)
    save_preset(preset, out)
    fit = preset.fit
    print(f"fit-twin: {len(recs)} recording(s) -> {out}")
    print(f"  leakage slope {fit['leakage']['alpha_w_per_c']:.3f} W/°C at {preset.physics.sm_clock_max_mhz:g} MHz"
          f" (loads' μ {preset.physics.dynamic_per_c:.4f}/°C); "
          f"thermal poles {[(round(r, 4), round(t, 2)) for r, t in preset.physics.thermal_poles]} (K/W, s)")
    print(f"  clock reading period {preset.sensor.clock_period_s * 1e3:.1f} ms, delay "
          f"{preset.sensor.clock_delay_s * 1e3:.1f} ms; clock steps every {preset.physics.clock_period_s * 1e3:.1f} ms, "
          f"recovery {preset.physics.clock_recovery_mhz_per_s:.0f} MHz/s; cap controller "
          f"{'period' if preset.physics.cap_on_period else 'step'}"
          + (f" (chosen of step/period on the recording's cap rows)" if args.cap_controller == "auto" else ""))
    print(f"  workloads: {', '.join(sorted(preset.workloads))}"
          + (f"; held out: {', '.join(args.hold_out_series)}" if args.hold_out_series else ""))
    return 0
