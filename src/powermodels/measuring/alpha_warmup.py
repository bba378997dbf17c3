"""The first-time warm-up that learns α on a GPU, and where a measurement gets its α.

Without a calibration file, the first measurement of a workload configuration
on a board runs a bounded warm-up (≤ ``max_s``, 10 s by default): back-to-back
launches (CUDA graphs for short ones, as the ``counter`` protocol does), cut
into energy-counter spans (:func:`~powermodels.thermal.spans.counter_spans`), and α fitted on them
(:func:`~powermodels.thermal.alpha.fit_alpha`) over as wide a temperature range as the warm-up
reaches — it stops early once ``target_range_c`` is covered. The first
``skip_s`` from the start are left out: from idle the temperature reading
jumps ~7 °C within 0.2 s and does not describe the die over the fastest part
of the warm-up (raw H100 recording, README). The result is cached
(:class:`~powermodels.thermal.alpha_cache.AlphaCache`), so later measurements take ~1 s.

When the warm-up cannot identify α (a GPU already hot barely warms), the
board's other learned fixed-clock α at the same clock are pooled (the thesis
treats α as a property of the GPU at a clock, not of the workload); with none,
the package's assumption is used (:func:`~powermodels.thermal.normalise.assumed_alpha`), with a
warning and its wide uncertainty.
"""

from __future__ import annotations

import math
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from .. import schema
from ..thermal.alpha import AlphaAssumedWarning, AlphaNotIdentified, board_alpha, fit_alpha, usable_spans, \
    with_board_prior
from ..thermal.alpha_cache import AlphaCache
from ..thermal.normalise import FIXED_CLOCK, AlphaEstimate, assumed_alpha
from ..thermal.spans import continuous_spans, counter_spans
from .graphs import batch_size, rebatch, run_launches
from .runner_base import resolve

__all__ = ["Warmup", "alpha_for", "fast_counter_reads", "learn_alpha", "row_alpha"]


@dataclass
class Warmup:
    """What a learning warm-up saw.

    Attributes
    ----------
    alpha : AlphaEstimate or None
        The fitted α; None when not identified (``reason`` says why).
    spans : pandas.DataFrame
        The energy-counter spans (:data:`~powermodels.thermal.spans.SPAN_COLUMNS`).
    launches : ndarray of shape (n, 2)
        Every launch of the warm-up.
    wall_s : float
        Wall time it took.
    reason : str
        Why α was not identified ("" when it was).
    """

    alpha: AlphaEstimate | None
    spans: pd.DataFrame
    launches: np.ndarray = field(repr=False)
    wall_s: float
    reason: str = ""


@contextmanager
def fast_counter_reads(runner, period_s: float = 0.002):
    """Read the energy counter every ``period_s`` on a real sampler while inside (brackets of ms)."""
    sampler = getattr(runner, "sampler", None)
    old = getattr(sampler, "energy_period_s", None)
    if old:
        sampler.energy_period_s = min(old, period_s)
    try:
        yield
    finally:
        if old:
            sampler.energy_period_s = old


def _launches_for(seconds: float, launch_s: float) -> int:
    return max(1, math.ceil(seconds / max(launch_s, 1e-9)))


def learn_alpha(runner, workload, config=None, *, max_s: float = 10.0, min_s: float = 3.0,
                target_range_c: float = 8.0, skip_s: float = 0.5, chunk_s: float = 1.0,
                min_range_c: float = 3.0, updates_per_span: int = 2, batch_below_s: float = 2e-4,
                batch_s: float = 2e-3, continue_from: np.ndarray | None = None) -> Warmup:
    """Run ``workload`` back to back for at most ``max_s`` and fit α on the way.

    Parameters
    ----------
    runner : Runner
        Real or simulated; its device must have an energy counter.
    workload, config
        What to run (see :func:`~powermodels.measuring.runner.resolve`).
    max_s : float, default=10.0
        Longest warm-up (its load; the wall time adds the trace reads).
    min_s : float, default=3.0
        Shortest warm-up before stopping early.
    target_range_c : float, default=8.0
        Stop once the spans' temperatures span this many °C.
    skip_s : float, default=0.5
        Load left out at the start (the reading lags the die there).
    chunk_s : float, default=1.0
        Load between checks (each check reads the trace and idles the GPU; the
        0.35 s after it is left out of the fit, :func:`~powermodels.thermal.spans.continuous_spans`).
    min_range_c : float, default=3.0
        Narrowest range that identifies α (:func:`~powermodels.thermal.alpha.fit_alpha`).
    updates_per_span : int, default=2
        Counter updates per span.
    batch_below_s, batch_s : float
        Launches shorter than ``batch_below_s`` go as CUDA graphs of ~``batch_s``.
    continue_from : array of shape (n, 2), optional
        Launches of the same workload that just ran back to back (the
        measurement that asked for α): the warm-up continues their load and
        its spans include theirs, so a measurement from a cool GPU widens the
        range (its first second is where the die warms fastest). ``max_s``
        counts from their start.
    """
    if not (0 < min_s <= max_s and 0 <= skip_s < min_s and chunk_s > 0 and target_range_c > 0):
        raise ValueError(f"learn_alpha: need 0 <= skip_s < min_s <= max_s and chunk_s, target_range_c > 0; got "
                         f"skip_s={skip_s}, min_s={min_s}, max_s={max_s}, chunk_s={chunk_s}, "
                         f"target_range_c={target_range_c}")
    w, config = resolve(workload, config)
    wall0 = time.perf_counter()
    with fast_counter_reads(runner):
        if continue_from is not None and len(continue_from):
            first = np.asarray(continue_from, dtype=float).reshape(-1, 2)
            t1 = float(np.median(np.diff(first[-min(len(first), 64):], axis=1)))
        else:
            first = run_launches(runner, w, config, 1)
            t1 = float(first[0, 1] - first[0, 0])
        batch = batch_size(max(t1, 1e-9), below_s=batch_below_s, target_s=batch_s)
        parts = [first]
        start = float(first[0, 0])
        one_mode_s = -math.inf  # (continued launches are the caller's: its spans include theirs)
        if continue_from is None or not len(continue_from):
            if batch == 1:  # a host pause inside the one launch timed first only lengthens it (graphs.rebatch):
                # the mode is decided on a short probe before the warm-up, so its spans hold one mode only
                probe = run_launches(runner, w, config, _launches_for(min(0.05, chunk_s / 10), t1), batch)
                batch = rebatch(batch, t1, probe, below_s=batch_below_s, target_s=batch_s)
                t1 = float(np.median(np.diff(probe, axis=1)))
                parts.append(probe)
            one_mode_s = float(parts[-1][-1, 1])
        spans = pd.DataFrame()
        while True:
            chunk = run_launches(runner, w, config, _launches_for(chunk_s, t1), batch)
            parts.append(chunk)
            t1 = float(np.median(np.diff(chunk, axis=1)))
            iv = np.vstack(parts)
            end = float(iv[-1, 1])
            elapsed = end - start
            if elapsed >= min_s or elapsed + chunk_s > max_s:
                trace = runner.trace(start, end, run_id="alpha-warmup")
                every = counter_spans(trace, iv, start_s=max(start + skip_s, one_mode_s), end_s=end,
                                     updates_per_span=updates_per_span)
                # (only where the load ran unbroken: this loop's own trace reads idle the GPU)
                spans = usable_spans(continuous_spans(every, iv))
                temp = spans.get(schema.TEMPERATURE_C, pd.Series(dtype=float)).to_numpy(dtype=float)
                temp = temp[np.isfinite(temp)]
                wide = temp.size > 1 and float(temp.max() - temp.min()) >= target_range_c
                if wide or elapsed + chunk_s > max_s:
                    break
    try:
        if spans.empty:
            raise AlphaNotIdentified(f"no energy-counter spans after the power cap settled in {max_s:g} s")
        alpha, reason = fit_alpha(spans, min_range_c=min_range_c), ""
        pause_ms = 1e3 * float(np.max(iv[1:, 0] - iv[:-1, 1], initial=0.0))  # what the GPU run can check
        alpha = replace(alpha, detail=f"{alpha.detail}; {len(every) - len(spans)} of {len(every)} spans left out "
                                      f"(breaks in the load up to {pause_ms:.0f} ms, or the cap settling)")
    except AlphaNotIdentified as err:
        alpha, reason = None, str(err)
    return Warmup(alpha, spans, iv, time.perf_counter() - wall0, reason)


def alpha_for(runner, workload, config=None, *, power_w: float, sm_clock_mhz: float = math.nan,
              regime: str = FIXED_CLOCK, cache: AlphaCache | None = None, learn: bool = True,
              pool_after: int = 3, **learn_params) -> AlphaEstimate:
    """The α a measurement of ``workload`` at ``config`` on ``runner``'s GPU uses.

    In order: the cached α of this board, workload and configuration; a new one
    learned now (:func:`learn_alpha`, then cached) when ``learn`` — either, when it is this
    workload's own fixed-clock fit, shrunk toward the board's prior (:func:`~powermodels.thermal.alpha.shrunk_alpha`:
    the board's other learned α at this clock, else the assumption), the cache keeping the fit itself; the board's
    fixed-clock α pooled at this clock and shrunk toward the assumption
    (:func:`~powermodels.thermal.alpha.board_alpha`); the package's
    assumption at ``power_w`` (:func:`~powermodels.thermal.normalise.assumed_alpha`, with an
    :class:`AlphaAssumedWarning`).

    Parameters
    ----------
    power_w : float
        The measurement's power (for the assumption's W/°C).
    sm_clock_mhz : float, optional
        The measurement's clock (for pooling).
    regime : str, default="fixed_clock"
        What the measurement saw; the board's fixed-clock α is pooled only onto fixed-clock work.
    cache : AlphaCache, optional
        Default: the state folder's.
    learn : bool, default=True
        Whether a missing α may be learned (a ≤ 10 s warm-up).
    pool_after : int, default=3
        Once this many workloads' fixed-clock α were learned on this board at this clock
        (±30 MHz), a new fixed-clock workload configuration pools them instead of warming up:
        α is a property of the board at a clock (thesis §4.2.2), and a campaign over a search
        space would otherwise spend 10 s on every configuration. The pool's spread is its
        uncertainty (0.75–1.34 W/°C between workloads on one H100).
    **learn_params
        Passed to :func:`learn_alpha`.
    """
    w, config = resolve(workload, config)
    info = runner.device.info
    cache = AlphaCache() if cache is None else cache
    cid = w.config_id(config)
    uuid = info.uuid or f"{info.kind}-{info.index}"
    found = cache.get(uuid, w.name, cid, driver=info.driver)
    board = cache.entries(uuid, driver=info.driver)
    if found is not None:
        return with_board_prior(found, board, power_w)
    why = "learning is off"
    if learn and regime == FIXED_CLOCK and math.isfinite(sm_clock_mhz):
        pooled = board_alpha(board, sm_clock_mhz, power_w)
        if pooled is not None and pooled.pooled >= pool_after:
            pooled = replace(pooled, detail=f"{pooled.detail} (no warm-up: {pooled.pooled} ≥ pool_after)")
            cache.put(uuid, w.name, cid, pooled, driver=info.driver)
            return pooled
    if learn:
        warm = learn_alpha(runner, w, config, **learn_params)
        if warm.alpha is not None:
            cache.put(uuid, w.name, cid, warm.alpha, driver=info.driver)  # its own fit: what later pools use
            return with_board_prior(warm.alpha, board, power_w)
        why = warm.reason
        if len(warm.spans) and not math.isfinite(sm_clock_mhz):
            sm_clock_mhz = float(np.nanmean(warm.spans[schema.SM_CLOCK_MHZ].to_numpy(dtype=float)))
    pooled = board_alpha(board, sm_clock_mhz, power_w) \
        if math.isfinite(sm_clock_mhz) and regime == FIXED_CLOCK else None
    if pooled is not None:
        if learn:  # kept, so later measurements do not warm up again (the entry expires with the cache's age)
            cache.put(uuid, w.name, cid, replace(pooled, detail=f"{pooled.detail}; not learned: {why}"),
                      driver=info.driver)
        return pooled
    assumed = assumed_alpha(power_w, regime)
    # the assumption's own words: under the power cap it is the capped prior, not the leakage slope
    warnings.warn(f"no α for {w.name} [{cid}] on {info.name} ({why}); using the {assumed.detail}",
                  AlphaAssumedWarning, stacklevel=2)
    if learn:
        cache.put(uuid, w.name, cid, replace(assumed, detail=f"{assumed.detail}; not learned: {why}"),
                  driver=info.driver)
    return assumed


def row_alpha(runner, workload, config, *, power_w: float, sm_clock_mhz: float = math.nan,
              regime: str = FIXED_CLOCK, given: AlphaEstimate | None = None, learn: bool = True, cache_dir=None,
              pool_after: int = 3, **learn_params) -> AlphaEstimate:
    """The α a row of ``workload`` at ``config`` uses: ``given`` if any (the caller's or a calibration
    file's), else :func:`alpha_for` (cached, learned ≤ 10 s, pooled, assumed) with the cache in
    ``cache_dir`` (default ``<state>/alpha``)."""
    if given is not None:
        return given
    return alpha_for(runner, workload, config, power_w=power_w, sm_clock_mhz=sm_clock_mhz, regime=regime,
                     cache=AlphaCache(cache_dir), learn=learn, pool_after=pool_after, **learn_params)
