"""Issue 19's done-means on one GPU, in one call: the same kernel, the same energy, cold, warm or hot.

Six workloads, each measured with the default protocol (``powermodels.measure``,
nothing changed on the GPU):

==================  ==========================================================
cupy_fp32_gemm      CuPy float32 matmul 4096² (a callable; as in ``gpu_user_workloads``)
cupy_triad          CuPy ``a = b + s·c`` over 3 × 64 Mi float32 (memory bound)
torch_bf16_gemm     PyTorch bf16 matmul 8192² (holds the 700 W cap on an H100;
                    as in ``gpu_user_workloads``)
cupy_small          CuPy elementwise add over 4 Mi float32 (≈ 16 µs); besides, the same
                    call over 1 Mi (≈ 6 µs, ``cupy_tiny``) once graph-batched and once
                    ``launch="as_called"`` (the launch-bound row of issue 19)
matmul_tiled_cu     ``kernels/examples/matmul_tiled.cu`` at its default configuration
torch_softmax       PyTorch float32 softmax over 16384 × 4096 (a PyTorch callable)
==================  ==========================================================

Per workload, in this order:

1. **cold** — after ``--idle-s`` (30 s) of idle GPU, one measurement. It is the
   first of this workload on this board, so it learns α (≤ 10 s warm-up, cached
   in a private state folder: every run starts without a cache);
2. **warm** — one measurement right after (α now known: ~1 s);
3. the **12 s reference** (``reference_energy``: back to back, counter from 2 s),
   with its temperatures;
4. **hot** — one measurement after 20+ s of the workload's own load (learning,
   warm and the reference).

Every row is normalised to the same ``T_ref`` (the cold row's: the middle of
the range α was learned over). Targets: ``energy_at_ref_j`` of cold / warm /
hot within 1 % of each other and within 2 % of the reference at ``T_ref``;
≤ 1.5 s wall per measurement once α is known.

Time on the GPU: per workload ~30 s idle + ~27 s of load ≈ 1 min; with start-up
≈ 6.5 min for the six. ``--max-s`` (450) stops before a workload that would
not finish in time (the rows so far are kept). Read-only: every NVML setter
is replaced by a function that raises before anything is opened.

Files in ``--out``: ``thermal_rows.csv`` (every measurement, with the window's ``start_s`` /
``end_s`` on the trace's clock), ``traces.parquet`` (each workload's NVML trace from 2 s before
its load to its last row, rows where a reading changed; ``run_id`` = workload), ``summary.csv``,
``report.md``, ``thermal_<device>.png`` (energy vs temperature, raw and
normalised), ``environment.json``, ``alpha_cache.json`` (the learned α as cached, with
how many warm-up spans breaks in the load cost).

Usage::

    PYTHONPATH=src python3 benchmarks/gpu_thermal.py --out $OUT
    PYTHONPATH=src python3 benchmarks/gpu_thermal.py --rescore datasets/h100-2026-11-25-session4/thermal \\
        datasets/h100-2026-11-25-session4/thermal_repeat --out docs/img     # earlier runs, current α method
    PYTHONPATH=src python3 benchmarks/gpu_thermal.py --device simulated --out /tmp/thermal_sim
    PYTHONPATH=src python3 benchmarks/gpu_thermal.py --plot-runs datasets/h100-2026-11-25-session5/thermal_0b4f1a7f \
        datasets/h100-2026-11-25-session5/thermal_2db598e1 datasets/h200-2026-11-27/thermal_0a8f0427 \
        --out docs/img   # thermal_boards.png
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd
from _readonly_nvml import forbid_nvml_setters
from powermodels.reporting import markdown_table

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
EXAMPLES = REPO / "kernels" / "examples"
SPREAD_PCT, REFERENCE_PCT, WALL_S = 1.0, 2.0, 1.5


# -- the workloads ------------------------------------------------------------------------


def _callable(name, fn, setup, twin, simulated):
    from powermodels.workloads import CallableWorkload

    return CallableWorkload(fn, setup=None if simulated else setup, simulated=twin, name=name)


def cupy_fp32_gemm(simulated):
    from gpu_user_workloads import cupy_matmul_workload

    return cupy_matmul_workload(simulated)


def cupy_triad(simulated):
    from powermodels.workloads import SimulatedTwin

    n = 64 * 2**20

    def setup():
        import cupy as cp

        return {"a": cp.empty(n, dtype=cp.float32), "b": cp.ones(n, dtype=cp.float32),
                "c": cp.ones(n, dtype=cp.float32)}

    def cupy_triad(a, b, c):
        import cupy as cp

        cp.add(b, 2.0 * c, out=a)

    # 3 arrays (+ the temporary 2·c: 2 more passes) of 256 MiB at ~3 TB/s
    return _callable("cupy_triad", cupy_triad, setup,
                     SimulatedTwin(time_s=5 * 4 * n / 3.0e12, activity=0.2, mem_activity=0.95), simulated)


def torch_bf16_gemm(simulated):
    from gpu_user_workloads import torch_matmul_workload

    return torch_matmul_workload(simulated)


def _cupy_add(name, n, time_s, simulated):
    from powermodels.workloads import SimulatedTwin

    def setup():
        import cupy as cp

        return {"a": cp.ones(n, dtype=cp.float32), "b": cp.ones(n, dtype=cp.float32),
                "out": cp.empty(n, dtype=cp.float32)}

    def cupy_add(a, b, out):
        import cupy as cp

        cp.add(a, b, out=out)

    return _callable(name, cupy_add, setup, SimulatedTwin(time_s=time_s, activity=0.3, mem_activity=0.6), simulated)


def cupy_small(simulated):
    """4 Mi float32 ``a + b`` (~16 µs on an H100: 48 MB at ~3 TB/s); 12 s of it stays under the
    harness's bound of 1,000,000 launches per measurement."""
    return _cupy_add("cupy_small", 4 * 2**20, 16e-6, simulated)


def cupy_tiny(simulated):
    """1 Mi float32 ``a + b`` (~6 µs: issue 19's launch-bound call), measured graph-batched and as called."""
    return _cupy_add("cupy_tiny", 2**20, 6e-6, simulated)


def matmul_tiled_cu(simulated):
    from powermodels.campaigns import load_spec
    from powermodels.workloads.spec import workload_from_entry

    entry = dict(load_spec(EXAMPLES / "matmul_campaign.toml").workloads[0])
    return workload_from_entry(entry, EXAMPLES)


def torch_softmax(simulated):
    from powermodels.workloads import SimulatedTwin

    shape = (16384, 4096)

    def setup():
        import torch

        return {"x": torch.randn(shape, device="cuda", dtype=torch.float32),
                "out": torch.empty(shape, device="cuda", dtype=torch.float32)}

    def torch_softmax(x, out):
        import torch

        out.copy_(torch.softmax(x, dim=1))

    return _callable("torch_softmax", torch_softmax, setup,
                     SimulatedTwin(time_s=2 * 4 * shape[0] * shape[1] / 3.0e12, activity=0.4, mem_activity=0.9),
                     simulated)


WORKLOADS = (cupy_fp32_gemm, cupy_triad, torch_bf16_gemm, cupy_small, matmul_tiled_cu, torch_softmax)


def _twin_gpu(name: str):
    """The simulated GPU of twin preset ``name`` (its cap controller overshoots like the H100's)."""
    from powermodels.twin.preset import load_preset

    return load_preset(name).gpu(seed=0)


#: what each uncapped workload drew on a real H100 (W, °C): the 12 s reference rows of board GPU-0b4f1a7f
#: (datasets/h100-2026-11-25-session5/thermal_0b4f1a7f/thermal_rows.csv; cupy_tiny: its graph row); board
#: GPU-2db598e1's rows (thermal_2db598e1/) check them. The capped bf16 GEMM keeps its twin: its real power
#: is the cap's, and activity 1 on a fitted preset is that GEMM.
H100_POWER = {"cupy_matmul_fp32_4096": (665.75, 65.4), "cupy_triad": (406.89, 51.6), "cupy_small": (421.98, 52.7),
              "cupy_tiny": (260.11, 52.1), "matmul_kernel": (695.57, 64.8), "torch_softmax": (609.62, 60.0)}


def on_preset(workload, preset):
    """``workload`` with the twin that draws its real H100 power on ``preset`` (unchanged without a preset).

    The workloads' twins carry activities for the default simulated GPU; on a
    fitted preset those activities mean about three times the power (activity 1
    is the bf16 GEMM that holds the cap), so a fp32 GEMM at 0.95 ran capped at
    ~1440 MHz where the real H100 runs it uncapped at 1980 MHz (session 5).
    """
    if preset is None or workload.name not in H100_POWER:
        return workload
    power_w, temperature_c = H100_POWER[workload.name]
    workload.twin = preset.at_power(workload.simulated(), power_w, temperature_c=temperature_c)
    return workload


# -- measuring ---------------------------------------------------------------------------


def _row(workload, state, m_row, wall, launches=None) -> dict:
    from powermodels import schema

    keep = (schema.ENERGY_J, schema.POWER_W, schema.TIME_S, schema.ENERGY_UNCERTAINTY_J, schema.TEMPERATURE_C,
            schema.TEMPERATURE_START_C, schema.TEMPERATURE_END_C, schema.SM_CLOCK_MHZ,
            schema.REFERENCE_TEMPERATURE_C, schema.ENERGY_AT_REF_J, schema.POWER_AT_REF_W,
            schema.ENERGY_AT_REF_UNCERTAINTY_J, schema.CORRECTION_ALPHA_W_PER_C, schema.ALPHA_UNCERTAINTY_W_PER_C,
            schema.ALPHA_SOURCE, schema.ALPHA_REGIME, schema.TRANSIENT, schema.SETTLE_S, schema.LAUNCH_MODE,
            schema.LAUNCH_BOUND, schema.THROTTLE_POWER_CAP_FRACTION, schema.PROTOCOL)
    row = {schema.WORKLOAD: workload, schema.THERMAL_STATE: state, "wall_s": wall,
           **{k: m_row.get(k, math.nan) for k in keep}}
    # where the measured launches ran on the trace's clock (traces.parquet): what a later analysis of
    # the rows against the die's history (a break in the load just before a row) needs
    iv = np.asarray(launches if launches is not None else np.empty((0, 2)), dtype=float).reshape(-1, 2)
    row[schema.START_S] = float(iv[:, 0].min()) if len(iv) else math.nan
    row[schema.END_S] = float(iv[:, 1].max()) if len(iv) else math.nan
    print(f"  {workload} {state:>9s}: {row[schema.ENERGY_J]:.5g} J at {row[schema.TEMPERATURE_C]:.1f} °C, "
          f"at {row[schema.REFERENCE_TEMPERATURE_C]:.0f} °C {row[schema.ENERGY_AT_REF_J]:.5g} J "
          f"(α {row[schema.ALPHA_SOURCE]}, {row[schema.LAUNCH_MODE]}), {wall:.2f} s", flush=True)
    return row


def measure_workload(runner, w, args, simulated: bool) -> list[dict]:
    """cold, warm, reference, hot (and as-called for the µs kernel) of one workload."""
    import powermodels
    from powermodels import schema
    from powermodels.measuring.reference import reference_energy

    rows = []
    print(f"== {w.name}: {args.idle_s:.0f} s idle", flush=True)
    runner.idle(args.idle_s)
    load_start = runner.now()

    def one(state, **params):
        t0 = time.perf_counter()
        # every workload learns its own α (no pooling across them: the point is per-workload learning)
        m = powermodels.measure(w, device=runner, alpha_pool_after=1000, **params)
        rows.append(_row(w.name, state, m.row, time.perf_counter() - t0, m.launches))
        return m.row

    cold = one("cold")
    t_ref = float(cold[schema.REFERENCE_TEMPERATURE_C])
    one("warm", reference_temperature_c=t_ref)
    t0 = time.perf_counter()
    ref = reference_energy(runner, w, duration_s=args.reference_s)
    at = ref.at_reference(t_ref, alpha_w_per_c=cold[schema.CORRECTION_ALPHA_W_PER_C],
                          alpha_uncertainty_w_per_c=cold[schema.ALPHA_UNCERTAINTY_W_PER_C])
    rows.append({schema.WORKLOAD: w.name, schema.THERMAL_STATE: "reference", "wall_s": time.perf_counter() - t0,
                 schema.ENERGY_J: ref.energy_j, schema.POWER_W: ref.power_w, schema.TIME_S: ref.time_s,
                 schema.ENERGY_UNCERTAINTY_J: ref.uncertainty_j, schema.TEMPERATURE_C: ref.temperature_c,
                 schema.TEMPERATURE_START_C: ref.temperature_start_c, schema.TEMPERATURE_END_C: ref.temperature_end_c,
                 schema.REFERENCE_TEMPERATURE_C: t_ref, **at,
                 schema.ALPHA_SOURCE: cold[schema.ALPHA_SOURCE], schema.ALPHA_REGIME: cold[schema.ALPHA_REGIME],
                 schema.CORRECTION_ALPHA_W_PER_C: cold[schema.CORRECTION_ALPHA_W_PER_C],
                 schema.LAUNCH_MODE: ref.launch_mode, schema.PROTOCOL: "reference"})
    print(f"  {w.name} reference: {ref.energy_j:.5g} J at {ref.temperature_c:.1f} °C "
          f"({ref.temperature_start_c:.0f}→{ref.temperature_end_c:.0f}), at {t_ref:.0f} °C "
          f"{at[schema.ENERGY_AT_REF_J]:.5g} J", flush=True)
    one("hot", reference_temperature_c=t_ref)
    if w.name == "cupy_small":
        one("as_called", reference_temperature_c=t_ref, launch="as_called")
        tiny = on_preset(cupy_tiny(simulated), getattr(args, "preset", None))
        for state, params in (("graph", {}), ("as_called", {"launch": "as_called"})):
            t0 = time.perf_counter()
            m = powermodels.measure(tiny, device=runner, reference_temperature_c=t_ref, **params)
            rows.append(_row(tiny.name, state, m.row, time.perf_counter() - t0, m.launches))
    return rows, workload_trace(runner, w.name, load_start - 2.0, runner.now())


def workload_trace(runner, name: str, start_s: float, end_s: float) -> pd.DataFrame:
    """The NVML trace of one workload's part of the run (2 s of idle before its load, warm-up, rows,
    reference), only the rows where a reading changed and the row before each (readings change on a
    ~100 ms grid; the row before keeps every energy-counter update's bracket, so counter windows
    computed from this trace are where the run's were): the evidence the rows themselves cannot give
    (is a row after a break in the load low because the die cooled under a reading that had not moved?)."""
    from powermodels.recording import downsample_trace

    return downsample_trace(runner.trace(start_s, end_s, run_id=name), brackets=True)


# -- report ----------------------------------------------------------------------------------


#: rows and reference whose time per launch differ more than this did not launch the same way
SAME_LAUNCH_REL = 0.05


def launch_note(states: pd.DataFrame, ref: pd.DataFrame) -> str:
    """"" when the reference launched as the rows did, else why the two are not the same quantity.

    A µs kernel's energy per launch depends on how it is launched (graph-batched: the GPU's own
    cost; one host call each: the host's gaps too). The reference's ``launch_mode`` says it since
    session 6; earlier recordings only show it in the time per launch (on the real H200
    GPU-0a8f0427 the add's reference ran 25.7 µs per launch, its graph rows 21.1 µs); that check
    is made at a fixed clock only (under the power cap the clock sets the time per launch).
    """
    from powermodels import schema

    if ref.empty or states.empty:
        return ""
    modes = sorted(set(states[schema.LAUNCH_MODE].dropna().astype(str)))
    ref_mode = str(ref[schema.LAUNCH_MODE].iloc[0]) if schema.LAUNCH_MODE in ref else "nan"
    t_rows, t_ref = float(states[schema.TIME_S].median()), float(ref[schema.TIME_S].iloc[0])
    if ref_mode not in ("nan", "", *modes):
        return f"reference launched {ref_mode}, rows {'/'.join(modes)}: not the same quantity"
    fixed = (states[schema.ALPHA_REGIME] == "fixed_clock").all()  # (under the cap the clock moves the time)
    if fixed and abs(t_ref / t_rows - 1) > SAME_LAUNCH_REL:
        return (f"reference {1e6 * t_ref:.3g} µs per launch, rows {1e6 * t_rows:.3g} µs: launched differently "
                f"({ref_mode if ref_mode not in ('nan', '') else 'mode not recorded'}), not the same quantity")
    return ""


def summary(table: pd.DataFrame) -> pd.DataFrame:
    from powermodels import schema

    out = []
    for w, g in table.groupby(schema.WORKLOAD, sort=False):
        states = g[g[schema.THERMAL_STATE].isin(["cold", "warm", "hot"])]
        if states.empty:  # cupy_tiny: launch modes only, in the launch table
            continue
        ref = g[g[schema.THERMAL_STATE] == "reference"]
        e_ref = float(ref[schema.ENERGY_AT_REF_J].iloc[0]) if len(ref) else math.nan
        raw, norm = states[schema.ENERGY_J].to_numpy(float), states[schema.ENERGY_AT_REF_J].to_numpy(float)
        spread = 100 * (norm.max() - norm.min()) / norm.mean()
        vs_ref = 100 * float(np.max(np.abs(norm / e_ref - 1)))
        known = states[states[schema.THERMAL_STATE] != "cold"]["wall_s"]
        a = g.iloc[0]
        note = launch_note(states, ref)
        out.append({
            "workload": w, "alpha %/°C": 100 * a[schema.CORRECTION_ALPHA_W_PER_C] / a[schema.POWER_W],
            "alpha source": a[schema.ALPHA_SOURCE], "regime": a[schema.ALPHA_REGIME],
            "T cold/warm/hot °C": "/".join(f"{t:.0f}" for t in states[schema.TEMPERATURE_C]),
            "T_ref °C": a[schema.REFERENCE_TEMPERATURE_C],
            "raw spread %": 100 * (raw.max() - raw.min()) / raw.mean(), "at-ref spread %": spread,
            "worst vs ref %": vs_ref, "max wall s (α known)": float(known.max()),
            "cold wall s": float(states["wall_s"].iloc[0]),
            "transient": bool(states[schema.TRANSIENT].fillna(False).astype(bool).any()),
            "within targets": bool(spread <= SPREAD_PCT and vs_ref <= REFERENCE_PCT and known.max() <= WALL_S),
            "note": note,
        })
    return pd.DataFrame(out)


def report(table, env, notes) -> str:
    from powermodels.reporting import markdown_table

    lines = [f"# gpu_thermal on {env['device']} ({env['date']})", "",
             f"Targets: cold/warm/hot at T_ref within {SPREAD_PCT} %, within {REFERENCE_PCT} % of the 12 s "
             f"reference at T_ref, ≤ {WALL_S} s wall once α is known.", ""]
    if len(table):
        from powermodels import schema

        modes = table[table[schema.THERMAL_STATE].isin(["graph", "as_called"])]
        lines += [markdown_table(summary(table), ".3g"), ""]
        if len(modes):
            lines += ["Launch modes (issue 19: the same call graph-batched and as a program makes it):", "",
                      markdown_table(modes[[schema.WORKLOAD, schema.THERMAL_STATE, schema.TIME_S, schema.ENERGY_J,
                                            schema.POWER_W, schema.LAUNCH_MODE, schema.LAUNCH_BOUND]], ".4g"), ""]
        lines += ["Every measurement:", "", markdown_table(table, ".5g")]
    lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def plot(table, path: Path, title: str) -> None:
    """Energy per launch vs temperature per workload: raw (grey) and at T_ref (blue), % of the reference.

    ``table`` is one run's rows, or a dict of runs (name → rows): one row of panels per run.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from powermodels import schema

    runs = table if isinstance(table, dict) else {"": table}
    runs = {k: t[t[schema.THERMAL_STATE].isin(["cold", "warm", "hot", "reference"])] for k, t in runs.items()}
    workloads = list(dict.fromkeys(w for t in runs.values() for w in t[schema.WORKLOAD]))
    cols = len(workloads) if len(runs) > 1 else min(3, len(workloads))
    per_run = math.ceil(len(workloads) / cols)
    fig, axes = plt.subplots(per_run * len(runs), cols, figsize=(3.3 * cols, 3.0 * per_run * len(runs)),
                             squeeze=False)
    for r, (name, rows) in enumerate(runs.items()):
        panels = axes[r * per_run:(r + 1) * per_run].ravel()
        for ax, w in zip(panels, workloads):
            g = rows[rows[schema.WORKLOAD] == w]
            if not len(g):
                ax.axis("off")
                continue
            ref = g[g[schema.THERMAL_STATE] == "reference"]
            base = float(ref[schema.ENERGY_AT_REF_J].iloc[0]) if len(ref) else float(g[schema.ENERGY_AT_REF_J].mean())
            for state, marker in (("cold", "o"), ("warm", "s"), ("hot", "^"), ("reference", "*")):
                s_ = g[g[schema.THERMAL_STATE] == state]
                ax.plot(s_[schema.TEMPERATURE_C], 100 * (s_[schema.ENERGY_J] / base - 1), marker, color="0.6", ms=8,
                        label=f"{state}, raw")
                ax.errorbar(s_[schema.TEMPERATURE_C], 100 * (s_[schema.ENERGY_AT_REF_J] / base - 1),
                            yerr=100 * s_[schema.ENERGY_AT_REF_UNCERTAINTY_J].astype(float) / base, fmt=marker,
                            color="C0", ms=8, label=f"{state}, at T_ref")
            ax.axhspan(-1, 1, color="C2", alpha=0.12)
            a = g.iloc[0]
            other = launch_note(g[g[schema.THERMAL_STATE] != "reference"], ref)
            ax.set_title(f"{name + ': ' if name else ''}{w}\n(α {a[schema.ALPHA_SOURCE]}, "
                         f"T_ref {a[schema.REFERENCE_TEMPERATURE_C]:.0f} °C"
                         f"{'; reference launched otherwise' if other else ''})", fontsize=7)
            ax.set_xlabel("die temperature (°C)", fontsize=7)
            ax.set_ylabel("vs reference at T_ref (%)", fontsize=7)
            ax.tick_params(labelsize=7)
        for ax in panels[len(workloads):]:
            ax.axis("off")
    axes.ravel()[0].legend(fontsize=5)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_runs(folders, path: Path) -> None:
    """One figure of several runs' recorded rows (``thermal_rows.csv``), each labelled by its board (UUID
    from ``environment.json``); the α source as the run's ``alpha_cache.json`` says (a pool recorded as
    ``learned`` by the code before session 5's fix reads ``pooled``)."""
    from powermodels import schema
    from powermodels.thermal.heldout import cached_fits

    runs = {}
    for f in map(Path, folders):
        rows = pd.read_csv(f / "thermal_rows.csv")
        fits = cached_fits(f / "alpha_cache.json")
        pooled = [w for w, a in fits.items() if a.source == "pooled"]
        rows.loc[rows[schema.WORKLOAD].isin(pooled) & (rows[schema.ALPHA_SOURCE] == "learned"),
                 schema.ALPHA_SOURCE] = "pooled"
        env = json.loads((f / "environment.json").read_text()) if (f / "environment.json").is_file() else {}
        kind = next((k for k in ("H100", "H200", "B200", "A100") if k in str(env.get("device", ""))), "")
        runs[f"{kind} {str(env.get('uuid', f.name)).removeprefix('GPU-')[:8]}".strip()] = rows
    plot(runs, path, "real rows per board: cold / warm / hot and the 12 s reference, raw (grey) and at "
                     "T_ref (blue), % of the reference at T_ref; green: ±1 %")


def rescore(folders, out: Path, power_limit_w: float) -> str:
    """Earlier runs' ``thermal_rows.csv`` re-scored with the current α method (no GPU): markdown and a plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from powermodels import schema
    from powermodels.thermal.heldout import STATES, cached_fits, heldout_table, rescore_rows

    runs = {Path(f).name: pd.read_csv(Path(f) / "thermal_rows.csv") for f in folders}
    # what each warm-up fitted (runs that cached it): the rows of such a run hold the shrunk α
    fits = {Path(f).name: cached_fits(Path(f) / "alpha_cache.json") for f in folders}
    text = []
    for name, rows in runs.items():
        text += [f"### {name}", "", markdown_table(heldout_table(rows, power_limit_w=power_limit_w,
                                                                 fits=fits[name])), ""]
    workloads = list(dict.fromkeys(w for rows in runs.values() for w in rows[schema.WORKLOAD]
                                   if w in set(rows.loc[rows[schema.THERMAL_STATE] == "reference", schema.WORKLOAD])))
    fig, axes = plt.subplots(len(runs), len(workloads), figsize=(2.9 * len(workloads), 2.9 * len(runs)), squeeze=False)
    for axrow, (name, rows) in zip(axes, runs.items()):
        new, _ = rescore_rows(rows[rows[schema.THERMAL_STATE].isin((*STATES, "reference"))], fits=fits[name])
        for ax, w in zip(axrow, workloads):
            g, n = rows[rows[schema.WORKLOAD] == w], new[new[schema.WORKLOAD] == w]
            if not len(n):
                ax.axis("off")
                continue
            base = float(n.loc[n[schema.THERMAL_STATE] == "reference", schema.ENERGY_AT_REF_J].iloc[0])
            g = g[g[schema.THERMAL_STATE].isin(n[schema.THERMAL_STATE])]
            for column, frame, colour, label in ((schema.ENERGY_J, g, "0.6", "raw"),
                                                  (schema.ENERGY_AT_REF_J, g, "C1", "at T_ref, recorded α"),
                                                  (schema.ENERGY_AT_REF_J, n, "C0", "at T_ref, shrunk α")):
                ax.plot(frame[schema.TEMPERATURE_C], 100 * (frame[column] / base - 1), "o", color=colour, label=label)
                ref = frame[frame[schema.THERMAL_STATE] == "reference"]
                ax.plot(ref[schema.TEMPERATURE_C], 100 * (ref[column] / base - 1), "*", color=colour, ms=12)
            ax.axhspan(-1, 1, color="C2", alpha=0.12)
            ax.set_title(f"{name}: {w}", fontsize=7)
            ax.set_xlabel("die temperature (°C)", fontsize=7)
            ax.tick_params(labelsize=7)
        axrow[0].set_ylabel("vs reference at T_ref (%)", fontsize=7)
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "thermal_h100_session4.png", dpi=100)
    plt.close(fig)
    return "\n".join(text)


def _measure_all(runner, args, makers, kind, start, per_workload, rows, notes, out, env) -> None:
    """Every workload in turn; rows, traces and report on disk after each one (nothing lost on a stop)."""
    traces = []
    for name in [n.strip() for n in args.workloads.split(",") if n.strip()]:
        if time.perf_counter() - start + per_workload > args.max_s:
            notes.append(f"{name}: skipped, would pass --max-s {args.max_s:.0f} s")
            continue
        t0 = time.perf_counter()
        try:
            w = on_preset(makers[name](kind == "simulated"), args.preset)
            got, trace = measure_workload(runner, w, args, kind == "simulated")
            rows += got
            traces.append(trace)
            pd.concat(traces, ignore_index=True).to_parquet(out / "traces.parquet", index=False)
        except Exception as err:  # one workload failing must not lose the others
            traceback.print_exc()
            notes.append(f"{name}: failed: {type(err).__name__}: {err}")
        notes.append(f"{name}: {time.perf_counter() - t0:.0f} s")
        table = pd.DataFrame(rows)
        table.to_csv(out / "thermal_rows.csv", index=False)
        (out / "report.md").write_text(report(table, env, notes))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--idle-s", type=float, default=30.0, help="idle before each cold measurement")
    parser.add_argument("--reference-s", type=float, default=12.0)
    parser.add_argument("--max-s", type=float, default=450.0, help="stop before a workload that would not finish")
    parser.add_argument("--workloads", default=",".join(f.__name__ for f in WORKLOADS))
    parser.add_argument("--twin", default=None,
                        help="--device simulated: a twin preset instead of the default simulated GPU "
                             "(e.g. h100-sxm, fitted to real H100 recordings: its cap controller overshoots)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--rescore", nargs="+", default=None, metavar="FOLDER",
                        help="no GPU: re-score earlier runs' thermal_rows.csv with the current α method, print "
                             "the table and write thermal_h100_session4.png to --out")
    parser.add_argument("--plot-runs", nargs="+", default=None, metavar="FOLDER",
                        help="no GPU: plot earlier runs' recorded rows, one row of panels per board, to "
                             "--out/thermal_boards.png")
    parser.add_argument("--power-limit-w", type=float, default=700.0,
                        help="--rescore: the runs' enforced power limit (the capped rows' settling check)")
    args = parser.parse_args(argv)
    if args.plot_runs:
        out = Path(args.out or ".")
        out.mkdir(parents=True, exist_ok=True)
        plot_runs(args.plot_runs, out / "thermal_boards.png")
        print(f"wrote {out / 'thermal_boards.png'}")
        return 0
    if args.rescore:
        print(rescore(args.rescore, Path(args.out or "."), args.power_limit_w))
        return 0
    blocked = forbid_nvml_setters()
    start = time.perf_counter()
    # a private state folder: α is learned afresh (the first measurement of each workload), never read
    # from an earlier run's cache
    state = os.environ["POWERMODELS_STATE_DIR"] = tempfile.mkdtemp(prefix="gpu_thermal_state_")

    from powermodels import schema
    from powermodels.devices import open_device
    from powermodels.measuring.runner import make_runner

    device = _twin_gpu(args.twin) if args.device == "simulated" and args.twin else open_device(args.device)
    if args.device == "simulated" and args.twin:
        from powermodels.twin.preset import load_preset

        args.preset = load_preset(args.twin)  # the workloads draw their real H100 power on it (on_preset)
    else:
        args.preset = None
    kind = device.info.kind
    out = Path(args.out or REPO / "benchmarks" / "results" / f"thermal_{kind}")
    out.mkdir(parents=True, exist_ok=True)
    env = {"device": device.info.name, "driver": device.info.driver, "uuid": device.info.uuid,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": platform.node(),
           "python": sys.version.split()[0], "idle_s": args.idle_s, "reference_s": args.reference_s,
           "nvml_setters_blocked": len(blocked)}
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    rows, notes = [], []
    makers = {f.__name__: f for f in WORKLOADS}
    # on the simulated GPU the host's ~10 µs per call (H100, issue 19) so as-called differs from graphs
    runner = make_runner(device, **({"host_call_s": 10.6e-6} if kind == "simulated" else {}))
    per_workload = args.idle_s + 30.0
    from powermodels.termination import Terminated, terminate_raises

    stopped = None
    # thermal_rows.csv and report.md are rewritten after every workload; SIGTERM (`timeout`) or
    # Ctrl-C stops the loop, and the summary, plot and α cache of the finished workloads are written
    with terminate_raises():
        try:
            _measure_all(runner, args, makers, kind, start, per_workload, rows, notes, out, env)
        except (Terminated, KeyboardInterrupt) as err:
            stopped = err
            notes.append(f"stopped ({err or type(err).__name__}): the workloads that finished are kept")
            print(f"stopped ({err or type(err).__name__}): writing the finished workloads to {out}", flush=True)
        finally:
            runner.close()
    table = pd.DataFrame(rows)
    if len(table):
        summary(table).to_csv(out / "summary.csv", index=False)
        plot(table, out / f"thermal_{kind}.png",
             f"{env['device']}: cold / warm / hot and the 12 s reference, raw (grey) and at T_ref (blue)")
    # the learned α as cached (each fit's detail says how many spans breaks in the load cost, and the
    # longest break: the evidence for or against the host-gap bias of docs/thermal.md)
    cached = {p.name: json.loads(p.read_text()) for p in sorted(Path(state, "alpha").glob("*.json"))}
    (out / "alpha_cache.json").write_text(json.dumps(cached, indent=1))
    notes.append(f"total {time.perf_counter() - start:.0f} s")
    text = report(table, env, notes)
    (out / "report.md").write_text(text)
    print(text)
    print(f"wrote {out}", flush=True)
    if stopped is not None:
        return stopped.code if isinstance(stopped, Terminated) else 130
    return 0 if len(table) and not table[schema.ENERGY_J].isna().all() else 1


if __name__ == "__main__":
    sys.exit(main())
