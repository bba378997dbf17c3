"""Model changes for the per-instruction table, chosen by cross-validation on the first set only.

Training data: the 63 H200 microbenchmarks and the first held-out set (13
workloads, already used to choose the model's settings). Each candidate is
scored by leave-one-workload-out over the first set: fit on the
microbenchmarks (plus, for the ``+ workloads`` candidates, the other 12
first-set workloads as training rows), predict the left-out workload. The
fresh set (``wattchmen_fresh_workloads.parquet``) is never read while
choosing; ``--freeze NAME`` then reports the chosen candidate's fresh-set MAPE
once (with its standard error) next to the frozen default's.

Usage::

    PYTHONPATH=src python benchmarks/wattchmen_cv.py                    # CV table only
    PYTHONPATH=src python benchmarks/wattchmen_cv.py --freeze "NAME"    # + fresh figure, once
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from _common import write_report  # noqa: E402

from powermodels import schema  # noqa: E402
from powermodels.models import InstructionEnergyModel  # noqa: E402
from powermodels.reporting import markdown_table  # noqa: E402
from powermodels.instruction_energy.calibration import prediction_table  # noqa: E402

DATA = REPO / "datasets" / "h200"
OUT = REPO / "benchmarks" / "results" / "wattchmen_cv.md"
GEMM_LIKE = ("cublas_sgemm_4096", "cublas_hgemm_8192", "cublas_dgemm_4096", "tiled_sgemm_2048")
IRREGULAR = ("fft_16M", "spmv_csr_2M", "transpose_8192")

#: name → model parameters, ``wl``: weight of the first-set workloads as training rows (0: not
#: used), ``drop``: static power fitted on time instead of the NANOSLEEP column, ``rel``:
#: every row weighted by 1/E² (relative residuals, as MAPE counts them).
CANDIDATES = {
    "default (frozen model)": dict(params={}, wl=0.0, drop=False, rel=False),
    "no sector traffic": dict(params={"memory_traffic": False}, wl=0.0, drop=False, rel=False),
    "no memory-level split": dict(params={"memory_levels": False}, wl=0.0, drop=False, rel=False),
    "static power fitted on time": dict(params={}, wl=0.0, drop=True, rel=False),
    "min_share=0.01": dict(params={"min_share": 0.01}, wl=0.0, drop=False, rel=False),
    "plain NNLS (alpha=0)": dict(params={"alpha": 0.0}, wl=0.0, drop=False, rel=False),
    "relative residuals": dict(params={}, wl=0.0, drop=False, rel=True),
    "+ workloads": dict(params={}, wl=1.0, drop=False, rel=False),
    "+ workloads, static fitted": dict(params={}, wl=1.0, drop=True, rel=False),
    "+ workloads, no sector traffic": dict(params={"memory_traffic": False}, wl=1.0, drop=False,
                                           rel=False),
    "+ workloads, relative residuals": dict(params={}, wl=1.0, drop=False, rel=True),
    "+ workloads weight 0.3, relative": dict(params={}, wl=0.3, drop=False, rel=True),
    "+ workloads weight 0.1, relative": dict(params={}, wl=0.1, drop=False, rel=True),
}

def _static(df: pd.DataFrame, drop: bool) -> pd.DataFrame:
    return df.drop(columns=[schema.STATIC_POWER_W]) if drop else df


def fit(micro, extra, c):
    """A candidate ``c`` fitted on the microbenchmarks (+ ``extra`` workloads at weight ``c['wl']``)."""
    use = extra is not None and len(extra) and c["wl"] > 0
    train = pd.concat([micro, extra], ignore_index=True) if use else micro
    train = train.fillna({col: 0.0 for col in schema.opcode_columns(train)})
    w = np.r_[np.ones(len(micro)), np.full(len(extra), c["wl"])] if use else np.ones(len(micro))
    if c["rel"]:
        w = w / train[schema.ENERGY_J].to_numpy() ** 2
    return InstructionEnergyModel(**c["params"]).fit(_static(train, c["drop"]), sample_weight=w)


def loo_ape(micro, first, c) -> np.ndarray:
    """APE (%) of each first-set workload predicted by a model that never saw it."""
    y = first[schema.ENERGY_J].to_numpy()
    if not c["wl"]:  # the workloads never enter the fit: one model predicts all
        pred = fit(micro, None, c).predict(_static(first, c["drop"]))
        return np.abs(pred - y) / y * 100
    ape = np.empty(len(first))
    for i in range(len(first)):
        model = fit(micro, first.drop(index=i), c)
        ape[i] = abs(model.predict(_static(first.iloc[[i]], c["drop"]))[0] - y[i]) / y[i] * 100
    return ape


def _se(a) -> float:
    return float(np.std(a, ddof=1) / np.sqrt(len(a)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--freeze", default="", help="candidate to freeze; reports the fresh set once")
    args = ap.parse_args(argv)
    micro = prediction_table(pd.read_parquet(DATA / "wattchmen_microbench.parquet"))
    first = prediction_table(pd.read_parquet(DATA / "wattchmen_workloads.parquet"))
    names = first[schema.WORKLOAD].tolist()
    gemm = np.isin(names, GEMM_LIKE)
    irr = np.isin(names, IRREGULAR)
    rows, apes = [], {}
    for label, c in CANDIDATES.items():
        ape = loo_ape(micro, first, c)
        apes[label] = ape
        rows.append({"candidate": label, "LOO MAPE %": ape.mean(), "SE %": _se(ape),
                     "GEMM-like %": ape[gemm].mean(), "irregular memory %": ape[irr].mean(),
                     "others %": ape[~gemm & ~irr].mean()})
        print(rows[-1], flush=True)
    table = pd.DataFrame(rows)
    base = apes["default (frozen model)"]
    table["paired diff vs default %"] = [float((a - base).mean()) for a in apes.values()]
    table["paired SE %"] = [_se(a - base) for a in apes.values()]
    text = ("# Per-instruction model changes: leave-one-workload-out CV on the first set\n\n"
            f"Training data only: {len(micro)} H200 microbenchmarks + {len(first)} first-set "
            "workloads (the set the model's settings were chosen on). Each workload is predicted "
            "by a model that did not see it; `+ workloads` candidates train on the microbenchmarks "
            "and the other 12 workloads. The fresh set is not read here.\n\n"
            + markdown_table(table, float_format=".3g") + "\n\nper-workload APE % (LOO):\n\n"
            + markdown_table(pd.DataFrame({"workload": names, **{k: v for k, v in apes.items()}}),
                             float_format=".3g") + "\n")
    if args.freeze:
        if args.freeze not in CANDIDATES:
            raise SystemExit(f"--freeze: unknown candidate {args.freeze!r} (have {list(CANDIDATES)})")
        fresh = prediction_table(pd.read_parquet(DATA / "wattchmen_fresh_workloads.parquet"))
        y = fresh[schema.ENERGY_J].to_numpy()
        out = []
        for label in dict.fromkeys(["default (frozen model)", args.freeze]):
            c = CANDIDATES[label]
            model = fit(micro, first, c)
            ape = np.abs(model.predict(_static(fresh, c["drop"])) - y) / y * 100
            out.append({"model": label, "fresh MAPE %": ape.mean(), "SE %": _se(ape),
                        **{n: a for n, a in zip(fresh[schema.WORKLOAD], ape, strict=True)}})
        text += (f"\n## Frozen: {args.freeze!r}; fresh set ({len(fresh)} workloads), reported once\n\n"
                 "The fresh set was already used once, for the default model: this figure is "
                 "less biased than a tuned one but not unbiased; a new fresh set must be measured "
                 "on a GPU for an unbiased figure.\n\n"
                 + markdown_table(pd.DataFrame(out).T.reset_index().rename(columns={"index": ""}),
                                  float_format=".3g") + "\n")
    return write_report(text, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
