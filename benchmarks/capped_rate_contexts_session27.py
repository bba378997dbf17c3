"""Capped launch rate, four ways (host A, candidate (u')'s calibrated presets): the board's pressure entries and
series; the twin's entries (run timed), its segment replay of the series, and its full replay's series."""
import sys, json
import numpy as np, pandas as pd
sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from candidate_u_prime_session27 import board_pressure_rate, twin_series, FROM_S
from powermodels import schema
from powermodels.recording import read_recording
from powermodels.twin import fit_controller as fc, metrics
from powermodels.twin.preset import load_preset
from powermodels.twin.replay import replay

rows = []
for b in sys.argv[1:]:
    rec = read_recording(f"/work/main/datasets/h200-2026-11-29/raw_recording_{b}")
    full = read_recording(f"/work/rec27/candup/{b}/twin")
    preset = load_preset(f"/work/rec27/candup/{b}/preset.json")
    spans = fc.capped_entries_before_series(rec); wl = fc.capped_workload(rec, spans)
    sspans = fc.settled_capped_series(rec)
    temps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - fc.LEAD_S])[0]) for a, _ in sspans]
    ptemps = [float(metrics.reading_series(rec, schema.TEMPERATURE_C, [a - fc.LEAD_S])[0]) for a, _ in spans]
    reps = []
    for (a, c), t in zip(spans, ptemps):
        seg = fc._segment(rec, a, c)
        sel = (seg[schema.PHASE_KIND] == "pressure") & (seg[schema.WORKLOAD] == wl)
        seg.loc[sel, schema.PHASE_KIND] = "series"
        reps.append(replay(seg, preset, start_temperature_c=t))
    n = sum(metrics.launches_between(r, 0.2 + fc.LEAD_S + FROM_S, 0.2 + fc.LEAD_S + (c - a), wl) for r, (a, c) in zip(reps, spans))
    twin_entries = n / sum(c - a - FROM_S for a, c in spans)
    _, twin_segment = twin_series(preset, rec, sspans, temps, wl)
    real_series = sum(metrics.launches_between(rec, a + fc.SETTLE_S, c, wl) for a, c in sspans) / sum(c - a - fc.SETTLE_S for a, c in sspans)
    full_series = sum(metrics.launches_between(full, a + fc.SETTLE_S, c, wl) for a, c in sspans) / sum(c - a - fc.SETTLE_S for a, c in sspans)
    die_real = metrics.reading_series(rec, schema.TEMPERATURE_C, [sspans[0][0] + 2, sspans[0][0] + 10])
    die_full = metrics.reading_series(full, schema.TEMPERATURE_C, [sspans[0][0] + 2, sspans[0][0] + 10])
    rows.append(dict(board=b, board_entries=board_pressure_rate(rec, spans, wl), board_series=real_series,
                     twin_entries=twin_entries, twin_segment_series=twin_segment, twin_full_series=full_series,
                     die_board_2s=die_real[0], die_twin_2s=die_full[0], die_board_10s=die_real[1], die_twin_10s=die_full[1]))
    print(rows[-1], flush=True)
d = pd.DataFrame(rows)
for c in ["board_series", "twin_entries", "twin_segment_series", "twin_full_series"]:
    d[c + "_vs_board_entries_pct"] = 100 * (d[c] / d.board_entries - 1)
print(d.round(2).to_string())
d.to_csv("/work/rec27/rate_gap.csv", index=False)
