"""Refit the shipped presets' power-cap controller under the step and the period controller and choose.

Usage: ``python benchmarks/twin_cap_refit.py --out DIR [--preset h100-sxm] [--preset h200-raw] [--write-preset]
[--fold]`` (no GPU; ~3–6 min per preset on a busy core, ~8 min for the fold).

For each preset, its own fitting recording (real: ``datasets/h100/raw-2026-11-25``, GPU-14ab84a0, for
``h100-sxm``; ``datasets/h200-2026-11-27/raw_recording_168e6658``, GPU-168e6658, for ``h200-raw``) refits only
the controller stage (:func:`powermodels.twin.fit_cap_choice.fit_cap_controller`, ``controller="auto"``): the
cap gains, the core coefficient at the capped clock and the recovery rate by replay, under each controller, and
keeps the one with the better issue rows on that recording. Everything else in the preset stays as shipped.
Writes ``DIR/<preset>.json`` (and the shipped file with ``--write-preset``) and ``DIR/<preset>_choice.md``.

``--fold`` fits ``h100-sxm``'s method on the fitting recording with the bf16 GEMM's series and its cooling
held out (``fit_twin(..., holdout=series_holdout(...), search_cap_gains=False)``), then the controller stage
as before (step controller: gains and capped clock, analytic recovery rate) and with ``fit_cap_controller(...,
"auto")``, replays the whole recording on each and writes the held-out rows (``DIR/fold_bf16.md``).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.compare import compare_recordings
from powermodels.twin.fit import fit_twin, series_holdout
from powermodels.twin.fit_cap_choice import controller_table, fit_cap_controller
from powermodels.twin.fit_controller import fit_cap_gains, fit_capped_clock
from powermodels.twin.preset import PRESET_DIR, load_preset, save_preset
from powermodels.twin.replay import replay

ROOT = Path(__file__).resolve().parents[1]
FITTING = {"h100-sxm": ROOT / "datasets" / "h100" / "raw-2026-11-25",
           "h200-raw": ROOT / "datasets" / "h200-2026-11-27" / "raw_recording_168e6658"}
#: the presets refitted from: as shipped until session 9 (kept loadable under these names)
SOURCE = {"h100-sxm": "h100-sxm-session8", "h200-raw": "h200-raw-session8"}
CLOCK_WORKLOAD = "cupy_fma_loop"
BF16 = "torch_bf16_matmul_8192"


def refit(name: str, out: Path, write: bool) -> None:
    t = time.time()
    shipped = load_preset(SOURCE[name])
    rec = read_recording(FITTING[name], probes=False)
    report: dict = {}
    preset = fit_cap_controller(shipped, rec, controller="auto", clock_workload=CLOCK_WORKLOAD, keep_given=True,
                                report=report)
    choice = report["cap_controller"]
    prov = {k: v for k, v in shipped.provenance.items() if k != "kept_as"}
    prov["cap_controller_refit"] = {
        "by": "powermodels.twin.fit_cap_choice.fit_cap_controller (controller='auto', keep_given=True: the "
              "shipped controller scored beside the step and period refits)",
        "command": "python benchmarks/twin_cap_refit.py --out DIR --preset " + name + " --write-preset",
        "recording": str(FITTING[name].relative_to(ROOT)), "chosen": choice["chosen"],
        "criterion": choice["criterion"],
        "scores": {n: {"issue_rows": p["score"]["issue_rows"], "span_score_w": p["score"]["score_w"]}
                   for n, p in choice["fits"].items()},
        "refitted": ["cap_on_period", "cap_proportional", "cap_gain_per_s", "cap_repeat", "cap_offset_w",
                     "core_w_per_ghz (and the uncapped workloads' activities, their power kept)",
                     "clock_recovery_mhz_per_s"],
        "before": {k: getattr(shipped.physics, k) for k in ("cap_on_period", "cap_proportional", "cap_gain_per_s",
                                                             "cap_repeat", "cap_offset_w", "core_w_per_ghz",
                                                             "clock_recovery_mhz_per_s")},
        "fitted_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    fit = dict(shipped.fit)
    fit["cap_controller_refit"] = json.loads(json.dumps(report, default=float))
    preset = replace(preset, name=name, provenance=prov, fit=fit)
    if name == "h200-raw":  # the instant reading as h200's (benchmarks/twin_h200_preset.py, session 9)
        window, delay = _module("twin_h200_preset.py").instant_window()
        prov["instant_window"] = {"window_s": window, "delay_s": delay,
                                  "source": _module("twin_h200_preset.py").INSTANT_WINDOW_SOURCE,
                                  "before": prov.get("instant_window")}
        preset = replace(preset, sensor=replace(preset.sensor, instant_window_s=window, delay_s=delay))
    save_preset(preset, out / f"{name}.json")
    if write:
        save_preset(preset, PRESET_DIR / f"{name}.json")
    table = controller_table(report)
    rows = pd.DataFrame([{"controller": n, **r} for n, p in choice["fits"].items()
                         for r in p["score"]["capped_series"]])
    (out / f"{name}_choice.md").write_text(
        f"# {name}: cap controller refit on {FITTING[name].relative_to(ROOT)} (real)\n\nchosen: {choice['chosen']} "
        f"({choice['criterion']})\n\n" + markdown_table(table) + "\n\n" + markdown_table(rows)
        + f"\n\nwall {time.time() - t:.0f} s\n")
    print(table.to_string(), "\n", rows.to_string(), f"\n{name}: {time.time() - t:.0f} s", flush=True)


def _module(filename: str):
    """A benchmark script beside this one, imported by path (benchmarks/ is not a package)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(filename[:-3], Path(__file__).with_name(filename))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def fold(out: Path) -> None:
    t = time.time()
    validation = _module("twin_validation.py")
    BF16_TIME, WINDOW = validation.BF16_TIME, validation.WINDOW
    rec = read_recording(FITTING["h100-sxm"], probes=False)
    hold = series_holdout(rec, BF16)
    fitted = fit_twin(rec, name="fold-bf16", sensor_window=WINDOW, holdout=hold, workload_times=BF16_TIME,
                      search_cap_gains=False)
    # before: the session-8 controller stage (step controller, gains and capped clock, analytic recovery rate)
    base = fit_capped_clock(fit_cap_gains(fitted, rec, hold), rec, hold)
    report: dict = {}
    auto = fit_cap_controller(fitted, rec, hold, controller="auto", clock_workload=CLOCK_WORKLOAD, report=report)
    tables = []
    for label, p in (("step (as before)", base), (f"auto: {report['cap_controller']['chosen']}", auto)):
        save_preset(p, out / f"fold_bf16_{label.split()[0].strip(':')}.json")
        tw = replay(rec, p)
        tab = compare_recordings(rec, tw)
        sel = (tab[schema.WORKLOAD] == BF16) | tab[schema.CHECK_METRIC].str.contains("clock")
        tables.append(tab.loc[sel].assign(controller=label))
    merged = pd.concat(tables, ignore_index=True)
    (out / "fold_bf16.md").write_text(markdown_table(merged) + "\n\n" + markdown_table(controller_table(report))
                                      + f"\n\nwall {time.time() - t:.0f} s\n")
    print(merged.to_string(), f"\nfold: {time.time() - t:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--preset", action="append", choices=sorted(FITTING), default=[])
    ap.add_argument("--write-preset", action="store_true")
    ap.add_argument("--fold", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.preset:
        refit(name, out, args.write_preset)
    if args.fold:
        fold(out)


if __name__ == "__main__":
    main()
