"""The reference method: a workload's energy from many seconds of back-to-back runs.

What issue 11 (and issue 10's done-means) compare every fast protocol with:
the same work launched back to back for ``duration_s`` (≥ 10 s), and the
energy per launch = the total-energy counter's difference from ``skip_s``
(2 s) after the start to the end, divided by the launches in between. The
first seconds are skipped because a GPU that starts cold draws a little less
(its temperature and leakage still rise, thesis eq. 4.6); the long span
makes the counter's update granularity (~100 ms on Hopper) negligible.

Both ends are aligned to counter updates exactly as the ``counter`` protocol
does (:func:`~powermodels.measuring.protocols.launches.aligned_window`), so the
reference is the same quantity measured over a much longer, warmer window.
On the simulated GPU the row also carries the simulated truth over the same
launches (``truth_energy_j``), which checks the reference itself.

The reference reports its own thermal state — mean temperature and the
readings at its window's start and end — and :meth:`ReferenceEnergy.at_reference`
moves it to a reference temperature with the same α and eq. 4.7 as a
protocol's row (:mod:`powermodels.thermal`), so a 1 s measurement is compared
with the 12 s reference at matched temperature: a 12 s run warms the die by
several °C more than a 1 s one (lent H100: ~0.2–0.5 %/°C of energy).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from .. import schema
from ..thermal.normalise import AlphaEstimate, normalise
from ..thermal.spans import thermal_state
from ..thermal.launch import launch_mode
from .graphs import batch_size, rebatch
from .protocols.launches import (
    aligned_window,
    has_energy_counter,
    launches_for,
    observed_means,
    run_launches,
    trace_window,
)

__all__ = ["ReferenceEnergy", "reference_energy"]


@dataclass(frozen=True)
class ReferenceEnergy:
    """The reference energy of one workload configuration.

    Attributes
    ----------
    energy_j : float
        Energy per launch (J): counter difference / launches in the window.
    power_w : float
        Mean power over the window (W).
    time_s : float
        Mean time per launch over the window's launches (s).
    launches : float
        Launches inside the window (fractions at its edges).
    window_s : float
        Length of the window (from ``skip_s`` in to the last counter update).
    uncertainty_j : float
        1-σ uncertainty of ``energy_j`` from the window's alignment and the
        counter's quantisation.
    temperature_c : float
        Mean temperature during the window.
    temperature_start_c, temperature_end_c : float
        Temperature readings at the window's start and end.
    sm_clock_mhz : float
        Mean SM clock reading during the window.
    launch_mode : str
        How the launches ran (:func:`~powermodels.thermal.launch.launch_mode`): ``graph``
        or ``back_to_back``; compare it with the rows' (a µs kernel's energy depends on it).
    truth_energy_j : float
        Simulated truth (or external meter) per launch over the window's whole
        launches; NaN where the runner knows no truth.
    wall_s : float
        Wall time the reference took.
    """

    energy_j: float
    power_w: float
    time_s: float
    launches: float
    window_s: float
    uncertainty_j: float
    temperature_c: float
    truth_energy_j: float
    wall_s: float
    temperature_start_c: float = math.nan
    temperature_end_c: float = math.nan
    sm_clock_mhz: float = math.nan
    launch_mode: str = ""

    def error(self, energy_j: float) -> float:
        """Relative error of ``energy_j`` against this reference (``+0.01`` = 1 % high)."""
        return float(energy_j) / self.energy_j - 1.0

    def at_reference(self, reference_temperature_c: float, alpha_w_per_c: float,
                     alpha_uncertainty_w_per_c: float = 0.0, alpha_source: str = "given") -> dict:
        """The reference moved to ``reference_temperature_c`` (thesis eq. 4.7) with a row's α.

        Returns the fields :func:`powermodels.thermal.normalise.normalise` gives
        (``energy_at_ref_j``, ``power_at_ref_w``, their uncertainty, the α used).
        """
        alpha = AlphaEstimate(float(alpha_w_per_c), float(alpha_uncertainty_w_per_c), alpha_source)
        return normalise(energy_j=self.energy_j, power_w=self.power_w, time_s=self.time_s,
                         temperature_c=self.temperature_c, alpha=alpha,
                         reference_temperature_c=reference_temperature_c, energy_uncertainty_j=self.uncertainty_j)

    def as_dict(self) -> dict:
        return asdict(self)


def reference_energy(runner, workload, config=None, *, duration_s: float = 12.0, skip_s: float = 2.0,
                     batch_below_s: float = 2e-4, batch_s: float = 2e-3) -> ReferenceEnergy:
    """Energy per launch of ``workload`` from ``duration_s`` of back-to-back runs (counter from ``skip_s``).

    Parameters
    ----------
    runner : Runner
        Real or simulated; its device must have a total-energy counter.
    workload : Workload or str
        What to run (a registry name works too).
    config : dict or str, optional
        Its configuration.
    duration_s : float, default=12.0
        Length of the back-to-back run (≥ 10 s is the method's definition;
        shorter values are allowed for tests).
    skip_s : float, default=2.0
        Start of the window after the first launch.
    batch_below_s, batch_s : float
        Launches shorter than ``batch_below_s`` go as CUDA graphs of about
        ``batch_s`` on runners that support it (as in the ``counter`` protocol).

    Raises
    ------
    ValueError
        Bad durations, or a device without an energy counter.
    """
    if not (math.isfinite(duration_s) and math.isfinite(skip_s) and 0 <= skip_s < duration_s):
        raise ValueError(f"reference_energy: need 0 <= skip_s < duration_s, got skip_s={skip_s}, "
                         f"duration_s={duration_s}")
    if not has_energy_counter(runner):
        raise ValueError(f"reference_energy: {runner.device_name} reports no energy counter "
                         "(the reference method reads it)")
    wall0 = time.perf_counter()
    first = run_launches(runner, workload, config, 1)
    t1 = t_first = float(first[0, 1] - first[0, 0])
    batch = batch_size(max(t1, 1e-9), below_s=batch_below_s, target_s=batch_s)
    probe = run_launches(runner, workload, config, launches_for(min(0.05, duration_s / 10), t1), batch)
    t1 = float(np.median(np.diff(probe, axis=1)))
    batch = rebatch(batch, t_first, probe, below_s=batch_below_s, target_s=batch_s)  # a paused first launch
    start = float(first[0, 0])
    left = duration_s - (float(probe[-1, 1]) - start)
    parts = [first, probe]
    if left > 0:
        parts.append(run_launches(runner, workload, config, launches_for(left, t1), batch))
    iv = np.vstack(parts)
    end = float(iv[-1, 1])
    trace = runner.trace(start, end, run_id="reference")
    window = aligned_window(trace, iv, start + skip_s, end)
    if window is None:
        raise RuntimeError(f"reference_energy: fewer than two energy-counter updates between "
                           f"{skip_s} s and {end - start:.2f} s; is the counter frozen?")
    whole = (iv[:, 0] >= window.start_s) & (iv[:, 1] <= window.end_s)
    truth = math.nan
    if whole.any():
        total = runner.reference_energy_j(iv[whole])
        truth = total / int(whole.sum()) if np.isfinite(total) else math.nan
    inside = (iv[:, 1] > window.start_s) & (iv[:, 0] < window.end_s)
    observed = observed_means(trace_window(trace, window.start_s, window.end_s))
    state = thermal_state(trace, window.start_s, window.end_s)
    return ReferenceEnergy(
        energy_j=window.energy_per_launch_j,
        power_w=window.power_w,
        time_s=float(np.mean(iv[inside, 1] - iv[inside, 0])),
        launches=window.launches,
        window_s=window.end_s - window.start_s,
        uncertainty_j=window.uncertainty_j,
        temperature_c=observed[schema.TEMPERATURE_C],
        truth_energy_j=truth,
        wall_s=time.perf_counter() - wall0,
        temperature_start_c=state[schema.TEMPERATURE_START_C],
        temperature_end_c=state[schema.TEMPERATURE_END_C],
        sm_clock_mhz=observed[schema.SM_CLOCK_MHZ],
        launch_mode=launch_mode(batch),
    )
