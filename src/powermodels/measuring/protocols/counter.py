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

**What the number means.** The energy per launch *at the GPU's state during
the window* (its temperature ``temperature_c`` on the row; clocks too). A GPU
that starts cold draws slightly less than the same GPU after seconds of load
(leakage rises with temperature, thesis eq. 4.6); on the lent H100 a 1 s
window from 0.2 s in read −0.7 … −1.4 % below a 2–14 s reference (issue 11),
on the simulated GPU (5 s thermal time constant) the gap is listed in
``docs/harness.md``. Give ``alpha_w_per_c`` (the calibration's α, W/°C) and
``reference_temperature_c`` to move the power to a reference temperature
with thesis eq. 4.7, ``P_ref = P − α·(T − T_ref)``; the energy follows as
``P_ref × time per launch``.

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
from ..graphs import batch_size
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
        Calibration's α (W/°C) for the temperature correction (thesis eq. 4.7).
    reference_temperature_c : float, optional
        Temperature to correct to; both or neither with ``alpha_w_per_c``.
    """

    settle_s: float = 0.3
    window_s: float = 0.5
    min_updates: int = 3
    max_duration_s: float = 5.0
    counter_read_s: float = 0.002
    batch_below_s: float = 2e-4
    batch_s: float = 2e-3
    alpha_w_per_c: float | None = None
    reference_temperature_c: float | None = None
    name: ClassVar[str] = "counter"

    def _check(self) -> None:
        if not (self.settle_s >= 0 and self.window_s > 0 and self.max_duration_s > 0
                and self.counter_read_s > 0 and self.batch_s > 0 and self.batch_below_s >= 0):
            raise ValueError("counter: settle_s and batch_below_s must be >= 0; window_s, max_duration_s, "
                             "counter_read_s and batch_s > 0")
        if isinstance(self.min_updates, bool) or int(self.min_updates) != self.min_updates \
                or self.min_updates < 1:
            raise ValueError(f"counter: min_updates must be an int >= 1, got {self.min_updates!r}")
        if (self.alpha_w_per_c is None) != (self.reference_temperature_c is None):
            raise ValueError("counter: give alpha_w_per_c and reference_temperature_c together (or neither)")

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
        t1 = float(first[0, 1] - first[0, 0])
        batch = batch_size(max(t1, 1e-9), below_s=self.batch_below_s, target_s=self.batch_s)
        ivs = [first]
        if self.settle_s - t1 > 0.5 * t1:  # the first launch may already be the settling
            # (the tolerance keeps 0.2 s of 0.1 s launches at 2, not 3, launches)
            ivs.append(run_launches(runner, workload, config, launches_for(self.settle_s - t1 - 1e-9, t1), batch))
            t1 = float(np.median(np.diff(ivs[-1], axis=1)))
        n = launches_for(max(self.window_s, self.min_updates * period) + 1.5 * period, t1)
        measured = [run_launches(runner, workload, config, n, batch)]
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
            measured.append(run_launches(runner, workload, config, launches_for(period, t1), batch))
        # the launches the window saw (the row's time per launch and reference are over these)
        keep = (iv[:, 1] > window.start_s) & (iv[:, 0] < window.end_s)
        steady = trace_window(trace, window.start_s, window.end_s)
        observed = observed_means(steady, runner)
        energy = window.energy_per_launch_j
        t = float(np.mean(iv[keep, 1] - iv[keep, 0]))
        power = energy / t  # mean power while a launch runs (launch gaps charged to the launch)
        if self.alpha_w_per_c is not None:  # thesis eq. 4.7
            temp = observed[schema.TEMPERATURE_C]
            if not np.isfinite(temp):
                raise ValueError("counter: the trace has no temperature to correct with alpha_w_per_c")
            power = power - float(self.alpha_w_per_c) * (temp - float(self.reference_temperature_c))
            energy = power * t
        fields = {schema.POWER_W: power, schema.ENERGY_J: energy,
                  schema.ENERGY_UNCERTAINTY_J: window.uncertainty_j, **observed}
        return fields, trace, iv[keep]

    def _fallback(self, runner, workload, config, run_id):
        warnings.warn(f"counter: {runner.device_name} reports no energy counter; measuring with "
                      "good_practice instead", RuntimeWarning, stacklevel=4)
        gp = GoodPractice()
        fields, trace, iv = gp._measure(runner, workload, config, run_id)
        fields[schema.PROTOCOL] = gp.name
        return fields, trace, iv
