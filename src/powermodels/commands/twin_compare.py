"""``powermodels twin-compare``: replay a real recording on a twin preset and compare.

Runs the recording's schedule (``phases.parquet``) on the preset
(:func:`powermodels.twin.compare.twin_compare`) and writes into ``--out`` the
twin's recording (``twin/``: the same files as the real one), the table
``comparison.csv`` / ``comparison.md``, overlay plots real vs twin and ``preset.json``
(the preset replayed, calibrated to the board when it was: keep it to replay the board again). A
recording without ``trace.parquet`` is compared on what needs no NVML reading
(warm-up energy per launch, clock recovery from launch times and probes);
what it cannot compare is listed.
"""

from __future__ import annotations

from . import COMMANDS

NAME = "twin-compare"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("recording", metavar="RECORDING", help="raw recording folder")
    parser.add_argument("--preset", required=True, action="append", metavar="PRESET",
                        help="shipped preset name (h100-sxm) or preset JSON file; given twice or more, the one "
                             "pooled over the recording's board part number (e.g. --preset h200-raw-part-000 "
                             "--preset h200-raw-part-001; board_calibration.part_preset)")
    parser.add_argument("--out", required=True,
                        help="folder for the twin's recording, table, plots and preset.json (the preset replayed, "
                             "calibrated when asked: load it to replay this board without recalibrating)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the twin's sensor phase and noise")
    parser.add_argument("--cap-seeds", type=int, default=5, metavar="N",
                        help="replay each capped series with N sensor seeds and score its overshoot and settling "
                             "as their median (default 5; 1: the full replay's single values)")
    parser.add_argument("--ambient", choices=("initial", "preset", "recorded", "recorded-causal"),
                        default="recorded-causal",
                        help="the replay's ambient temperature, read through the preset's thermal network: from "
                             "every idle stretch, each value from its stretch's end on (recorded-causal, the "
                             "default since session 11), from the first idle stretch before any load (initial), "
                             "from every stretch interpolated (recorded), or the preset's constant (preset)")
    parser.add_argument("--counter-timing", choices=("auto", "recorded", "seed"), default="seed",
                        help="when the twin's energy counter updates: at the seed's phase (seed, the default; it "
                             "was auto in sessions 28-32 and lost on the four never-seen boards of session 33), "
                             "or on the recording's own period and phase, fitted to its updates before its first "
                             "series (recorded; auto where 100 or more precede it)")
    parser.add_argument("--calibrate-board", choices=("board", "workload", "domains"), default=None,
                        help="first bring the preset to the recording's board from its first idle entry and "
                             "each uncapped series' first second (board_calibration.calibrate_board): one "
                             "dynamic-power factor for the board, one per workload, or one for the core and one for "
                             "the memory (domains); those seconds are then in-sample, so the warm-up rows are scored "
                             "from second 2 on")
    parser.add_argument("--calibrate-thermal", nargs="?", const="scale", choices=("scale", "network"), default=False,
                        help="bring the preset's thermal network to the recording's board, read from the readings "
                             "before its first series (board_calibration.thermal; the warm-up and cooling rows stay "
                             "held out): 'scale' (the default with no value) scales every resistance by one factor, "
                             "'network' fits the board's own resistances and time constants (one on its band's edge is "
                             "fitted again in a band widened past that edge)")
    parser.add_argument("--calibrate-cap", nargs="?", const="probes", choices=("probes", "clock", "rate"),
                        help="last, bring the capped workload to the board's, read from the capped pressure entries "
                             "before the first series (a raw recording's natural part; "
                             "board_calibration.capped_clock_before_series): 'probes' (the default with no value) "
                             "its cycles from its probed launches there (a recording made with gpu_raw_recording.py "
                             "--probe-pressure), then the clock under the power cap; 'clock' the clock alone, with "
                             "the preset's cycles (not validated on its own); 'rate' as 'probes', then the board's "
                             "settled cap power and capped launch rate there, matched by replays at the recording's "
                             "ambient (board_calibration.capped_rate; session 27; recommended since session 31 with "
                             "the recommended calibrated preset, after its clean test on four never-seen boards: "
                             "docs/twin.md). The series' readings stay held out")
    parser.add_argument("--cap-controller", choices=("preset", "step", "period"), default="preset",
                        help="the twin's power-cap controller: as the preset says (default), on each 1 ms step's "
                             "power, or on the mean power over the preset's clock period (a ladder's mix of loads "
                             "then settles at the cap; docs/twin.md)")
    parser.add_argument("--protocol-comparison", action="append", default=[], metavar="CSV",
                        help="a real comparison.csv of benchmarks/gpu_user_workloads.py: replay its default "
                             "protocol vs reference runs on the twin (repeatable)")
    parser.add_argument("--sensor-window", default=None, metavar="CSV",
                        help="a real sensor_window_nvml.csv (characterize runs): characterise the twin's "
                             "sensor the same way")


def run(args) -> int:
    import sys
    from pathlib import Path

    from .. import schema
    from ..board_calibration import calibrated_preset, part_preset
    from ..board_calibration.capped_rate import carries_probed_capped_pressure
    from ..board_calibration.parts import preset_part_numbers
    from ..recording import read_recording
    from ..twin.compare import twin_compare
    from ..twin.preset import load_preset, with_cap_controller
    from ._common import out_folder

    out_folder(args.out)  # before the replay, not after it
    real = read_recording(args.recording, trace_optional=True)
    if len(args.preset) > 1:
        chosen = part_preset(real, args.preset)
        print(f"twin-compare: {chosen.name} (board part number {', '.join(preset_part_numbers(chosen))})",
              file=sys.stderr)
    else:
        chosen = load_preset(args.preset[0])
    preset = with_cap_controller(chosen, args.cap_controller)
    if args.calibrate_board and not args.calibrate_cap and carries_probed_capped_pressure(real):
        print("twin-compare: this recording's capped pressure is clock-probed; add --calibrate-cap rate, the "
              "recommended capped calibration since session 31 (docs/twin.md, 'Which preset to use')",
              file=sys.stderr)
    preset = calibrated_preset(preset, real, scale=args.calibrate_board, thermal=args.calibrate_thermal,
                               cap=args.calibrate_cap or False)
    matched = preset.fit.get("board_capped_clock", {}).get("power_and_rate")
    if matched:
        print(f"twin-compare: capped power and rate matched before the first series: twin {matched['twin_settled_w']:.1f} W, "
              f"{matched['twin_rate_per_s']:.1f} launches/s against the board's {matched['board_settled_w']:.1f} W, "
              f"{matched['board_rate_per_s']:.1f} (replays at {matched['replay_ambient_c']:.1f} °C)", file=sys.stderr)

    shown = [0.0]

    def progress(done, total):
        if done - shown[0] >= 60.0 or done >= total:
            shown[0] = done
            print(f"twin-compare: replayed {done:.0f} of {total:.0f} s", file=sys.stderr, flush=True)

    for path in [*args.protocol_comparison, *([args.sensor_window] if args.sensor_window else [])]:
        if not Path(path).is_file():  # before the replay, not after it
            raise ValueError(f"twin-compare: {path} is not a file")
    table = twin_compare(real, preset, args.out, seed=args.seed, progress=progress,
                         protocol_tables=args.protocol_comparison, sensor_window=args.sensor_window,
                         ambient=args.ambient, counter_timing=args.counter_timing,
                         cap_seeds=range(args.seed, args.seed + max(args.cap_seeds, 1)))
    for row in table.itertuples(index=False):
        mark = "ok " if row.within else "MISS"
        print(f"{mark} {row.metric} {row.workload}: real {row.real:.4g}, twin {row.twin:.4g} "
              f"(error {row.error:+.3g}, target ±{row.target:g}; {row.unit})")
    print(f"ambient: {table.attrs['ambient']}")
    for note in table.attrs.get("not_compared", []):
        print(f"not compared: {note}")
    print(f"twin-compare: {int(table[schema.CHECK_WITHIN].sum())} of {len(table)} within target; wrote {args.out}")
    return 0
