"""Yang Fig. 14's Hopper row from real traces in datasets/<gpu>/.

Reads the square-wave traces (one ``run_id`` per load period, 2/3 … 4/3 of the
update period) and the step trace recorded on the lent GPU, characterises every
reading with :func:`powermodels.sensor.report.characterize_traces`, fits the
instant window on each load period separately as well (Yang Fig. 13: the spread
over periods; the paper's H100 PCIe spreadsheet gives 23.6–24.9 ms), and writes
``benchmarks/results/sensor_real_<gpu>.md`` plus the report's plots.

Usage::

    python benchmarks/sensor_real.py [--data datasets/h200] [--square sensor_square.parquet]
                                     [--step sensor_step.parquet]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.reporting import markdown_table
from powermodels.sensor.report import attach_loads, characterize_traces, write_report
from powermodels.sensor.update_period import UpdatePeriod
from powermodels.sensor.window import BoxcarWindow

REPO = Path(__file__).resolve().parents[1]

#: Yang Fig. 14, Hopper/GH100 (H100): update period, windows; rise "instant" / "over 1 s".
PAPER = {
    schema.POWER_INSTANT_W: ("100 ms", "25 ms (H100 PCIe: 23.6–24.9 ms)", "instant"),
    schema.POWER_AVERAGE_W: ("100 ms", "1000 ms", "over 1 s (linear)"),
    schema.POWER_USAGE_W: ("100 ms", "1000 ms", "over 1 s (linear)"),
    schema.ENERGY_COUNTER_J: ("—", "—", "—"),
}


MIN_PHASE_BINS = 5  # of 20: distinct phases of the load at which the updates land


def _phase_bins(run: pd.DataFrame) -> int:
    """How many of 20 phase bins of the load period the sensor's updates land in."""
    t = run[schema.T_S].to_numpy()
    load = run[schema.LOAD_ACTIVITY].to_numpy()
    rises = t[1:][(load[1:] >= 0.5) & (load[:-1] < 0.5)]
    if rises.size < 3:
        return 0
    period = float(np.median(np.diff(rises)))
    v = run[schema.POWER_INSTANT_W].to_numpy()
    u = t[1:][np.diff(v) != 0]
    u = u[(u > rises[0]) & (u < rises[-1])]
    return int(np.unique(np.floor(((u - rises[0]) % period) / period * 20)).size)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="datasets folder (default: the first of datasets/h100, h200)")
    ap.add_argument("--square", default="sensor_square.parquet")
    ap.add_argument("--step", default="sensor_step.parquet")
    ap.add_argument("--loads", default=None,
                    help="on/off times (run_id, start_s, end_s) when the traces have no load column "
                         "(the harness's harness_square_wave_loads.parquet)")
    ap.add_argument("--step-run", default=None,
                    help="run_id of the step inside --square (then --step is not read)")
    ap.add_argument("--tag", default=None, help="suffix of the output names (default: the folder name)")
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    args = ap.parse_args(argv)

    if args.data is None:
        found = [d for d in (REPO / "datasets" / "h100", REPO / "datasets" / "h200")
                 if (d / args.square).exists()]
        if not found:
            print(f"no {args.square} under datasets/h100 or datasets/h200", file=sys.stderr)
            return 1
        data = found[0]
    else:
        data = Path(args.data)
    gpu = data.name
    tag = args.tag or gpu
    square = pd.read_parquet(data / args.square)
    if args.loads is not None:  # the harness's format: load times in their own table
        loads = pd.read_parquet(data / args.loads)
        square = attach_loads(square, loads)
    if args.step_run is not None:
        step = square[square[schema.RUN_ID] == args.step_run]
        square = square[square[schema.RUN_ID] != args.step_run]
    else:
        step = pd.read_parquet(data / args.step)

    # A load period locked to the update period (50 ms, or 66.7 ms = 2/3 when the GPU keeps
    # perfect time) shows the window only a few phases of the load: no information about it.
    phases = {run: _phase_bins(g) for run, g in square.groupby(schema.RUN_ID, sort=False)}
    informative = [run for run, n in phases.items() if n >= MIN_PHASE_BINS]
    sq_inf = square[square[schema.RUN_ID].isin(informative)]
    # default fit: each run's delay free within ± a tenth of the update period (per-run
    # CUDA-event/host-clock sync); for comparison, one delay shared by all runs
    result = characterize_traces(sq_inf, step)
    table = result.table
    joint = characterize_traces(sq_inf, step, fields=(schema.POWER_INSTANT_W,), delay_spread_s=0.0)
    joint_win = joint.estimators[schema.POWER_INSTANT_W]["window"]
    spread = result.estimators[schema.POWER_INSTANT_W]["window"]

    # Yang Fig. 13: the instant window per load period. One period alone aliases
    # (a delay of one load period fits as well), so the delay is held near the
    # joint fit's, as Yang's per-period fits have no delay at all.
    joint_delay = result.row(schema.POWER_INSTANT_W)[schema.DELAY_S]
    per_run = []
    for run_id, g in square.groupby(schema.RUN_ID, sort=False):
        try:
            up = UpdatePeriod().fit(g)
            w = BoxcarWindow(max_window_s=0.3, max_delay_s=max(joint_delay, 0.0) + 0.005).fit(g)
        except ValueError as err:
            per_run.append({"run": run_id, "note": str(err)})
            continue
        per_run.append({"run": run_id, "phase_bins_of_20": phases[run_id],
                        "update_period_ms": up.update_period_s_ * 1e3,
                        "window_ms": w.window_s_ * 1e3, "delay_ms": w.delay_s_ * 1e3,
                        "loss": w.loss_, "updates": w.n_updates_})
    per_run = pd.DataFrame(per_run)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rep_dir = out / f"sensor_real_{tag}"
    write_report(result, rep_dir, square, step, title=f"Sensor characterisation: {gpu} (real)",
                 notes=f"Traces: {data / args.square}" + (f", {data / args.step}." if args.step_run is None else "."))

    lines = [f"# Yang Fig. 14, Hopper row, reproduced on the lent {gpu.upper()}", "",
             "| field | update period | window | delay | sampled | rise time 10→90 % | kind | paper (update / window / rise) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in table.itertuples(index=False):
        row = dict(zip(table.columns, r, strict=True))
        f = row[schema.SENSOR_FIELD]
        paper = " / ".join(PAPER.get(f, ("?", "?", "?")))
        lines.append(f"| {f} | {row[schema.UPDATE_PERIOD_S] * 1e3:.1f} ms | {row[schema.WINDOW_S] * 1e3:.1f} ms "
                     f"| {row[schema.DELAY_S] * 1e3:.1f} ms | {row[schema.SAMPLED_FRACTION]:.0%} "
                     f"| {row[schema.RISE_TIME_S] * 1e3:.0f} ms | {row[schema.RESPONSE_KIND]} | {paper} |")
    lines += ["", f"Instant window (table) with each run's delay free within ±{spread.delay_spread_s * 1e3:.0f} ms "
                  f"(`characterize_traces` default): **{spread.window_s_ * 1e3:.1f} ms**, "
                  f"run delays {', '.join(f'{d * 1e3:.1f}' for d in spread.run_delays_s_)} ms, "
                  f"loss {spread.loss_:.4f}; one delay for all runs (`delay_spread_s=0`): "
                  f"{joint_win.window_s_ * 1e3:.1f} ms, delay {joint_win.delay_s_ * 1e3:.1f} ms, "
                  f"loss {joint_win.loss_:.4f}."]
    if result.skipped:
        lines += ["", "Skipped: " + "; ".join(f"{k}: {v}" for k, v in result.skipped.items())]
    lines += ["", "## Instant window per load period (Yang Fig. 13)", ""]
    lines += [markdown_table(per_run)]
    if "window_ms" in per_run:
        ok = per_run[per_run["phase_bins_of_20"] >= MIN_PHASE_BINS]
        w = ok["window_ms"].dropna()
        lines += ["", f"The joint fit (table above) and this summary use the {len(w)} load periods whose "
                      f"updates land in ≥ {MIN_PHASE_BINS} of 20 load phases ({', '.join(ok['run'])}); "
                      f"instant window over them: median {np.median(w):.1f} ms, range "
                      f"{w.min():.1f}–{w.max():.1f} ms (paper, H100 PCIe: 23.6–24.9 ms)."]
    lines += ["", f"Plots and the full report: `{rep_dir.relative_to(REPO) if rep_dir.is_relative_to(REPO) else rep_dir}/`.",
              f"Command: `python benchmarks/sensor_real.py {' '.join(argv or sys.argv[1:])}`."]
    text = "\n".join(lines) + "\n"
    (out / f"sensor_real_{tag}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
