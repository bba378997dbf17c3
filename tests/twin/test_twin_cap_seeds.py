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
    assert [r[schema.CHECK_METRIC][:14] for r in rows] == ["cap overshoot:", "cap settling t"]
    over = rows[0]
    assert over[schema.CHECK_TWIN] == pytest.approx(float(np.median(runs["overshoot_w"])))
    assert over[schema.CHECK_REAL] == pytest.approx(metrics.cap_overshoot(real, "bf16")["overshoot_w"])
    assert "median of 3 sensor seeds" in over[schema.CHECK_UNIT]
    assert over[schema.CHECK_WITHIN] == (abs(over[schema.CHECK_ERROR]) <= 0.25)



def test_twin_compare_scores_the_cap_rows_over_seeds(capped, tmp_path):
    from powermodels.twin.compare import twin_compare

    preset, real, _ = capped
    table = twin_compare(real, preset, tmp_path / "cmp", ambient="preset", cap_seeds=(0, 1))
    cap = table.loc[table[schema.CHECK_METRIC].str.startswith("cap ")]
    assert len(cap) == 2 and cap[schema.CHECK_UNIT].str.contains("median of 2 sensor seeds").all()
    assert any("median over sensor seeds 0, 1" in n for n in table.attrs["not_compared"])
    one = twin_compare(real, preset, tmp_path / "one", ambient="preset", cap_seeds=(0,))
    assert not one[schema.CHECK_UNIT].str.contains("sensor seeds").any()


@pytest.fixture(scope="module")
def starts():
    """Three capped starts from idle (a ``capstarts`` recording), replayed twice: 'real' and twin."""
    rows, t = [], 0.0
    for k in range(3):
        rows += [("capstart", "-", k, "idle", t, t + 4.0), ("capstart", "bf16", k, "series", t + 4.0, t + 11.0)]
        t += 11.0
    rows.append(("capstart", "-", 3, "idle", t, t + 2.0))
    sched = pd.DataFrame(rows, columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                        schema.T0_S, schema.T1_S])
    preset = known_preset()
    real = replay(sched, preset, seed=5, poll_s=2e-3, start_temperature_c=40.0)
    twin = replay(sched, preset, seed=0, poll_s=2e-3, start_temperature_c=40.0)
    return preset, real, twin


def test_every_start_is_scored_and_the_medians_compared(starts):
    preset, real, twin = starts
    assert metrics.series_entries(real, "bf16") == [1, 3, 5]
    table = metrics.cap_starts(real, "bf16")
    assert list(table["entry"]) == [0, 1, 2]
    assert table["t0_s"].tolist() == pytest.approx([4.0, 15.0, 26.0], abs=1e-6)
    assert table.loc[1, "overshoot_w"] == pytest.approx(metrics.cap_overshoot(real, "bf16", entry=1)["overshoot_w"])
    runs = capped_series_seeds(real, twin, preset, "bf16", seeds=(0, 1))
    assert sorted(zip(runs["entry"], runs["seed"], strict=True)) == [(e, s) for e in range(3) for s in (0, 1)]
    rows = cap_rows_over_seeds(real, {"bf16": runs}, 0.25)
    assert rows[0][schema.CHECK_REAL] == pytest.approx(float(table["overshoot_w"].median()))
    assert rows[0][schema.CHECK_TWIN] == pytest.approx(float(runs["overshoot_w"].median()))
    assert "median of 3 starts × 2 sensor seeds" in rows[0][schema.CHECK_UNIT] and "real: median of 3 starts" in rows[0][schema.CHECK_UNIT]
    # the comparison table lists the capped workload once, scored on the starts' medians
    from powermodels.twin.compare import compare_recordings

    cmp = compare_recordings(real, twin)
    cap = cmp.loc[cmp[schema.CHECK_METRIC].str.startswith("cap ")]
    assert len(cap) == 2 and cap[schema.CHECK_UNIT].str.contains("median of 3 starts").all()
    assert cap[schema.CHECK_REAL].iloc[0] == pytest.approx(float(table["overshoot_w"].median()))
    assert (cmp[schema.CHECK_METRIC].str.startswith("warm-up")).sum() == 1


def test_an_entry_that_is_not_there_or_too_short_is_refused(starts):
    _, real, _ = starts
    with pytest.raises(ValueError, match="has 3 'series' entries, no entry 3"):
        metrics.cap_overshoot(real, "bf16", entry=3)
    with pytest.raises(ValueError, match=r"settled power is read from 6\.5 s on"):
        metrics.cap_overshoot(real, "bf16", steady_from_s=6.5)


def test_a_segment_replays_its_start_as_the_full_replay_does():
    """Fails before session 12: the segment stopped at the series' end, before the counter's next update,
    so its settled power read low (685.1 W against the full replay's 690.6 W) and its overshoot high."""
    sched = pd.DataFrame([("capstart", "-", 0, "idle", 0.0, 3.0), ("capstart", "bf16", 0, "series", 3.0, 10.0),
                          ("capstart", "-", 1, "idle", 10.0, 12.0)],
                         columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                  schema.T0_S, schema.T1_S])
    preset = known_preset()
    full = replay(sched, preset, seed=0, poll_s=2e-3, start_temperature_c=40.0)
    seg = capped_series_seeds(full, full, preset, "bf16", seeds=(0,))
    whole = metrics.cap_overshoot(full, "bf16")
    assert seg["settled_w"].iloc[0] == pytest.approx(whole["settled_w"], abs=0.5)
    assert seg["overshoot_w"].iloc[0] == pytest.approx(whole["overshoot_w"], abs=0.5)



def test_a_start_that_never_leaves_the_band_is_matched_by_a_twin_that_does_not_either(monkeypatch):
    """Real and twin both settled at once (0 s): error 0, within; the real time is floored at one window step.

    H200 GPU-ef3dd380's raw start read 0 s and its twin 0 s: the row said −100 %, a miss (session 14).
    """
    assert metrics.settling_error(0.0, 0.0) == 0.0
    assert metrics.settling_error(0.0, metrics.SETTLING_STEP_S) == pytest.approx(0.0)
    assert metrics.settling_error(0.0, 1.0) == pytest.approx(9.0)
    assert metrics.settling_error(2.0, 1.5) == pytest.approx(-0.25)
    runs = pd.DataFrame({"entry": [0, 0], "seed": [0, 1], "overshoot_w": [4.0, 5.0], "settling_s": [0.0, 0.0]})
    real_starts = pd.DataFrame({"entry": [0], "overshoot_w": [4.5], "settling_s": [0.0]})
    monkeypatch.setattr(metrics, "cap_starts", lambda real, workload: real_starts)
    rows = cap_rows_over_seeds(None, {"bf16": runs}, 0.25)
    settling = next(r for r in rows if r[schema.CHECK_METRIC].startswith("cap settling"))
    assert settling[schema.CHECK_REAL] == 0.0 and settling[schema.CHECK_TWIN] == 0.0 and settling[schema.CHECK_ERROR] == 0.0 and settling[schema.CHECK_WITHIN]
