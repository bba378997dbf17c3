"""InstructionEnergyModel on the real H200 instruction tables of datasets/ (regression test).

The model is fitted on the 63 measured microbenchmarks with its default settings and
predicts the two held-out sets; the MAPEs must match what benchmarks/results/ reports
(benchmarks/gpu_wattchmen.py analyze), so a change to the model that moves the published
figures fails here. Skips when the tables or result files are absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.models.instruction import InstructionEnergyModel

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "benchmarks" / "results"
DATA = REPO / "datasets" / "h200"
# what a profiler cannot give is dropped, as in gpu_wattchmen.py analyze
MEASURED_ONLY = [schema.POWER_W, schema.TEMPERATURE_C, schema.SM_CLOCK_MHZ]


def _load(path: Path) -> pd.DataFrame:
    if not path.exists():
        pytest.skip(f"{path} is absent")
    df = pd.read_parquet(path)
    df = df[np.isfinite(df[schema.ENERGY_J])].reset_index(drop=True)
    return df.drop(columns=[c for c in MEASURED_ONLY if c in df.columns])


def _results(name: str) -> tuple[dict, str]:
    js, md = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    if not (js.exists() and md.exists()):
        pytest.skip(f"{js} or {md} is absent")
    return json.loads(js.read_text()), md.read_text()


def _mape(model, table) -> float:
    y = table[schema.ENERGY_J].to_numpy()
    return float(np.mean(np.abs(model.predict(table) - y) / y) * 100)


@pytest.fixture(scope="module")
def micro() -> pd.DataFrame:
    return _load(DATA / "wattchmen_microbench.parquet")


@pytest.fixture(scope="module")
def models(micro) -> dict:
    return {ext: InstructionEnergyModel(extension=ext).fit(micro) for ext in ("none", "bucket")}


@pytest.mark.parametrize("table, results", [
    ("wattchmen_fresh_workloads.parquet", "wattchmen_fresh"),
    ("wattchmen_workloads.parquet", "wattchmen"),
])
def test_mape_matches_the_published_results(models, table, results):
    wl = _load(DATA / table)
    summary, md = _results(results)
    direct, extended = _mape(models["none"], wl), _mape(models["bucket"], wl)
    assert direct == pytest.approx(summary["direct_mape_pct"], abs=0.05)
    assert extended == pytest.approx(summary["extended_mape_pct"], abs=0.05)
    # and the markdown table says the same, rounded to one decimal
    row = re.search(r"^\| extended MAPE % \| ([0-9.]+) \|", md, flags=re.M)
    assert row is not None
    assert float(row.group(1)) == pytest.approx(extended, abs=0.05)


def test_fresh_set_per_workload_errors_match_the_results_table(models):
    wl = _load(DATA / "wattchmen_fresh_workloads.parquet")
    _, md = _results("wattchmen_fresh")
    assert len(wl) >= 6
    pred = models["bucket"].predict(wl)
    for name, y, p in zip(wl[schema.WORKLOAD], wl[schema.ENERGY_J], pred, strict=True):
        row = re.search(rf"^\| {re.escape(name)} \|(.*)$", md, flags=re.M)
        assert row is not None, name
        cells = [c.strip() for c in row.group(1).split("|")]
        assert float(cells[4]) == pytest.approx(abs(p - y) / y * 100, abs=0.05), name
    # a fresh workload must not be one the model was fitted on or tuned on
    first = pd.read_parquet(DATA / "wattchmen_workloads.parquet")[schema.WORKLOAD]
    micro_names = pd.read_parquet(DATA / "wattchmen_microbench.parquet")[schema.WORKLOAD]
    assert not set(wl[schema.WORKLOAD]) & (set(first) | set(micro_names))
