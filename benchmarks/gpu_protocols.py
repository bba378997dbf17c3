"""Issue 11's protocol benchmark: every protocol's energy error vs the reference, and its wall time.

Workloads: every registry kernel, several configurations, launch times from
10 µs to 100 ms — ``fp32`` (default, 2.2 ms; ``nr_outer=8,nr_inner=256``,
~70 µs), ``sgemm`` (default; ``MWG=128,NWG=64``), ``stream_copy``,
``stream_triad`` and the ``square_wave`` FMA chain at 10 µs, 100 µs, 1 ms,
10 ms and 100 ms per launch (its length is calibrated on the GPU; on the
simulated GPU a twin of the same length). Protocols: ``naive``,
``continuous``, ``good_practice``, ``steady_state`` (``--steady-max-s``) and
the default ``counter`` (``--counter-repeats`` runs, for the median and worst
wall time). Reference: :func:`powermodels.measuring.reference.reference_energy`
(the same work back to back for ``--reference-s`` = 12 s, energy-counter
difference from ``--skip-s`` = 2 s to the end, divided by the repetitions).

``--device nvml`` (the GPU, read-only: every NVML setter raises) runs the
protocols one after the other on one GPU with ``--gap-s`` of idle before each,
then the reference; wall time = the row's ``wall_s``. ``--device simulated``
runs each protocol and the reference on a fresh simulated GPU from idle
(preset ``--preset``, counter updates jittered by ``--jitter-ms``), wall time
= simulated device seconds (what a GPU would take); the error against the
simulated truth over the same launches is listed too, ``counter_alpha`` is the
counter protocol moved to the reference's temperature with the simulated
GPU's own α (thesis eq. 4.7: what the cold-vs-warm gap is), and
``--part presets`` runs the counter protocol on every sensor preset.

Rows are appended to ``rows.csv`` as they finish; no new measurement starts
after ``--max-minutes`` (8.5), and a second call with the same ``--out`` (or
``--resume-from`` an earlier ``rows.csv``, e.g. on a fresh machine) measures
only what is missing; then ``report.md``, ``error_vs_wall.png`` and
``environment.json`` are (re)written in ``--out`` (default
``benchmarks/results/protocols_<device>``).

Usage::

    # on the GPU, ~8 min of the ~9 needed; the second call finishes (rows.csv copied back first)
    PYTHONPATH=src python3 benchmarks/gpu_protocols.py --device nvml --out $OUT
    PYTHONPATH=src python3 benchmarks/gpu_protocols.py --device nvml --out $OUT \
        --resume-from benchmarks/results/protocols_h100/rows.csv
    # a one-minute smoke test first
    PYTHONPATH=src python3 benchmarks/gpu_protocols.py --device nvml --out $OUT/smoke \
        --workloads "fp32,square_wave[0.01ms]" --protocols counter --counter-repeats 2 --reference-s 4 --skip-s 1
    PYTHONPATH=src python3 benchmarks/gpu_protocols.py --device simulated                  # ~1 min CPU
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _readonly_nvml import forbid_nvml_setters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
TARGET_PCT = 2.0

REGISTRY = [("fp32", "default"), ("fp32", "block_size_x=1024,nr_outer=8,nr_inner=256"),
            ("sgemm", "default"), ("sgemm", "MWG=128,NWG=64"),
            ("stream_copy", "default"), ("stream_triad", "default")]
SQUARE_WAVE_S = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
PROTOCOLS = ("naive", "continuous", "good_practice", "steady_state", "counter", "counter_alpha")


def square_wave_workload(launch_s: float, runner=None):
    """The registry's square-wave FMA chain as a workload of ``launch_s`` per launch (all SMs)."""
    from powermodels.workloads import CallableWorkload, SimulatedTwin

    name = f"square_wave[{launch_s * 1e3:g}ms]"
    twin = SimulatedTwin(time_s=launch_s, activity=0.95, mem_activity=0.02)
    if runner is None or not hasattr(runner, "calibrate_square_wave"):
        return CallableWorkload(lambda: None, name=name, simulated=twin)
    from powermodels.workloads import square_wave_kernel

    if 1.0 not in runner._square:
        runner.calibrate_square_wave(1.0, target_s=0.01)
    c0, c1 = runner._square[1.0]
    pk = square_wave_kernel(1.0, max(1, round((launch_s - c0) / c1)))
    return CallableWorkload(lambda: pk.launch(), name=name, simulated=twin, timing="events")


def _protocol(name: str, args, seed: int):
    from powermodels.measuring.protocols import make_protocol

    params = {"good_practice": {"random_state": seed}, "steady_state": {"max_duration_s": args.steady_max_s}}
    return make_protocol(name, **params.get(name, {}))


def _sim_runner(args, seed: int, preset: str | None = None):
    from powermodels.devices.simulated import PRESETS, SimulatedGPU
    from powermodels.measuring.runner import SimulatedRunner

    p = PRESETS[preset or args.preset]
    p = dataclasses.replace(p, energy_jitter_s=min(args.jitter_ms * 1e-3, 0.3 * p.energy_period_s))
    runner = SimulatedRunner(SimulatedGPU(preset=p, seed=seed))
    runner.idle(1.0)  # a user's first measurement: from idle
    return runner


def _simulated_alpha(runner) -> float:
    """dP/dT of the simulated GPU at its top clock (leakage term, thesis eq. 4.6), W/°C."""
    ph = runner.gpu.physics
    return ph.leakage_w * float(ph.relative_voltage(ph.sm_clock_max_mhz)) * ph.leakage_per_c


def _measure(runner, protocol, workload, config, simulated: bool, at_reference: bool = False) -> dict:
    """One protocol row as the report's fields; ``at_reference``: its figure at the protocol's
    ``reference_temperature_c`` (``energy_at_ref_j``, thesis eq. 4.7) in place of the raw energy."""
    from powermodels import schema

    t0 = runner.now()
    m = protocol.measure(runner, workload, None if config == "default" else config)
    r = m.row
    wall = runner.now() - t0 if simulated else float(r[schema.WALL_S])
    truth = float(r.get(schema.REFERENCE_ENERGY_J, math.nan))
    energy = r[schema.ENERGY_AT_REF_J] if at_reference else r[schema.ENERGY_J]
    return {"protocol": r[schema.PROTOCOL], "energy_j": float(energy),
            "energy_uncertainty_j": float(r.get(schema.ENERGY_UNCERTAINTY_J, math.nan)),
            "time_s": float(r[schema.TIME_S]), "power_w": float(r[schema.POWER_W]),
            "truth_energy_j": truth, "wall_s": wall, "launches": int(r[schema.LAUNCHES]),
            "temperature_c": float(r.get(schema.TEMPERATURE_C, math.nan)),
            "sm_clock_mhz": float(r.get(schema.SM_CLOCK_MHZ, math.nan))}


def _reference(runner, workload, config, args, simulated: bool) -> dict:
    from powermodels.measuring.reference import reference_energy

    t0 = runner.now()
    ref = reference_energy(runner, workload, None if config == "default" else config,
                           duration_s=args.reference_s, skip_s=args.skip_s)
    return {"protocol": "reference", "energy_j": ref.energy_j, "energy_uncertainty_j": ref.uncertainty_j,
            "time_s": ref.time_s, "power_w": ref.power_w, "truth_energy_j": ref.truth_energy_j,
            "wall_s": runner.now() - t0 if simulated else ref.wall_s, "launches": int(ref.launches),
            "temperature_c": ref.temperature_c, "sm_clock_mhz": math.nan}


class Store:
    """``rows.csv`` appended row by row; what is in it is not measured again."""

    def __init__(self, path: Path, resume_from: Path | None = None, deadline: float = math.inf):
        self.path = path
        if resume_from is not None and not path.exists():  # rows of an earlier call (another machine)
            path.write_text(Path(resume_from).read_text())
        self.rows = pd.read_csv(path).to_dict("records") if path.exists() else []
        self.deadline = deadline
        self.done = {(r["part"], r["workload"], r["config"], r["protocol_slot"], int(r["repeat"]), r["preset"])
                     for r in self.rows}

    def has(self, key) -> bool:
        """Already measured — or out of time (then the next call resumes here)."""
        return key in self.done or time.perf_counter() > self.deadline

    def add(self, key, row: dict) -> None:
        row = {**row, **dict(zip(("part", "workload", "config", "protocol_slot", "repeat", "preset"),
                                 key, strict=True))}
        self.rows.append(row)
        self.done.add(key)
        pd.DataFrame([row]).to_csv(self.path, mode="a", header=not self.path.exists() or
                                   self.path.stat().st_size == 0, index=False)
        print(f"  {key[1]} [{key[2]}] {key[3]}#{key[4]} {key[5]}: {row['energy_j']:.5g} J, "
              f"wall {row['wall_s']:.2f} s", flush=True)


def workloads_for(runner, args):
    """(name, workload, config) of every benchmark workload on this runner."""
    out = [(k, k, c) for k, c in REGISTRY]
    for t in SQUARE_WAVE_S:
        w = square_wave_workload(t, runner)
        out.append((w.name, w, "default"))
    wanted = set(args.workloads.split(",")) if args.workloads else None
    return [x for x in out if wanted is None or x[0] in wanted]


def part_protocols(args, store: Store, simulated: bool, gpu_runner=None) -> None:
    preset = args.preset if simulated else "-"
    probe = gpu_runner if gpu_runner is not None else None
    for name, workload, config in workloads_for(probe, args):
        seed = 0
        slots = [(p, 0) for p in args.protocols if p != "counter"]
        slots += [("counter", k) for k in range(args.counter_repeats)] if "counter" in args.protocols else []
        # on the GPU the reference comes last (it warms the GPU); a fresh simulated GPU each time
        slots = [("reference", 0), *slots, ("counter_alpha", 0)] if simulated else [*slots, ("reference", 0)]
        for slot, repeat in slots:
            key = ("protocols", name, config, slot, repeat, preset)
            seed += 1
            if store.has(key):
                continue
            runner = _sim_runner(args, seed) if simulated else gpu_runner
            if not simulated:
                runner.idle(args.gap_s)
            if slot == "reference":
                row = _reference(runner, workload, config, args, simulated)
            elif slot == "counter_alpha":  # moved to the reference's temperature with the physical alpha
                ref_t = next(r["temperature_c"] for r in store.rows if r["part"] == "protocols"
                             and (r["workload"], r["config"], r["protocol_slot"], r["preset"])
                             == (name, config, "reference", preset))
                protocol = _protocol("counter", args, seed)
                protocol.alpha_w_per_c, protocol.reference_temperature_c = _simulated_alpha(runner), ref_t
                row = _measure(runner, protocol, workload, config, simulated, at_reference=True)
            else:
                row = _measure(runner, _protocol(slot, args, seed), workload, config, simulated)
            store.add(key, row)


def part_presets(args, store: Store) -> None:
    from powermodels.devices.simulated import PRESETS

    for i, preset in enumerate(sorted(PRESETS)):
        for j, (name, workload, config) in enumerate(workloads_for(None, args)):
            seed = 100 + 20 * i + j  # another update phase on every preset and workload
            key = ("presets", name, config, "counter", 0, preset)
            if store.has(key):
                continue
            runner = _sim_runner(args, seed, preset)
            store.add(key, _measure(runner, _protocol("counter", args, seed), workload, config, True))


# -- report -------------------------------------------------------------------------------


def with_errors(rows: pd.DataFrame) -> pd.DataFrame:
    """Each protocol row with the error against its workload's reference (and the truth)."""
    ref = rows[rows.protocol_slot == "reference"].set_index(["workload", "config", "preset"])["energy_j"]
    df = rows[rows.protocol_slot != "reference"].copy()
    key = list(zip(df.workload, df.config, df.preset, strict=True))
    df["reference_energy_j"] = [ref.get(k, math.nan) for k in key]
    df["error_pct"] = 100 * (df.energy_j / df.reference_energy_j - 1)
    df["error_vs_truth_pct"] = 100 * (df.energy_j / df.truth_energy_j - 1)
    return df


def report(rows: pd.DataFrame, device: str, simulated: bool) -> str:
    from powermodels.reporting import markdown_table

    main = rows[rows.part == "protocols"]
    df = with_errors(main)
    lines = [f"# Protocols vs the reference on {device}", ""]
    ref_rows = main[main.protocol_slot == "reference"]
    if len(ref_rows):
        lines += [f"Reference: each workload back to back for 12 s, energy counter from 2 s to the end "
                  f"(median wall {ref_rows.wall_s.median():.1f} s per workload)."]
        if simulated and np.isfinite(ref_rows.truth_energy_j).any():
            e = 100 * (ref_rows.energy_j / ref_rows.truth_energy_j - 1)
            lines += [f"Reference vs the simulated truth: max |error| {np.abs(e).max():.3f} %."]
    lines += ["", "## Error vs the reference (%, median over repeats)", ""]
    per = df.groupby(["workload", "config", "protocol_slot"], sort=False).agg(
        error_pct=("error_pct", "median"), time_ms=("time_s", lambda t: 1e3 * t.median()))
    order = [p for p in PROTOCOLS if p in set(df.protocol_slot)]
    table = per.error_pct.unstack("protocol_slot").reindex(columns=order)
    table.insert(0, "t_launch_ms", per.time_ms.groupby(["workload", "config"], sort=False).median())
    lines += [markdown_table(table.reset_index(), ".3g", align="auto"), ""]
    summary = df.groupby("protocol_slot", sort=False).agg(
        median_abs_error_pct=("error_pct", lambda e: np.abs(e).median()),
        max_abs_error_pct=("error_pct", lambda e: np.abs(e).max()),
        within_2pct=("error_pct", lambda e: f"{int((np.abs(e) <= TARGET_PCT).sum())}/{len(e)}"),
        median_wall_s=("wall_s", "median"), max_wall_s=("wall_s", "max"))
    if simulated:
        summary.insert(2, "max_abs_error_vs_truth_pct", df.groupby("protocol_slot", sort=False)
                       .error_vs_truth_pct.apply(lambda e: np.abs(e).max()))
    lines += ["## Per protocol (wall time per measurement)", "",
              markdown_table(summary.reindex(order).reset_index(), ".3g", align="auto"), ""]
    presets = rows[rows.part == "presets"]
    if len(presets):
        presets = presets.assign(error_vs_truth_pct=100 * (presets.energy_j / presets.truth_energy_j - 1))
        by = presets.groupby("preset").agg(
            max_abs_error_vs_truth_pct=("error_vs_truth_pct", lambda e: np.abs(e).max()),
            median_wall_s=("wall_s", "median"), max_wall_s=("wall_s", "max"), workloads=("wall_s", "size"))
        lines += ["## counter on every sensor preset (error vs the simulated truth)", "",
                  markdown_table(by.reset_index(), ".3g", align="auto"), ""]
    return "\n".join(lines)


def plot(rows: pd.DataFrame, path: Path, device: str, simulated: bool) -> None:
    """Error vs wall time per protocol: vs the reference, and (simulated) vs the truth."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter

    df = with_errors(rows[rows.part == "protocols"])
    panels = [("error_pct", "vs the 12 s reference")]
    if simulated:
        panels.append(("error_vs_truth_pct", "vs simulated truth"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.0), dpi=100, squeeze=False)
    markers = dict(zip(PROTOCOLS, "v^sDo*", strict=True))
    for ax, (column, what) in zip(axes[0], panels, strict=True):
        for p in PROTOCOLS:
            d = df[df.protocol_slot == p]
            if len(d):
                ax.scatter(d.wall_s, d[column], s=22, marker=markers[p], label=p, alpha=0.8)
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=2.0, linscale=1.5)
        ticks = [-100, -50, -20, -10, -5, -2, -1, 0, 1, 2, 5]
        ax.yaxis.set_major_locator(FixedLocator(ticks))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:+g}" if v else "0"))
        ax.yaxis.set_minor_locator(FixedLocator([]))
        ax.set_ylim(-110, 6)
        ax.axhspan(-TARGET_PCT, TARGET_PCT, color="0.88", zorder=0, label="±2 %")
        ax.axvline(1.0, color="0.5", lw=0.8, ls="--")
        ax.set_xlabel("wall time per measurement (s)" + (", simulated device time" if simulated else ""))
        ax.set_ylabel(f"energy error {what} (%)")
        ax.grid(axis="y", color="0.93", lw=0.6)
    axes[0][0].legend(fontsize=7, loc="lower right")
    fig.suptitle(f"Protocols on {device}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("nvml", "simulated"), default="nvml")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--part", choices=("protocols", "presets", "all"), default="all")
    parser.add_argument("--protocols", default=",".join(PROTOCOLS[:-1]))
    parser.add_argument("--workloads", default="", help="comma-separated workload names (all by default)")
    parser.add_argument("--counter-repeats", type=int, default=3)
    parser.add_argument("--reference-s", type=float, default=12.0)
    parser.add_argument("--skip-s", type=float, default=2.0)
    parser.add_argument("--steady-max-s", type=float, default=10.0)
    parser.add_argument("--gap-s", type=float, default=1.0, help="idle before each measurement (GPU)")
    parser.add_argument("--preset", default="hopper")
    parser.add_argument("--jitter-ms", type=float, default=5.0, help="simulated counter update jitter")
    parser.add_argument("--max-minutes", type=float, default=8.5,
                        help="start no new measurement after this long (a second call resumes)")
    parser.add_argument("--resume-from", type=Path, help="rows.csv of an earlier call to continue from")
    args = parser.parse_args(argv)
    args.protocols = [p for p in args.protocols.split(",") if p]
    simulated = args.device == "simulated"
    out = args.out or REPO / "benchmarks" / "results" / f"protocols_{args.device}"
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out / "rows.csv", args.resume_from, time.perf_counter() + 60 * args.max_minutes)
    env = {"date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "python": platform.python_version(),
           "argv": sys.argv[1:]}
    t0 = time.perf_counter()
    if simulated:
        device = f"the simulated GPU (preset '{args.preset}', counter jitter ±{args.jitter_ms:g} ms)"
        if args.part in ("protocols", "all"):
            part_protocols(args, store, True)
        if args.part in ("presets", "all"):
            part_presets(args, store)
    else:
        env["nvml_setters_blocked"] = len(forbid_nvml_setters())
        from powermodels.devices import open_device
        from powermodels.measuring.runner import CupyRunner

        dev = open_device("nvml")
        device = dev.info.name
        env.update(gpu=dev.info.name, driver=dev.info.driver, uuid=dev.info.uuid)
        with CupyRunner(dev) as runner:
            part_protocols(args, store, False, runner)
            env["sampler_rate_hz"] = runner.sampler.rate_hz()
            env["graph_batches"] = [{"launches": b.n, "captured": b.captured, "error": b.error}
                                    for b in runner.__dict__.get("_batches", {}).values()]
    env["seconds"] = time.perf_counter() - t0
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    rows = pd.DataFrame(store.rows)
    text = report(rows, device, simulated)
    (out / "report.md").write_text(text)
    plot(rows, out / "error_vs_wall.png", device, simulated)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
