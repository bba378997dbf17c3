"""α learned on the simulated GPU, cached per (GPU UUID, workload, configuration)."""

import json
import warnings

import numpy as np
import pytest

from powermodels.measuring.runner import make_runner
from powermodels.thermal.alpha_cache import AlphaCache, AlphaCacheWarning
from powermodels.measuring.alpha_warmup import alpha_for, learn_alpha
from powermodels.thermal.alpha import AlphaAssumedWarning, pooled_alpha
from powermodels.thermal.normalise import AlphaEstimate
from powermodels.thermal.spans import counter_spans, thermal_state


@pytest.fixture
def runner():
    r = make_runner("simulated")
    yield r
    r.close()


def true_alpha(gpu, clock_mhz=1980.0):
    """dP/dT of the simulated physics at a fixed clock: κ·V(f)·λ (thesis eq. 4.6)."""
    p = gpu.physics
    return p.leakage_w * float(p.relative_voltage(clock_mhz)) * p.leakage_per_c


def test_learned_alpha_matches_the_simulated_leakage(runner):
    warm = learn_alpha(runner, "sgemm")
    a = warm.alpha
    assert a is not None, warm.reason
    truth = true_alpha(runner.gpu)
    assert abs(a.alpha_w_per_c - truth) < max(3 * a.uncertainty_w_per_c, 0.1 * truth)
    assert a.temperature_max_c - a.temperature_min_c >= 3
    # bounded: never more than 10 s of load
    assert warm.launches[-1, 1] - warm.launches[0, 0] <= 10.0 + 0.5


def test_alpha_is_cached_and_reused(runner, tmp_path):
    cache = AlphaCache(tmp_path)
    first = alpha_for(runner, "sgemm", power_w=400.0, cache=cache)
    t = runner.gpu.now()
    second = alpha_for(runner, "sgemm", power_w=400.0, cache=cache)
    assert runner.gpu.now() == t        # no warm-up the second time
    assert second == first and second.source == "learned"
    files = list(tmp_path.iterdir())
    assert [f.suffix for f in files if not f.name.endswith(".lock")] == [".json"]  # no temp file left


def _entries(cache, uuid):
    path = cache.path(uuid)
    return path, json.loads(path.read_text())


def test_foreign_entry_is_ignored_with_a_warning(runner, tmp_path):
    cache = AlphaCache(tmp_path)
    uuid = runner.device.info.uuid
    alpha_for(runner, "sgemm", power_w=400.0, cache=cache)
    path, data = _entries(cache, uuid)
    for entry in data["entries"].values():
        entry["uuid"] = "GPU-someone-elses-board"
    path.write_text(json.dumps(data))
    t = runner.gpu.now()
    with pytest.warns(AlphaCacheWarning, match="foreign"):
        a = alpha_for(runner, "sgemm", power_w=400.0, cache=cache)
    assert runner.gpu.now() > t + 2.0 and a.source == "learned"   # learned again
    _, data = _entries(cache, uuid)
    assert all(e["uuid"] == uuid for e in data["entries"].values())  # and replaced


def test_stale_entry_is_ignored_with_a_warning(runner, tmp_path):
    cache = AlphaCache(tmp_path, max_age_days=30)
    uuid = runner.device.info.uuid
    alpha_for(runner, "sgemm", power_w=400.0, cache=cache)
    path, data = _entries(cache, uuid)
    for entry in data["entries"].values():
        entry["created"] = "2020-01-01T00:00:00+00:00"
    path.write_text(json.dumps(data))
    with pytest.warns(AlphaCacheWarning, match="stale: learned .* days ago"):
        assert cache.get(uuid, "sgemm", next(iter(data["entries"].values()))["config"]) is None


def test_entry_of_another_driver_is_stale(tmp_path):
    cache = AlphaCache(tmp_path)
    cache.put("GPU-1", "k", "c", AlphaEstimate(1.0, 0.1, "learned"), driver="580.1")
    with pytest.warns(AlphaCacheWarning, match="driver 580.1"):
        assert cache.get("GPU-1", "k", "c", driver="590.2") is None
    assert cache.get("GPU-1", "k", "c", driver="580.1") is not None


def test_damaged_file_is_ignored_with_a_warning_and_rewritten(tmp_path):
    cache = AlphaCache(tmp_path)
    path = cache.path("GPU-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json")
    with pytest.warns(AlphaCacheWarning, match="unreadable"):
        assert cache.get("GPU-1", "k", "c") is None
    with pytest.warns(AlphaCacheWarning):
        cache.put("GPU-1", "k", "c", AlphaEstimate(1.0, 0.1, "learned"))
    assert cache.get("GPU-1", "k", "c").alpha_w_per_c == 1.0


def test_without_learning_the_board_pool_then_the_assumption(runner, tmp_path):
    cache = AlphaCache(tmp_path)
    with pytest.warns(AlphaAssumedWarning, match="assumed"):
        a = alpha_for(runner, "stream_triad", power_w=400.0, sm_clock_mhz=1980.0, cache=cache, learn=False)
    assert a.source == "assumed"
    learned = alpha_for(runner, "sgemm", power_w=400.0, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pooled = alpha_for(runner, "stream_triad", power_w=400.0, sm_clock_mhz=1980.0, cache=cache, learn=False)
    # the pool takes the cached fit itself (the row's learned α is that fit shrunk toward the prior)
    (fit,) = [e for e in cache.entries(runner.device.info.uuid or "simulated-0") if e.source == "learned"]
    assert pooled.alpha_w_per_c == pytest.approx(fit.alpha_w_per_c, rel=0.01)  # (shrunk toward the assumption)
    assert learned.alpha_w_per_c == pytest.approx(fit.alpha_w_per_c, rel=0.02)  # a precise fit keeps its value
    assert "pooled over 1 workload" in pooled.detail


def test_pooled_alpha_weights_by_uncertainty_and_keeps_the_spread():
    a = AlphaEstimate(1.0, 0.1, "learned", sm_clock_mhz=1980.0, power_w=500, reference_temperature_c=50)
    b = AlphaEstimate(2.0, 0.2, "learned", sm_clock_mhz=1980.0, power_w=500, reference_temperature_c=50)
    far = AlphaEstimate(9.0, 0.1, "learned", sm_clock_mhz=1200.0, power_w=500, reference_temperature_c=50)
    p = pooled_alpha([a, b, far], 1975.0)
    assert p.alpha_w_per_c == pytest.approx((1 / 0.01 + 2 / 0.04) / (1 / 0.01 + 1 / 0.04))
    assert p.uncertainty_w_per_c == pytest.approx(np.std([1.0, 2.0], ddof=1))
    assert pooled_alpha([far], 1980.0) is None


def test_spans_follow_the_truth_and_thermal_state(runner):
    runner.idle(2.0)
    iv = runner.run("sgemm", None, int(2.0 / runner.launch_time_s("sgemm")))
    trace = runner.trace(iv[0, 0], iv[-1, 1])
    s = counter_spans(trace, iv)
    assert len(s) >= 5
    for _, row in s.iterrows():
        inside = iv[(iv[:, 0] >= row["start_s"]) & (iv[:, 1] <= row["end_s"])]
        truth = runner.reference_energy_j(inside) / len(inside)
        assert row["energy_j"] == pytest.approx(truth, rel=0.02)
    state = thermal_state(trace, iv[0, 0], iv[-1, 1])
    assert state["temperature_end_c"] > state["temperature_start_c"] + 3


def test_a_failed_learning_is_cached_with_its_fallback(tmp_path):
    """A GPU already hot barely warms: α is not identified, the assumption is used and kept,
    so the next measurement takes ~1 s instead of warming up again."""
    from powermodels.measuring.protocols import make_protocol

    with make_runner("simulated") as runner:
        runner.run("sgemm", None, int(60.0 / runner.launch_time_s("sgemm")))  # a minute of load: hot
        counter = make_protocol("counter", alpha_cache_dir=str(tmp_path))
        with pytest.warns(AlphaAssumedWarning, match="moved"):
            first = counter.measure(runner, "sgemm").row
        assert first["alpha_source"] == "assumed"
        t0 = runner.now()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            second = counter.measure(runner, "sgemm").row
        assert runner.now() - t0 < 1.5 and second["alpha_source"] == "assumed"
        assert "not learned" in AlphaCache(tmp_path).get(runner.device.info.uuid, "sgemm", first["config"],
                                                         driver="simulated").detail


def test_the_warm_up_continues_the_measurement_that_asked(runner):
    """From a cool GPU the measurement's own first second (the fastest warming) is in the fit."""
    from powermodels.measuring.protocols import make_protocol

    runner.idle(30.0)
    t0 = runner.now()
    make_protocol("counter").measure(runner, "sgemm")
    entry = AlphaCache().get(runner.device.info.uuid, "sgemm",
                             make_protocol("counter").measure(runner, "sgemm").row["config"], driver="simulated")
    assert entry.source == "learned"
    assert runner.now() - t0 < 12.0                      # measurement + ≤ 10 s of warm-up, one load
    assert entry.temperature_min_c < 42                   # the fit starts 0.5 s into the measurement


def test_after_pool_after_workloads_a_new_one_pools_instead_of_warming_up(runner, tmp_path):
    """A campaign over a search space does not spend 10 s on every configuration."""
    cache = AlphaCache(tmp_path)
    for kernel in ("sgemm", "stream_triad"):
        runner.idle(20.0)
        assert alpha_for(runner, kernel, power_w=400.0, sm_clock_mhz=1980.0, cache=cache,
                         pool_after=2).source == "learned"
    t0 = runner.now()
    pooled = alpha_for(runner, "fp32", power_w=400.0, sm_clock_mhz=1980.0, cache=cache, pool_after=2)
    assert runner.now() == t0 and pooled.pooled == 2 and "no warm-up" in pooled.detail
    from powermodels.workloads import as_workload

    fp32 = as_workload("fp32")
    kept = cache.get(runner.device.info.uuid, "fp32", fp32.config_id(fp32.validate_config(None)))
    assert kept is not None and kept.pooled == 2  # cached under fp32's own configuration


def test_the_assumption_warning_names_the_capped_prior_under_the_cap(runner, tmp_path):
    """Fails before: a capped row's warning said 0.25 ± 0.12 %/°C of the power (the fixed-clock
    leakage slope) while the row used the capped prior, 0.096 ± 0.038 %/°C of energy per launch."""
    from powermodels.thermal.normalise import POWER_CAPPED

    with pytest.warns(AlphaAssumedWarning, match=r"0\.096 ± 0\.038 %/°C of energy per launch") as warned:
        a = alpha_for(runner, "sgemm", power_w=700.0, regime=POWER_CAPPED, learn=False, cache=AlphaCache(tmp_path))
    assert a.regime == POWER_CAPPED and a.source == "assumed"
    assert not any("0.25" in str(w.message) for w in warned)
