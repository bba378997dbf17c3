"""Candidate (u), session 26 design stage (failed its rule, not shipped; kept for the record, then removed): probed capped cycles + the board's settled cap power matched by replay.

Run: PYTHONPATH=src python benchmarks/results/candidate_u_session26.py datasets/h200-2026-11-29/raw_recording_a1b91ca4 OUT
"""
import sys, json
from dataclasses import replace
from pathlib import Path
import numpy as np
import pandas as pd
from powermodels import schema
from powermodels.recording import read_recording
from powermodels.board_calibration.calibrate import calibrated_preset, probed_cycles_before
from powermodels.twin import fit_controller as fc, metrics
from powermodels.twin.compare import twin_compare

def twin_settled_power(preset, rec, sspans, temps):
    reps = fc._replay_spans(preset, rec, sspans, temps)
    p = []
    for r, (a, b) in zip(reps, sspans):
        t, e = metrics.counter_updates(r)
        s0, s1 = 0.2 + fc.LEAD_S + fc.SETTLE_S, 0.2 + fc.LEAD_S + (b - a)
        i, j = int(np.searchsorted(t, s0)), int(np.searchsorted(t, s1)) - 1
        p.append((e[j] - e[i]) / (t[j] - t[i]))
    return float(np.mean(p))

def candidate(base, rec, moves=3, tol_w=0.3):
    twin = calibrated_preset(base, rec, scale="domains", thermal="network")
    spans = fc.capped_entries_before_series(rec)
    board = fc.settled_cap_power(rec, spans)
    first = float(rec.phase_rows(kind="series")[schema.T0_S].min())
    twin, probed = probed_cycles_before(twin, rec, fc.capped_workload(rec, spans), first)
    target = fc.capped_clock_reading([rec] * len(spans), [a for a, _ in spans], [b - a for a, b in spans])
    sspans = fc.settled_capped_series(rec)
    temps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - fc.LEAD_S])[0]) for a, _ in sspans]
    log = []
    fitted = fc.fit_capped_clock(twin, rec, window="settled", target_mhz=target)
    for _ in range(moves):
        got = twin_settled_power(fitted, rec, sspans, temps)
        log.append({"cap_offset_w": twin.physics.cap_offset_w, "twin_settled_w": got, "board_settled_w": board})
        if abs(got - board) <= tol_w:
            break
        twin = replace(twin, physics=replace(twin.physics, cap_offset_w=twin.physics.cap_offset_w + board - got))
        fitted = fc.fit_capped_clock(twin, rec, window="settled", target_mhz=target)
    else:
        log.append({"cap_offset_w": twin.physics.cap_offset_w, "twin_settled_w": twin_settled_power(fitted, rec, sspans, temps), "board_settled_w": board})
    return fitted, log

if __name__ == "__main__":
    real_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    rec = read_recording(real_path)
    fitted, log = candidate("h200-raw-pooled", rec)
    table = twin_compare(rec, fitted, out)
    table.insert(0, "board", real_path.name.split("_")[-1]); table.insert(0, "preset", "cand-u")
    table.to_csv(out / "rows.csv", index=False)
    (out / "cand_log.json").write_text(json.dumps(log, indent=1))
    print(real_path.name, log[-1], flush=True)
