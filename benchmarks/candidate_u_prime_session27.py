"""Candidate (u'), design stage, as note 3 defines it: (u) + the capped workload's time per launch scaled until
the twin's replay of the capped series' schedule runs the board's launches per second over its pressure entries."""
import sys, json
from dataclasses import replace
from pathlib import Path
import numpy as np
from powermodels import schema
from powermodels.recording import read_recording
from powermodels.board_calibration.calibrate import calibrated_preset, probed_cycles_before
from powermodels.twin import fit_controller as fc, metrics
from powermodels.twin.adapt import time_scaled
from powermodels.twin.compare import twin_compare

FROM_S = 1.0  # the pressure entries' rate is read from 1 s in, as their NVML clock (capped_clock_reading)


def twin_series(preset, rec, sspans, temps, wl):
    """The twin's settled power (counter, from SETTLE_S) and launches per second over its replay of the series."""
    reps = fc._replay_spans(preset, rec, sspans, temps)
    p, n, d = [], 0.0, 0.0
    for r, (a, b) in zip(reps, sspans):
        t, e = metrics.counter_updates(r)
        s0, s1 = 0.2 + fc.LEAD_S + fc.SETTLE_S, 0.2 + fc.LEAD_S + (b - a)
        i, j = int(np.searchsorted(t, s0)), int(np.searchsorted(t, s1)) - 1
        p.append((e[j] - e[i]) / (t[j] - t[i]))
        n += metrics.launches_between(r, s0, s1, wl); d += s1 - s0
    return float(np.mean(p)), n / d


def board_pressure_rate(rec, spans, wl):
    n = sum(metrics.launches_between(rec, a + FROM_S, b, wl) for a, b in spans)
    return n / sum(b - a - FROM_S for a, b in spans)


def candidate(base, rec, rounds=3, tol_w=0.3, tol_rate=0.001):
    twin = calibrated_preset(base, rec, scale="domains", thermal="network")
    spans = fc.capped_entries_before_series(rec)
    board = fc.settled_cap_power(rec, spans)
    first = float(rec.phase_rows(kind="series")[schema.T0_S].min())
    wl = fc.capped_workload(rec, spans)
    twin, probed = probed_cycles_before(twin, rec, wl, first)
    target = fc.capped_clock_reading([rec] * len(spans), [a for a, _ in spans], [b - a for a, b in spans])
    board_rate = board_pressure_rate(rec, spans, wl)
    sspans = fc.settled_capped_series(rec)
    temps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - fc.LEAD_S])[0]) for a, _ in sspans]
    log = []
    fitted = fc.fit_capped_clock(twin, rec, window="settled", target_mhz=target)
    for _ in range(rounds):
        got, _ = twin_series(fitted, rec, sspans, temps, wl)
        if abs(got - board) > tol_w:
            twin = replace(twin, physics=replace(twin.physics, cap_offset_w=twin.physics.cap_offset_w + board - got))
            fitted = fc.fit_capped_clock(twin, rec, window="settled", target_mhz=target)
        got2, twin_rate = twin_series(fitted, rec, sspans, temps, wl)
        k = twin_rate / board_rate
        log.append({"cap_offset_w": twin.physics.cap_offset_w, "twin_settled_w_before_move": got,
                    "twin_settled_w": got2, "board_settled_w": board, "twin_rate": twin_rate,
                    "board_rate": board_rate, "time_ratio": k})
        if abs(got2 - board) <= tol_w and abs(k - 1) <= tol_rate:
            break
        twin = replace(twin, workloads={**twin.workloads, wl: time_scaled(twin.workloads[wl], k)})
        fitted = replace(fitted, workloads={**fitted.workloads, wl: time_scaled(fitted.workloads[wl], k)})
    final_p, final_rate = twin_series(fitted, rec, sspans, temps, wl)
    log.append({"final_twin_settled_w": final_p, "board_settled_w": board, "final_twin_rate": final_rate,
                "board_rate": board_rate, "probed": probed})
    return fitted, log


if __name__ == "__main__":
    real_path, out = Path(sys.argv[1]), Path(sys.argv[2])
    rec = read_recording(real_path)
    fitted, log = candidate("h200-raw-pooled", rec)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cand_log.json").write_text(json.dumps(log, indent=1, default=str))
    print(real_path.name, json.dumps(log[-1], default=str), flush=True)
    table = twin_compare(rec, fitted, out)
    table.insert(0, "board", real_path.name.split("_")[-1]); table.insert(0, "preset", "candidate-u-prime-session27")
    table.to_csv(out / "rows.csv", index=False)
