"""docs/thermal.md's reading of the real runs' misses (benchmarks/thermal_misses.py; real rows in datasets/).

Real: H100 GPU-a2b20798 (session 4, two runs), GPU-0b4f1a7f and GPU-2db598e1 (session 5), H200
GPU-0a8f0427 (session 6). Nothing here is fitted; the checks hold the page's claims to the rows.
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from thermal_misses import RUNS, capped, spreads, z_scores  # noqa: E402

H200 = "H200 0a8f0427 (s6)"


@pytest.fixture(scope="module")
def runs():
    return {k: pd.read_csv(ROOT / v / "thermal_rows.csv") for k, v in RUNS.items()}


def test_rows_scatter_about_as_their_uncertainty_says_and_the_h200_add_is_left_out(runs):
    z, left = z_scores(runs)
    assert left == [f"{H200} cupy_small: its reference launched otherwise (not the same quantity)"]
    assert len(z) == 66
    assert 0.9 < float(np.sqrt(np.mean(z["z"] ** 2))) < 1.3
    assert (z.loc[(z["run"] == H200) & (z["workload"] == "cupy_triad"), "z"].abs() < 0.85).all()


def test_no_physical_alpha_closes_the_h200_triads_spread(runs):
    s = spreads(runs).set_index(["run", "workload"])
    triad = s.loc[(H200, "cupy_triad")]
    assert triad["at-ref spread % (as run)"] > 1.0 and triad["least spread, α 0–0.6 %/°C"] > 0.85
    assert triad["noise alone within 1 %"] < 0.5


def test_capped_energy_follows_the_windows_power_on_every_board(runs):
    c = capped(runs).set_index("run")
    assert list(c.index) == ["H100 0b4f1a7f (s5)", "H100 2db598e1 (s5)", H200]  # session 4's rows sat far above
    assert c["own β"].between(0.3, 0.45).all()
    moved = c["and at the limit: vs ref %"] < c["at T_ref: vs ref %"]
    assert moved.all() and (c["and at the limit: spread %"] < c["at T_ref: spread %"]).sum() == 2
