"""A row says truthfully where its α came from: ``pooled`` is not ``learned`` (issue 19, session-5 H100 rows)."""

import json
import math
import warnings

import pytest

from powermodels import schema
from powermodels.measuring.alpha_warmup import alpha_for
from powermodels.measuring.runner import make_runner
from powermodels.thermal.alpha import board_alpha, pooled_alpha
from powermodels.thermal.alpha_cache import AlphaCache
from powermodels.thermal.heldout import rescore_rows
from powermodels.thermal.normalise import AlphaEstimate

SESSION5 = "h100-2026-11-25-session5"


def _cached(datasets, board):
    """Every α entry the real run cached on ``board``: workload → the entry's ``alpha`` dict."""
    files = json.loads((datasets / SESSION5 / f"thermal_{board}" / "alpha_cache.json").read_text())
    (body,) = files.values()
    return {e["workload"]: e["alpha"] for e in body["entries"].values()}


def test_pooled_is_an_allowed_source():
    assert "pooled" in schema.ALPHA_SOURCES


@pytest.mark.parametrize("board, workload", [("0b4f1a7f", "cupy_triad"), ("0b4f1a7f", "cupy_small"),
                                             ("2db598e1", "cupy_small")])
def test_real_pooled_cache_entries_read_back_as_pooled(datasets, board, workload):
    """Session 5 cached these as ``source: learned`` while their detail says pooled over the board."""
    entry = _cached(datasets, board)[workload]
    assert entry["pooled"] >= 1 and entry["detail"].startswith("pooled over")
    alpha = AlphaEstimate.from_dict(entry)
    assert alpha.source == "pooled"


def test_real_own_fits_stay_learned(datasets):
    entry = _cached(datasets, "0b4f1a7f")["cupy_matmul_fp32_4096"]
    assert entry["pooled"] == 0 and AlphaEstimate.from_dict(entry).source == "learned"


def test_pool_and_board_alpha_say_pooled():
    fits = [AlphaEstimate(1.0, 0.1, "learned", sm_clock_mhz=1980.0, power_w=500.0, reference_temperature_c=50.0),
            AlphaEstimate(1.4, 0.2, "learned", sm_clock_mhz=1980.0, power_w=500.0, reference_temperature_c=50.0)]
    assert pooled_alpha(fits, 1980.0).source == "pooled"
    assert board_alpha(fits, 1980.0, 500.0).source == "pooled"
    # a pool is never pooled again
    assert pooled_alpha([pooled_alpha(fits, 1980.0)], 1980.0) is None


def test_a_pooled_source_needs_a_pool_count():
    with pytest.raises(ValueError, match="pooled"):
        AlphaEstimate(1.0, 0.1, "pooled")


def test_simulated_row_without_its_own_fit_says_pooled(tmp_path):
    with make_runner("simulated") as runner:
        cache = AlphaCache(tmp_path)
        assert alpha_for(runner, "sgemm", power_w=400.0, cache=cache).source == "learned"
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            pooled = alpha_for(runner, "stream_triad", power_w=400.0, sm_clock_mhz=1980.0, cache=cache, learn=False)
    assert pooled.source == "pooled" and pooled.pooled == 1


def test_rescore_repools_a_row_that_says_pooled():
    """A run recorded with the fix says ``pooled``; the re-score pools it over the board's earlier fits."""
    import pandas as pd

    def rows(workload, source, alpha, pooled_power):
        return [{schema.WORKLOAD: workload, schema.THERMAL_STATE: s, schema.ENERGY_J: 1.0 + 0.01 * i,
                 schema.POWER_W: pooled_power, schema.TIME_S: 1e-3, schema.TEMPERATURE_C: 50.0 + 3 * i,
                 schema.REFERENCE_TEMPERATURE_C: 55.0, schema.CORRECTION_ALPHA_W_PER_C: alpha,
                 schema.ALPHA_UNCERTAINTY_W_PER_C: 0.1, schema.ALPHA_SOURCE: source,
                 schema.ALPHA_REGIME: "fixed_clock", schema.SM_CLOCK_MHZ: 1980.0}
                for i, s in enumerate(("cold", "warm", "reference", "hot"))]

    table = pd.DataFrame(rows("a", "learned", 1.2, 500.0) + rows("b", "pooled", 9.9, 500.0))
    _, alphas = rescore_rows(table)
    assert alphas["b"].source == "pooled" and math.isclose(alphas["b"].alpha_w_per_c, 1.2, rel_tol=0.05)


@pytest.mark.parametrize("board", ["0b4f1a7f", "2db598e1"])
def test_rescoring_a_session5_run_with_its_cached_fits_reproduces_its_rows(datasets, board):
    """Session 5 ran the shrinkage method: re-scoring its rows with the same method must give back the
    recorded energy_at_ref_j (the rows hold the shrunk α; shrinking it again scored another method:
    matmul_kernel on 0b4f1a7f 0.272 → 0.198 %/°C)."""
    import pandas as pd

    from powermodels.thermal.heldout import cached_fits

    folder = datasets / SESSION5 / f"thermal_{board}"
    rows = pd.read_csv(folder / "thermal_rows.csv")
    rows = rows[rows[schema.THERMAL_STATE].isin(["cold", "warm", "hot", "reference"])
                & (rows[schema.ALPHA_REGIME] == "fixed_clock")]
    new, _ = rescore_rows(rows, fits=cached_fits(folder / "alpha_cache.json"))
    assert new[schema.ENERGY_AT_REF_J].to_numpy() == pytest.approx(rows[schema.ENERGY_AT_REF_J].to_numpy(), rel=2e-4)
