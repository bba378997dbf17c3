"""Does a raw recording's natural bf16 pressure stand for its capped series? One row per board (real, no GPU).

Usage::

    PYTHONPATH=src python benchmarks/pressure_vs_series.py datasets/h200-2026-11-29/raw_recording_{774c3a68,8a9ced5c}

``--calibrate-cap probes`` (docs/twin.md, sessions 23–24) reads a board's capped cycles and clock from the
natural part's ``pressure`` entries, before the first series; it holds when those entries run as the series do.
For each recording made with ``gpu_raw_recording.py --probe-pressure`` this prints, over the capped pressure entries
that end before the first series (:func:`powermodels.twin.fit_controller.capped_entries_before_series`):
the median NVML instant power and clock from 0.5 s into each, the settled cap power
(:func:`~powermodels.twin.fit_controller.settled_cap_power`), and the capped workload's probed time ratio
(:func:`powermodels.twin.adapt.probed_time_ratio`, real time over the preset's at each launch's probed clock, the
preset calibrated to the board by ``--scale domains`` and ``--thermal network`` as ``--calibrate-cap`` starts from)
there and over the thermal series, with the median probed clock of each, and the die temperature and launch rate
of each from 0.5 s into every entry (a batch across that edge counted pro rata), then the series' probed clock and
launch rate over its first seconds only, as long as a pressure entry (the same time since a capped start). Equal
ratios say the pressure's cycles are the series'. On the six probed H200s of sessions 23-25 the pressure's probed
clock read 15-30 MHz above the whole series' but 0-16 MHz above the series' first seconds (the series' clock falls
as it runs), while its launch rate stayed 0.17-0.47 % below theirs (docs/twin-sessions.md, session 25).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from _common import board_label

from powermodels import schema
from powermodels.board_calibration import calibrated_preset, probed_cycles_before
from powermodels.board_calibration.capped_rate import entries_launch_rate
from powermodels.recording import read_recording
from powermodels.reporting import markdown_table
from powermodels.twin.adapt import probed_time_ratio
from powermodels.twin.fit_controller import (
    capped_entries_before_series,
    capped_workload,
    settled_cap_power,
)

#: seconds skipped at each pressure entry's start (the cap controller's first swing)
SKIP_S = 0.5


def in_spans(t: np.ndarray, spans, skip_s: float = SKIP_S) -> np.ndarray:
    """Whether each time ``t`` lies in one of ``spans``, each from ``skip_s`` in."""
    inside = np.zeros(t.size, bool)
    for a, b in spans:
        inside |= (t >= a + skip_s) & (t < b)
    return inside


def probe_clock(probes: pd.DataFrame, spans, skip_s: float = SKIP_S) -> float:
    """Median probed clock of the probes inside ``spans``, each from ``skip_s`` in."""
    inside = in_spans(probes[schema.T_S].to_numpy(float), spans, skip_s)
    return float(np.median(probes.loc[inside, schema.PROBE_CLOCK_MHZ])) if inside.any() else float("nan")


def board_row(path: Path, preset: str, scale: str | None = "domains", thermal: str | bool = "network") -> dict:
    """The row of one recording (raises ValueError when its pressure was not probed or never ran capped).

    ``scale`` and ``thermal`` are :func:`~powermodels.board_calibration.calibrated_preset`'s (None / False: none).
    """
    rec = read_recording(path)
    spans = capped_entries_before_series(rec)
    if not spans:
        raise ValueError(f"{path}: no capped pressure entry of 1.5 s or more before the first series")
    first = float(rec.phase_rows(kind="series")[schema.T0_S].min())
    workload = capped_workload(rec, spans)
    t = rec.trace[schema.T_S].to_numpy(float)
    inside = in_spans(t, spans)
    if rec.probes is None:
        raise ValueError(f"{path}: no probes.parquet (record with --probe-pressure)")
    cal = calibrated_preset(preset, rec, scale=scale, thermal=thermal)
    # the pressure's ratio as --calibrate-cap probes reads it (and refuses what it refuses), the series' beside it
    _, read = probed_cycles_before(cal, rec, workload, first)
    launches = rec.launches[rec.launches[schema.WORKLOAD] == workload]
    probes = rec.probes[rec.probes[schema.WORKLOAD] == workload]
    before_l, before_p = launches[schema.START_S] < first, probes[schema.T_S] < first
    series_spans = rec.phase_rows(kind="series", workload=workload)[[schema.T0_S, schema.T1_S]].to_numpy(float)
    in_series = in_spans(t, series_spans)
    die = rec.trace[schema.TEMPERATURE_C].to_numpy(float)
    # the series' first seconds, as long as a pressure entry: the same time since a capped start as the pressure's
    length = float(np.median([b - a for a, b in spans]))
    series_first = [(a, min(b, a + length)) for a, b in series_spans]
    ratio = {"pressure": read["probed_time_ratio"],
             "series": probed_time_ratio(cal.workloads[workload], launches[~before_l], probes[~before_p],
                                         cal.physics.mem_clocks_mhz[0])}
    return {"board": board_label(rec.board), "entries": len(spans),
            "power_w": float(np.median(rec.trace.loc[inside, schema.POWER_INSTANT_W])),
            "clock_mhz": float(np.median(rec.trace.loc[inside, schema.SM_CLOCK_MHZ])),
            "settled_cap_w": settled_cap_power(rec, spans),
            "ratio_pressure": ratio["pressure"], "ratio_series": ratio["series"],
            "ratio_gap_pct": 100.0 * (ratio["pressure"] / ratio["series"] - 1.0),
            "probe_mhz_pressure": float(probes.loc[before_p, schema.PROBE_CLOCK_MHZ].median()),
            "probe_mhz_series": float(probes.loc[~before_p, schema.PROBE_CLOCK_MHZ].median()),
            "die_c_pressure": float(np.median(die[inside])), "die_c_series": float(np.median(die[in_series])),
            "launches_per_s_pressure": entries_launch_rate(rec, spans, workload, SKIP_S),
            "launches_per_s_series": entries_launch_rate(rec, series_spans, workload, SKIP_S),
            "probe_mhz_series_first": probe_clock(probes, series_first),
            "launches_per_s_series_first": entries_launch_rate(rec, series_first, workload, SKIP_S),
            "launches_pressure": int(before_l.sum()), "launches_series": int((~before_l).sum())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("recordings", nargs="+", type=Path)
    ap.add_argument("--preset", default="h200-raw-pooled", help="the preset the ratios are read against")
    ap.add_argument("--scale", default="domains", choices=["domains", "board", "workload", "none"],
                    help="the board calibration first (twin-compare --calibrate-board)")
    ap.add_argument("--thermal", default="network", choices=["network", "scale", "none"],
                    help="the thermal calibration first (twin-compare --calibrate-thermal)")
    args = ap.parse_args(argv)
    scale = None if args.scale == "none" else args.scale
    thermal = False if args.thermal == "none" else args.thermal
    try:
        rows = pd.DataFrame([board_row(p, args.preset, scale, thermal) for p in args.recordings])
    except ValueError as err:
        print(f"pressure_vs_series: {err}", file=sys.stderr)
        return 2
    print(markdown_table(rows.round({"power_w": 1, "clock_mhz": 0, "settled_cap_w": 1, "ratio_pressure": 4,
                                     "ratio_series": 4, "ratio_gap_pct": 2, "probe_mhz_pressure": 1,
                                     "probe_mhz_series": 1, "launches_per_s_pressure": 1,
                                     "launches_per_s_series": 1, "probe_mhz_series_first": 1,
                                     "launches_per_s_series_first": 1})))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
