"""Per-kernel vs global frequency models on real RTX 8000 data (thesis §5.7 on public data).

Data: ``../shared/data/nv-dvfs-benchmark-rtx8000`` (Wang et al., NV-DVFS-Benchmark):
138 microbenchmark kernel/input pairs and 20 real applications, each at 10 core
clocks 705–1710 MHz (memory 6500 MHz), NVML mean power and nvprof kernel time.

For power (thesis eq. 4.1, :class:`FrequencyPowerModel`) and time (eq. 4.5,
:class:`RationalTimeModel`) it reports MAPE on held-out rows for

- per-kernel models, held-out clocks (``GroupKFold`` over the 10 clocks within every kernel);
- one global model, the same held-out clocks;
- one global model, held-out kernels (``GroupKFold`` over kernels);
- one global model trained on all microbenchmarks, tested on the 20 real applications
  (the DSO setting), and per-application models with leave-one-clock-out.

Usage: ``python benchmarks/thesis_rtx8000.py [--data DIR]``; writes
``benchmarks/results/thesis_rtx8000.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _common import write_report
from sklearn.metrics import mean_absolute_percentage_error

from powermodels import schema
from powermodels.models.frequency import FrequencyPowerModel
from powermodels.models.grouped import compare_per_group_vs_global
from powermodels.models.runtime import RationalTimeModel
from powermodels.reporting import markdown_table

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data" / "nv-dvfs-benchmark-rtx8000"
OUT = REPO / "benchmarks" / "results" / "thesis_rtx8000.md"

# The CSV's own column names (not ours: this is someone else's file format).
CLOCK, POWER, TIME = "core_frequency", "average_power", "time"


def load(data: Path, name: str) -> pd.DataFrame:
    df = pd.read_csv(data / name)
    df["kernel_id"] = df["benchmark"] + "/" + df["kernel"] + "/" + df["argNo"]
    return df.sort_values(["kernel_id", CLOCK]).reset_index(drop=True)


def evaluate(df: pd.DataFrame, n_clock_splits: int, n_group_splits: int) -> pd.DataFrame:
    X = df[[CLOCK]].to_numpy(dtype=float)
    out = []
    for target, est in ((POWER, FrequencyPowerModel()), (TIME, RationalTimeModel())):
        res = compare_per_group_vs_global(est, X, df[target].to_numpy(float), df["kernel_id"].to_numpy(),
                                          df[CLOCK].to_numpy(), n_clock_splits=n_clock_splits,
                                          n_group_splits=n_group_splits)
        res.insert(0, "target", "power" if target == POWER else "time")
        out.append(res)
    return pd.concat(out, ignore_index=True)


def transfer(train: pd.DataFrame, test: pd.DataFrame) -> list[dict]:
    rows = []
    for target, est in ((POWER, FrequencyPowerModel()), (TIME, RationalTimeModel())):
        m = est.fit(train[[CLOCK]].to_numpy(float), train[target].to_numpy(float))
        pred = m.predict(test[[CLOCK]].to_numpy(float))
        rows.append({"target": "power" if target == POWER else "time", schema.MODEL: "global (microbenchmarks)",
                     schema.HELD_OUT: "real applications",
                     schema.MAPE_PCT: 100 * mean_absolute_percentage_error(test[target], pred),
                     schema.MAPE_STD_PCT: np.nan, schema.N_FOLDS: 1})
    return rows


def to_markdown(df: pd.DataFrame) -> str:
    cols = {"target": "target", schema.MODEL: "model", schema.HELD_OUT: "held out", schema.MAPE_PCT: "MAPE %",
            schema.MAPE_STD_PCT: "std over folds %", schema.N_FOLDS: "folds"}
    return markdown_table(df[list(cols)].rename(columns=cols), ".1f", align="lllrrr", na_rep="")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    micro = load(args.data, "rtx8000-dvfs-microbenchmark-profile.csv")
    real = load(args.data, "rtx8000-dvfs-real-profile.csv")
    res_micro = evaluate(micro, n_clock_splits=5, n_group_splits=5)
    res_real = evaluate(real, n_clock_splits=10, n_group_splits=5)
    res_transfer = pd.DataFrame(transfer(micro, real))
    elapsed = time.perf_counter() - t0
    text = "\n".join([
        "# Per-kernel vs global frequency models — RTX 8000 (NV-DVFS-Benchmark, public data)",
        "",
        f"Command: `python benchmarks/thesis_rtx8000.py` ({elapsed:.1f} s on the CPU). Data: "
        "`../shared/data/nv-dvfs-benchmark-rtx8000` (Wang et al.; NVIDIA Quadro RTX 8000, 10 core clocks "
        "705–1710 MHz, NVML mean power, nvprof kernel time). Power model: thesis eq. 4.1 "
        "(`FrequencyPowerModel`); time model: eq. 4.5 (`RationalTimeModel`). MAPE on held-out rows, "
        "mean over folds.",
        "",
        f"## 138 microbenchmark kernels × 10 clocks ({len(micro)} rows); held-out clocks: 5 folds of 2 clocks",
        "",
        to_markdown(res_micro),
        "",
        f"## 20 real applications × 10 clocks ({len(real)} rows); held-out clocks: leave one clock out",
        "",
        to_markdown(res_real),
        "",
        "## Global model trained on the microbenchmarks, tested on the real applications",
        "",
        to_markdown(res_transfer),
        "",
        "Reading: a per-kernel curve predicts unseen clocks of *its* kernel well; one curve for all "
        "kernels does not, whether the clock or the kernel is new — the thesis §5.7.3 finding "
        "(every configuration has its own power and time curve), here on a second GPU and on public data.",
        "",
    ])
    return write_report(text, OUT)


if __name__ == "__main__":
    raise SystemExit(main())
