"""DSO features on a real GPU: static PTX (Table II) and ncu runtime utilisation (Table I).

Collects, for whatever kernels exist under ``kernels/`` at run time:

* ``ptx_features.csv`` — one row per ``.entry`` of every ``kernels/**/*.cu``
  (registry kernels compiled with their default ``-D`` configuration), by
  ``nvcc -ptx`` or, without nvcc, CuPy's NVRTC; plus the tiled SGEMM source
  of the Wattchmen held-out set. cuBLAS and CuPy-generated kernels have no
  PTX we can read: they get runtime features only.
* ``runtime_features.csv`` — one row per workload: the registry kernels
  (``harness.workloads``), the Wattchmen microbenchmarks and held-out
  workloads (``benchmarks/gpu_wattchmen.py``), profiled by
  ``ncu --clock-control none`` (clocks are left to the GPU: nothing is
  locked or changed), launch-duration-weighted over each workload's kernels.
* ``ncu_raw.csv`` (the ncu output), ``meta.json`` (GPU, driver, versions,
  date, command, what could not be collected).

Usage (the lead runs it on the lent GPU)::

    PYTHONPATH=src python3 benchmarks/gpu_dvfs_features.py collect --out $OUT
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from powermodels import schema  # noqa: E402
from powermodels.harness import profiling  # noqa: E402

MARKER = r'extern "C" __global__ void pm_dvfs_marker(int* p) { if (p[0] == 12345) p[1] = 1; }'
DURATION = "gpu__time_duration.sum"
REPEATS = 2


# --------------------------------------------------------------------------- static

def _registry_macros() -> dict[str, list[str]]:
    """Default -D options per source file of the kernel registry."""
    from powermodels.harness import workloads

    out = {}
    for spec in workloads.KERNELS.values():
        cfg = workloads.validate_config(spec.name, spec.default or {})
        out.setdefault(spec.source, [f"-D{k}={v}" for k, v in cfg.items()])
    return out


def static_features(problems: list[str]) -> pd.DataFrame:
    macros = _registry_macros()
    rows = []
    sources = sorted((REPO / "kernels").rglob("*.cu"))
    extra = {}
    try:
        import gpu_wattchmen

        extra["wattchmen_tiled_sgemm.cu"] = gpu_wattchmen.TILED_SGEMM
    except Exception as err:  # the held-out set is optional
        problems.append(f"gpu_wattchmen import: {err!r}")
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "pm_dvfs_ptx"
    tmp.mkdir(parents=True, exist_ok=True)
    for name, text in extra.items():
        path = tmp / name
        path.write_text(text)
        sources.append(path)
    for src in sources:
        opts = ("-std=c++17", f"-I{src.parent}", *macros.get(src.name, []))
        try:
            ptx = profiling.compile_ptx(src, arch="sm_90", options=opts)
            for entry, text in profiling.split_ptx_entries(ptx).items():
                row = {"source": str(src.relative_to(REPO)) if src.is_relative_to(REPO) else src.name,
                       schema.KERNEL: entry}
                row.update(profiling.ptx_features(text).to_dict())
                rows.append(row)
        except Exception as err:
            problems.append(f"PTX of {src.name}: {str(err)[:300]}")
    return pd.DataFrame(rows).fillna(0.0)


# --------------------------------------------------------------------------- runtime

def _workloads():
    """name → zero-argument step, for every workload we can launch here."""
    import cupy as cp

    from powermodels.harness import workloads

    steps, problems = {}, []
    for name in workloads.KERNELS:
        if name == "square_wave":
            continue
        try:
            k = workloads.prepare(name)
            steps[f"registry:{name}"] = k.launch
        except Exception as err:
            problems.append(f"registry {name}: {err!r}")
    try:
        import gpu_wattchmen

        from powermodels.harness.microbench import MICROBENCHMARKS

        gpu = gpu_wattchmen.Gpu(Path(os.environ.get("TMPDIR", "/tmp")) / "pm_dvfs_cubins")
        for name in MICROBENCHMARKS:
            steps[f"microbench:{name}"] = gpu.launcher(name, 16)
        for name, step in gpu_wattchmen.workloads(gpu).items():
            steps[f"heldout:{name}"] = step
    except Exception as err:
        problems.append(f"Wattchmen workloads: {err!r}")
    cp.cuda.Device().synchronize()
    return steps, problems


def cmd_launch(args) -> int:
    """Run under ncu: a marker kernel (grid = index + 1) before each workload."""
    import cupy as cp

    steps, problems = _workloads()
    marker = cp.RawKernel(MARKER, "pm_dvfs_marker")
    buf = cp.zeros(4, dtype=cp.int32)
    names = list(steps)
    Path(args.plan).write_text(json.dumps({"workloads": names, "problems": problems}))
    for i, name in enumerate(names):
        marker((i + 1,), (1,), (buf,))
        try:
            for _ in range(REPEATS):
                steps[name]()
            cp.cuda.Device().synchronize()
        except Exception as err:
            problems.append(f"launch {name}: {err!r}")
    Path(args.plan).write_text(json.dumps({"workloads": names, "problems": problems}))
    return 0


def runtime_table(csv_text: str, names: list[str]) -> pd.DataFrame:
    """Duration-weighted Table I features per workload, segmented by the marker launches."""
    rows, current, acc = [], None, []

    def flush():
        if current is None or not acc:
            return
        feats = pd.DataFrame([a[0] for a in acc])
        w = np.array([a[1] for a in acc], dtype=float)
        w = np.where(np.isfinite(w) & (w > 0), w, 1.0)
        row = {schema.WORKLOAD: names[current], "kernels": len(acc),
               "kernel_names": ";".join(sorted({a[2] for a in acc}))[:500]}
        for col in schema.RUNTIME_FEATURES:
            v = feats[col].to_numpy(dtype=float)
            ok = np.isfinite(v)
            row[col] = float(np.sum(v[ok] * w[ok]) / np.sum(w[ok])) if ok.any() else np.nan
        rows.append(row)

    for launch in profiling.ncu_launches(csv_text):
        if launch["kernel"].startswith("pm_dvfs_marker"):
            flush()
            grid = launch["grid"].strip("() ").split(",")[0]
            current, acc = int(grid) - 1, []
            continue
        acc.append((profiling.runtime_features(launch["metrics"]),
                    launch["metrics"].get(DURATION, np.nan), launch["kernel"]))
    flush()
    return pd.DataFrame(rows)


def cmd_collect(args) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    meta = {"date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv), "nvcc": shutil.which("nvcc"), "ncu": shutil.which(args.ncu)}
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(h)
        meta["gpu"] = name.decode() if isinstance(name, bytes) else name
        drv = pynvml.nvmlSystemGetDriverVersion()
        meta["driver"] = drv.decode() if isinstance(drv, bytes) else drv
    except Exception as err:
        problems.append(f"NVML: {err!r}")

    ptx = static_features(problems)
    ptx.to_csv(out / "ptx_features.csv", index=False)
    print(f"PTX features: {len(ptx)} kernels from {ptx['source'].nunique() if len(ptx) else 0} sources")

    plan = out / "plan.json"
    metrics = sorted({m for c in profiling.NCU_METRICS.values() for m in c} | {DURATION})
    available = _available_metrics(args.ncu, problems)
    if available:
        metrics = [m for m in metrics if m.split(".")[0] in available]
    cmd = profiling.ncu_command([sys.executable, str(Path(__file__).resolve()), "launch",
                                 "--plan", str(plan)], metrics=metrics, ncu=args.ncu)
    meta["ncu_command"] = " ".join(cmd)
    print("running:", meta["ncu_command"][:300], "...")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    (out / "ncu_raw.csv").write_text(proc.stdout)
    if proc.returncode != 0:
        problems.append(f"ncu exit {proc.returncode}: {proc.stderr[-2000:]}")
    try:
        planned = json.loads(plan.read_text())
        problems += planned["problems"]
        rt = runtime_table(proc.stdout, planned["workloads"])
        rt.to_csv(out / "runtime_features.csv", index=False)
        print(rt.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    except Exception:
        problems.append("runtime table: " + traceback.format_exc()[-1500:])
    meta["problems"] = problems
    meta["metrics"] = metrics
    (out / "meta.json").write_text(json.dumps(meta, indent=2))
    print(f"{len(problems)} problem(s); see meta.json")
    return 0


def _available_metrics(ncu: str, problems: list[str]) -> set[str]:
    """Base metric names this GPU's ncu knows (``ncu --query-metrics``); empty if unknown."""
    try:
        proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    except Exception as err:
        problems.append(f"ncu --query-metrics: {err!r}")
        return set()
    names = {ln.split()[0] for ln in proc.stdout.splitlines() if ln and "__" in ln.split()[0]}
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="both feature sets into --out")
    c.add_argument("--out", required=True)
    c.add_argument("--ncu", default="ncu")
    c.add_argument("--timeout", type=int, default=480)
    la = sub.add_parser("launch", help="(internal, run under ncu)")
    la.add_argument("--plan", required=True)
    args = ap.parse_args(argv)
    return cmd_collect(args) if args.cmd == "collect" else cmd_launch(args)


if __name__ == "__main__":
    sys.exit(main())
