"""FinGraV on a real kernel: a fine-grain power profile from many short runs (issue 15 item 5).

One call on the lent GPU (read-only: every NVML setter raises; ~3.5 min):

    PYTHONPATH=src timeout 470 python3 benchmarks/gpu_fingrav.py --device nvml --out $OUT

Here, on the simulated GPU (clearly a simulation; the truth is known):

    python benchmarks/gpu_fingrav.py --device simulated

Again from a recording this script wrote (no GPU):

    python benchmarks/gpu_fingrav.py --from DIR --out DIR2

Issue 26 item 3 (``benchmarks/fingrav_h100_real.py``, real H100 recordings): on
NVIDIA's sensors the per-bin profile of a 2–10 ms run is not identified (the
instant reading is a ~20 ms boxcar every 100 ms whose window and delay are
known to a few ms), and the baseline fitted between runs takes up the power
that lingers after them. So besides the profile this script measures what
the sensors do identify, as FinGraV itself defines it: the steady-state
power (SSP, §IV-A S4) from ``--ssp-runs`` long runs (``--ssp-ms`` of back-to-back
executions) — the readings whose whole window lies inside a run, past its
first ``--skip-ms`` (``fingrav_level.inside_level``) — and the energy of a short
run from the counter above the idle measured before the session
(``fingrav_level.counter_run_energy``). The profile is fitted with that idle
as its baseline and shows each bin's standard error.

Steps (FinGraV §IV): a kernel of a few ms (registry ``fp32``,
``block_size_x=1024, nr_outer=64, nr_inner=1024``: 2.2 ms on the H200 and on
the simulated GPU), ``--runs`` runs of ``--executions`` back-to-back
executions each, separated by random idle gaps (so the runs fall at every
offset to the sensor's updates); launch times from CUDA events mapped onto
the sampler's host clock (``EventClock`` inside the runner, its sync bound
reported); the instant reading's window and delay fitted on the same trace
(the runs are the load: ``window_design.fit_design``); golden runs by run
length (``fingrav.golden_runs``); the profile by least squares over the
readings whose window covers a run (``fingrav_window.window_profile``).
Error against the energy counter: (a) the profile's power over the run vs
the counter's steady power of the same kernel back to back for 3 s (settle
1 s), (b) the energy of the whole run session (the profile's baseline over
the session plus one profile per run) vs the counter's difference over it.
On the simulated GPU also against the true power binned the same way.
Writes ``fingrav_<device>.md``, ``.csv``, ``.png`` and the recording
(``fingrav_<device>_trace.parquet``, ``fingrav_<device>_launches.parquet``,
``fingrav_<device>_meta.json``) to ``--out`` (default ``benchmarks/results``).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    from _readonly_nvml import forbid_nvml_setters

    BLOCKED = forbid_nvml_setters()
else:
    BLOCKED = []

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.reporting import markdown_table
from powermodels.sensor.fingrav_level import counter_baseline, counter_run_energy, inside_level
from powermodels.sensor.fingrav_window import window_profile
from powermodels.sensor.report import attach_load
from powermodels.sensor.update_period import UpdatePeriod
from powermodels.sensor.window_design import fit_design

REPO = Path(__file__).resolve().parents[1]
CONFIG = {"block_size_x": 1024, "nr_outer": 64, "nr_inner": 1024}


def counter_steady_w(trace: pd.DataFrame, t0: float, t1: float) -> float:
    """Mean power from the energy counter between its first and last update inside ``[t0, t1]``."""
    g = trace[[schema.T_S, schema.ENERGY_COUNTER_J]].dropna()
    g = g[(g[schema.T_S] >= t0) & (g[schema.T_S] <= t1)]
    e = g[schema.ENERGY_COUNTER_J].to_numpy()
    t = g[schema.T_S].to_numpy()
    ch = np.flatnonzero(np.diff(e) > 0) + 1  # samples where a new counter value appeared
    if ch.size < 2:
        raise ValueError("counter_steady_w: fewer than two counter updates in the window")
    i, j = ch[0], ch[-1]
    return float((e[j] - e[i]) / (t[j] - t[i]))


def session(runner, runs: int, executions: int, ssp_runs: int, ssp_ms: float, seed: int, log, parts=None):
    """Record: idle, 3 s steady, idle, the short runs, idle, the long (SSP) runs, all at random gaps.

    Returns a launches table (``kind`` steady / short / ssp, ``run``, start, end), the recording's
    start and end, and the idle span after the short runs (for the counter's baseline).
    ``parts``: a list the runs are appended to as they end (a stopped session keeps them).
    """
    from powermodels.termination import Terminated

    rng = np.random.default_rng(seed)
    parts = [] if parts is None else parts
    t_start, _ = runner.idle(1.5)
    idle0 = idle1 = float("nan")
    try:
        idle0, idle1 = _session_runs(runner, runs, executions, ssp_runs, ssp_ms, rng, log, parts)
    except (Terminated, KeyboardInterrupt) as err:  # `timeout` or Ctrl-C: keep the runs that ended
        log(f"stopped ({err or type(err).__name__}) after {len(parts)} runs: writing what was recorded")
        t_end = runner.now()
        return _launch_table(parts), t_start, t_end, (idle0 + 0.3, idle1), str(err) or type(err).__name__
    _, t_end = runner.idle(0.5)
    return _launch_table(parts), t_start, t_end, (idle0 + 0.3, idle1), None


def _launch_table(parts) -> pd.DataFrame:
    if not parts:
        return pd.DataFrame(columns=["kind", schema.RUN_INDEX, schema.EXECUTION, schema.START_S, schema.END_S])
    return pd.concat([pd.DataFrame({"kind": kind, schema.RUN_INDEX: k, schema.EXECUTION: np.arange(len(iv)),
                                    schema.START_S: iv[:, 0], schema.END_S: iv[:, 1]})
                      for kind, k, iv in parts], ignore_index=True)


def _session_runs(runner, runs, executions, ssp_runs, ssp_ms, rng, log, parts):
    """The steady part, the short runs and the SSP runs, appended to ``parts``; returns the idle span."""
    probe = np.asarray(runner.run("fp32", CONFIG, launches=1), dtype=float)
    exec_s = max(probe[0, 1] - probe[0, 0], 1e-4)
    steady = np.asarray(runner.run("fp32", CONFIG, launches=max(1, int(3.0 / exec_s))), dtype=float)
    runner.idle(1.5)
    parts.append(("steady", 0, steady))
    for k in range(runs):
        runner.idle(float(rng.uniform(0.06, 0.16)))
        parts.append(("short", k, np.asarray(runner.run("fp32", CONFIG, launches=executions), dtype=float)))
        if (k + 1) % 100 == 0:
            log(f"{k + 1} short runs")
    # the idle the short runs are measured against: right after them, the GPU at the session's
    # temperature (before them it is still cooling from the steady part); its first 0.3 s skipped
    idle0, idle1 = runner.idle(1.2)
    n_ssp = max(executions, int(np.ceil(ssp_ms / 1e3 / exec_s)))
    for k in range(ssp_runs):
        runner.idle(float(rng.uniform(0.06, 0.16)))
        parts.append(("ssp", k, np.asarray(runner.run("fp32", CONFIG, launches=n_ssp), dtype=float)))
    log(f"{ssp_runs} SSP runs of {n_ssp} executions")
    return idle0, idle1


def run_spans(launches: pd.DataFrame, kind: str) -> np.ndarray:
    """``[first start, last end]`` of every run of one kind."""
    g = launches[launches["kind"] == kind].groupby(schema.RUN_INDEX)
    return np.column_stack([g[schema.START_S].min().to_numpy(), g[schema.END_S].max().to_numpy()])


def record(args, log):
    """Run the session on the device; write and return the recording."""
    from powermodels.devices import open_device
    from powermodels.measuring.runner import make_runner

    if args.device == "simulated":
        dev = open_device("simulated", seed=args.seed, preset="hopper")
        runner = make_runner(dev, sample_period_s=5e-4)
    else:
        dev = open_device("nvml")
        runner = make_runner(dev)
    from powermodels.termination import terminate_raises

    # SIGTERM (`timeout`) raises inside: the session stops, and what it recorded is written below
    with runner, terminate_raises():
        launches, t0, t1, idle, stopped = session(runner, args.runs, args.executions, args.ssp_runs,
                                                  args.ssp_ms, args.seed, log)
        trace = runner.trace(t0, t1, run_id="fingrav")
        truth = dev.truth(t0, t1) if args.device == "simulated" else None
        sync = getattr(getattr(runner, "clock", None), "estimate", None)
    name = f"fingrav_{args.device}"
    trace.to_parquet(args.out / f"{name}_trace.parquet")
    launches.to_parquet(args.out / f"{name}_launches.parquet")
    meta = {"gpu": dev.info.name, "device": args.device, "config": CONFIG, "idle_s": list(idle),
            "sync": str(sync) if sync is not None else None, "blocked_setters": len(BLOCKED),
            "command": " ".join(sys.argv), "seed": args.seed, "complete": stopped is None}
    if stopped is not None:
        meta["stopped"] = stopped
    (args.out / f"{name}_meta.json").write_text(json.dumps(meta, indent=1))
    if stopped is not None:
        log(f"recording of the stopped session written to {args.out} ({name}_*); not analysed")
        raise SystemExit(143 if "SIGTERM" in stopped else 129 if "SIGHUP" in stopped else 130)
    return trace, launches, meta, truth, dev


def load(folder: Path):
    """A recording written by :func:`record` (``--from``)."""
    metas = sorted(folder.glob("fingrav_*_meta.json"))
    if not metas:
        raise FileNotFoundError(f"--from {folder}: no fingrav_*_meta.json (a recording of this script)")
    stem = metas[0].name[: -len("_meta.json")]
    missing = [f for f in (f"{stem}_trace.parquet", f"{stem}_launches.parquet") if not (folder / f).exists()]
    if missing:
        raise FileNotFoundError(f"--from {folder}: {missing[0]} is missing")
    return (pd.read_parquet(folder / f"{stem}_trace.parquet"),
            pd.read_parquet(folder / f"{stem}_launches.parquet"), json.loads(metas[0].read_text()))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("nvml", "simulated"), default="nvml")
    p.add_argument("--from", dest="source", type=Path, default=None,
                   help="re-analyse a recording this script wrote (no GPU)")
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--executions", type=int, default=3, help="back-to-back executions per run")
    p.add_argument("--ssp-runs", type=int, default=150, help="long runs for the steady-state power")
    p.add_argument("--ssp-ms", type=float, default=80.0, help="length of a long run (executions back to back)")
    p.add_argument("--skip-ms", type=float, default=15.0,
                   help="readings of a long run count only after this (FinGraV's executions before SSP)")
    p.add_argument("--bin-ms", type=float, default=0.5)
    p.add_argument("--post-ms", type=float, default=5.0,
                   help="profile this long after the run too (the H200 stays above idle after a kernel)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = p.parse_args(argv)
    if args.runs < 10 or args.executions < 1 or args.ssp_runs < 3 or args.ssp_ms <= 0:
        raise ValueError("--runs must be >= 10, --executions >= 1, --ssp-runs >= 3, --ssp-ms > 0")
    args.out.mkdir(parents=True, exist_ok=True)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    wall = time.perf_counter()
    truth = dev = None
    if args.source is not None:
        trace, launches, meta = load(args.source)
    else:
        trace, launches, meta, truth, dev = record(args, log)
    text = analyze(trace, launches, meta, args, log, truth, dev, time.perf_counter() - wall)
    print(text)
    return 0


def analyze(trace, launches, meta, args, log, truth=None, dev=None, wall_s=0.0) -> str:
    """Profile, SSP level and counter energy of one recording; writes the report, csv and png."""
    sim = meta["device"] == "simulated"
    runs = run_spans(launches, "short")
    ssp_runs = run_spans(launches, "ssp")
    st = launches[launches["kind"] == "steady"]
    steady = st[[schema.START_S, schema.END_S]].to_numpy(dtype=float)
    s0 = float(runs[0, 0]) - 0.2
    t1 = float(trace[schema.T_S].max())
    sess = trace[(trace[schema.T_S] >= s0) & (trace[schema.T_S] <= runs[-1, 1] + 0.5)].copy()
    # window and delay of the instant reading, fitted on the short runs (the pulses design)
    short_launches = launches.loc[launches["kind"] == "short", [schema.START_S, schema.END_S]].to_numpy()
    loaded = attach_load(sess.assign(**{schema.RUN_ID: "runs"}), short_launches)
    period = UpdatePeriod(power_column=schema.POWER_INSTANT_W).fit(loaded).update_period_s_
    win = fit_design(loaded, period)
    log(f"update {period * 1e3:.1f} ms, window {win.window_s_ * 1e3:.2f} ms, delay {win.delay_s_ * 1e3:.2f} ms")
    # the idle after the short runs, from the counter: the profile's baseline and the counter's
    idle_w, idle_se = counter_baseline(trace, *meta["idle_s"])
    bin_s = args.bin_ms / 1e3
    prof, base, info = window_profile(sess, runs, window_s=win.window_s_, delay_s=win.delay_s_,
                                      bin_s=bin_s, pre_s=2 * bin_s, post_s=args.post_ms / 1e3,
                                      baseline_w=idle_w)
    _, fitted_base, _ = window_profile(sess, runs, window_s=win.window_s_, delay_s=win.delay_s_,
                                       bin_s=bin_s, pre_s=2 * bin_s, post_s=args.post_ms / 1e3)
    run_s = info["run_s"]
    inside = (prof[schema.TOI_S] > 0) & (prof[schema.TOI_S] < run_s)
    prof_run_w = float(prof.loc[inside, schema.POWER_W].mean())
    steady_w = counter_steady_w(trace, steady[0, 0] + 1.0, steady[-1, 1])
    stt = trace[(trace[schema.T_S] >= steady[0, 0] + 1.0) & (trace[schema.T_S] <= steady[-1, 1])]
    inst_steady_w = float(stt[schema.POWER_INSTANT_W].mean())
    # FinGraV's SSP: readings wholly inside the long runs past their first --skip-ms, the window's
    # interval upper end and a margin of the delay's uncertainty (a fifth of the window) around it
    lo_w, hi_w = win.window_interval_s_
    margin = max(0.2 * win.window_s_, 0.002)
    ssp_reads, ssp = inside_level(trace, ssp_runs, window_s=max(hi_w, win.window_s_), delay_s=win.delay_s_,
                                  after_s=args.skip_ms / 1e3, margin_s=margin)
    # the short runs' energy from the counter, over the idle before them
    ce = counter_run_energy(trace, runs, idle_w, baseline_se_w=idle_se)
    cnt_run_w = idle_w + ce["energy_j"] / run_s
    rows = [("SSP level: readings wholly inside the long runs [W]", ssp["power_w"]),
            ("SSP level: standard error [W] / readings", f"{ssp['se_w']:.2f} / {ssp['n']}"),
            ("counter: steady power, same kernel back to back [W]", steady_w),
            ("(a) SSP level vs counter steady power [%]", 100 * (ssp["power_w"] / steady_w - 1)),
            ("instant reading at steady state vs counter [%] (the sensor's gain)",
             100 * (inst_steady_w / steady_w - 1)),
            ("counter: idle after the short runs [W]", idle_w),
            ("counter: energy of a short run above idle [J]", ce["energy_j"]),
            ("counter: idle + that energy / run length [W] (what lingers after a run included)", cnt_run_w),
            ("(b) that vs counter steady power [%]", 100 * (cnt_run_w / steady_w - 1)),
            ("profile (baseline = the counter's idle): mean over the run [W]", prof_run_w),
            ("(c) profile vs counter steady power [%] (not identified: see the bins' errors)",
             100 * (prof_run_w / steady_w - 1)),
            ("baseline fitted between runs instead [W]", fitted_base)]
    tru = None
    if truth is not None:
        tt = truth[schema.T_S].to_numpy() + 1e-4  # 0.2 ms grid step centres
        pw = truth[schema.REFERENCE_POWER_W].to_numpy()
        k = np.searchsorted(runs[:, 0], tt + 2 * bin_s, side="right") - 1
        toi = tt - runs[np.clip(k, 0, None), 0]
        ok = (k >= 0) & (toi >= -2 * bin_s) & (toi < run_s + args.post_ms / 1e3)
        b = np.floor((toi[ok] + 2 * bin_s) / bin_s).astype(int)
        tru = pd.Series(pw[ok]).groupby(b).mean()
        tp = tru.reindex(range(len(prof))).to_numpy()
        true_run = float(np.mean(tp[inside.to_numpy()]))
        a, z = ssp_runs[0, 0] + args.skip_ms / 1e3, ssp_runs[0, 1]
        rows += [("simulated truth: mean power over a short run [W]", true_run),
                 ("simulated truth: power of a long run past its start [W]",
                  dev.true_energy_j(a, z) / (z - a))]
    name = f"fingrav_{meta['device']}"
    prof.to_csv(args.out / f"{name}.csv", index=False)
    png = _plot(prof, tru, bin_s, run_s, steady_w, idle_w, ssp, cnt_run_w, args.out / f"{name}.png", sim)
    src = f"--from {args.source}" if args.source is not None else f"--device {meta['device']}"
    lines = [f"# FinGraV profile of fp32 ({CONFIG}) on {meta['gpu']}"
             + (" — SIMULATED GPU, not a real measurement" if sim else ""), "",
             f"Command: `python benchmarks/gpu_fingrav.py {src} --runs {args.runs} "
             f"--executions {args.executions} --ssp-runs {args.ssp_runs} --ssp-ms {args.ssp_ms:g} "
             f"--skip-ms {args.skip_ms:g} --bin-ms {args.bin_ms:g} --post-ms {args.post_ms:g} "
             f"--seed {args.seed}`; wall {wall_s:.0f} s."
             + (f" NVML setters blocked: {meta['blocked_setters']}." if not sim else ""), "",
             f"Short runs {info['runs']} ({info['golden']} golden, run length {run_s * 1e3:.2f} ms, "
             f"{args.executions} executions), readings used {info['readings']}, "
             f"RMS residual {info['rms_residual_w']:.2f} W; long runs {len(ssp_runs)} "
             f"({(ssp_runs[0, 1] - ssp_runs[0, 0]) * 1e3:.0f} ms); instant reading: update "
             f"{period * 1e3:.1f} ms, window {win.window_s_ * 1e3:.2f} ms "
             f"[{lo_w * 1e3:.1f}, {hi_w * 1e3:.1f}], delay {win.delay_s_ * 1e3:.2f} ms"
             + (f"; CUDA-event sync bound {meta['sync']}" if meta.get("sync") else "") + ".", "",
             markdown_table(pd.DataFrame(rows, columns=["quantity", "value"]), float_format=".4g"), "",
             "Per-bin profile of the short runs (baseline: the counter's idle; ± one standard error):", "",
             markdown_table(prof.assign(**{schema.TOI_S: prof[schema.TOI_S] * 1e3}).rename(
                 columns={schema.TOI_S: "toi_ms"}), float_format=".4g"), "",
             f"![profile]({png.name})" if png else "", ""]
    text = "\n".join(lines)
    (args.out / f"{name}.md").write_text(text)
    return text


def _plot(prof, tru, bin_s, run_s, steady_w, idle_w, ssp, cnt_run_w, path: Path, sim: bool):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.axvspan(0, run_s * 1e3, color="0.9", zorder=0)
    ax.errorbar(prof[schema.TOI_S] * 1e3, prof[schema.POWER_W], yerr=prof[schema.POWER_SE_W], fmt="o-",
                ms=3, lw=0.8, label="FinGraV profile, short runs (instant reading, ±1 SE)")
    if tru is not None:
        ax.step(prof[schema.TOI_S] * 1e3, tru.reindex(range(len(prof))).to_numpy(), where="mid", ls="--",
                label="simulated truth")
    ax.axhline(steady_w, color="k", lw=0.8, ls=":", label=f"energy counter, back to back ({steady_w:.0f} W)")
    ax.axhline(ssp["power_w"], color="C2", lw=1.0, label=f"SSP level, inside long runs ({ssp['power_w']:.0f} W)")
    ax.axhline(cnt_run_w, color="C1", lw=0.8, ls="-.", label=f"counter: short run energy / length ({cnt_run_w:.0f} W)")
    ax.axhline(idle_w, color="0.5", lw=0.8, ls="--", label=f"counter: idle ({idle_w:.0f} W)")
    ax.set_xlabel("time since the run's first launch [ms]")
    ax.set_ylabel("W")
    ax.set_title(("SIMULATED GPU: " if sim else "") + "fp32 kernel, profile from many runs", fontsize=9)
    ax.legend(fontsize=6.5)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main())
