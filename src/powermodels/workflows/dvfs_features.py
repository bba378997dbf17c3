"""DVFS predictor features of any workload: static PTX (DSO Table II) and ncu runtime (Table I).

:func:`collect_dvfs_features` writes, for the workloads asked for:

* ``ptx_features.csv`` — one row per ``.entry`` of every CUDA source given
  (default: every ``kernels/**/*.cu``, registry kernels compiled with their
  default ``-D`` configuration, plus the tiled SGEMM of the validation set),
  by ``nvcc -ptx`` or, without nvcc, CuPy's NVRTC. Library kernels (cuBLAS,
  CuPy-generated) have no PTX we can read: they get runtime features only.
* ``runtime_features.csv`` — one row per workload, profiled by
  ``ncu --clock-control none`` (clocks are left to the GPU: nothing is locked
  or changed), launch-duration-weighted over the workload's kernels
  (:func:`runtime_table`).
* ``ncu_raw.csv``, ``plan.json`` and ``meta.json`` (GPU, driver, date,
  command, what could not be collected).

Workload specs: ``"registry"`` (every registry kernel but ``square_wave``),
``"microbench"`` (the Wattchmen microbenchmarks at 16 iterations),
``"heldout"`` / ``"fresh"`` (the validation sets of
:mod:`powermodels.microbench.validation_workloads`), or any
:func:`~powermodels.workloads.as_workload` spec (a registry name,
``"module:function"``, ``"file.py:name"``: the user's own code).
The runtime pass runs this module under ncu (``python -m
powermodels.workflows.dvfs_features --plan PLAN``), each workload after a
marker kernel whose grid is its index + 1.
"""

from __future__ import annotations

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

from .. import schema
from ..microbench import profiling

__all__ = ["DEFAULT_WORKLOADS", "collect_dvfs_features", "runtime_table", "static_features"]

MARKER = r'extern "C" __global__ void pm_dvfs_marker(int* p) { if (p[0] == 12345) p[1] = 1; }'
DURATION = "gpu__time_duration.sum"
#: Launches of each workload under the profiler.
REPEATS = 2
#: What ``benchmarks/gpu_dvfs_features.py`` collects (the H200 dataset's set).
DEFAULT_WORKLOADS = ("registry", "microbench", "heldout")


# --------------------------------------------------------------------------- static

def _registry_macros() -> dict[str, list[str]]:
    """Default -D options per source file of the kernel registry."""
    from .. import workloads

    out = {}
    for spec in workloads.KERNELS.values():
        cfg = workloads.validate_config(spec.name, spec.default or {})
        out.setdefault(spec.source, [f"-D{k}={v}" for k, v in cfg.items()])
    return out


def static_features(sources=None, problems: list[str] | None = None, *, arch: str = "sm_90",
                    root: Path | None = None) -> pd.DataFrame:
    """PTX instruction-mix features (DSO Table II), one row per kernel entry.

    Parameters
    ----------
    sources : list of path, optional
        CUDA sources (default: every ``kernels/**/*.cu`` of the checkout and
        the validation set's tiled SGEMM).
    problems : list of str, optional
        Sources that could not be compiled are appended here (and skipped).
    arch : str, default="sm_90"
        PTX target.
    root : path, optional
        Paths are written relative to it (default: the repository root).
    """
    from ..microbench.catalog import kernel_dir

    problems = [] if problems is None else problems
    root = root or kernel_dir().parents[1]
    if sources is None:
        from ..microbench.validation_workloads import TILED_SGEMM

        sources = sorted((root / "kernels").rglob("*.cu"))
        tmp = Path(os.environ.get("TMPDIR", "/tmp")) / "pm_dvfs_ptx"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "wattchmen_tiled_sgemm.cu").write_text(TILED_SGEMM)
        sources.append(tmp / "wattchmen_tiled_sgemm.cu")
    macros = _registry_macros()
    rows = []
    for src in map(Path, sources):
        opts = ("-std=c++17", f"-I{src.parent}", *macros.get(src.name, []))
        try:
            ptx = profiling.compile_ptx(src, arch=arch, options=opts)
            for entry, text in profiling.split_ptx_entries(ptx).items():
                row = {"source": str(src.relative_to(root)) if src.is_relative_to(root) else src.name,
                       schema.KERNEL: entry}
                row.update(profiling.ptx_features(text).to_dict())
                rows.append(row)
        except Exception as err:  # noqa: BLE001 - one source must not lose the others
            problems.append(f"PTX of {src.name}: {str(err)[:300]}")
    return pd.DataFrame(rows).fillna(0.0)


# --------------------------------------------------------------------------- runtime

def _steps(specs) -> tuple[dict, list[str]]:
    """name → zero-argument step for every workload of ``specs`` that can be built here."""
    import cupy as cp

    from .. import workloads
    from ..microbench.catalog import MICROBENCHMARKS
    from ..microbench.gpu import MicrobenchGpu
    from ..microbench.validation_workloads import WORKLOAD_SETS, build_workloads

    steps, problems = {}, []
    for spec in specs:
        try:
            if spec == "registry":
                for name in workloads.KERNELS:
                    if name != "square_wave":
                        steps[f"registry:{name}"] = workloads.prepare(name).launch
            elif spec == "microbench":
                gpu = MicrobenchGpu(Path(os.environ.get("TMPDIR", "/tmp")) / "pm_dvfs_cubins")
                for name in MICROBENCHMARKS:
                    steps[f"microbench:{name}"] = gpu.launcher(name, 16)
            elif spec in WORKLOAD_SETS:
                steps.update({f"{spec}:{k}": v for k, v in WORKLOAD_SETS[spec](cp).items()})
            else:
                built, bad = build_workloads(cp, [spec])
                steps.update(built)
                problems += bad
        except Exception as err:  # noqa: BLE001 - a missing piece must not lose the others
            problems.append(f"{spec}: {err!r}")
    cp.cuda.Device().synchronize()
    return steps, problems


def _launch_child(plan_path: str) -> int:
    """Run under ncu: a marker kernel (grid = index + 1) before each workload."""
    import cupy as cp

    plan = json.loads(Path(plan_path).read_text())
    steps, problems = _steps(plan["specs"])
    marker = cp.RawKernel(MARKER, "pm_dvfs_marker")
    buf = cp.zeros(4, dtype=cp.int32)
    names = list(steps)
    Path(plan_path).write_text(json.dumps({**plan, "workloads": names, "problems": problems}))
    for i, name in enumerate(names):
        marker((i + 1,), (1,), (buf,))
        try:
            for _ in range(plan.get("repeats", REPEATS)):
                steps[name]()
            cp.cuda.Device().synchronize()
        except Exception as err:  # noqa: BLE001
            problems.append(f"launch {name}: {err!r}")
    Path(plan_path).write_text(json.dumps({**plan, "workloads": names, "problems": problems}))
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


def _available_metrics(ncu: str, problems: list[str]) -> set[str]:
    """Base metric names this GPU's ncu knows (``ncu --query-metrics``); empty if unknown."""
    try:
        proc = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    except Exception as err:  # noqa: BLE001
        problems.append(f"ncu --query-metrics: {err!r}")
        return set()
    return {ln.split()[0] for ln in proc.stdout.splitlines() if ln and "__" in ln.split()[0]}


def _gpu_meta(problems: list[str]) -> dict:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        name, drv = pynvml.nvmlDeviceGetName(h), pynvml.nvmlSystemGetDriverVersion()
        return {"gpu": name.decode() if isinstance(name, bytes) else name,
                "driver": drv.decode() if isinstance(drv, bytes) else drv}
    except Exception as err:  # noqa: BLE001 - metadata only
        problems.append(f"NVML: {err!r}")
        return {}


GROUPS = ("registry", "microbench", "heldout", "fresh")


def check_workload_specs(specs) -> list[str]:
    """``specs`` if each is a group, a registry kernel or ``module:function``/``file.py:name``.

    Checked before anything runs: an unknown name used to surface only as
    the ncu pass's failure (or a missing ``ncu``), never naming the spec.
    """
    from ..workloads.registry import KERNELS

    specs = list(specs)
    if not specs:
        raise ValueError("--workloads: give at least one workload spec")
    for spec in specs:
        if spec not in GROUPS and spec not in KERNELS and ":" not in spec:
            raise ValueError(f"--workloads: {spec!r} is not a workload spec ({', '.join(GROUPS)}, a "
                             f"registry kernel of {sorted(KERNELS)}, module:function or file.py:name)")
    return specs


def collect_dvfs_features(out, workloads=DEFAULT_WORKLOADS, *, sources=None, ncu: str = "ncu",
                          timeout: float = 480, runtime: bool = True, say=print) -> dict:
    """Both feature sets of ``workloads`` into ``out`` (module docstring); returns ``meta``.

    Parameters
    ----------
    out : path
        Output folder (created).
    workloads : sequence of str
        Workload specs (module docstring).
    sources : list of path, optional
        CUDA sources for the PTX features (default: the checkout's kernels).
    ncu : str, default="ncu"
    timeout : float, default=480
        Seconds the ncu pass may take.
    runtime : bool, default=True
        False: PTX features only (no GPU needed when nvcc is installed).
    """
    workloads = check_workload_specs(workloads) if runtime else list(workloads)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    meta = {"date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv), "nvcc": shutil.which("nvcc"), "ncu": shutil.which(ncu),
            "workloads": list(workloads)}
    ptx = static_features(sources, problems)
    ptx.to_csv(out / "ptx_features.csv", index=False)
    say(f"PTX features: {len(ptx)} kernels from {ptx['source'].nunique() if len(ptx) else 0} sources")
    if runtime:
        meta.update(_gpu_meta(problems))
        plan = out / "plan.json"
        plan.write_text(json.dumps({"specs": list(workloads), "repeats": REPEATS}))
        metrics = sorted({m for c in profiling.NCU_METRICS.values() for m in c} | {DURATION})
        available = _available_metrics(ncu, problems)
        if available:
            metrics = [m for m in metrics if m.split(".")[0] in available]
        cmd = profiling.ncu_command([sys.executable, "-m", "powermodels.workflows.dvfs_features",
                                     "--plan", str(plan)], metrics=metrics, ncu=ncu)
        meta["ncu_command"], meta["metrics"] = " ".join(cmd), metrics
        say("running: " + meta["ncu_command"][:300] + " ...")
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        (out / "ncu_raw.csv").write_text(proc.stdout)
        if proc.returncode != 0:
            problems.append(f"ncu exit {proc.returncode}: {proc.stderr[-2000:]}")
        try:
            planned = json.loads(plan.read_text())
            problems += planned.get("problems", [])
            rt = runtime_table(proc.stdout, planned["workloads"])
            rt.to_csv(out / "runtime_features.csv", index=False)
            say(rt.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        except Exception:  # noqa: BLE001 - keep the raw output and say why
            problems.append("runtime table: " + traceback.format_exc()[-1500:])
    meta["problems"] = problems
    meta["ptx_kernels"] = int(len(ptx))
    from ..files import write_json

    write_json(out / "meta.json", meta)
    say(f"{len(problems)} problem(s); see meta.json")
    return meta


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="(internal) launches profiled by ncu")
    ap.add_argument("--plan", required=True)
    sys.exit(_launch_child(ap.parse_args().plan))
