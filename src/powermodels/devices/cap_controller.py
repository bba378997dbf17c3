"""The simulated GPU's power-cap clock controller (driven by :mod:`.simulated_engine`).

Once per 1 ms control step :meth:`CapController.step` gets the step's mean
power and activities and returns the SM clock of the next step and its
throttle reason. It holds the controller's own state: the windowed-mean cap's
ring of per-step power and its integral budget (``cap_window_s``), the credit
of the rate-limited clock rise (``clock_recovery_mhz_per_s``), its lagged view
of the activity (``cap_response_s``) and, with ``cap_on_period``, the activity
accumulated over the current clock period.

Two ways to predict the power a clock would draw (``GPUPhysics.cap_on_period``):

- ``False`` (the original controller): on every control step, from that
  1 ms step's activity; the clock drops at once and rises only on the clock
  period. A mix of loads alternating faster than the clock period is held at
  the heavier load's capped clock, since every stretch of it pulls the clock
  down at once and the lighter load's stretch ends before a rise is due.
- ``True``: on the clock period only (``clock_period_s``), from the mean
  activity over the period just ended — the controller regulates the mean
  power over its own period, so such a mix settles at the cap with a clock
  between the loads' own capped clocks (what the H100 and H200 do in the
  ladder part of the raw recordings in ``datasets/h100-2026-11-27`` and
  ``datasets/h200-2026-11-27``, docs/twin.md).
"""

from __future__ import annotations

import numpy as np

from .. import clock_events
from .physics import GPUPhysics

__all__ = ["THROTTLE_SW_POWER_CAP", "CapController"]

#: NVML clock-event reason bit for software power capping (nvmlClocksEventReasonSwPowerCap).
THROTTLE_SW_POWER_CAP = clock_events.SW_POWER_CAP


class CapController:
    """State and decision of the power-cap clock controller.

    Parameters
    ----------
    physics : GPUPhysics
        The controller's parameters (``cap_*``, ``clock_period_s``,
        ``clock_recovery_*``) and the power model it predicts with.
    clocks : numpy.ndarray
        Supported SM clocks (MHz, ascending), indexed by the clock indices.
    control_step_s : float
        Length of one control step (s).
    pre_power_w : float
        Power before t = 0 (fills the windowed mean's ring).
    limit_w : float
        Power limit at the start (the integral budget starts from it).
    """

    def __init__(self, physics: GPUPhysics, clocks: np.ndarray, control_step_s: float,
                 pre_power_w: float, limit_w: float):
        ph = physics
        self.physics = ph
        self._dc = control_step_s
        v = ph.relative_voltage(clocks)
        self._leak_c = (ph.leakage_w * v).tolist()
        self._core_c = (ph.core_w_per_ghz * clocks / 1000.0 * v * v).tolist()
        self._leak_arr = ph.leakage_w * v
        self._core_arr = ph.core_w_per_ghz * clocks / 1000.0 * v * v
        self._clock_period = max(1, round(ph.clock_period_s / control_step_s)) if ph.clock_period_s else 1
        # clock bins a rise may take per controller period (the fraction carries over: the rate is exact)
        self._recovery_per_period = (ph.clock_recovery_mhz_per_s * control_step_s * self._clock_period
                                     / ph.sm_clock_step_mhz)
        self._rise_credit, self._rise_steps = 0.0, 0
        self._rise_delay_steps = round(ph.clock_recovery_delay_s / control_step_s)
        # the controller's lagged view of the activity (cap_response_s; idle before t = 0)
        self._response = 1.0 - np.exp(-control_step_s / ph.cap_response_s) if ph.cap_response_s > 0 else 1.0
        self._seen_core, self._seen_mem = 0.0, 0.0
        # activity summed over the current clock period (cap_on_period)
        self._period_core, self._period_mem, self._period_n = 0.0, 0.0, 0
        # windowed-mean power cap (cap_window_s > 0): ring of per-step power, running sum, budget
        n_window = max(1, round(ph.cap_window_s / control_step_s))
        self._cap_ring = np.full(n_window, pre_power_w)
        self._cap_sum = pre_power_w * n_window
        self._cap_pos = 0
        # integral budget: a pure integral controller starts with its headroom; with a proportional term
        # the window error gives the headroom and the budget starts at the limit (no standing offset)
        self._budget = limit_w + ph.cap_offset_w + ph.cap_headroom_w * (ph.cap_proportional == 0)

    def step(self, k: int, power: float, a: float, m: float, temp_next: float, fi_prev: int,
             target: int, fm: float, limit: float) -> tuple[int, int]:
        """Control step ``k`` is over: the clock index and throttle reasons of step ``k + 1``.

        Parameters
        ----------
        k : int
            Index of the control step that just ended.
        power : float
            Its mean power (W).
        a, m : float
            Its mean core and memory activity (0..1).
        temp_next : float
            Die temperature at the next step's start (°C).
        fi_prev : int
            Clock index of step ``k``.
        target : int
            Clock index the controller aims for without a cap (the lock or the top clock).
        fm : float
            Memory clock of the next step (MHz).
        limit : float
            Power limit (W).

        Returns
        -------
        tuple of int
            ``(clock index, throttle reasons)`` of step ``k + 1``.
        """
        ph = self.physics
        limit = self._cap_budget(power, limit + ph.cap_offset_w) if ph.cap_window_s > 0 else limit
        if self._response < 1.0:
            self._seen_core += self._response * (a - self._seen_core)
            self._seen_mem += self._response * (m - self._seen_mem)
            a, m = self._seen_core, self._seen_mem
        boundary = (k + 1) % self._clock_period == 0
        if ph.cap_on_period:
            self._period_core += a
            self._period_mem += m
            self._period_n += 1
            if not boundary:
                # the clock holds between decisions (a lowered clock lock still applies at once)
                fi = min(fi_prev, target)
                return fi, THROTTLE_SW_POWER_CAP if fi < target else 0
            a, m = self._period_core / self._period_n, self._period_mem / self._period_n
            self._period_core, self._period_mem, self._period_n = 0.0, 0.0, 0
        # the clock it would move to: down at once, up by the recovery rate
        avail = self._rise_credit + self._recovery_per_period
        up = int(avail + 1e-9)
        fi = target if fi_prev >= target else min(target, fi_prev + max(up, 1))
        # the controller predicts the next step's (period's) power from this step's (period's) activity
        leak_scale = 1.0 + ph.leakage_per_c * (temp_next - ph.t_ref_c)
        theta = 1.0 + ph.dynamic_per_c * (temp_next - ph.t_ref_c)  # a load's own temperature slope
        a_eff = ph.idle_activity + (1.0 - ph.idle_activity) * a * theta
        mem = ph.mem_w_per_ghz * fm / 1000.0 * (ph.mem_idle_activity + (1.0 - ph.mem_idle_activity) * m * theta)
        if ph.p0_w + self._leak_c[fi] * leak_scale + self._core_c[fi] * a_eff + mem > limit:
            predicted = ph.p0_w + self._leak_arr * leak_scale + self._core_arr * a_eff + mem
            fi = min(fi, max(int(np.searchsorted(predicted, limit, side="right")) - 1, 0))
        if fi > fi_prev:
            # a rise happens on the controller's period only, once the power has allowed it for the onset delay
            self._rise_steps += self._clock_period if ph.cap_on_period else 1
            if not boundary or self._rise_steps < self._rise_delay_steps:
                fi = fi_prev
            elif up < 1:  # slower than a bin per period: wait until the credit makes one
                self._rise_credit, fi = avail, fi_prev
            else:
                self._rise_credit = min(max(avail - (fi - fi_prev), 0.0), 0.999)
        else:
            self._rise_steps, self._rise_credit = 0, 0.0
        return fi, THROTTLE_SW_POWER_CAP if fi < target else 0

    def _cap_budget(self, power: float, limit: float) -> float:
        """Windowed-mean cap: push this step's power into the window, move and return the budget."""
        ph = self.physics
        pos = self._cap_pos
        self._cap_sum += power - self._cap_ring[pos]
        self._cap_ring[pos] = power
        self._cap_pos = (pos + 1) % self._cap_ring.size
        mean = self._cap_sum / self._cap_ring.size
        budget = self._budget + ph.cap_gain_per_s * (limit - mean) * self._dc
        lo, hi = limit - 4.0 * ph.cap_headroom_w, limit + ph.cap_headroom_w
        self._budget = min(max(budget, lo), hi)
        leaving = self._cap_ring[self._cap_pos] - limit  # drawn one window ago, leaves with the next step
        return min(max(self._budget + ph.cap_proportional * (limit - mean) + ph.cap_repeat * leaving, lo), hi)
