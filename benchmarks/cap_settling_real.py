"""How long the real H100 power-cap controller takes to settle, and what "settled" can mean (issue 19).

No GPU: the capped bf16 GEMM 8192² of three real recordings, each a continuous 25–30 s load from
idle (30 s cool-down before), on three H100 boards with a 700 W enforced limit:

=============  ============================================================================
0b4f1a7f       ``datasets/h100-2026-11-25-session5/natural_dvfs/recording`` (``pressure_gemm_bf16_8192``)
620707cb       ``datasets/h100-2026-11-25-session5/raw_recording_620707cb`` (full-rate NVML trace)
14ab84a0       ``datasets/h100/thermal_2026-11-25`` (extracted from the shared raw recording)
=============  ============================================================================

Per board: the 100 ms counter spans' power after 5 s (the jitter a rule must live with), the mean
power per stretch of the load, when a 1 s mean first reads the limit ± 2 %, and what the earlier
rule (no trend above 0.5 % across the last second of 100 ms spans, and the power within 2 %) and the
present one (:func:`powermodels.thermal.spans.cap_held`: the 1 s mean within 2 %) say when the
protocol's load is replayed from 36 starts (0.3 … 17.8 s: cold to hot; 0.65 s measured, then 0.5 s
pieces, at most 5 s more).

    PYTHONPATH=src python benchmarks/cap_settling_real.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from powermodels import schema  # noqa: E402
from powermodels.reporting import markdown_table  # noqa: E402
from powermodels.thermal.spans import (capped_row_window, counter_spans, extend_until_settled,  # noqa: E402
                                       power_capped)
from thermal_offline import per_launch, series_tables  # noqa: E402

LIMIT_W = 700.0
RECORDINGS = {
    "0b4f1a7f": ("raw", "h100-2026-11-25-session5/natural_dvfs/recording"),
    "620707cb": ("raw", "h100-2026-11-25-session5/raw_recording_620707cb"),
    "14ab84a0": ("extracted", "h100/thermal_2026-11-25"),
}


def bf16_series(datasets: Path, board: str) -> tuple[pd.DataFrame, np.ndarray, float]:
    """(trace, per-launch intervals, load start) of the capped bf16 GEMM's continuous load on ``board``."""
    kind, rel = RECORDINGS[board]
    folder = Path(datasets) / rel
    if kind == "raw":
        trace, launches, meta = series_tables(folder)
    else:
        trace, launches = pd.read_parquet(folder / "trace.parquet"), pd.read_parquet(folder / "launches.parquet")
        meta = json.loads((folder / "series.json").read_text())["series"]
    (m,) = [m for m in meta if "bf16" in m["workload"]]
    w = m["workload"]
    return (trace[trace[schema.RUN_ID] == w], per_launch(launches[launches[schema.WORKLOAD] == w]),
            float(m["load_start_s"]))


def _old_rule(spans: pd.DataFrame, lookback_s: float = 1.0, trend: float = 0.005, power: float = 0.02) -> bool:
    """The rule before session 5's fix: ≥ 3 spans in the last second, their energy-per-launch trend ≤ 0.5 %
    across it, and their mean power within 2 % of the limit."""
    if len(spans) < 3:
        return False
    end = float(spans[schema.END_S].iloc[-1])
    last = spans.loc[spans[schema.START_S].to_numpy(dtype=float) >= end - lookback_s]
    if len(last) < 3:
        return False
    t = 0.5 * (last[schema.START_S].to_numpy(dtype=float) + last[schema.END_S].to_numpy(dtype=float))
    e = last[schema.ENERGY_J].to_numpy(dtype=float)
    change = abs(np.polyfit(t - t.mean(), e, 1)[0]) * (t[-1] - t[0]) / float(np.mean(e))
    n = last[schema.LAUNCHES].to_numpy(dtype=float)
    p = float(np.sum(e * n) / np.sum(last[schema.TIME_S].to_numpy(dtype=float) * n))
    return bool(change <= trend and abs(p / LIMIT_W - 1) <= power)


def _replay(trace, iv, start, rule):
    """The protocol's load from ``start``: 0.65 s measured, 0.5 s pieces until ``rule`` says settled (≤ 5 s)."""
    if rule == "present":
        shown = {"end": start + 0.65}

        def run_more():
            lo = shown["end"]
            shown["end"] += 0.5
            return iv[(iv[:, 0] >= lo) & (iv[:, 0] < shown["end"])]

        first = iv[(iv[:, 0] >= start) & (iv[:, 0] < start + 0.65)]
        out, tr, settle, transient = extend_until_settled(run_more, lambda e: trace[trace[schema.T_S] <= e], first,
                                                          start, power_limit_w=LIMIT_W)
        return settle, transient, capped_row_window(tr, out, start, float(out[-1, 1]))[1]
    extra = 0.0
    while True:
        end = start + 0.65 + extra
        spans = counter_spans(trace, iv, start_s=start, end_s=end, updates_per_span=1)
        if _old_rule(spans):
            window = end - 0.65, end   # the row then reported its last 0.65 s
            return extra, False, capped_row_window(trace, iv, window[0], window[1], window_s=0.65)[1]
        if extra >= 5.0:
            return extra, True, np.nan
        extra += 0.5


def board_table(datasets: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    rows, replays = [], []
    for board in RECORDINGS:
        trace, iv, s0 = bf16_series(datasets, board)
        spans = counter_spans(trace, iv, start_s=s0, updates_per_span=1)
        assert power_capped(spans)
        t = spans[schema.END_S].to_numpy(dtype=float) - s0
        n = spans[schema.LAUNCHES].to_numpy(dtype=float)
        e = spans[schema.ENERGY_J].to_numpy(dtype=float) * n
        busy = spans[schema.TIME_S].to_numpy(dtype=float) * n
        p = e / busy
        row = {"board": board, "100 ms span power after 5 s, p5–p95 W": "%.0f–%.0f" % tuple(np.percentile(p[t > 5], [5, 95])),
               "span sd %": 100 * np.std(p[t > 5]) / np.mean(p[t > 5])}
        for a, b in ((0, 1), (1, 2), (2, 5), (5, 25)):
            sel = (t > a) & (t <= b)
            row[f"{a}–{b} s W"] = e[sel].sum() / busy[sel].sum()
        ends = s0 + np.arange(0.5, 25.0, 0.05)
        means = np.array([capped_row_window(trace, iv, s0, x)[1] for x in ends])
        ok = np.abs(means / LIMIT_W - 1) <= 0.02
        row["1 s mean first at limit ±2 %, s"] = float(ends[np.argmax(ok)] - s0)
        row["1 s means after 5 s, W"] = "%.0f–%.0f" % (np.nanmin(means[ends - s0 > 5]), np.nanmax(means[ends - s0 > 5]))
        rows.append(row)
        for rule in ("earlier", "present"):
            got = [_replay(trace, iv, s0 + off, rule) for off in np.arange(0.3, 18.0, 0.5)]
            settle = np.array([g[0] for g in got])
            transient = np.array([g[1] for g in got])
            power = np.array([g[2] for g in got])
            settled_p = power[~transient]
            replays.append({"board": board, "rule": rule, "replays": len(got), "transient": int(transient.sum()),
                            "median settle s": float(np.median(settle)), "max settle s": float(settle.max()),
                            "settled rows' power W": "%.1f–%.1f" % (settled_p.min(), settled_p.max())
                            if settled_p.size else "—",
                            "settled rows off the limit > 2 %": int(np.sum(np.abs(settled_p / LIMIT_W - 1) > 0.02))})
    return pd.DataFrame(rows), pd.DataFrame(replays)


def main() -> int:
    boards, replays = board_table(REPO / "datasets")
    print(markdown_table(boards, ".4g"))
    print()
    print(markdown_table(replays, ".3g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
