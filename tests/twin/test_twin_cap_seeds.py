"""The capped start's rows over sensor seeds (twin.cap_seeds)."""

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.twin import metrics
from powermodels.twin.cap_seeds import cap_rows_over_seeds, capped_series_seeds
from powermodels.twin.compare import capped_series
from powermodels.twin.replay import replay

from .test_twin import known_preset


@pytest.fixture(scope="module")
def capped():
    sched = pd.DataFrame([("thermal", "-", -1, "idle", 0.0, 5.0), ("thermal", "bf16", 0, "series", 5.0, 12.5),
                          ("thermal", "-", -1, "idle", 12.5, 14.0)],
                         columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                  schema.T0_S, schema.T1_S])
    preset = known_preset()
    real = replay(sched, preset, seed=11, poll_s=2e-3, start_temperature_c=40.0)  # stands for the real board
    twin = replay(sched, preset, seed=0, poll_s=2e-3, start_temperature_c=40.0)
    return preset, real, twin


def test_each_seed_replays_the_capped_start(capped):
    preset, real, twin = capped
    assert capped_series(real) == ["bf16"]
    runs = capped_series_seeds(real, twin, preset, "bf16", seeds=(0, 1, 2))
    assert list(runs["seed"]) == [0, 1, 2]
    # the sensor's phase alone moves the first second's counter mean: one replay is one draw
    assert runs["first_second_w"].nunique() == 3
    rows = cap_rows_over_seeds(real, {"bf16": runs}, 0.25)
    assert [r["metric"][:14] for r in rows] == ["cap overshoot:", "cap settling t"]
    over = rows[0]
    assert over["twin"] == pytest.approx(float(np.median(runs["overshoot_w"])))
    assert over["real"] == pytest.approx(metrics.cap_overshoot(real, "bf16")["overshoot_w"])
    assert "median of 3 sensor seeds" in over["unit"]
    assert over["within"] == (abs(over["error"]) <= 0.25)



def test_twin_compare_scores_the_cap_rows_over_seeds(capped, tmp_path):
    from powermodels.twin.compare import twin_compare

    preset, real, _ = capped
    table = twin_compare(real, preset, tmp_path / "cmp", ambient="preset", cap_seeds=(0, 1))
    cap = table.loc[table["metric"].str.startswith("cap ")]
    assert len(cap) == 2 and cap["unit"].str.contains("median of 2 sensor seeds").all()
    assert any("median over sensor seeds 0, 1" in n for n in table.attrs["not_compared"])
    one = twin_compare(real, preset, tmp_path / "one", ambient="preset", cap_seeds=(0,))
    assert not one["unit"].str.contains("sensor seeds").any()
