"""Calibrate the per-instruction energy table on the user's GPU (Wattchmen §3-§5).

One call, :func:`calibrate_instructions`, does what ``benchmarks/gpu_wattchmen.py
measure`` + ``analyze`` did for the H200 dataset:

1. **energy** — idle power, then the steady-state power and time per launch of
   every microbenchmark (:mod:`powermodels.microbench.catalog`) and of any
   validation workloads, written to ``measure.json`` after each item (a crash
   loses nothing; ``resume=True`` skips what is there);
2. **counts** — ncu passes (``--clock-control none``: clocks are never locked)
   for SASS opcode counts with modifiers, L1/L2 hit rates and sector counters
   (``ncu_raw.csv.gz``, ``ncu_sectors.csv.gz``);
3. **tables** — :mod:`.instruction_tables` (``instructions_microbench.parquet``,
   ``instructions_workloads.parquet``);
4. **fit** — :class:`~powermodels.models.InstructionEnergyModel` on the
   microbenchmarks, saved as a calibration file (``instructions.pmcal``), and
   the validation workloads' errors (:func:`evaluate_instruction_model`).

Nothing GPU-specific is in this module: the backend measures (the real GPU:
:class:`~powermodels.microbench.gpu.CupyNcuBackend`; the simulated
one: :class:`~powermodels.microbench.simulated.SimulatedInstructionBackend`),
and the power limit, clocks and static power come from the measurements.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from .tables import STATIC_MICROBENCHMARK, plan_of, tables_from_profiles

__all__ = ["MEASURED_ONLY", "InstructionCalibration", "calibrate_instructions",
           "evaluate_instruction_model", "finish_calibration", "fit_instruction_model",
           "measure_energy", "prediction_table", "refit_from_raw"]

#: Columns a profiler cannot give: dropped before fitting and predicting.
MEASURED_ONLY = (schema.POWER_W, schema.TEMPERATURE_C, schema.SM_CLOCK_MHZ, schema.CLOCK_SOURCE)
RECORD = "measure.json"
MICRO_TABLE = "instructions_microbench.parquet"
WORKLOAD_TABLE = "instructions_workloads.parquet"
CALIBRATION = "instructions.pmcal"


def prediction_table(table: pd.DataFrame) -> pd.DataFrame:
    """Rows with a finite energy, without the columns only a power measurement gives."""
    table = table[np.isfinite(table[schema.ENERGY_J])]
    ops = schema.opcode_columns(table)
    if ops:
        table = table[table[ops].sum(axis=1) > 0]
    return table.drop(columns=[c for c in MEASURED_ONLY if c in table.columns]).reset_index(drop=True)


def fit_instruction_model(micro: pd.DataFrame, **params):
    """:class:`~powermodels.models.InstructionEnergyModel` (``params``) fitted on a microbenchmark table."""
    from ..models import InstructionEnergyModel

    return InstructionEnergyModel(**params).fit(prediction_table(micro))


def evaluate_instruction_model(micro: pd.DataFrame, workloads: pd.DataFrame, **params):
    """Direct and extended predictions of held-out workloads (Wattchmen §5.2).

    Parameters
    ----------
    micro : DataFrame
        Microbenchmark instruction table (training rows).
    workloads : DataFrame
        Held-out workloads' instruction table with measured ``energy_j``.
    **params
        :class:`~powermodels.models.InstructionEnergyModel` parameters
        (``extension`` is set to "none" for direct and "bucket" for extended).

    Returns
    -------
    per_workload : DataFrame
        ``workload``, ``energy_j`` (measured), ``direct_j``, ``direct_ape_pct``,
        ``extended_j``, ``extended_ape_pct``, ``direct_coverage``, ``extended_coverage``.
    summary : dict
        ``direct_mape_pct``, ``extended_mape_pct``, ``direct_coverage_pct``,
        ``extended_coverage_pct``, ``n_workloads`` and the extended ``model``.
    """
    micro, wl = prediction_table(micro), prediction_table(workloads)
    if not len(wl):
        raise ValueError("workloads: no row with a finite energy and instruction counts")
    y = wl[schema.ENERGY_J].to_numpy()
    out = pd.DataFrame({schema.WORKLOAD: wl[schema.WORKLOAD], schema.ENERGY_J: y})
    summary: dict = {}
    for label, ext in (("direct", "none"), ("extended", "bucket")):
        model = fit_instruction_model(micro, **{**params, "extension": ext})
        pred = model.predict(wl)
        out[f"{label}_j"] = pred
        out[f"{label}_ape_pct"] = np.abs(pred - y) / y * 100
        out[f"{label}_coverage"] = model.coverage(wl)
        summary[f"{label}_mape_pct"] = float(out[f"{label}_ape_pct"].mean())
        summary[f"{label}_coverage_pct"] = float(100 * out[f"{label}_coverage"].mean())
        summary[f"{label}_model"] = model
    summary["n_workloads"] = len(wl)
    return out, summary


@dataclass
class InstructionCalibration:
    """What :func:`calibrate_instructions` produced (files are in ``out``)."""

    out: Path
    record: dict
    micro: pd.DataFrame
    workloads: pd.DataFrame
    model: object
    per_workload: pd.DataFrame | None = None
    summary: dict = field(default_factory=dict)


#: What in a backend's ``info()`` changes the measurements: a resume must match it.
IDENTITY = ("gpu", "uuid")


def _set_aside(path: Path, why: str, say) -> None:
    import datetime as _dt

    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    path.replace(aside)
    say(f"WARNING: {path} is unreadable ({why}); kept as {aside.name}, measuring anew")


def _load_record(path: Path, resume: bool, say=print) -> dict | None:
    """The record of an earlier run to resume from; a damaged one is set aside with a warning."""
    if not (resume and path.is_file()):
        return None
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        _set_aside(path, f"{type(err).__name__}: {err}", say)
        return None
    shape = {"micro": dict, "workloads": dict, "info": (dict, type(None))}
    bad = [k for k, kind in shape.items() if not isinstance(record.get(k) if isinstance(record, dict)
                                                            else None, kind)]
    if not isinstance(record, dict) or bad:
        _set_aside(path, f"not a measure record: field(s) {bad or ['(top level)']} missing or of the "
                         "wrong type", say)
        return None
    return record


def check_resume_identity(record: dict, info: dict, path: Path) -> None:
    """Refuse to resume ``record`` on another GPU/preset than ``info`` (ValueError naming what changed)."""
    old = record.get("info") or {}
    changed = [f"{k} {old.get(k)!r} -> {info.get(k)!r}" for k in IDENTITY
               if k in old and old.get(k) != info.get(k)]
    if changed:
        raise ValueError(f"--resume: {path} was measured on another device ({'; '.join(changed)}); "
                         "run without --resume to measure anew, or give another --out")


def write_json(path: Path, obj) -> None:
    """``obj`` as JSON, atomically and durably (a crash or a full disk leaves the previous file)."""
    from ..files import write_json as write_durably

    write_durably(path, obj, indent=1)


def measure_energy(backend, out: Path, micro: list[str], workloads=(), *, resume=False,
                   say=print) -> dict:
    """Step 1: idle power, then steady-state power and time of every item (``measure.json``)."""
    path = out / RECORD
    record = _load_record(path, resume, say) or {"info": None, "idle_power_w": None, "micro": {},
                                                 "workloads": {}, "specs": list(workloads)}
    backend.open(micro)
    try:
        info = backend.info()
        check_resume_identity(record, info, path)
        record["info"] = record["info"] or info
        say(json.dumps(record["info"]))
        if record["idle_power_w"] is None:
            record["idle_power_w"] = backend.idle_power()
            write_json(path, record)
        say(f"idle power {record['idle_power_w']:.2f} W")
        t0 = time.monotonic()
        _measure_items(record, "micro", micro, backend.measure_microbenchmark, path, say)
        names, problems = backend.prepare_workloads(list(workloads)) if workloads else ([], [])
        for p in problems:
            say(f"workload not built: {p}")
        _measure_items(record, "workloads", names, backend.measure_workload, path, say)
        say(f"energy phase took {time.monotonic() - t0:.0f} s")
    finally:
        backend.close()
    return record


def _measure_items(record: dict, key: str, names: list[str], measure, path: Path, say) -> None:
    """Measure each item not yet in ``record[key]``, saving the record after each one."""
    for i, name in enumerate(names):
        if name in record[key]:
            continue
        try:
            res = measure(name)
            record[key][name] = res
            write_json(path, record)
            iters = f" iters={res['iters']:8d}" if "iters" in res else ""
            say(f"[{i + 1}/{len(names)}] {name:20s}{iters} t={res['time_s'] * 1e3:8.3f} ms "
                f"P={res['power_w']:7.2f} W T={res['temperature_c']:.0f}C "
                f"f={res['sm_clock_mhz']:.0f}")
        except Exception as err:  # noqa: BLE001 - one broken item must not lose the rest
            say(f"{name}: FAILED {type(err).__name__}: {err}")


def calibrate_instructions(backend, out, *, micro=None, workloads=(), resume: bool = False,
                           model_params: dict | None = None, say=print) -> InstructionCalibration:
    """Measure, profile, tabulate and fit the per-instruction energy table (module docstring).

    Parameters
    ----------
    backend : CupyNcuBackend or SimulatedInstructionBackend
        Measures energy and profiles counts.
    out : path
        Output folder (created): ``measure.json``, ``ncu_raw.csv.gz``,
        ``ncu_sectors.csv.gz``, the two instruction tables, ``instructions.pmcal``
        and ``summary.json``.
    micro : list of str, optional
        Microbenchmarks to measure (default: all of the backend's). The
        static-power benchmark ``nanosleep`` is always added.
    workloads : sequence of str
        Validation workloads (backend-specific specs: ``"heldout"``,
        ``"fresh"``, registry names, ``"module:function"``; on the simulated
        GPU ``"sim"`` or a :data:`~powermodels.microbench.simulated.SIM_WORKLOADS` name).
    resume : bool, default=False
        Keep the items of an existing ``measure.json`` in ``out``, measured
        on the same GPU (name and UUID; a simulated preset has its own): a
        record of another one is refused (``ValueError`` naming what changed),
        and an unreadable one is set aside as ``measure.json.corrupt-<time>``
        with a warning, and everything is measured anew.
    model_params : dict, optional
        :class:`~powermodels.models.InstructionEnergyModel` parameters.
    say : callable
        Progress lines (also appended to ``calibrate_log.txt``).

    Returns
    -------
    InstructionCalibration
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with logged(out, say) as tell:
        names = list(micro) if micro else backend.microbenchmarks()
        unknown = sorted(set(names) - set(backend.microbenchmarks()))
        if unknown:
            raise ValueError(f"micro: unknown microbenchmarks {unknown}")
        if STATIC_MICROBENCHMARK not in names:
            names.append(STATIC_MICROBENCHMARK)
        record, micro_t, wl_t = measure_and_profile(backend, out, names, workloads,
                                                    resume=resume, say=tell)
        return finish_calibration(out, record, micro_t, wl_t, model_params, tell)


@contextlib.contextmanager
def logged(out: Path, say=print):
    """``say`` that also appends each line to ``out/calibrate_log.txt``."""
    with open(out / "calibrate_log.txt", "a") as log:
        def tell(msg):
            say(msg)
            log.write(msg + "\n")
            log.flush()

        yield tell

def measure_and_profile(backend, out: Path, micro: list[str], workloads=(), *, resume=False,
                        say=print, counts_from=None, recheck=(),
                        ) -> tuple[dict, pd.DataFrame, pd.DataFrame]:
    """Steps 1-2 and the tables: energy record, ncu profiles (gzipped CSVs), instruction tables.

    Parameters
    ----------
    counts_from : path, optional
        Folder of an earlier calibration on the same GPU model and toolchain (its
        ``measure.json`` and ncu CSVs). Instruction counts are a property of the code, the
        compiler and the GPU model, not of the board, so the items it profiled are not
        profiled again (the opcode pass costs ~0.5 s per kernel: 6 of a run's 12 minutes);
        only the new ones and ``recheck`` are. Energy and time are always measured anew.
        ``record["counts_from"]`` names the source and the reused items.
    recheck : sequence of str
        Items of ``counts_from`` profiled again as a check that its counts still hold
        (``record["counts_check"]``: new ÷ old total instructions; the new counts are used).
    """
    from .tables import count_ratios, earlier_profiles, item_launches, profile_plan

    # read before the energy phase: a wrong folder fails at once, not after minutes on the GPU
    earlier = earlier_profiles(counts_from) if counts_from is not None else None
    record = measure_energy(backend, out, micro, workloads, resume=resume, say=say)
    if not record["micro"]:
        raise RuntimeError("no microbenchmark was measured (see calibrate_log.txt)")
    plan = {**plan_of(record), "specs": list(record.get("specs", workloads))}
    info = (earlier[0].get("info") or {}) if earlier else {}
    differ = [f"{k} {info.get(k)!r} there, {record['info'].get(k)!r} here"
              for k in ("gpu", "sm_count") if earlier and info.get(k) != record["info"].get(k)]
    if differ:  # counts scale with the SM count, and kernels differ between GPU models
        say(f"WARNING: counts_from {counts_from} was profiled on another GPU model "
            f"({'; '.join(differ)}): profiling every item")
        earlier = None
    if earlier is not None:
        old_plan = profile_plan(earlier[0])
        for key in ("micro", "workloads"):
            plan[key] = [n for n in plan[key] if n not in old_plan[key] or n in recheck]
        record["profile_plan"] = {k: plan[k] for k in ("micro", "workloads")}
        record["counts_from"] = {
            "path": str(counts_from), "gpu": info.get("gpu"), "uuid": info.get("uuid"),
            "date_utc": info.get("date_utc"),
            "reused": [n for k in ("micro", "workloads") for n in record[k]
                       if n not in plan[k]]}
        say(f"counts from {counts_from}: {len(record['counts_from']['reused'])} items reused, "
            f"profiling {len(plan['micro'])} microbenchmarks and {len(plan['workloads'])} workloads")
    prof = backend.profile(plan, say)
    record["ncu_metric"] = prof["metric"]
    if earlier is not None:
        metric = earlier[0].get("ncu_metric", prof["metric"])
        check = count_ratios(item_launches(prof["opcode_csv"], record["profile_plan"], prof["metric"]),
                             item_launches(earlier[1], profile_plan(earlier[0]), metric))
        record["counts_check"] = check
        say("counts check (new ÷ reused total instructions): "
            + (", ".join(f"{n} {r:.4f}" for n, r in check.items()) or "no item rechecked"))
    write_json(out / RECORD, record)
    for key, name in (("opcode_csv", "ncu_raw.csv.gz"), ("sector_csv", "ncu_sectors.csv.gz")):
        with gzip.open(out / name, "wt") as f:
            f.write(prof[key] or "")
    # with reused counts an empty sector CSV means "this run profiled nothing itself" (the earlier
    # run's sector profile then gives every item's traffic); without, it means no sector profile
    sector_csv = prof["sector_csv"] if earlier is not None else (prof["sector_csv"] or None)
    return record, *tables_from_profiles(record, prof["opcode_csv"], sector_csv, earlier)


def finish_calibration(out: Path, record: dict, micro_t: pd.DataFrame, wl_t: pd.DataFrame,
                       model_params: dict | None = None, say=print, model=None,
                       ) -> InstructionCalibration:
    """Steps 3-4: write the tables, fit (unless ``model`` is given), save, validate."""
    from ..io import save_calibration

    from ..files import atomic_open

    for table, name in ((micro_t, MICRO_TABLE), (wl_t, WORKLOAD_TABLE)):
        with atomic_open(out / name) as fh:
            table.to_parquet(fh)
    say(f"tables: {micro_t.shape} microbenchmarks, {wl_t.shape} workloads")
    params = dict(model_params or {})
    model = fit_instruction_model(micro_t, **params) if model is None else model
    info = record.get("info") or {}
    meta = {"kind": "instruction_energy", "gpu": info.get("gpu"), "uuid": info.get("uuid"),
            "microbenchmarks": len(micro_t), "static_power_w": model.static_power_w_}
    if getattr(model, "transfer_", None):
        meta["transfer"] = model.transfer_
    save_calibration(model, out / CALIBRATION, meta)
    summary = {"gpu": info.get("gpu"), "microbenchmarks": len(micro_t),
               "features": len(model.energies_), "rank": model.rank_,
               "relative_residual": model.relative_residual_,
               "static_power_w": model.static_power_w_}
    if getattr(model, "transfer_", None):  # rank and residual are the reference's: not said
        summary.pop("rank"), summary.pop("relative_residual")
        say(f"transferred table from {len(micro_t)} microbenchmarks: {len(model.energies_)} "
            f"opcode features, static+constant power {model.static_power_w_:.1f} W "
            f"-> {out / CALIBRATION}")
    else:
        say(f"fit on {len(micro_t)} microbenchmarks: {len(model.energies_)} opcode features, "
            f"rank {model.rank_}, relative residual {model.relative_residual_:.3f}, "
            f"static+constant power {model.static_power_w_:.1f} W -> {out / CALIBRATION}")
    per = None
    if len(wl_t) and len(prediction_table(wl_t)):
        wl = prediction_table(wl_t)
        if getattr(model, "transfer_", None):  # a transferred table: predict with it as is
            y = wl[schema.ENERGY_J].to_numpy()
            pred = model.predict(wl)
            per = pd.DataFrame({schema.WORKLOAD: wl[schema.WORKLOAD], schema.ENERGY_J: y,
                                "extended_j": pred, "extended_ape_pct": np.abs(pred - y) / y * 100})
            summary["extended_mape_pct"] = float(per["extended_ape_pct"].mean())
            summary["n_workloads"] = len(per)
        else:
            per, ev = evaluate_instruction_model(micro_t, wl_t, **params)
            summary.update({k: v for k, v in ev.items() if not k.endswith("_model")})
            say(f"validation workloads: direct MAPE {ev['direct_mape_pct']:.1f} %, "
                f"extended MAPE {ev['extended_mape_pct']:.1f} % over {ev['n_workloads']}")
    write_json(out / "summary.json", summary)
    return InstructionCalibration(out, record, micro_t, wl_t, model, per, summary)


def _raw_file(folder: Path, *names: str) -> Path | None:
    for name in names:
        for suffix in ("", ".gz"):
            if (folder / (name + suffix)).is_file():
                return folder / (name + suffix)
    return None


def refit_from_raw(raw, out, *, model_params: dict | None = None, say=print,
                   ) -> InstructionCalibration:
    """Steps 3-4 from the raw files of an earlier calibration (no GPU).

    ``raw`` holds ``measure.json`` (or the H200 dataset's ``wattchmen_measure.json``)
    and the ncu CSVs (``ncu_raw.csv[.gz]``, optionally ``ncu_sectors.csv[.gz]``).
    """
    from .tables import rebuild_tables

    raw, out = Path(raw), Path(out)
    record_path = _raw_file(raw, RECORD, "wattchmen_measure.json")
    opcodes = _raw_file(raw, "ncu_raw.csv")
    if record_path is None or opcodes is None:
        raise FileNotFoundError(f"--from-raw: {raw} lacks measure.json or ncu_raw.csv[.gz]")
    out.mkdir(parents=True, exist_ok=True)
    micro_t, wl_t = rebuild_tables(record_path, opcodes, _raw_file(raw, "ncu_sectors.csv"))
    record = json.loads(record_path.read_text())
    return finish_calibration(out, record, micro_t, wl_t, model_params, say)
