"""FinGraV on a real kernel: a fine-grain power profile from many short runs (issue 15 item 5).

One call on the lent GPU (read-only: every NVML setter raises):

    PYTHONPATH=src timeout 470 python3 benchmarks/gpu_fingrav.py --device nvml --out $OUT

Here, on the simulated GPU (clearly a simulation; the truth is known):

    python benchmarks/gpu_fingrav.py --device simulated

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
Writes ``fingrav_<device>.md``, ``.csv``, ``.png`` (``--out``, default
``benchmarks/results``).
"""

from __future__ import annotations

import sys

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    from _readonly_nvml import forbid_nvml_setters

    BLOCKED = forbid_nvml_setters()
else:
    BLOCKED = []

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.reporting import markdown_table
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


def counter_energy_j(trace: pd.DataFrame, t0: float, t1: float) -> tuple[float, float, float]:
    """Counter difference between the last update before ``t0`` and the last before ``t1``, and its times."""
    g = trace[[schema.T_S, schema.ENERGY_COUNTER_J]].dropna()
    t, e = g[schema.T_S].to_numpy(), g[schema.ENERGY_COUNTER_J].to_numpy()
    ch = np.r_[0, np.flatnonzero(np.diff(e) > 0) + 1]
    a = ch[t[ch] <= t0][-1]
    b = ch[t[ch] <= t1][-1]
    return float(e[b] - e[a]), float(t[a]), float(t[b])


def session(runner, runs: int, executions: int, seed: int, log):
    """Record: idle, 3 s steady, idle, then the runs at random gaps. Returns times and launches."""
    rng = np.random.default_rng(seed)
    t_start, _ = runner.idle(1.5)
    steady = np.asarray(runner.run("fp32", CONFIG, launches=1), dtype=float)
    n = max(1, int(3.0 / max(steady[0, 1] - steady[0, 0], 1e-4)))
    steady = np.asarray(runner.run("fp32", CONFIG, launches=n), dtype=float)
    runner.idle(1.5)
    s0 = runner.now()
    ivs = []
    for k in range(runs):
        runner.idle(float(rng.uniform(0.06, 0.16)))
        ivs.append(np.asarray(runner.run("fp32", CONFIG, launches=executions), dtype=float))
        if (k + 1) % 100 == 0:
            log(f"{k + 1} runs")
    _, t_end = runner.idle(0.5)
    return t_start, steady, s0, ivs, t_end


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", choices=("nvml", "simulated"), default="nvml")
    p.add_argument("--runs", type=int, default=1000)
    p.add_argument("--executions", type=int, default=3, help="back-to-back executions per run")
    p.add_argument("--bin-ms", type=float, default=0.5)
    p.add_argument("--post-ms", type=float, default=5.0,
                   help="profile this long after the run too (the H200 stays above idle after a kernel)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = p.parse_args(argv)
    if args.runs < 10 or args.executions < 1:
        raise ValueError("--runs must be >= 10 and --executions >= 1")
    args.out.mkdir(parents=True, exist_ok=True)
    from powermodels.devices import open_device
    from powermodels.harness.runner import make_runner

    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    wall = time.perf_counter()
    if args.device == "simulated":
        dev = open_device("simulated", seed=args.seed, preset="hopper")
        runner = make_runner(dev, sample_period_s=5e-4)
    else:
        dev = open_device("nvml")
        runner = make_runner(dev)
    with runner:
        t0, steady, s0, ivs, t1 = session(runner, args.runs, args.executions, args.seed, log)
        trace = runner.trace(t0, t1, run_id="fingrav")
        truth = dev.truth(s0, t1) if args.device == "simulated" else None
        sync = getattr(getattr(runner, "clock", None), "estimate", None)
    runs = np.array([[iv[0, 0], iv[-1, 1]] for iv in ivs])
    launches = np.vstack(ivs)
    sess = trace[trace[schema.T_S] >= s0].copy()
    # window and delay of the instant reading, fitted on the runs themselves (the pulses design)
    loaded = attach_load(sess.assign(**{schema.RUN_ID: "runs"}), launches)
    period = UpdatePeriod(power_column=schema.POWER_INSTANT_W).fit(loaded).update_period_s_
    win = fit_design(loaded, period)
    log(f"update {period * 1e3:.1f} ms, window {win.window_s_ * 1e3:.2f} ms, delay {win.delay_s_ * 1e3:.2f} ms")
    bin_s = args.bin_ms / 1e3
    prof, base, info = window_profile(sess, runs, window_s=win.window_s_, delay_s=win.delay_s_,
                                      bin_s=bin_s, pre_s=2 * bin_s, post_s=args.post_ms / 1e3)
    run_s = info["run_s"]
    inside = (prof[schema.TOI_S] > 0) & (prof[schema.TOI_S] < run_s)
    prof_run_w = float(prof.loc[inside, schema.POWER_W].mean())
    # (a) against the counter's steady power of the same kernel back to back
    steady_w = counter_steady_w(trace, steady[0, 0] + 1.0, steady[-1, 1])
    # the instant reading over the same steady second(s): its own gain against the counter,
    # so that (a) splits into the sensor's gain and the method's error
    st = trace[(trace[schema.T_S] >= steady[0, 0] + 1.0) & (trace[schema.T_S] <= steady[-1, 1])]
    inst_steady_w = float(st[schema.POWER_INSTANT_W].mean())
    # (b) session energy: baseline over the session + each run's excess (profile) vs the counter
    e_cnt, ta, tb = counter_energy_j(trace, s0 + 0.3, t1)
    excess_j = float(((prof[schema.POWER_W] - base) * bin_s).sum())
    in_ab = ((runs[:, 0] >= ta) & (runs[:, 1] <= tb)).sum()
    e_prof = base * (tb - ta) + in_ab * excess_j
    rows = [("profile: mean power over the run [W]", prof_run_w),
            ("counter: steady power, same kernel back to back [W]", steady_w),
            ("(a) profile vs counter steady power [%]", 100 * (prof_run_w / steady_w - 1)),
            ("instant reading at steady state vs counter [%] (the sensor's gain)",
             100 * (inst_steady_w / steady_w - 1)),
            ("profile vs instant reading at steady state [%] (the method's error)",
             100 * (prof_run_w / inst_steady_w - 1)),
            ("profile: baseline between runs [W]", base),
            ("session energy from the profile [J]", e_prof),
            ("session energy from the counter [J]", e_cnt),
            ("(b) profile vs counter session energy [%]", 100 * (e_prof / e_cnt - 1))]
    tru = None
    if truth is not None:
        # the true power binned by TOI over the golden runs, as the profile is
        tt = truth[schema.T_S].to_numpy() + 1e-4  # 0.2 ms grid step centres
        pw = truth[schema.REFERENCE_POWER_W].to_numpy()
        k = np.searchsorted(runs[:, 0], tt + 2 * bin_s, side="right") - 1
        toi = tt - runs[np.clip(k, 0, None), 0]
        ok = (k >= 0) & (toi >= -2 * bin_s) & (toi < run_s + args.post_ms / 1e3)
        b = np.floor((toi[ok] + 2 * bin_s) / bin_s).astype(int)
        tru = pd.Series(pw[ok]).groupby(b).mean()
        tp = tru.reindex(range(len(prof))).to_numpy()
        err = prof[schema.POWER_W].to_numpy() - tp
        true_run = float(np.mean(tp[inside.to_numpy()]))
        rows += [("simulated truth: mean power over the run [W]", true_run),
                 ("profile vs truth, mean over the run [%]", 100 * (prof_run_w / true_run - 1)),
                 ("profile vs truth, RMS over bins [W]", float(np.sqrt(np.nanmean(err ** 2)))),
                 ("counter steady power vs truth [%]",
                  100 * (steady_w / float(dev.true_energy_j(steady[0, 0] + 1.0, steady[-1, 1])
                                          / (steady[-1, 1] - steady[0, 0] - 1.0)) - 1))]
    sim = args.device == "simulated"
    name = f"fingrav_{args.device}"
    prof.to_csv(args.out / f"{name}.csv", index=False)
    png = _plot(prof, tru, bin_s, run_s, steady_w, base, args.out / f"{name}.png", sim)
    info_d = dev.info
    lines = [f"# FinGraV profile of fp32 ({CONFIG}) on {info_d.name}"
             + (" — SIMULATED GPU, not a real measurement" if sim else ""), "",
             f"Command: `python benchmarks/gpu_fingrav.py --device {args.device} --runs {args.runs} "
             f"--executions {args.executions} --bin-ms {args.bin_ms:g} --post-ms {args.post_ms:g} "
             f"--seed {args.seed}`; "
             f"wall {time.perf_counter() - wall:.0f} s."
             + (f" NVML setters blocked: {len(BLOCKED)}." if not sim else ""), "",
             f"Runs {info['runs']} ({info['golden']} golden, run length {run_s * 1e3:.2f} ms, "
             f"{args.executions} executions), readings used {info['readings']}, "
             f"RMS residual {info['rms_residual_w']:.2f} W; instant reading: update "
             f"{period * 1e3:.1f} ms, window {win.window_s_ * 1e3:.2f} ms "
             f"[{win.window_interval_s_[0] * 1e3:.1f}, {win.window_interval_s_[1] * 1e3:.1f}], "
             f"delay {win.delay_s_ * 1e3:.2f} ms"
             + (f"; CUDA-event sync bound {sync}" if sync is not None else "") + ".", "",
             markdown_table(pd.DataFrame(rows, columns=["quantity", "value"]).round(3)), "",
             f"![profile]({png.name})" if png else "", ""]
    text = "\n".join(lines)
    (args.out / f"{name}.md").write_text(text)
    print(text)
    return 0


def _plot(prof, tru, bin_s, run_s, steady_w, base, path: Path, sim: bool):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ax.step(prof[schema.TOI_S] * 1e3, prof[schema.POWER_W], where="mid", label="FinGraV profile (instant reading)")
    if tru is not None:
        ax.step(prof[schema.TOI_S] * 1e3, tru.reindex(range(len(prof))).to_numpy(), where="mid", ls="--",
                label="simulated truth")
    ax.axhline(steady_w, color="k", lw=0.8, ls=":", label="energy counter, back to back")
    ax.axvspan(0, run_s * 1e3, color="0.9", zorder=0)
    ax.set_xlabel("time since the run's first launch [ms]")
    ax.set_ylabel("W")
    ax.set_title(("SIMULATED GPU: " if sim else "") + "fp32 kernel, profile from many runs", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main())
