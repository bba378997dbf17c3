"""Issue 10's "done means" on one GPU, in one call: users' own workloads vs the independent reference.

Every part measures a user's workload the way a user would (the default
protocol, ``powermodels.measure`` / a campaign / ``measure_program``) and
compares it with the independent reference method: the same work back to
back for ``--reference-s`` (≥ 10 s), energy from the total-energy counter
between ``--skip-s`` (2 s) and the end, divided by the repetitions
(:func:`powermodels.measuring.reference.reference_energy`; for a program
:func:`powermodels.measuring.program.program_reference`). Target: within 2 %.

Parts (``--parts``, comma-separated; all by default):

callables  a CuPy float32 matmul callable (4096²) and a PyTorch bf16 matmul callable (8192²),
           each also inside ``EnergyMeter`` windows around 3 s of back-to-back calls
           (steady and interpolated), against the same reference
source     the user's tunable ``kernels/examples/matmul_tiled.cu`` (4 tunables, 36 valid
           configurations) as a campaign over ``--configs`` (20) sampled configurations,
           each vs the reference
program    an external program doing ~5 s of CuPy matmuls (``measure_program``, 3 runs, 2 s
           idle gaps) vs the program run back to back
tuner      ``kernel_tuner.tune_kernel`` on the same ``.cu`` kernel and the same ``--configs``
           sampled configurations with the powermodels observer next to Kernel Tuner's
           NVMLObserver, each configuration vs the reference (measured here unless ``source``
           ran first). Restrictions go through ``kernel_tuner_restrictions`` (the campaign's
           strings and a function keeping the sample): Kernel Tuner 1.5 re-reads a lambda's
           source instead of calling it, which failed on the H100 on 2026-11-24
           (``r() takes 0 positional arguments but 4 were given``). On the simulated GPU
           Kernel Tuner's C backend runs a stand-in returning each configuration's twin time
           (no NVMLObserver there)

Read-only on the GPU: every NVML setter is replaced by a function that raises
before anything is opened; clocks and power limits stay whatever the GPU
chooses (``ncu`` is not used here). ``--device simulated`` runs every part that
can run without a GPU on the simulated GPU (twins), which is how CI-less
sessions check the script. Results (written after each part, so nothing is
lost): ``comparison.csv``, ``tuner.csv``, ``report.md``, ``environment.json``
in ``--out`` (default ``benchmarks/results/user_workloads_<device>``).

The tuner part needs ``kernel_tuner`` on the GPU machine. The CUDA image
lacks it and the modules it imports (checked against kernel_tuner 1.5.0's
imports, not its whole Requires-Dist: pymoo is imported only by its pymoo
strategy): carry these wheels (Python 3.12, manylinux x86-64) in ``.whl/``:
kernel_tuner 1.5.0, python-constraint2 2.9.0, xmltodict 1.0.4, jsonschema
4.26.0, jsonschema-specifications 2025.9.1, referencing 0.37.0, rpds-py
2026.9.1 (attrs, packaging, typing-extensions, numpy, scipy, pandas,
scikit-learn, CuPy are in the image).
A part that fails is noted in the report and the others still run.

Time on the GPU with the defaults: callables 37 s, program 45 s (H100, 2026-11-24); source
~5 min (20 references of 12 s); tuner alone ~5 min (20 × ~2 s in Kernel Tuner, 20 references
of 12 s), ~1 min after ``source`` (its references are reused). Run ``--parts tuner`` (or
``source,tuner`` with ``--configs 12``) in its own 10-minute call.

Usage (on the GPU machine)::

    PYTHONPATH=src python3 benchmarks/gpu_user_workloads.py --out $OUT
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:src &&
        python3 benchmarks/gpu_user_workloads.py --parts tuner --out $OUT
    PYTHONPATH=src python3 benchmarks/gpu_user_workloads.py --device simulated --reference-s 4 --skip-s 1
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import pandas as pd
from _readonly_nvml import forbid_nvml_setters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
EXAMPLES = REPO / "kernels" / "examples"
TARGET_PCT = 2.0


def _row(workload, kind, config, m_row, ref, wall_measure, extra=None) -> dict:
    from powermodels import schema

    e, r = float(m_row[schema.ENERGY_J]), float(ref["energy_j"])
    row = {
        "workload": workload, "kind": kind, "config": config,
        "protocol": m_row.get(schema.PROTOCOL, ""),
        "energy_j": e, "energy_uncertainty_j": float(m_row.get(schema.ENERGY_UNCERTAINTY_J, math.nan)),
        "time_s": float(m_row[schema.TIME_S]), "power_w": float(m_row[schema.POWER_W]),
        "reference_energy_j": r, "reference_uncertainty_j": float(ref["uncertainty_j"]),
        "reference_power_w": float(ref["power_w"]),
        "error_pct": 100.0 * (e / r - 1.0) if r else math.nan,
        "truth_energy_j": float(ref.get("truth_energy_j", math.nan)),
        "temperature_c": float(m_row.get(schema.TEMPERATURE_C, math.nan)),
        "sm_clock_mhz": float(m_row.get(schema.SM_CLOCK_MHZ, math.nan)),
        "wall_measure_s": wall_measure, "wall_reference_s": float(ref["wall_s"]),
    }
    row["within_target"] = bool(abs(row["error_pct"]) <= TARGET_PCT)
    row.update(extra or {})
    print(f"  {workload} [{config}] {kind}: {e:.5g} J vs reference {r:.5g} J "
          f"({row['error_pct']:+.2f} %), {row['power_w']:.0f} W", flush=True)
    return row


def _ref_dict(ref) -> dict:
    return ref.as_dict() if hasattr(ref, "as_dict") else dict(ref)


# -- the user's workloads ---------------------------------------------------------


def cupy_matmul_workload(simulated: bool):
    """A CuPy float32 4096² matmul callable (arrays made once in setup)."""
    from powermodels.workloads import CallableWorkload, SimulatedTwin

    n = 4096

    def setup():
        import cupy as cp

        rng = cp.random.default_rng(0)
        return {"a": rng.random((n, n), dtype=cp.float32), "b": rng.random((n, n), dtype=cp.float32),
                "out": cp.empty((n, n), dtype=cp.float32)}

    def cupy_matmul(a, b, out):
        import cupy as cp

        cp.matmul(a, b, out=out)

    twin = SimulatedTwin(time_s=2 * n**3 / 50e12, activity=0.95, mem_activity=0.3)  # ~50 TFLOP/s fp32
    return CallableWorkload(cupy_matmul, setup=None if simulated else setup, simulated=twin,
                            name="cupy_matmul_fp32_4096")


def torch_matmul_workload(simulated: bool):
    """A PyTorch bf16 8192² matmul callable (tensor cores; on PyTorch's current stream)."""
    from powermodels.workloads import CallableWorkload, SimulatedTwin

    n = 8192

    def setup():
        import torch

        g = torch.Generator(device="cuda").manual_seed(0)
        return {"a": torch.rand((n, n), device="cuda", dtype=torch.bfloat16, generator=g),
                "b": torch.rand((n, n), device="cuda", dtype=torch.bfloat16, generator=g),
                "out": torch.empty((n, n), device="cuda", dtype=torch.bfloat16)}

    def torch_matmul(a, b, out):
        import torch

        torch.matmul(a, b, out=out)

    twin = SimulatedTwin(time_s=2 * n**3 / 650e12, activity=1.0, mem_activity=0.5)
    return CallableWorkload(torch_matmul, setup=None if simulated else setup, simulated=twin,
                            name="torch_matmul_bf16_8192")


def source_entry(configs: int = 20) -> dict:
    """The campaign entry of the user's tiled matmul (as in kernels/examples/matmul_campaign.toml)."""
    from powermodels.campaigns import load_spec

    entry = dict(load_spec(EXAMPLES / "matmul_campaign.toml").workloads[0])
    entry["configs"] = {"sample": int(configs), "seed": 0}
    return entry


PROGRAM = """
import sys, cupy as cp
n, reps = 8192, int(sys.argv[1])
a = cp.random.rand(n, n, dtype=cp.float32); b = cp.random.rand(n, n, dtype=cp.float32)
c = cp.empty_like(a)
for _ in range(reps):
    cp.matmul(a, b, out=c)
cp.cuda.Device().synchronize()
print(float(c[0, 0]))
"""


def program_workload(simulated: bool, folder: Path, gpu_seconds: float = 5.0):
    """An external program with ~``gpu_seconds`` of CuPy matmuls (a fixed count, calibrated once here)."""
    from powermodels.measuring.program import ProgramWorkload

    if simulated:  # the process sleeps; its twin is 0.45 s of GPU work, the GPU idles the rest
        from powermodels.workloads import SimulatedTwin

        argv = [sys.executable, "-c", "import time; time.sleep(0.5)"]
        twin = SimulatedTwin(time_s=0.45, activity=0.9, mem_activity=0.3)
        return ProgramWorkload(argv, simulated=twin, name="program_sleep"), 0
    import cupy as cp

    n = 8192
    a = cp.random.rand(n, n, dtype=cp.float32)
    c = cp.empty_like(a)
    cp.matmul(a, a, out=c)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        cp.matmul(a, a, out=c)
    cp.cuda.Device().synchronize()
    per = (time.perf_counter() - t0) / 10
    del a, c
    reps = max(1, round(gpu_seconds / per))
    script = folder / "program_matmul.py"
    script.write_text(PROGRAM)
    return ProgramWorkload([sys.executable, str(script), str(reps)], name="program_cupy_matmul",
                           capture_output=True), reps


# -- parts ------------------------------------------------------------------------


def part_callables(runner, args, simulated):
    import powermodels
    from powermodels.measuring.reference import reference_energy

    rows = []
    for make in (cupy_matmul_workload, torch_matmul_workload):
        w = make(simulated)
        t0 = time.perf_counter()
        m = powermodels.measure(w, device=runner)
        wall = time.perf_counter() - t0
        ref = reference_energy(runner, w, duration_s=args.reference_s, skip_s=args.skip_s)
        rows.append(_row(w.name, "callable", "", m.row, _ref_dict(ref), wall))
        rows += meter_rows(runner, w, _ref_dict(ref), simulated)
    return rows


def meter_rows(runner, w, ref: dict, simulated: bool, seconds: float = 3.0) -> list[dict]:
    """EnergyMeter around ``seconds`` of the callable back to back: interpolated and steady windows."""
    from powermodels import schema
    from powermodels.meter import EnergyMeter

    launches = max(1, round(seconds / ref["time_s"]))
    prepared = None if simulated else w.prepare()
    meter = EnergyMeter(runner.device)  # sync="auto": CuPy / PyTorch synchronized at both ends
    try:
        t0 = time.perf_counter()
        meter.begin_window("plain")
        meter.begin_window("steady")
        if simulated:
            runner.device.run(w.simulated(), launches=launches)
        else:
            for _ in range(launches):
                prepared.launch()
        steady = meter.end_window("steady", steady=True)
        plain = meter.end_window("plain")
        wall = time.perf_counter() - t0
    finally:
        meter.close()
        if prepared is not None:
            prepared.close()
    rows = []
    for label, win in (("meter (steady)", steady), ("meter (interpolated)", plain)):
        row = {schema.PROTOCOL: label, schema.ENERGY_J: win.energy_j / launches,
               schema.ENERGY_UNCERTAINTY_J: win.uncertainty_j / launches,
               schema.TIME_S: win.time_s / launches, schema.POWER_W: win.power_w,
               schema.TEMPERATURE_C: win.temperature_max_c,
               schema.SM_CLOCK_MHZ: 0.5 * (win.sm_clock_min_mhz + win.sm_clock_max_mhz)}
        extra = {}
        if simulated:  # the meter against the truth over its own window (no thermal-state difference)
            true = runner.device.true_energy_j(win.start_s, win.end_s) / launches
            extra = {"window_truth_energy_j": true, "window_truth_error_pct": 100 * (row[schema.ENERGY_J] / true - 1)}
        rows.append(_row(w.name, "EnergyMeter", f"{launches} launches", row, ref, wall, extra))
    return rows


def part_source(runner, args, simulated, folder: Path):
    from powermodels import schema
    from powermodels.campaigns import run_campaign
    from powermodels.measuring.reference import reference_energy
    from powermodels.workloads.spec import workload_from_entry

    entry = source_entry(args.configs)
    spec = {"workloads": [entry], "repeats": 1, "base_dir": str(EXAMPLES)}
    t0 = time.perf_counter()
    # the campaign's own folder (rows + traces) is scratch: its rows go to comparison.csv
    table = run_campaign(spec, folder / "source_campaign", runner=runner, progress=False)
    wall = (time.perf_counter() - t0) / max(len(table), 1)
    w = workload_from_entry(entry, EXAMPLES)
    rows = []
    for _, r in table.iterrows():
        ref = reference_energy(runner, w, r[schema.CONFIG], duration_s=args.reference_s, skip_s=args.skip_s)
        rows.append(_row(w.name, "source (campaign)", r[schema.CONFIG], r.to_dict(), _ref_dict(ref), wall))
    return rows


def part_program(device, args, simulated, folder: Path):
    from powermodels import schema
    from powermodels.measuring.program import measure_program, program_reference

    w, reps = program_workload(simulated, folder)
    t0 = time.perf_counter()
    m = measure_program(w, device, repeats=3, idle_s=2.0,
                        progress=lambda s: print(f"  program: {s}", flush=True))
    wall = time.perf_counter() - t0
    ref = program_reference(w, device, duration_s=max(args.reference_s, 2 * m.time_s + args.skip_s),
                            skip_s=args.skip_s)
    row = m.table.iloc[int(np.argsort(m.table[schema.ENERGY_J].to_numpy())[len(m.table) // 2])].to_dict()
    return [_row(w.name, "program", f"matmuls={reps}", row, ref, wall,
                 {"idle_power_w": float(np.nanmedian(m.table[schema.IDLE_POWER_W]))})]


def in_sample(workload, tune_params, keys):
    """A restriction keeping the sampled configurations: a function of the configuration dict."""

    def in_the_campaigns_sample(p):
        return workload.config_id({k: p[k] for k in tune_params}) in keys

    return in_the_campaigns_sample


def c_stand_in(kernel: str, twin, configs: list[dict]) -> str:
    """C source for Kernel Tuner's C backend: returns each configuration's twin time (ms) as 'time'.

    On the simulated GPU Kernel Tuner cannot launch the CUDA kernel; its C
    backend runs this function through the same tune_kernel loop (search-space
    builder, restrictions, observers), and the observer runs the twin's
    launches on the simulated GPU inside its window.
    """
    from powermodels.workloads.twins import NOMINAL_MEM_MHZ, NOMINAL_SM_MHZ

    lines = [f'extern "C" float {kernel}(float *c, float *a, float *b) {{']
    for config in configs:
        ms = 1e3 * float(twin.workload(kernel, config).time_s(NOMINAL_SM_MHZ, NOMINAL_MEM_MHZ))
        test = " && ".join(f"{k} == {v}" for k, v in config.items())
        lines.append(f"    if ({test}) return {ms!r}f;")
    lines += ["    return -1.0f;  /* not a sampled configuration: restrictions failed */", "}"]
    return "\n".join(lines) + "\n"


def part_tuner(runner, args, comparison: list, simulated: bool, folder: Path):
    """tune_kernel with PowerModelsObserver next to NVMLObserver on the campaign's sampled configurations.

    Restrictions as Kernel Tuner 1.5 evaluates them correctly
    (:func:`powermodels.integrations.kernel_tuner.kernel_tuner_restrictions`):
    the campaign's three strings plus a function keeping the sample. Each
    configuration is compared with the reference (taken here unless the
    ``source`` part already measured it).
    """
    import os

    from kernel_tuner import tune_kernel

    from powermodels.measuring.reference import reference_energy
    from powermodels.workloads.spec import make_argument, select_configs, workload_from_entry
    from powermodels.integrations.kernel_tuner import PowerModelsObserver, kernel_tuner_restrictions

    device = runner.device
    entry = source_entry(args.configs)
    w = workload_from_entry(entry, EXAMPLES)
    chosen = select_configs(w, entry["configs"])
    keys = {w.config_id(c) for c in chosen}
    tune_params = {k: list(v) for k, v in entry["tune_params"].items()}
    restrictions = kernel_tuner_restrictions(
        [*entry["restrictions"], ("in the campaign's sample", in_sample(w, tune_params, keys))], tune_params)
    if simulated:  # Kernel Tuner's C backend on the CPU; the twin's launches on the simulated GPU
        pm = PowerModelsObserver(device, simulated=w.twin)
        observers, nvml = [pm], None
        small = [np.zeros(16, dtype=np.float32) for _ in entry["arguments"]]
        source, arguments, options = c_stand_in(entry["kernel"], w.twin, chosen), small, {"lang": "C"}
    else:
        from kernel_tuner.observers.nvml import NVMLObserver

        pm = PowerModelsObserver(device)
        nvml = NVMLObserver(["nvml_energy", "nvml_power", "core_freq", "temperature"], device=device.info.index)
        observers = [pm, nvml]
        source = str(EXAMPLES / entry["source"])
        arguments = [make_argument(a, EXAMPLES) for a in entry["arguments"]]
        options = {"lang": "cupy", "grid_div_x": entry["grid_div_x"], "grid_div_y": entry["grid_div_y"]}
    cwd = os.getcwd()
    os.chdir(folder)  # Kernel Tuner's C backend writes temp_*.c/.so into the current folder
    try:
        results, _ = tune_kernel(entry["kernel"], source, tuple(entry["problem_size"]), arguments, tune_params,
                                 restrictions=restrictions, observers=observers, verbose=False, quiet=True,
                                 **options)
    finally:
        os.chdir(cwd)
        pm.close()
    print(f"  tuner: Kernel Tuner built {len(results)} configurations of the {len(chosen)} sampled", flush=True)
    refs = {r["config"]: r for r in comparison if r["kind"].startswith("source")}
    rows = []
    for r in results:
        config = {k: r[k] for k in tune_params}
        cid = w.config_id(config)
        if "powermodels_energy" not in r:  # Kernel Tuner skipped it (compile or launch failure)
            print(f"  tuner {cid}: no energy (Kernel Tuner: {r.get('time')!r})", flush=True)
            continue
        if cid not in refs:
            refs[cid] = _ref_dict(reference_energy(runner, w, config, duration_s=args.reference_s,
                                                   skip_s=args.skip_s))
            refs[cid]["reference_energy_j"] = refs[cid]["energy_j"]
        ref = float(refs[cid]["reference_energy_j"])
        nvml_j = float(r.get("nvml_energy", math.nan))
        row = {"config": cid, "time_ms": r["time"], "powermodels_energy_j": r["powermodels_energy"],
               "powermodels_uncertainty_j": r["powermodels_energy_uncertainty"],
               "powermodels_power_w": r["powermodels_power"], "nvml_energy_j": nvml_j,
               "nvml_power_w": float(r.get("nvml_power", math.nan)),
               "core_freq_mhz": float(r.get("core_freq", math.nan)),
               "temperature_c": float(r.get("temperature", math.nan)), "reference_energy_j": ref,
               "powermodels_error_pct": 100 * (r["powermodels_energy"] / ref - 1),
               "nvml_error_pct": 100 * (nvml_j / ref - 1)}
        rows.append(row)
        print(f"  tuner {cid}: powermodels {row['powermodels_energy_j']:.4g} J, "
              f"NVMLObserver {nvml_j:.4g} J, reference {ref:.4g} J", flush=True)
    return rows


# -- report -------------------------------------------------------------------------


def report(comparison, tuner, env, notes) -> str:
    lines = ["# Users' own workloads vs the independent reference (issue 10)", "",
             f"Device: {env.get('device')}; driver {env.get('driver')}; {env.get('date')}. Reference: the "
             f"same work back to back for {env['reference_s']:g} s, counter from {env['skip_s']:g} s to the "
             f"end, divided by the repetitions. Target: within {TARGET_PCT:g} %.", ""]
    if comparison:
        df = pd.DataFrame(comparison)
        ok = int(df["within_target"].sum())
        lines += [f"**{ok} of {len(df)} within {TARGET_PCT:g} %**; |error| median "
                  f"{df['error_pct'].abs().median():.2f} %, max {df['error_pct'].abs().max():.2f} %.", "",
                  "| workload | kind | config | protocol | energy J | reference J | error % | power W | "
                  "wall s (measure / reference) |", "|---|---|---|---|---:|---:|---:|---:|---:|"]
        for r in comparison:
            lines.append(f"| {r['workload']} | {r['kind']} | {r['config'] or '-'} | {r['protocol']} | "
                         f"{r['energy_j']:.5g} ± {r['energy_uncertainty_j']:.2g} | "
                         f"{r['reference_energy_j']:.5g} | {r['error_pct']:+.2f} | {r['power_w']:.0f} | "
                         f"{r['wall_measure_s']:.1f} / {r['wall_reference_s']:.1f} |")
    truths = [r for r in comparison if math.isfinite(r.get("window_truth_error_pct", math.nan))]
    if truths:
        lines += ["", "EnergyMeter against the simulated truth over its own window (no thermal-state "
                  "difference): " + "; ".join(f"{r['workload']} {r['protocol']} "
                                             f"{r['window_truth_error_pct']:+.3f} %" for r in truths) + "."]
    if tuner:
        lines += ["", "## Kernel Tuner: powermodels observer next to NVMLObserver", "",
                  "| config | time ms | powermodels J | NVMLObserver J | reference J | powermodels % | NVML % |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for r in tuner:
            lines.append(f"| {r['config']} | {r['time_ms']:.3f} | {r['powermodels_energy_j']:.4g} | "
                         f"{r['nvml_energy_j']:.4g} | {r['reference_energy_j']:.4g} | "
                         f"{r['powermodels_error_pct']:+.2f} | {r['nvml_error_pct']:+.2f} |")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--parts", default="callables,source,program,tuner")
    parser.add_argument("--reference-s", type=float, default=12.0)
    parser.add_argument("--skip-s", type=float, default=2.0)
    parser.add_argument("--configs", type=int, default=20,
                        help="configurations of the .cu kernel sampled for the campaign and the tuner")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    blocked = forbid_nvml_setters()

    from powermodels.devices import open_device
    from powermodels.measuring.runner import make_runner

    device = open_device(args.device)
    simulated = device.info.kind == "simulated"
    out = Path(args.out or REPO / "benchmarks" / "results" / f"user_workloads_{device.info.kind}")
    out.mkdir(parents=True, exist_ok=True)
    env = {"device": device.info.name, "driver": device.info.driver, "uuid": device.info.uuid,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "host": platform.node(),
           "python": sys.version.split()[0], "reference_s": args.reference_s, "skip_s": args.skip_s,
           "nvml_setters_blocked": len(blocked), "parts": args.parts}
    if not simulated:
        env["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,temperature.gpu,"
                                            "power.draw,power.limit", "--format=csv"],
                                           capture_output=True, text=True, check=False).stdout.strip()
    (out / "environment.json").write_text(json.dumps(env, indent=1))
    comparison, tuner, notes = [], [], []

    def save():
        if comparison:
            pd.DataFrame(comparison).to_csv(out / "comparison.csv", index=False)
        if tuner:
            pd.DataFrame(tuner).to_csv(out / "tuner.csv", index=False)
        (out / "report.md").write_text(report(comparison, tuner, env, notes))

    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    runner = make_runner(device)
    with tempfile.TemporaryDirectory() as tmp:
        for part in parts:
            t0 = time.perf_counter()
            print(f"== {part}", flush=True)
            try:
                if part == "callables":
                    comparison += part_callables(runner, args, simulated)
                elif part == "source":
                    comparison += part_source(runner, args, simulated, Path(tmp))
                elif part == "program":
                    comparison += part_program(device, args, simulated, Path(tmp))
                elif part == "tuner":
                    if simulated:
                        notes.append("tuner: on the simulated GPU Kernel Tuner's C backend runs a stand-in "
                                     "returning each configuration's twin time; no NVMLObserver (no NVML)")
                    tuner += part_tuner(runner, args, comparison, simulated, Path(tmp))
                else:
                    raise ValueError(f"unknown part {part!r}")
            except Exception as err:  # one part failing must not lose the others
                traceback.print_exc()
                notes.append(f"{part}: failed: {type(err).__name__}: {err}")
            notes.append(f"{part}: {time.perf_counter() - t0:.0f} s")
            save()
    runner.close()
    print(report(comparison, tuner, env, notes))
    print(f"wrote {out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
