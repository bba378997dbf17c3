"""The ``counter`` protocol: a kernel's energy from the total-energy counter in about a second.

The built-in total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``)
is the exact integral of the GPU's power, published in whole millijoules at
its own updates (~100 ms apart on Hopper, with jitter; DESIGN.md). The
power readings, in contrast, average only a fraction of each update period
and carry the sensor's gain error (Yang §IV). So the counter gives a
kernel's energy without any sensor model, once three things are known
exactly: *when* the two counter values the energy is taken between were
published, and *how many launches* ran between those two instants.

The protocol:

1. **Back-to-back launches** for ``settle_s`` (0.3 s: the GPU leaves idle and
   its power-management transient passes), then — without a pause — a measuring
   run of ``window_s`` plus 1.5 update periods: the first and last counter
   updates inside it are ``window_s`` + half a period apart on average (at
   least ``window_s`` − half a period).
2. **Align to counter updates** the sampler observed: a new counter value
   first seen at read *i* was published between reads *i − 1* and *i*
   (:func:`counter_updates`); its instant is taken as the middle of that
   bracket. The window runs from the first update whose bracket lies inside
   the measuring run to the last one that does.
3. **Count the launches inside the window** from their [start, end]
   intervals (CUDA events on a GPU): whole launches count 1, the two cut at
   the window's edges count the fraction of their duration inside
   (:func:`launches_inside`). Energy per launch = counter difference / that
   count — the same quantity as the reference method (the counter difference
   over many seconds divided by the repetitions), so launch overheads and
   the gaps between launches are charged to the launches the same way.
4. **Uncertainty** (1 σ, on the row as ``energy_uncertainty_j``): each end
   of the window is known to within its bracket (uniform, σ = half-width/√3)
   — on real GPUs the update instants jitter, so every update is bracketed
   on its own rather than fitted to a regular grid; the counter's whole-mJ
   quantisation adds σ = quantum/√12 per end (the quantum, 1 mJ on NVML,
   is read from the smallest counter step seen).

Short kernels (below ``batch_below_s``, ~10 µs–100 µs) cannot keep a GPU
busy from a Python launch loop; the protocol asks runners that support it
(:class:`~powermodels.measuring.runner.CupyRunner` with a ``batch`` option)
to launch them as CUDA graphs of several launches (:mod:`.graphs`).

**What the number means.** ``energy_j`` is the energy per launch *at the
GPU's state during the window*; the row says which state (``temperature_c``,
``temperature_start_c``, ``temperature_end_c``, clocks, clock-event reasons)
and gives the figure at a reference temperature (``energy_at_ref_j``,
``power_at_ref_w``: thesis eq. 4.7, ``P_ref = P − α·(T − T_ref)``) with the α
it used and where α came from (:mod:`powermodels.thermal`): the caller's
(``alpha_w_per_c``) or a calibration file's, else the one learned on this
board for this workload and configuration — the first measurement runs a
≤ 10 s warm-up (``learn_alpha``) and caches it, later ones take ~1 s — else
the board's pool or the package's assumption. ``T_ref`` is
``reference_temperature_c`` when given, else the learned α's own (the middle
of its range, the same for every row of that workload on that board).

**Power cap.** When the power-cap clock-event reason is active during the
measuring run, the load continues (up to ``max_settle_s``) until the energy
per counter update stops drifting (the controller overshoots from idle and
settles over seconds: ~770 W for 0.5 s on the lent H100 under a 700 W cap);
the window is then the run's last part, ``settle_s`` says how much was added,
and ``transient`` is set when it never settled.

**Launch mode.** ``launch_mode`` says how the measured launches were issued:
``graph`` (short launches batched into CUDA graphs: the GPU's own cost),
``back_to_back`` (one host call per launch, queued ahead) or ``as_called``
(``launch="as_called"``: a plain loop of calls, as the user's program makes
them, host gaps included); ``launch_bound`` is set when the host's gaps take
more than 20 % of the time per launch.

A device without an energy counter (no counter value in the trace) is
measured with ``good_practice`` instead, with a warning; the row then says
``protocol = good_practice``.
"""


from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from ... import schema
from ...thermal.launch import check_launch_mode, launch_bound, launch_mode
from ...thermal.normalise import check_reference_temperature
from ...thermal.row import given_alpha, thermal_fields
from ..alpha_warmup import row_alpha
from ...thermal.alpha import regime_of
from ...thermal.spans import capped_row_window, counter_spans, enforced_power_limit_w, extend_until_settled, \
    power_capped
from ..graphs import batch_size, rebatch
from .base import Protocol
from .good_practice import GoodPractice
from .launches import (
    check_duration,
    CounterWindow,
    aligned_window,
    counter_updates,
    has_energy_counter,
    launches_for,
    launches_inside,
    observed_means,
    run_launches,
    trace_window,
)

# the counter helpers live in .launches (shared with the reference and programs); named here too
__all__ = [
    "Counter",
    "CounterWindow",
    "aligned_window",
    "counter_updates",
    "has_energy_counter",
    "launches_inside",
    "run_launches",
]


@dataclass
class Counter(Protocol):
    """Energy per launch from the total-energy counter, aligned to its updates (≈ 1 s).

    See the module docstring for the method and what the number means.

    Parameters
    ----------
    settle_s : float, default=0.3
        Back-to-back load before the measuring run starts (the first launch
        counts towards it). On the lent H200 the counter's power per update
        after a cold start read 351, 371, 338, 348, 353 W and then 354–355 W
        for the rest of a 63 s FP32 run: a power-management transient of
        ~0.4 s, after which the drift is below 0.3 %.
    window_s : float, default=0.5
        Sets the measuring run (this plus 1.5 update periods); the window
        between its first and last counter update is then ``window_s`` ± half
        an update period, on average half a period longer.
    min_updates : int, default=3
        Least counter updates the window spans; fewer observed: the run is
        extended by one update period at a time (up to ``max_duration_s``).
    max_duration_s : float, default=5.0
        Longest load of one measurement (settling and measuring run): a
        ``window_s``/``min_updates`` that cannot fit is refused up front, and
        a run that still sees too few updates gives up at this length.
    counter_read_s : float, default=0.002
        Counter-read cadence asked of a real runner's sampler during the
        run (its default, 20 ms, would make each bracket 20 ms wide).
    batch_below_s : float, default=2e-4
        Launches shorter than this are batched into CUDA graphs (on runners
        that support it) of about ``batch_s``.
    batch_s : float, default=2e-3
        Target duration of one graph launch.
    alpha_w_per_c : float, optional
        α (W/°C) for the figures at the reference temperature (thesis eq. 4.7);
        None: the learned (or pooled, or assumed) α of this board.
    alpha_uncertainty_w_per_c : float, default=0
        Its 1-σ uncertainty.
    alpha_source : {"given", "file"}, default="given"
        What the row says about a given α (``file``: a calibration's).
    reference_temperature_c : float, optional
        ``T_ref``; None: the learned α's own reference.
    learn_alpha : bool, default=True
        Whether a missing α may be learned (a ≤ 10 s warm-up after the first
        measurement of a workload configuration on a board, then cached).
    alpha_cache_dir : str, optional
        Where learned α are cached; default ``<state>/alpha``.
    alpha_pool_after : int, default=3
        Once this many workloads' α were learned on the board at this clock, a new
        fixed-clock workload configuration pools them instead of warming up
        (:func:`~powermodels.measuring.alpha_warmup.alpha_for`).
    max_settle_s : float, default=5.0
        Longest extra load waiting for the power-cap controller to settle.
    launch : {"auto", "as_called"}, default="auto"
        ``auto``: short launches in CUDA graphs (where the runner can),
        others back to back; ``as_called``: one call per launch in a plain
        loop, as the user's program makes them.
    """

    settle_s: float = 0.3
    window_s: float = 0.5
    min_updates: int = 3
    max_duration_s: float = 5.0
    counter_read_s: float = 0.002
    batch_below_s: float = 2e-4
    batch_s: float = 2e-3
    alpha_w_per_c: float | None = None
    alpha_uncertainty_w_per_c: float = 0.0
    alpha_source: str = "given"
    reference_temperature_c: float | None = None
    learn_alpha: bool = True
    alpha_cache_dir: str | None = None
    alpha_pool_after: int = 3
    max_settle_s: float = 5.0
    launch: str = "auto"
    name: ClassVar[str] = "counter"

    def _check(self) -> None:
        if not (self.settle_s >= 0 and self.window_s > 0 and self.max_duration_s > 0
                and self.counter_read_s > 0 and self.batch_s > 0 and self.batch_below_s >= 0):
            raise ValueError("counter: settle_s and batch_below_s must be >= 0; window_s, max_duration_s, "
                             "counter_read_s and batch_s > 0")
        if isinstance(self.min_updates, bool) or int(self.min_updates) != self.min_updates \
                or self.min_updates < 1:
            raise ValueError(f"counter: min_updates must be an int >= 1, got {self.min_updates!r}")
        if self.reference_temperature_c is not None:
            check_reference_temperature(self.reference_temperature_c, "counter: reference_temperature_c")
        if self.alpha_w_per_c is not None:
            given_alpha(self.alpha_w_per_c, self.alpha_uncertainty_w_per_c, "given")
        if self.alpha_source not in ("given", "file"):
            raise ValueError(f"counter: alpha_source must be 'given' or 'file', got {self.alpha_source!r}")
        if not isinstance(self.learn_alpha, bool):
            raise ValueError(f"counter: learn_alpha must be true or false, got {self.learn_alpha!r}")
        if isinstance(self.alpha_pool_after, bool) or not isinstance(self.alpha_pool_after, int) \
                or self.alpha_pool_after < 1:
            raise ValueError(f"counter: alpha_pool_after must be an int >= 1, got {self.alpha_pool_after!r}")
        if not (isinstance(self.max_settle_s, (int, float)) and 0 <= self.max_settle_s <= 60):
            raise ValueError(f"counter: max_settle_s must be in [0, 60] s, got {self.max_settle_s!r}")
        if self.launch != "auto" and check_launch_mode(self.launch) != "as_called":
            raise ValueError(f"counter: launch must be 'auto' or 'as-called', got {self.launch!r}")

    def _measure(self, runner, workload, config, run_id):
        self._check()
        sampler = getattr(runner, "sampler", None)
        old = getattr(sampler, "energy_period_s", None)
        if old:  # a real sampler: bracket updates to a few ms while we measure
            sampler.energy_period_s = min(old, self.counter_read_s)
        try:
            return self._measure_counter(runner, workload, config, run_id)
        finally:
            if old:
                sampler.energy_period_s = old

    def _measure_counter(self, runner, workload, config, run_id):
        if not has_energy_counter(runner):
            return self._fallback(runner, workload, config, run_id)
        period = float(runner.sensor.update_period_s)
        check_duration(self.name, self.settle_s + max(self.window_s, self.min_updates * period)
                       + 1.5 * period, self.max_duration_s,
                       f"settle_s={self.settle_s:g}, window_s={self.window_s:g} and min_updates="
                       f"{self.min_updates} at a {period:g} s update period")
        first = run_launches(runner, workload, config, 1)  # warm-up, and a first time per launch
        t1 = t_first = float(first[0, 1] - first[0, 0])
        as_called = self.launch != "auto"
        batch = 1 if as_called else batch_size(max(t1, 1e-9), below_s=self.batch_below_s, target_s=self.batch_s)

        def more(n):
            if as_called:
                return runner.run_as_called(workload, config, n)
            return run_launches(runner, workload, config, n, batch)

        ivs = [first]
        if self.settle_s - t1 > 0.5 * t1:  # the first launch may already be the settling
            # (the tolerance keeps 0.2 s of 0.1 s launches at 2, not 3, launches)
            ivs.append(more(launches_for(self.settle_s - t1 - 1e-9, t1)))
            t1 = float(np.median(np.diff(ivs[-1], axis=1)))
            if not as_called and batch == 1:  # a host pause inside the first launch only lengthens it
                batch = rebatch(batch, t_first, ivs[-1], below_s=self.batch_below_s, target_s=self.batch_s)
                left = self.settle_s - (float(ivs[-1][-1, 1]) - float(first[0, 0]))
                if batch > 1 and left > 0:  # (graphs.rebatch) and the rest of the settling in graphs
                    ivs.append(more(launches_for(left, t1)))
        span = max(self.window_s, self.min_updates * period) + 1.5 * period
        measured = [more(launches_for(span, t1))]
        start = float(measured[0][0, 0])
        while True:
            iv = np.vstack(measured)
            end = float(iv[-1, 1])
            trace = runner.trace(float(first[0, 0]), end, run_id=run_id)
            window = aligned_window(trace, iv, start, end)
            if window is not None and window.updates >= self.min_updates:
                break
            if not np.isfinite(trace.get(schema.ENERGY_COUNTER_J, pd.Series([np.nan])).to_numpy(float)).any():
                return self._fallback(runner, workload, config, run_id)
            if end - start >= self.max_duration_s:
                got = 0 if window is None else window.updates
                raise RuntimeError(f"counter: only {got} energy-counter update(s) seen in {end - start:.1f} s "
                                   f"of load (need {self.min_updates}); is the counter frozen?")
            measured.append(more(launches_for(period, t1)))
        # under the power cap: keep the load on until the controller settled, measure the last part
        # (settled = flat and at the enforced limit; the load goes on in 0.5 s pieces: the controller
        # averages power over its window, so the GPU's idle while the host reads the trace between
        # short pieces lets the load itself run above the limit — session 4's H100 rows read 797–855 W
        # for seconds where the continuous 12 s reference held 698 W)
        iv, trace, settle, transient = extend_until_settled(
            lambda: more(launches_for(max(period, 0.5), t1)),
            lambda e: runner.trace(float(first[0, 0]), e, run_id=run_id),
            iv, start, max_settle_s=self.max_settle_s, power_limit_w=enforced_power_limit_w(runner.device))
        end = float(iv[-1, 1])
        if settle > 0 or transient or power_capped(counter_spans(trace, iv, start_s=start, end_s=end,
                                                                 updates_per_span=1), share=0.0):
            # a capped row reports the very window the settling rule judged (its last second): session
            # 5's H100 row judged one window and reported a shorter one, at 724.8 W under a 700 W limit
            window = capped_row_window(trace, iv, start, end)[0] or window
        # the launches the window saw (the row's time per launch and reference are over these)
        keep = (iv[:, 1] > window.start_s) & (iv[:, 0] < window.end_s)
        observed = observed_means(trace_window(trace, window.start_s, window.end_s), runner)
        energy = window.energy_per_launch_j
        t = float(np.mean(iv[keep, 1] - iv[keep, 0]))
        power = energy / t  # mean power while a launch runs (launch gaps charged to the launch)
        mode = launch_mode(batch, as_called=as_called)
        fields = {schema.POWER_W: power, schema.ENERGY_J: energy,
                  schema.ENERGY_UNCERTAINTY_J: window.uncertainty_j, **observed,
                  schema.TRANSIENT: transient, schema.SETTLE_S: settle, schema.LAUNCH_MODE: mode,
                  # graphs run back to back on the GPU; otherwise compare with the isolated first launch
                  schema.LAUNCH_BOUND: mode != "graph" and launch_bound(t, min(t_first, t))}
        regime = regime_of(counter_spans(trace, iv[keep], start_s=window.start_s, end_s=window.end_s,
                                         updates_per_span=1))
        alpha = row_alpha(runner, workload, config, power_w=power, sm_clock_mhz=observed[schema.SM_CLOCK_MHZ],
                          regime=regime,
                          given=None if self.alpha_w_per_c is None else given_alpha(
                              self.alpha_w_per_c, self.alpha_uncertainty_w_per_c, self.alpha_source),
                          learn=self.learn_alpha, cache_dir=self.alpha_cache_dir, pool_after=self.alpha_pool_after,
                          # a first-time warm-up continues this run's load (a cool GPU: a wider range)
                          **({} if as_called else {"continue_from": np.vstack([*ivs, iv])}))
        fields.update(thermal_fields(trace, window.start_s, window.end_s, energy_j=energy, power_w=power,
                                     time_s=t, temperature_c=observed[schema.TEMPERATURE_C], alpha=alpha,
                                     reference_temperature_c=self.reference_temperature_c,
                                     energy_uncertainty_j=window.uncertainty_j))
        return fields, trace, iv[keep]

    def _fallback(self, runner, workload, config, run_id):
        warnings.warn(f"counter: {runner.device_name} reports no energy counter; measuring with "
                      "good_practice instead", RuntimeWarning, stacklevel=4)
        gp = GoodPractice()
        fields, trace, iv = gp._measure(runner, workload, config, run_id)
        fields[schema.PROTOCOL] = gp.name
        return fields, trace, iv
