"""What a power-capped workload's energy per launch does with temperature, on real H100 recordings (issue 19).

No GPU. The capped bf16 GEMM 8192² (PyTorch), 25–30 s back to back after ≥ 20 s idle, on four H100
boards with a 700 W enforced limit, nothing changed:

=============  ==================================================================================
0b4f1a7f       ``datasets/h100-2026-11-25-session5/natural_dvfs/recording`` (trace, probes)
620707cb       ``datasets/h100-2026-11-25-session5/raw_recording_620707cb`` (trace, probes)
14ab84a0       ``datasets/h100/thermal_2026-11-25`` (the shared raw recording's series; trace, no probes)
ae8fffca       ``datasets/h100-probe-2026-11-25`` (counter, launches, probes; **no trace**, so no temperature)
=============  ==================================================================================

Per board, over the spans after the controller settled (:func:`powermodels.thermal.spans.settled_spans`;
200 ms energy-counter spans): the slope of energy per launch on the die temperature in %/°C with its
95 % interval (:func:`powermodels.thermal.alpha.slope_with_uncertainty`: autocorrelation- and
quantisation-aware), over the whole load and over the first 10 s (what the warm-up sees); the power's
slope; and the physics the thesis gives for it (eq. 4.5–4.7): at the cap the power is pinned, so
``d ln E/dT = d ln P/dT + (d ln t/d ln f)·(d ln f/dT)``, with the clock ``f`` from the on-GPU probes
(NVML's where a board has none) and ``d ln t/d ln f`` from the batches' time per launch against their probed
clock. Then the capped prior (:data:`powermodels.thermal.normalise.CAPPED_PRIOR_PER_C`, :func:`powermodels.thermal.alpha.capped_prior_from_slopes`) is fitted on two boards
and checked on the third, rotating.

    PYTHONPATH=src python benchmarks/capped_slope_real.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from powermodels import schema  # noqa: E402
from powermodels.reporting import markdown_table  # noqa: E402
from powermodels.thermal.alpha import capped_prior_from_slopes, slope_with_uncertainty  # noqa: E402
from powermodels.thermal.spans import counter_spans, settled_spans  # noqa: E402
from cap_settling_real import LIMIT_W, bf16_series  # noqa: E402

PROBES = {"0b4f1a7f": "h100-2026-11-25-session5/natural_dvfs/recording",
          "620707cb": "h100-2026-11-25-session5/raw_recording_620707cb"}
NO_TRACE = ("ae8fffca", "h100-probe-2026-11-25")
Z95 = 1.96


def _probed(folder: Path, workload: str, t0: float, t1: float) -> pd.DataFrame:
    """Batches of ``workload`` in ``[t0, t1]`` with their probed clock and time per launch."""
    la = pd.read_parquet(folder / "launches.parquet")
    pr = pd.read_parquet(folder / "probes.parquet")
    la = la[(la[schema.WORKLOAD] == workload) & (la["start_s"] >= t0) & (la["end_s"] <= t1)]
    pr = pr[(pr[schema.WORKLOAD] == workload) & (pr["t_s"] >= t0 - 0.1) & (pr["t_s"] <= t1)]
    both = la.merge(pr[["batch", "clock_mhz", "t_s"]], on="batch")
    both = both[(both["t_s"] - both["start_s"]).abs() < 0.05]  # the probe just before its batch
    return both.assign(per_launch_s=both["time_s"] / both["launches"])


def _attach_clock(spans: pd.DataFrame, batches: pd.DataFrame) -> np.ndarray:
    mid = batches["start_s"].to_numpy(dtype=float)
    clk = batches["clock_mhz"].to_numpy(dtype=float)
    return np.array([np.nanmean(clk[(mid >= a) & (mid < b)]) if np.any((mid >= a) & (mid < b)) else np.nan
                     for a, b in zip(spans[schema.START_S], spans[schema.END_S])])


def _rel_slope(x, y) -> tuple[float, float]:
    """Slope of ln y on x (%/unit) and its 1 σ."""
    ok = np.isfinite(x) & np.isfinite(y)
    s, u = slope_with_uncertainty(np.asarray(x)[ok], np.log(np.asarray(y)[ok]))
    return 100 * s, 100 * u


def _ci(s: float, u: float) -> str:
    return f"{s:+.3f} [{s - Z95 * u:+.3f}, {s + Z95 * u:+.3f}]"


def board_rows(datasets: Path) -> tuple[pd.DataFrame, dict]:
    rows, slopes = [], {}
    for board in ("0b4f1a7f", "620707cb", "14ab84a0"):
        trace, iv, s0 = bf16_series(datasets, board)
        every = counter_spans(trace, iv, start_s=s0 + 0.5)
        spans = settled_spans(every)
        t_load = spans[schema.START_S].to_numpy(dtype=float) - s0
        temp = spans[schema.TEMPERATURE_C].to_numpy(dtype=float)
        energy = spans[schema.ENERGY_J].to_numpy(dtype=float)
        power = spans[schema.POWER_W].to_numpy(dtype=float)
        per_launch = spans[schema.TIME_S].to_numpy(dtype=float)
        if board in PROBES:
            folder = datasets / PROBES[board]
            wl = trace[schema.RUN_ID].iloc[0] if schema.RUN_ID in trace else None
            batches = _probed(folder, wl, s0, float(iv[-1, 1]))
            clock, clock_src = _attach_clock(spans, batches), "probe"
            # d ln t / d ln f over the batches of the whole series (the capped clock spans ~1.3–2.0 GHz early on)
            b = batches[batches["start_s"] > s0 + 0.5]
            elastic = np.polyfit(np.log(b["clock_mhz"]), np.log(b["per_launch_s"]), 1)[0]
        else:
            clock, clock_src = spans[schema.SM_CLOCK_MHZ].to_numpy(dtype=float), "nvml"
            elastic = np.polyfit(np.log(clock), np.log(per_launch), 1)[0]
        whole = _rel_slope(temp, energy)
        first = t_load <= 10.0
        early = _rel_slope(temp[first], energy[first]) if np.ptp(temp[first]) >= 3 else (np.nan, np.nan)
        p_s, p_u = _rel_slope(temp, power)
        f_s, f_u = _rel_slope(temp, clock)
        t_s, t_u = _rel_slope(temp, per_launch)
        predicted = p_s + elastic * f_s
        slopes[board] = whole
        rows.append({"board": board, "settled spans": len(spans), "from s": round(float(t_load.min()), 2),
                     "T °C": f"{temp.min():.0f}–{temp.max():.0f}",
                     "dlnE/dT %/°C (95 % CI)": _ci(*whole),
                     "first 10 s": _ci(*early) if np.isfinite(early[0]) else "< 3 °C",
                     "dlnP/dT": _ci(p_s, p_u), "dlnf/dT": f"{_ci(f_s, f_u)} ({clock_src})",
                     "dlnt/dlnf": round(float(elastic), 3), "dln(t per launch)/dT": _ci(t_s, t_u),
                     "predicted dlnP/dT + (dlnt/dlnf)(dlnf/dT)": f"{predicted:+.3f}",
                     "mean P W": round(float(power.mean()), 1)})
    return pd.DataFrame(rows), slopes


def no_trace_row(datasets: Path) -> dict:
    """ae8fffca: no temperature; energy per launch and probed clock against seconds of load."""
    board, rel = NO_TRACE
    folder = datasets / rel
    ph = pd.read_parquet(folder / "phases.parquet")
    (s0, s1, wl), = [(r.t0_s, r.t1_s, r.workload) for r in ph.itertuples()
                     if r.phase == "thermal" and r.kind == "series" and "bf16" in r.workload]
    en = pd.read_parquet(folder / "energy.parquet")
    en = en[(en["t_s"] >= s0 - 1) & (en["t_s"] <= s1)]
    trace = pd.DataFrame({schema.T_S: en["t_s"].to_numpy(), schema.ENERGY_COUNTER_J: en["energy_counter_j"].to_numpy()})
    batches = _probed(folder, wl, s0, s1)
    iv = batches[["start_s", "end_s"]].to_numpy(dtype=float)
    spans = counter_spans(trace, iv, start_s=s0 + 0.5)
    # no trace: settled = the 1 s mean power at the limit ± 2 %, from where it first is
    t_load = spans[schema.START_S].to_numpy(dtype=float) - s0
    spans = spans[t_load >= 2.0]
    t_load = t_load[t_load >= 2.0]
    energy = spans[schema.ENERGY_J].to_numpy(dtype=float)
    clock = _attach_clock(spans, batches)
    e_s, e_u = _rel_slope(t_load, energy)
    f_s, f_u = _rel_slope(t_load, clock)
    b = batches[batches["start_s"] > s0 + 0.5]
    elastic = np.polyfit(np.log(b["clock_mhz"]), np.log(b["per_launch_s"]), 1)[0]
    return {"board": board, "spans (2 s on)": len(spans), "mean P W": round(float(spans[schema.POWER_W].mean()), 1),
            "dlnE/d(load s) %/s": _ci(e_s, e_u), "dlnf/d(load s) %/s": _ci(f_s, f_u),
            "dlnt/dlnf": round(float(elastic), 3), "clock MHz 2–5 s / 20–25 s": "%.0f / %.0f" % (
                np.nanmean(clock[(t_load < 5)]), np.nanmean(clock[t_load > 20]))}


def rotation(slopes: dict) -> pd.DataFrame:
    """The capped prior fitted on two boards, checked on the third."""
    out = []
    for held in slopes:
        train = {b: s for b, s in slopes.items() if b != held}
        prior, sigma = capped_prior_from_slopes([s / 100 for s, _ in train.values()], [u / 100 for _, u in train.values()])
        s, u = slopes[held]
        out.append({"fitted on": " + ".join(train), "prior %/°C": f"{100 * prior:.3f} ± {100 * sigma:.3f}",
                    "held out": held, "held-out slope %/°C": f"{s:.3f} ± {u:.3f}",
                    "within the prior's 2σ": bool(abs(s / 100 - prior) <= 2 * np.hypot(sigma, u / 100))})
    return pd.DataFrame(out)


def main() -> int:
    datasets = REPO / "datasets"
    table, slopes = board_rows(datasets)
    print(f"capped bf16 GEMM 8192², {LIMIT_W:.0f} W limit, spans after the controller settled:\n")
    print(markdown_table(table, ".4g"))
    print()
    print(markdown_table(pd.DataFrame([no_trace_row(datasets)]), ".4g"))
    print()
    print(markdown_table(rotation(slopes), ".4g"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
