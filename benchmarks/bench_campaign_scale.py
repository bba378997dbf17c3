"""Campaign cost against its size: peak memory and resume overhead at 1,000 and 10,000 runs.

A user tunes thousands of configurations with ``powermodels campaign`` and
resumes it after an interruption. For each size N (runs of ``sgemm``
configurations on the simulated Hopper GPU, the cheapest protocol by default:
``naive``, one launch per run) three invocations run, each in a fresh process
so its peak RSS (``resource.getrusage``) is its own:

A. the campaign up to N − 2 runs (``max_runs``);
B. a resume that adds one run;
C. a resume that adds the last run and completes the campaign (consolidation).

The *overhead* of B and C is the invocation's time inside ``run_campaign``
minus the measurement time of the run it added (the row's ``wall_s``). The
same invocations run with the campaign code of an earlier commit
(``--before-rev``, default b92591f: one-row parquet run parts, resume and the
final step read every run part and trace, the final step concatenates every
trace) — what a user has without this change.

Usage::

    python benchmarks/bench_campaign_scale.py [--runs 1000 10000] [--before-runs 1000]
        [--protocol naive] [--out benchmarks/results/campaign_scale.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import write_report

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SGEMM_SPACE = 3712  # configurations of sgemm's restricted search space
REPEATS = 4


def spec_for(n: int, protocol: str) -> dict:
    configs = math.ceil(n / REPEATS)
    if configs > SGEMM_SPACE:
        raise ValueError(f"--runs {n}: at most {SGEMM_SPACE * REPEATS} with {REPEATS} repeats of sgemm")
    params = {"continuous": {"duration_s": 0.01}}.get(protocol, {})
    return {"kernels": {"sgemm": {"sample": configs, "seed": 0}}, "protocol": protocol,
            "protocol_params": params, "repeats": REPEATS, "device": "simulated",
            "device_kwargs": {"seed": 0}}


def _campaign_module(impl: str, rev: str):
    if impl == "store":
        import powermodels.campaigns as module

        return module
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:src/powermodels/harness/campaign.py"],
                            check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "campaign_before.py"
    path.write_text(source)
    # inside the package, so its relative imports resolve against today's harness
    spec = importlib.util.spec_from_file_location("powermodels.harness._campaign_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def child(impl: str, rev: str, n: int, protocol: str, out: str, max_runs: int | None) -> dict:
    """One invocation in this process; what it cost (JSON on stdout)."""
    module = _campaign_module(impl, rev)
    import pandas as pd  # noqa: F401 - imported before the baseline RSS is read

    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    before = module.finished_keys(out) if Path(out).exists() else set()
    t0, cpu0 = time.perf_counter(), time.process_time()
    runs = module.run_campaign(spec_for(n, protocol), out, progress=False, max_runs=max_runs)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    added = runs.loc[~runs["run_id"].isin(before)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # where a resume's overhead goes (timed again after the invocation, caches warm)
    t0 = time.perf_counter()
    module.plan(module.CampaignSpec.from_dict(spec_for(n, protocol)))
    plan_s = time.perf_counter() - t0
    store_s = math.nan
    if impl == "store":
        from powermodels.campaigns.store import CampaignStore

        t0 = time.perf_counter()
        store = CampaignStore(out)
        store.finished_keys()
        store.run_table()
        store_s = time.perf_counter() - t0
    return {"wall_s": wall, "cpu_s": cpu, "added": int(len(added)), "measure_s": float(added["wall_s"].sum()),
            "peak_rss_mib": peak, "rss_after_imports_mib": rss0, "finished": int(len(runs)),
            "plan_s": plan_s, "store_read_s": store_s}


def invoke(impl: str, rev: str, n: int, protocol: str, out: Path, max_runs: int | None) -> dict:
    cmd = [sys.executable, __file__, "--child", impl, "--before-rev", rev, "--protocol", protocol,
           "--runs", str(n), "--child-out", str(out)]
    if max_runs is not None:
        cmd += ["--child-max-runs", str(max_runs)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"{impl} N={n}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(impl: str, rev: str, n: int, protocol: str, work: Path) -> list[dict]:
    out = work / f"{impl}-{n}"
    shutil.rmtree(out, ignore_errors=True)
    rows = []
    for step, max_runs in (("A: first N-2 runs", n - 2), ("B: resume +1 run", 1), ("C: resume +1, complete", None)):
        r = invoke(impl, rev, n, protocol, out, max_runs)
        r.update(impl=impl, n=n, step=step, overhead_s=r["wall_s"] - r["measure_s"],
                 overhead_cpu_s=max(0.0, r["cpu_s"] - r["measure_s"]))
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        r["folder_mib"] = size / 2**20
        rows.append(r)
        print(f"{impl:6s} N={n:6d} {step:24s} wall {r['wall_s']:8.2f} s  overhead {r['overhead_s']:7.3f} s  "
              f"peak RSS {r['peak_rss_mib']:7.0f} MiB", file=sys.stderr, flush=True)
    shutil.rmtree(out, ignore_errors=True)
    return rows


def report(rows: list[dict], protocol: str, rev: str) -> str:
    names = {"store": "this commit (append-only store)", "before": f"before ({rev})"}
    lines = [
        "# Campaign cost against its size (simulated Hopper GPU)",
        "",
        f"`python benchmarks/bench_campaign_scale.py` — sgemm configurations × {REPEATS} repeats, "
        f"protocol `{protocol}`, one process per invocation; {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the end. Overhead = "
        "time in `run_campaign` minus the measurement time of the runs it added — also as CPU time of "
        "the process, which other jobs sharing the machine disturb less (step A: writing the "
        "store; B, C: listing, planning, the run table, opening the device, lazy imports); *plan* "
        "(expanding the spec, sampling sgemm's search space) and *finished keys + run table* (the "
        "store's reads) are timed again after the invocation. Peak RSS of the whole process (Python, "
        f"pandas and pyarrow take about {min(r['rss_after_imports_mib'] for r in rows):.0f} MiB before "
        "the campaign starts).",
        "",
        "| code | runs N | invocation | wall (s) | runs added | overhead (s) | overhead, CPU (s) "
        "| of which plan (s) | finished keys + run table (s) | per added run (ms) | peak RSS (MiB) "
        "| folder (MiB) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        per = 1e3 * r["wall_s"] / r["added"] if r["added"] else float("nan")
        store = "—" if math.isnan(r["store_read_s"]) else f"{r['store_read_s']:.3f}"
        # step A: its runs' measurement is wall time under load, not comparable with CPU time
        cpu = f"{r['overhead_cpu_s']:.3f}" if r["added"] == 1 else "—"
        lines.append(f"| {names[r['impl']]} | {r['n']:,} | {r['step']} | {r['wall_s']:.2f} | {r['added']:,} | "
                     f"{r['overhead_s']:.3f} | {cpu} | {r['plan_s']:.3f} | {store} | {per:.1f} | "
                     f"{r['peak_rss_mib']:.0f} | {r['folder_mib']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--before-runs", type=int, nargs="*", default=[1000],
                   help="sizes to run with the earlier code as well (none: skip)")
    p.add_argument("--before-rev", default="b92591f")
    p.add_argument("--protocol", default="naive")
    p.add_argument("--out", type=Path, default=HERE / "results" / "campaign_scale.md")
    p.add_argument("--child", choices=("store", "before"), help=argparse.SUPPRESS)
    p.add_argument("--child-out", help=argparse.SUPPRESS)
    p.add_argument("--child-max-runs", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.before_rev, args.runs[0], args.protocol, args.child_out,
                               args.child_max_runs)))
        return 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="campaign-scale-") as work:
        for n in args.runs:
            rows += measure("store", args.before_rev, n, args.protocol, Path(work))
        for n in args.before_runs:
            rows += measure("before", args.before_rev, n, args.protocol, Path(work))
    return write_report(report(rows, args.protocol, args.before_rev), args.out)


if __name__ == "__main__":
    sys.exit(main())
