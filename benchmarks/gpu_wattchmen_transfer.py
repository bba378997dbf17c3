"""Wattchmen §6 on two GPUs: transfer the H200 table to another GPU from 10 % of its microbenchmarks.

``measure`` (GPU, one call, ~7 min on an H100; ``--resume`` finishes a cut-off run)
    On the new GPU: idle power, all 63 microbenchmarks (74 with ``--hopper-extras``:
    the warp-group MMA ``hgmma_f32``, the operand-toggling rows and the issue-26
    measurement rows, ``catalog.MEASUREMENT_ROWS``) and both held-out workload sets (``heldout``
    and ``fresh``), each with the clock it ran at (on-GPU probes after every batch
    of the power window, and NVML's reading), then both ncu passes
    (``--clock-control none``), with
    :func:`powermodels.instruction_energy.calibration.measure_and_profile`.
    Instruction counts belong to the code, compiler and GPU model, not the board:
    by default the counts of ``--counts-from`` (``datasets/h100/wattchmen``) are
    reused and ncu profiles only the items it lacks plus four checks (a full
    opcode pass of every item takes ~6.5 min on an H100, the energy phase ~5 min);
    on another GPU model, or with ``--counts-from none``, every item is profiled.
    The full set is measured once; the 10 % subsets are drawn from it, so one
    call gives the transferred, the full and the as-is rows. ``--device simulated``
    runs the same steps on the simulated backend.
``analyze`` (anywhere)
    First chooses the model's settings by leave-one-microbenchmark-out
    cross-validation on the new GPU's microbenchmarks only
    (:func:`powermodels.instruction_energy.selection.cross_validate_instruction_models`;
    the workloads are not read for it; where the table has measurement rows, the same CV
    decides whether each group of them enters the fit) and reports the chosen setting's
    held-out MAPE, with each workload's error. Then, with the chosen setting,
    fits the reference table on ``--reference`` (default ``datasets/h200``),
    and on the new GPU's held-out workloads reports MAPE for: the table
    transferred from random 10 % subsets (+ NANOSLEEP; mean ± standard error
    over ``--seeds`` subsets, and the seed-0 subset alone), a full fit on the
    new GPU, and the reference table used as is (with the new GPU's NANOSLEEP
    static power, and with its own).
``simulated`` (anywhere)
    The same comparison between two simulated GPUs (``sim-hopper-a`` →
    ``sim-hopper-b``), as a check of the procedure.

Usage::

    # on the H100 (repository root, $OUT the output folder; 6 files):
    export PATH=/usr/local/cuda/bin:$PATH
    PYTHONPATH=src timeout 560 python3 benchmarks/gpu_wattchmen_transfer.py measure --hopper-extras --out $OUT
    # here, on the tables kept in datasets/h100/wattchmen/:
    PYTHONPATH=src python benchmarks/gpu_wattchmen_transfer.py analyze --data datasets/h100/wattchmen
    PYTHONPATH=src python benchmarks/gpu_wattchmen_transfer.py simulated
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    from _readonly_nvml import forbid_nvml_setters

    forbid_nvml_setters()

from _common import write_report  # noqa: E402

from powermodels import schema  # noqa: E402
from powermodels.reporting import markdown_table  # noqa: E402
from powermodels.instruction_energy.calibration import (  # noqa: E402
    fit_instruction_model,
    logged,
    measure_and_profile,
    prediction_table,
)
from powermodels.instruction_energy.selection import (  # noqa: E402
    cross_validate_instruction_models,
)
from powermodels.instruction_energy.diagnostics import (  # noqa: E402
    clock_check,
    with_operand_variants,
)
from powermodels.instruction_energy.transfer import compare_transfer  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
#: What ``analyze`` chose and scored, in order (toggling-operand table first): written beside its
#: report as JSON for the docs' picture (``benchmarks/plot_wattchmen_heldout.py``).
SUMMARY: list[dict] = []
WATTCHMEN_FIG14 = "Wattchmen Fig. 14 (air- → water-cooled V100): 10 % 13 %, full table 14 % MAPE"


#: Items of the counts source profiled again as a check that its counts hold: a scalar, a
#: tensor-core (mma.sync) microbenchmark, the warp-group-MMA GEMM and a hand-written GEMM.
RECHECK = {"nvml": ["ffma", "hmma_f32", "cublas_hgemm_8192", "tiled_sgemm_2048"],
           "simulated": ["ffma", "hmma_f32", "sim_gemm"]}


def preflight(names: list[str], say) -> list[str]:
    """The ``names`` that launch cleanly on the GPU: tried together in a child process, then
    one by one (each in its own) if that fails.

    The Hopper extras had never run on a GPU: a faulting kernel leaves the CUDA context
    unusable, which would lose every later item of the run (and the whole ncu pass).
    """
    import subprocess

    def launches(batch: list[str]) -> tuple[object, str]:
        launch = "; ".join(f"g.launcher({n!r}, 64)()" for n in batch)
        code = ("import sys, tempfile; from pathlib import Path; "
                f"sys.path.insert(0, {str(REPO / 'benchmarks')!r}); "
                "from _readonly_nvml import forbid_nvml_setters; forbid_nvml_setters(); "
                "from powermodels.microbench.gpu import MicrobenchGpu; "
                f"g = MicrobenchGpu(Path(tempfile.gettempdir()) / 'pm_cubins', names={batch!r}); "
                f"{launch}; g.cp.cuda.Device().synchronize(); "
                "v = float(g.out[:1024].sum()); print('finite' if v == v else 'NaN in out')")
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                  timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                      [str(REPO / "src"), os.environ.get("PYTHONPATH", "")])})
            # a NaN output (operands read from the wrong place) still runs the instruction: kept
            return proc.returncode, (proc.stdout if proc.returncode == 0 else
                                     proc.stderr or proc.stdout)[-400:].strip()
        except subprocess.TimeoutExpired:
            return "timeout", "no result in 120 s"

    rc, tail = launches(names)  # all at once first: one child process when nothing faults
    if rc == 0:
        say(f"preflight {', '.join(names)}: launched and synchronised cleanly ({tail})")
        return list(names)
    ok = []
    for name in names:  # then one by one, to keep those that work
        rc, tail = launches([name])
        if rc == 0:
            ok.append(name)
            say(f"preflight {name}: launched and synchronised cleanly ({tail})")
        else:
            say(f"WARNING: preflight {name} failed (rc={rc}): {tail}; left out of the run")
    return ok


def cmd_measure(args) -> int:
    from powermodels.microbench.catalog import HOPPER_MICROBENCHMARKS, MICROBENCHMARKS

    if args.device == "simulated":
        from powermodels.microbench.simulated import SimulatedInstructionBackend

        backend = SimulatedInstructionBackend(noise=0.01, seed=3, hopper_extras=args.hopper_extras)
        workloads = ["sim"]
    else:
        from powermodels.microbench.gpu import CupyNcuBackend

        backend = CupyNcuBackend(hopper_extras=args.hopper_extras)
        workloads = ["heldout", "fresh"]
    extras = list(HOPPER_MICROBENCHMARKS) if args.hopper_extras else []
    counts_from = None if args.counts_from in ("", "none") else Path(args.counts_from)
    if counts_from is not None and not counts_from.is_dir():
        raise SystemExit(f"--counts-from: {counts_from} is not a folder (give 'none' to profile all)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with logged(out, print) as say:
        if extras and args.device == "nvml":
            extras = preflight(extras, say)
        micro = [*MICROBENCHMARKS, *extras]
        say(f"measure: {len(micro)} microbenchmarks ({'with' if args.hopper_extras else 'without'} "
            f"the Hopper extras), workloads {workloads}, device {args.device}, counts from "
            f"{counts_from or 'a full ncu profile'}")
        _, micro_t, wl = measure_and_profile(backend, out, micro, workloads, resume=args.resume,
                                             say=say, counts_from=counts_from,
                                             recheck=RECHECK[args.device])
        micro_t.to_parquet(out / "wattchmen_microbench.parquet")
        wl.to_parquet(out / "wattchmen_workloads.parquet")
        say(f"tables: {micro_t.shape} microbenchmarks, {wl.shape} workloads")
    return 0


def _as_is_own_static(reference, wl: pd.DataFrame) -> float:
    table = prediction_table(wl).drop(columns=[schema.STATIC_POWER_W])
    y = table[schema.ENERGY_J].to_numpy()
    return float(np.mean(np.abs(reference.predict(table) - y) / y) * 100)


def report(reference, micro: pd.DataFrame, wl: pd.DataFrame, seeds: int, title: str,
           gpu_note: str, params: dict | None = None) -> str:
    table = compare_transfer(reference, micro, wl, fraction=0.1, seeds=range(seeds),
                             subset=None, model_params=params)
    own = _as_is_own_static(reference, wl)
    table.loc[len(table)] = {"table": "reference table as is (its own static power)",
                             "mape_pct": own, "se_pct": float("nan"), "n": 1, "microbenchmarks": 0}
    per = prediction_table(wl)
    seed0 = compare_transfer(reference, micro, wl, fraction=0.1, seeds=[0])
    table.loc[len(table)] = {"table": "transferred (seed-0 subset alone)",
                             "mape_pct": float(seed0["mape_pct"].iloc[0]), "se_pct": float("nan"),
                             "n": 1, "microbenchmarks": int(seed0["microbenchmarks"].iloc[0])}
    text = (f"# {title}\n\n{gpu_note}\n\nMAPE over {len(per)} held-out workloads of the new GPU; "
            f"transferred rows: random 10 % of the microbenchmarks + NANOSLEEP, line fitted to "
            f"their energies (`method='rows'`), {seeds} subsets (mean ± standard error).\n\n"
            + markdown_table(table, float_format=".3g") + f"\n\n{WATTCHMEN_FIG14}.\n")
    return text


def selection(micro: pd.DataFrame, wl: pd.DataFrame,
              power_limit_w: float | None = None) -> tuple[dict, str, pd.DataFrame]:
    """Settings chosen by leave-one-microbenchmark-out CV (workloads unread), and the report part.

    The held-out errors of every candidate are printed too (after the choice, which they do not
    enter), so that a reader can see what the choice cost or gained. With ``power_limit_w`` every
    candidate is also scored with its predictions held at the limit. Where the table has rows of
    :data:`~powermodels.microbench.catalog.MEASUREMENT_ROWS`, every candidate is also scored with
    each group of them held back (not trained on, still scored), so the same CV decides whether
    they are used. Returns the chosen settings, the report part and the rows the chosen fit uses.
    """
    from powermodels.microbench.catalog import MEASUREMENT_ROWS

    cv = cross_validate_instruction_models(micro, power_limit_w=power_limit_w, progress=print,
                                           row_groups=MEASUREMENT_ROWS)
    best = cv.iloc[0]
    params = dict(best["params"])

    def rows(held_back) -> pd.DataFrame:
        return micro[~micro[schema.WORKLOAD].isin(held_back)].reset_index(drop=True)

    used = rows(best["held_back"])
    chosen = fit_instruction_model(used, **params)
    per = prediction_table(wl)
    y = per[schema.ENERGY_J].to_numpy()
    err = 100 * (chosen.predict(per) / y - 1)
    held = [float(np.mean(np.abs(fit_instruction_model(rows(h), **p).predict(per) / y - 1)) * 100)
            for p, h in zip(cv["params"], cv["held_back"], strict=True)]
    shown = cv.assign(heldout_mape_pct=held, params=cv["params"].map(lambda p: str(p) or "{}"),
                      held_back=cv["held_back"].map(lambda h: ", ".join(h) or "-"))
    measured_rows = bool(any(cv["held_back"].map(len)))
    if not measured_rows:  # no measurement rows in this table: the report as before
        shown = shown.drop(columns="held_back")
    per_wl = pd.DataFrame({"workload": per[schema.WORKLOAD], "measured_j": y,
                           "predicted_j": chosen.predict(per), "error_pct": err})
    SUMMARY.append({"candidate": best["candidate"], "params": params,
                    **({"held_back": list(best["held_back"])} if measured_rows else {}),
                    "cv_mape_pct": float(best["cv_mape_pct"]), "n_micro": int(best["n"]),
                    "heldout_mape_pct": float(np.mean(np.abs(err))),
                    "per_workload_error_pct": dict(zip(per_wl["workload"], map(float, err)))})
    text = (f"## Held-out workloads, settings chosen on the microbenchmarks\n\n"
            f"**{np.mean(np.abs(err)):.1f} % MAPE** over {len(per)} held-out workloads with "
            f"**{best['candidate']}** (`{params}`), the setting with the lowest "
            f"leave-one-microbenchmark-out error ({best['cv_mape_pct']:.1f} %, {best['n']} "
            f"microbenchmarks left out one at a time; `nanosleep`, the static-power reference, "
            f"always kept). The workloads were not read while choosing; their MAPE under every "
            f"candidate is listed after the choice.\n\n"
            + markdown_table(shown, float_format=".3g") + "\n\nPer workload (chosen setting):\n\n"
            + markdown_table(per_wl, float_format=".3g") + "\n")
    return params, text, used


def clock_section(params: dict, micro: pd.DataFrame, wl: pd.DataFrame) -> str:
    """Report part: do the workloads that ran below the top clock miss because of the clock?"""
    check = clock_check(fit_instruction_model(micro, **params), micro, wl)
    probed = schema.CLOCK_SOURCE in wl and (wl[schema.CLOCK_SOURCE] == "probe").all()
    where = ("median of the on-GPU clock probes of the power window" if probed
             else "NVML reading at the end of the power window")
    if check.empty:
        return ("## The clock each workload ran at\n\nEvery workload ran at the microbenchmarks' "
                f"clock ({where}).\n")
    return ("## The clock each workload ran at\n\n"
            f"{len(check)} workloads ran below the microbenchmarks' clock "
            f"({check['top_clock_mhz'].iloc[0]:.0f} MHz, their median; {where}), held by the "
            "power limit. Predicting them at the clock they ran at scales "
            "each instruction's dynamic energy by (V(f)/V(f_top))² ≤ 1 for any voltage curve "
            "that does not fall with the clock, so it can only lower the predictions below: the "
            "errors shown are the best case (V flat). The model's own power for them (E_pred / "
            "T) is far below the limit they ran at, so by the model they would not have been "
            "capped at all: their instruction energies are too low, not their clock. "
            "`dynamic_factor` is what the dynamic part would need to be multiplied by.\n\n"
            + markdown_table(check.drop(columns=["top_clock_mhz"]).astype({schema.SM_CLOCK_MHZ: int}),
                             float_format=".3g") + "\n")


def held_out_workloads(data: Path) -> pd.DataFrame:
    """The held-out workloads of a dataset folder: ``wattchmen_workloads.parquet``, and the fresh
    set ``wattchmen_fresh_workloads.parquet`` where the folder has one (the H200's second set, its
    own static power; opcodes one set lacks count 0)."""
    files = (data / "wattchmen_workloads.parquet", data / "wattchmen_fresh_workloads.parquet")
    tables = [pd.read_parquet(f) for f in files if f.is_file()]
    wl = pd.concat(tables, ignore_index=True)
    return wl.fillna({c: 0.0 for c in schema.opcode_columns(wl)})


def power_limit(data: Path, given: float | None) -> float | None:
    """The board's power limit: ``--power-limit-w``, else the record's ``info.power_limit_w``."""
    if given:
        return float(given)
    record = data / "measure.json"
    if record.is_file():
        import json

        value = json.loads(record.read_text()).get("info", {}).get("power_limit_w")
        return float(value) if value else None
    return None


def cmd_analyze(args) -> int:
    from powermodels.microbench.catalog import OPERAND_VARIANTS

    data = Path(args.data)
    micro_all = pd.read_parquet(data / "wattchmen_microbench.parquet")
    wl = held_out_workloads(data)
    limit = power_limit(data, args.power_limit_w)
    variants = sorted(set(micro_all[schema.WORKLOAD]) & set(OPERAND_VARIANTS))
    # fixed before the workloads are read (instruction_diagnostics says why CV cannot choose):
    # workloads run on changing data, so a toggling-operand row stands for its instruction
    micro = with_operand_variants(micro_all, "toggling")
    params, chosen_text, micro = selection(micro, wl, limit)
    source = "--power-limit-w" if args.power_limit_w else "measure.json"
    limit_note = (f"Power limit {limit:g} W ({source}): every candidate is scored with and "
                  "without its predictions held at limit × time." if limit
                  else "No power limit known: predictions unlimited.")
    parts = [limit_note + "\n\n" + chosen_text]
    if variants:
        fixed = with_operand_variants(micro_all, "fixed")
        fixed_params, fixed_text, fixed = selection(fixed, wl, limit)
        parts[0] = (f"Operand-toggling rows {variants} stand in for "
                    f"{[OPERAND_VARIANTS[v] for v in variants]} (chosen before the workloads "
                    f"were read; the fixed-operand table follows for comparison).\n\n" + parts[0])
        parts.append(fixed_text.replace("## Held-out workloads,",
                                        "## Fixed-operand table (comparison): held-out workloads,", 1))
    else:
        fixed, fixed_params = micro, params
    parts.append(clock_section(params, micro, wl))
    name = "_".join(data.resolve().parts[-2:])  # datasets/h100/wattchmen -> h100_wattchmen
    import json

    (RESULTS / f"wattchmen_transfer_{name}.json").write_text(json.dumps(
        {"data": str(args.data), "power_limit_w": limit, "tables": SUMMARY}, indent=1) + "\n")
    if args.reference == "none":
        return write_report("# Wattchmen on one GPU\n\n" + "\n".join(parts),
                            RESULTS / f"wattchmen_transfer_{name}.md")
    ref_micro = pd.read_parquet(Path(args.reference) / "wattchmen_microbench.parquet")
    reference = fit_instruction_model(ref_micro, **fixed_params)
    shown = Path(args.reference).resolve()
    shown = shown.relative_to(REPO) if shown.is_relative_to(REPO) else shown
    note = (f"reference: `{shown}` ({len(ref_micro)} microbenchmarks); "
            f"new GPU: `{args.data}` ({len(fixed)} fixed-operand microbenchmarks, as the "
            f"reference's, {len(wl)} workloads); every table below with the setting "
            f"`{fixed_params}` chosen on them")
    text = report(reference, fixed, wl, args.seeds, "Wattchmen §6 transfer", note, fixed_params)
    text = text.replace("\n\n", "\n\n" + "\n".join(parts) + "\n## Transfer from the reference GPU\n\n", 1)
    return write_report(text, RESULTS / f"wattchmen_transfer_{name}.md")


def cmd_simulated(args) -> int:
    from powermodels.microbench.simulated import SimulatedInstructionBackend
    from powermodels.instruction_energy.calibration import calibrate_instructions

    with tempfile.TemporaryDirectory() as tmp:
        a = calibrate_instructions(SimulatedInstructionBackend("sim-hopper-a", noise=args.noise,
                                                               seed=1),
                                   Path(tmp) / "a", say=lambda m: None)
        b = calibrate_instructions(SimulatedInstructionBackend("sim-hopper-b", noise=args.noise,
                                                               seed=2),
                                   Path(tmp) / "b", workloads=["sim"], say=lambda m: None)
    note = (f"simulated GPUs: `sim-hopper-a` → `sim-hopper-b` (energies 0.8·e + 40 pJ with 5 % "
            f"log-normal scatter per opcode, static power 140 → 110 W), {args.noise:.0%} power noise")
    text = report(a.model, b.micro, b.workloads, args.seeds,
                  "Wattchmen §6 transfer on the simulated GPU", note)
    return write_report(text, RESULTS / "wattchmen_transfer_simulated.md")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", default=os.environ.get("OUT", "wattchmen_transfer_out"))
    m.add_argument("--resume", action="store_true", help="keep the items of --out/measure.json")
    m.add_argument("--hopper-extras", action="store_true",
                   help="also measure the opt-in microbenchmarks (catalog.HOPPER_MICROBENCHMARKS: "
                        "warp-group MMA, operand-toggling variants, HGMMA per arrive group, "
                        "irregular DRAM accesses), as `calibrate-instructions --hopper-extras` does")
    m.add_argument("--device", choices=["nvml", "simulated"], default="nvml",
                   help="nvml: the GPU (CuPy, NVML, ncu); simulated: the simulated backend")
    m.add_argument("--counts-from", default=str(REPO / "datasets" / "h100" / "wattchmen"),
                   help="earlier run on the same GPU model whose ncu counts are reused (only new "
                        "items and a few checks are profiled; another GPU model: all are); "
                        "'none' profiles every item (~12 min on an H100)")
    a = sub.add_parser("analyze")
    a.add_argument("--data", default=str(REPO / "datasets" / "h100" / "wattchmen"))
    a.add_argument("--reference", default=str(REPO / "datasets" / "h200"),
                   help="reference GPU's dataset for the transfer rows; 'none' leaves them out")
    a.add_argument("--power-limit-w", type=float, default=None,
                   help="the board's power limit (W) when measure.json does not record it; each "
                        "candidate is then also scored with predictions held at limit × time")
    a.add_argument("--seeds", type=int, default=20)
    s = sub.add_parser("simulated")
    s.add_argument("--seeds", type=int, default=20)
    s.add_argument("--noise", type=float, default=0.01)
    args = p.parse_args(argv)
    return {"measure": cmd_measure, "analyze": cmd_analyze, "simulated": cmd_simulated}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
