"""Shipped presets on boards none of them saw: ``twin-compare`` per preset and recording, one table (no GPU).

Usage::

    PYTHONPATH=src python benchmarks/twin_unseen_boards.py --out DIR \\
        --preset h200-raw --preset h200-raw-pooled --preset h200-raw-pooled-cap \\
        --preset h200-raw-pooled:domains --preset h200-raw-pooled:domains:network \\
        [--workers 2] [--plot docs/img/unseen_boards.png] \\
        datasets/h200-2026-11-28/raw_recording_1efa3f60 ...

This is the issue's own test: "we keep real recordings you have not seen and replay them". Each
``--preset`` replays every recording through :func:`powermodels.twin.compare.twin_compare`, as the command
``powermodels twin-compare REC --preset NAME --out DIR/NAME/RECORDING`` does (recorded-causal ambient, five
sensor seeds for the capped start, the energy counter at the seed's phase: ``--counter-timing``, the recording's own
timing in sessions 28-32). ``NAME:SCALE`` first brings the preset to the recording's board from
the recording itself (:func:`powermodels.board_calibration.calibrated_preset`, ``--calibrate-board SCALE``;
its read seconds are in-sample and not scored; ``SCALE-bursts`` reads the natural part's bursts instead, no
series, session 28): that row is a calibrated twin, not a board-blind one, and
its memory factor tells the board's group (docs/twin.md, session 15). ``NAME:SCALE:THERMAL`` (``THERMAL`` one
of ``scale``, ``network`` (widened at a band edge), ``network-keep``, ``network-preset``; ``SCALE`` may be empty: ``NAME::network``)
calibrates the thermal network too, as
``--calibrate-thermal THERMAL`` does; ``network`` is fitted first (docs/twin.md, session 18), and ``-keep`` or
``-preset`` says what it does instead of widening when a time constant lands on its band's edge (session 20). ``part:A,B`` replays each recording on
the one of the presets ``A``, ``B`` … pooled over the board's own part number
(:func:`powermodels.board_calibration.parts.part_preset`; session 17). A last ``:cap=F`` multiplies the
(calibrated) core coefficient by ``F`` and divides the uncapped workloads' activities by it
(:func:`powermodels.twin.fit_controller.scaled_core`): a capped clock factor pooled over other boards, on top of
each board's own calibration (session 22); a last ``:cap`` instead reads the board's own capped clock before the
first series, ``:cap-probes`` its capped cycles from the probed pressure launches too
(``calibrated_preset(cap="clock" | "probes")``, session 23), ``:cap-rate`` then its settled cap power and capped
launch rate there, matched by replays at the recording's ambient (``cap="rate"``, session 27); ``:cap-recorded-ambient``
and ``:cap-probes-recorded-ambient`` fit the capped clock at the recording's ambient too, not the preset's constant
(``cap_ambient="recorded"``; it failed its test in session 28). An ending ``@AMBIENT`` replays with that ambient
(``twin-compare --ambient``), e.g. ``h200-raw-pooled:domains:network@initial``.

A preset that was fitted to, or pooled over, one of the recordings' boards is refused: the table is held
out or it is nothing. Folders already holding ``comparison.csv`` are read back, not replayed, so an
interrupted run resumes where it stopped. Writes ``DIR/rows.csv`` (every scored row), ``DIR/summary.md``
(per preset: median |worst second|, rows within target) and, with ``--plot``, each board's warm-up worst
second per workload and preset. Replays are simulated; the recordings are real. ~50 s per replay on one core.
"""

from __future__ import annotations

import argparse
import json
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
from _common import board_label, save_figure

from powermodels import schema
from powermodels.board_calibration import calibrated_preset
from powermodels.board_calibration.parts import part_preset
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.compare import AMBIENTS, twin_compare
from powermodels.twin.fit_controller import scaled_core
from powermodels.twin.preset import load_preset

#: a ``--preset`` label that picks, per recording, the candidate pooled over the board's part number
PART = "part:"
#: a ``--preset`` label's last field ``:cap=F``: the calibrated preset's core coefficient × ``F``, its uncapped
#: workloads' activities ÷ ``F`` (``scaled_core``): a capped clock factor pooled over other boards (session 22)
CAP = re.compile(r":cap=(?P<factor>[0-9.]+)$")
#: a ``--preset`` label's last field ``:cap``, ``:cap-probes`` or ``:cap-rate``: the board's own capped clock, read
#: before the first series (``calibrated_preset(cap="clock" | "probes" | "rate")``; ``-probes`` takes its capped cycles
#: from the probed pressure too, ``-rate`` then its settled cap power and launch rate, session 27)
CAP_OWN = re.compile(r":cap(?:-(?P<step>probes|rate))?(?P<recorded>-recorded-ambient)?$")
#: the ending of a ``:cap`` or ``:cap-probes`` whose capped clock fit replays at the recording's ambient
#: (``calibrated_preset(cap_ambient="recorded")``, session 28) instead of the preset's constant
RECORDED_AMBIENT = "-recorded-ambient"
#: a ``--preset`` label's ending ``@AMBIENT``: the replay's ambient (``twin_compare``'s ``ambient``; default recorded-causal)
AMBIENT = re.compile(r"@(?P<ambient>[a-z-]+)$")
#: the warm-up row's metric (a calibrated preset's reads "… worst second from second N on")
WARMUP = "warm-up energy per launch, worst second"
COOLING = "cooling temperature, worst second of 30 s"
OVERSHOOT = "cap overshoot: first-second mean above settled"
SETTLING = "cap settling time (1 s mean within 1 %)"


def preset_boards(name: str) -> set[str]:
    """Board ids (8 hex digits) a shipped preset was fitted to, pooled over or had its controller fitted on."""
    prov = load_preset(name).provenance
    uuids = [r.get("uuid", "") for r in prov.get("fitted_from", [])] + list(prov.get("pooled_boards", {}).get("boards", []))
    uuids += list(prov.get("capped_workload", {}).get("boards", []))  # read through their probes (session 19)
    boards = {board_label(u) for u in uuids if u}
    for path in prov.get("cap_profile_refit", {}).get("train", []):
        boards.add(str(path).rsplit("_", 1)[-1][:8])
    return boards


def board_of(path: Path) -> str:
    """The recording's board: the first 8 hex digits of its UUID (``GPU-1efa3f60-…`` → ``1efa3f60``).

    Read from ``provenance.json`` alone: the tables are read once, by the replay that needs them.
    """
    provenance = json.loads((Path(path) / "provenance.json").read_text())
    return board_label(provenance.get("uuid", "GPU-unknown"))


#: the power scales and thermal calibrations a label may name (``calibrated_preset``'s ``scale`` and ``thermal``)
SCALES = ("", "board", "workload", "domains")
#: a scale's ending "-bursts": its factors read from the natural part's bursts, no series (``read="bursts"``,
#: session 28's candidate (b)); every warm-up second is then held out
BURSTS = "-bursts"
THERMALS = ("", "scale", "network", "network-widen", "network-keep", "network-preset")


def parse_label(label: str) -> tuple[list[str], str, str]:
    """A ``--preset`` label's preset names, power calibration scale and thermal calibration.

    ``NAME`` → ``([NAME], "", "")``; ``NAME:SCALE`` → ``([NAME], SCALE, "")``; ``NAME:SCALE:THERMAL`` →
    ``([NAME], SCALE, THERMAL)``; ``part:A,B`` → ``([A, B], "", "")`` (each recording takes the one of
    ``A``, ``B`` pooled over its board's part number), and ``part:A,B:SCALE[:THERMAL]`` that one calibrated.
    A last ``:cap=F`` (:func:`cap_factor`), ``:cap``, ``:cap-probes`` or ``:cap-rate`` (:func:`own_cap`) and an ending
    ``@AMBIENT`` (:func:`replay_ambient_of`) are not part of the three (:func:`label_endings`).
    """
    label = label_endings(label)[0]
    if label.startswith(PART):
        names, _, calibration = label[len(PART):].partition(":")
        scale, _, thermal = calibration.partition(":")
        return names.split(","), scale, thermal
    name, _, calibration = label.partition(":")
    scale, _, thermal = calibration.partition(":")
    return [name], scale, thermal


def label_endings(label: str) -> tuple[str, str | None, str | bool, str]:
    """A ``--preset`` label without its endings, and the endings, read from the end once.

    Returns ``(rest, F, own, ambient)``: ``ambient`` of an ending ``@AMBIENT`` (else ``"recorded-causal"``), then
    ``F`` of a ``:cap=F`` as written (else None), then ``own`` of a ``:cap`` (``"clock"``), ``:cap-probes``
    (``"probes"``) or ``:cap-rate`` (``"rate"``; else False); ``rest`` is what is left (``NAME[:SCALE[:THERMAL]]`` or ``part:…``).
    """
    found = AMBIENT.search(label)
    ambient = "recorded-causal" if found is None else found["ambient"]
    label = AMBIENT.sub("", label)
    factor = CAP.search(label)
    label = CAP.sub("", label)
    own = CAP_OWN.search(label)
    return (CAP_OWN.sub("", label), None if factor is None else factor["factor"],
            False if own is None else (own["step"] or "clock") + (own["recorded"] or ""), ambient)


def replay_ambient_of(label: str) -> str:
    """A ``--preset`` label's replay ambient: ``AMBIENT`` of an ending ``@AMBIENT``, else ``"recorded-causal"``."""
    return label_endings(label)[3]


def cap_factor(label: str) -> float | None:
    """A ``--preset`` label's capped-clock factor ``F`` (``…:cap=F``), None without one."""
    written = label_endings(label)[1]
    return None if written is None else float(written)


def own_cap(label: str) -> str | bool:
    """A ``--preset`` label's own capped step: ``"clock"`` (``…:cap``), ``"probes"`` (``…:cap-probes``), ``"rate"``
    (``…:cap-rate``) or False; an ending ``-recorded-ambient`` is :func:`own_cap_ambient`'s."""
    own = label_endings(label)[2]
    return own and own.removesuffix(RECORDED_AMBIENT)


def own_cap_ambient(label: str) -> str:
    """Where a label's own capped clock fit replays: ``"recorded"`` for ``…:cap[-probes]-recorded-ambient``, else
    ``"preset"`` (``calibrated_preset``'s ``cap_ambient``; ``:cap-rate`` always replays at the recording's)."""
    own = label_endings(label)[2]
    return "recorded" if own and own.endswith(RECORDED_AMBIENT) else "preset"


def folder_name(label: str) -> str:
    """The folder of a ``--preset`` label: the preset's name (a file's stem), then ``-SCALE`` if calibrated.

    ``part:A,B`` (a preset per board part number) is ``by-part-`` and the first candidate's stem; a thermal
    calibration adds ``-thermal-THERMAL``, a capped clock factor ``-capF``, the board's own ``-cap`` or
    ``-cap-probes`` or ``-cap-rate``, an ambient other than the default ``-ambient-AMBIENT``.
    """
    names, scale, thermal = parse_label(label)
    stem = ("by-part-" if label.startswith(PART) else "") + Path(names[0]).stem
    _, written, own, ambient = label_endings(label)
    return (stem + (f"-{scale}" if scale else "") + (f"-thermal-{thermal}" if thermal else "")
            + (f"-cap{written}" if written is not None else "")  # F as written: no rounding
            + ("" if not own else "-cap" + ("" if own.startswith("clock") else "-") + own.removeprefix("clock"))
            + (f"-ambient-{ambient}" if ambient != "recorded-causal" else ""))


def replay_one(label: str, path: str, folder: str, counter_timing: str = "seed", seed: int = 0) -> str:
    """Replay ``path`` on the preset ``label`` (``NAME``, ``NAME:SCALE[:THERMAL]``, ``part:A,B[:SCALE[:THERMAL]]``, each with
    an optional last ``:cap=F``, ``:cap``, ``:cap-probes`` or ``:cap-rate`` and an ending ``@AMBIENT``) into ``folder``
    with the twin's ``seed``."""
    real = read_recording(path)
    names, scale, thermal = parse_label(label)
    preset = part_preset(real, names) if label.startswith(PART) else load_preset(names[0])
    if scale or thermal or own_cap(label):
        network, _, at_edge = thermal.partition("-")  # network-keep: session 19's network, kept at a band edge
        preset = calibrated_preset(preset, real, scale=scale.removesuffix(BURSTS) or None, thermal=network or False,
                                   network_at_edge=at_edge or "widen", cap=own_cap(label),
                                   cap_ambient=own_cap_ambient(label),
                                   read="bursts" if scale.endswith(BURSTS) else "series")
    factor = cap_factor(label)
    if factor is not None:  # a factor pooled over other boards, on top of this board's calibration
        preset = scaled_core(preset, factor)
    table = twin_compare(real, preset, folder, seed=seed, ambient=replay_ambient_of(label),
                         counter_timing=counter_timing)
    memory = preset.provenance.get("board_calibration", {}).get("memory_scale") if scale else None
    if memory is not None:
        (Path(folder) / "memory_scale.txt").write_text(f"{memory:.4f}\n")
    capped = preset.fit.get("board_capped_clock")
    if capped is not None:  # what was read before the first series, for the report
        (Path(folder) / "board_capped_clock.json").write_text(json.dumps(capped, indent=1, default=str) + "\n")
    return f"{label} {Path(path).name}: {int(table[schema.CHECK_WITHIN].sum())} of {len(table)} within target"


def collect(out: Path, labels: list[str], boards: dict[str, str]) -> pd.DataFrame:
    """Every row of every ``OUT/LABEL/BOARD/comparison.csv``, with its preset and board."""
    frames = []
    for label in labels:
        for path, board in boards.items():
            folder = out / folder_name(label) / Path(path).name
            table = pd.read_csv(folder / "comparison.csv")
            table.insert(0, "recording", Path(path).name)
            table.insert(0, "board", board)
            table.insert(0, "preset", label)
            memory = folder / "memory_scale.txt"
            table["memory_scale"] = float(memory.read_text()) if memory.exists() else np.nan
            frames.append(table)
    return pd.concat(frames, ignore_index=True)


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per preset: the warm-up worst second's median |error| and range, and rows within target."""
    out = []
    for label, g in rows.groupby("preset", sort=False):
        warm = g.loc[g[schema.CHECK_METRIC].str.startswith(WARMUP)]
        row = {"preset": label, "boards": g["board"].nunique(),
               "warm-up median |worst| %": warm[schema.CHECK_ERROR].abs().median(),
               "warm-up within 1 %": f"{int(warm[schema.CHECK_WITHIN].sum())} of {len(warm)}"}
        for workload, w in warm.groupby(schema.WORKLOAD):
            row[f"{workload} worst %"] = f"{w[schema.CHECK_ERROR].min():+.2f} … {w[schema.CHECK_ERROR].max():+.2f}"
        for metric, short in ((COOLING, "cooling within 2 °C"), (OVERSHOOT, "overshoot within 25 %"),
                              (SETTLING, "settling within 25 %")):
            m = g.loc[g[schema.CHECK_METRIC] == metric]
            row[short] = f"{int(m[schema.CHECK_WITHIN].sum())} of {len(m)}"
        out.append(row)
    return pd.DataFrame(out).round(2)


def plot(rows: pd.DataFrame, path: Path) -> None:
    """Each board's warm-up worst second per workload, one marker per preset, the ±1 % target shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    warm = rows.loc[rows[schema.CHECK_METRIC].str.startswith(WARMUP)]
    workloads = sorted(warm[schema.WORKLOAD].unique())
    labels = list(dict.fromkeys(warm["preset"]))
    fig, ax = plt.subplots(figsize=(9, 4.2 + 0.22 * len(labels)))
    ax.axhspan(-1, 1, color="0.9", label="target ±1 %")
    width = 0.8 / len(labels)
    for k, label in enumerate(labels):
        sub = warm.loc[warm["preset"] == label]
        for i, workload in enumerate(workloads):
            y = sub.loc[sub[schema.WORKLOAD] == workload, schema.CHECK_ERROR].to_numpy()
            x = np.full(len(y), i - 0.4 + width * (k + 0.5))
            ax.plot(x, y, "o", ms=4, color=f"C{k}", alpha=0.8, label=label if i == 0 else None)
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(workloads)), workloads)
    ax.set_ylabel("twin − real, worst second (%)")
    ax.set_title(f"Warm-up energy per launch on {warm['board'].nunique()} boards no preset saw "
                 "(real recordings, twin replays)", fontsize=10)
    # below the axes: inside, the legend hid the boards farthest from the target
    ax.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False)
    save_figure(fig, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--preset", action="append", required=True,
                    help="a shipped preset's name or a preset file, NAME:SCALE to calibrate its power to each board "
                         "first, NAME:SCALE:THERMAL its thermal network too (SCALE may be empty), or part:A,B to "
                         "take the one of A, B pooled over each board's part number (part:A,B:SCALE[:THERMAL] "
                         "calibrated as above); a last ':cap=F' multiplies the calibrated core coefficient by F, the "
                         "uncapped activities divided back (a capped clock factor pooled over other boards, e.g. "
                         "h200-raw-pooled:domains:network:cap=1.0446); or a last ':cap' / ':cap-probes' brings the "
                         "capped clock (and with -probes the capped cycles) to the board's, read before the first "
                         "series; an ending '@AMBIENT' replays with that ambient (twin-compare --ambient; default "
                         "recorded-causal)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--counter-timing", choices=("auto", "recorded", "seed"), default="seed",
                    help="the twins' energy counter (twin_compare's counter_timing): a phase drawn from the seed "
                         "(seed, the default; auto was the default in sessions 28-32 and lost on never-seen boards "
                         "in session 33) or each recording's own update period and phase read before its first "
                         "series (auto, where it can be read; recorded); give each its own --out")
    ap.add_argument("--seeds", choices=("same", "each"), default="same",
                    help="same: every replay with seed 0 (as before session 30); each: every recording its own seed, "
                         "its position in the list from 1, so that what the seed draws (the sensor's phase and noise, "
                         "and a level state's path: SimulatedWorkload.level_*) differs from board to board as it "
                         "does between real boards; give each its own --out")
    ap.add_argument("--plot", type=Path)
    args = ap.parse_args(argv)
    boards = {str(p): board_of(p) for p in args.recordings}
    for label in args.preset:
        names, scale, thermal = parse_label(label)
        if scale.removesuffix(BURSTS) not in SCALES or scale == BURSTS:
            ap.error(f"{label}: the scale after ':' must be board, workload or domains (each may end in -bursts)")
        if own_cap(label) == "rate" and own_cap_ambient(label) == "recorded":
            ap.error(f"{label}: ':cap-rate' always fits at the recording's ambient; '-recorded-ambient' is for ':cap' "
                     "and ':cap-probes'")
        if cap_factor(label) is not None and own_cap(label):
            ap.error(f"{label}: a pooled ':cap=F' and the board's own ':cap' / ':cap-probes' / ':cap-rate' exclude each other")
        if replay_ambient_of(label) not in AMBIENTS:
            ap.error(f"{label}: the ambient after '@' must be one of {', '.join(AMBIENTS)}")
        if thermal not in THERMALS:
            ap.error(f"{label}: the thermal calibration after the second ':' must be scale, network, network-widen, network-keep or network-preset")
        for name in names:
            seen = preset_boards(name) & set(boards.values())
            if seen:
                ap.error(f"{name} was fitted to or pooled over {', '.join(sorted(seen))}: not an unseen board")
    seeds = {path: (position if args.seeds == "each" else 0) for position, path in enumerate(boards, start=1)}
    jobs = [(label, path, str(args.out / folder_name(label) / Path(path).name), args.counter_timing, seeds[path])
            for label in args.preset for path in boards
            if not (args.out / folder_name(label) / Path(path).name / "comparison.csv").exists()]
    print(f"{len(jobs)} replays to run ({len(args.preset) * len(boards) - len(jobs)} read back)", flush=True)
    if args.workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=args.workers) as pool:
            messages = pool.map(replay_one, *zip(*jobs, strict=True))
            for done, message in enumerate(messages, start=1):
                print(f"[{done}/{len(jobs)}] {message}", flush=True)
    else:
        for done, job in enumerate(jobs, start=1):
            print(f"[{done}/{len(jobs)}] {replay_one(*job)}", flush=True)
    rows = collect(args.out, args.preset, boards)
    rows.to_csv(args.out / "rows.csv", index=False)
    text = markdown_table(summary(rows))
    (args.out / "summary.md").write_text(text + "\n")
    print(text)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
