"""Physical ground truth of the simulated GPU: V(f), power, leakage, thermal RC, power cap.

The model is DSO eq. 1 extended with activity factors and a temperature-
dependent leakage term (thesis §4.2.2, eq. 4.6: power rises linearly with die
temperature at a fixed clock)::

    P = P0 + κ·V(f)·(1 + λ·(T − T_ref))                 static + leakage
          + c·f·V(f)²·(a_idle + (1 − a_idle)·a·θ)        core dynamic, a = core activity
          + γ·f_mem·(m_idle + (1 − m_idle)·m·θ)          memory, m = memory activity
    θ = 1 + μ·(T − T_ref)                               the load's own temperature slope

(μ = ``dynamic_per_c``, 0 by default: the thesis' model. On the real H100s a
load's power rises 2–3.4 W/°C at a fixed clock while the idle board's rises
0.7–1.1 W/°C; pooled over loads the extra slope is proportional to the load's
own power above idle, 0.24–0.27 %/°C on three boards — docs/twin.md, session 10.)

with ``f`` in GHz and ``V`` the voltage relative to its value below the knee.
``V(f)`` is flat below the knee and rises linearly above it (the Kernel Tuner
shape of :func:`powermodels.models.voltage.relative_voltage`, thesis eq. 4.1),
softened over ``voltage_knee_width_mhz`` with a softplus; a width of 0 gives
exactly the piecewise-linear shape.

Temperature follows a first-order thermal RC, solved exactly over each
control step: ``T ← T_amb + (T − T_amb)·e^{−dt/τ} + R·P·(1 − e^{−dt/τ})``.

Default values mimic an H100 SXM (Hopper, 700 W): idle ≈ 100 W, a full FP32
load at 1980 MHz ≈ 590 W rising ~25 W as the die heats (so it runs
unthrottled at 1980 MHz, as measured on the lent GPU), and a load that keeps
both the SMs and HBM fully busy exceeds 700 W and is power-capped. The RC
constants (R = 0.07 K/W, τ = 5 s) reproduce the measured warm-up of
DESIGN.md (31 → 48 °C in 3 s of full FMA load) with a plausible steady state
(~70 °C); a τ of tens of seconds cannot heat 17 °C in 3 s without an
implausibly hot steady state, so a single fast pole stands for the die.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._checks import positive_fields

__all__ = ["LEVEL_IDLE_GAP_S", "GPUPhysics", "clock_table"]

#: a launch after this long without one starts a new load (the level state may move; ``core_level_*``)
LEVEL_IDLE_GAP_S = 0.1


@dataclass(frozen=True)
class GPUPhysics:
    """Parameters of the simulated GPU's physics (defaults: H100-SXM-like).

    Parameters
    ----------
    sm_clock_min_mhz, sm_clock_max_mhz, sm_clock_step_mhz : float
        Supported graphics clocks (H100: 345–1980 MHz in 15 MHz steps). The
        maximum is the boost clock used when the clock is not locked.
    mem_clocks_mhz : tuple of float
        Supported memory clocks, the first is the default. H100 SXM has
        2619 MHz; a second, lower clock (ratio of the H200's 3201/2201 pair)
        lets DVFS over both domains be simulated.
    power_limit_w, power_limit_min_w, power_limit_max_w : float
        Default, minimum and maximum power limit (Hopper SXM: 700 W).
    p0_w : float
        Constant board power (P0 of DSO eq. 1).
    leakage_w : float
        Leakage κ at relative voltage 1 and ``t_ref_c``.
    leakage_per_c : float
        Relative leakage increase per °C (λ); linear, so the thesis eq. 4.7
        temperature correction is exact at a fixed clock.
    t_ref_c : float
        Reference temperature of the leakage term.
    core_w_per_ghz : float
        Core dynamic coefficient c (W per GHz at relative voltage 1, activity 1).
    idle_activity : float
        Core activity of an idle GPU (clock tree, housekeeping).
    mem_w_per_ghz : float
        Memory coefficient γ (W per GHz of memory clock at activity 1).
    mem_idle_activity : float
        Memory activity of an idle GPU (refresh, PHY).
    voltage_knee_mhz, voltage_slope_per_ghz : float
        V(f) knee and relative slope above it (V_rel(1980) ≈ 1.5).
    voltage_knee_width_mhz : float
        Softness of the knee; 0 gives the piecewise-linear shape.
    thermal_resistance_k_per_w, thermal_tau_s : float
        First-order thermal RC: steady-state rise per watt and time constant.
    clock_recovery_mhz_per_s : float
        How fast the clock climbs back after a power-cap episode (the cap
        itself acts within one control step).
    fine_step_s : float
        Internal grid of the power truth (0.2 ms); launches shorter than a
        step occupy it fractionally.
    control_step_s : float
        Grid of the clock controller and thermal model (1 ms), a multiple of
        ``fine_step_s``.
    thermal_poles : tuple of (R_k_per_w, tau_s) pairs, default=()
        A Foster thermal network: the die temperature is ``T_amb + Σ x_i``
        with each ``x_i`` a first-order lag of ``R_i·P`` with time constant
        ``τ_i`` (a fast die pole and a slow heatsink pole, measured on the
        H100: the die follows load within 1–2 s, the heatsink over tens of
        seconds). Empty: the single pole of ``thermal_resistance_k_per_w`` and
        ``thermal_tau_s``.
    cap_window_s : float, default=0
        0: the power cap acts within one control step on the predicted power
        (the original controller). > 0: the controller regulates the mean
        power over this window (NVML's 1 s average on Hopper) to the limit;
        it lets the short-term power run up to a *budget* that integral
        action moves by ``cap_gain_per_s · (limit − window mean)`` per second
        within ``[limit − 4·headroom, limit + cap_headroom_w]``. From idle
        the window mean is low, so a capped load starts above the limit and
        settles over seconds (the H100's overshoot to ~726 W).
    cap_headroom_w : float, default=0
        How far above the limit the budget may run.
    cap_gain_per_s : float, default=0
        Integral gain of the budget (W per second per W of window error).
    clock_period_s : float, default=0
        The controller changes the clock only every this many seconds (the
        H100 steps every 10–20 ms); rises are limited by
        ``clock_recovery_mhz_per_s``. 0: every control step.
    cap_proportional : float, default=0
        Proportional gain on the window error: the budget the clock is set
        to is ``budget + cap_proportional · (limit − window mean)`` (same
        bounds). With the integral gain it sets how fast a capped start is
        pulled back and how the power swings around the limit (the H100's
        ~1 s swings of ±100 W while its 1 s mean holds 700 W).
    cap_repeat : float, default=0
        Share of the power about to leave the window (drawn one window ago)
        that the budget allows again: ``budget += cap_repeat · (P(t − window)
        − limit)``. 1 with a large ``cap_proportional`` holds the window's
        energy at ``limit × window`` (a dead-beat controller): a capped start
        runs at the headroom until the window is full, drops, and the
        pattern repeats with the window's period while the 1 s mean stays
        flat (the H100's ±100 W swings with a ~1 s period).
    mem_heat_share : float, default=1
        Share of the memory's dynamic power that heats the die temperature
        sensor (the rest heats the HBM stacks beside it): the thermal model
        is driven by ``P − (1 − mem_heat_share)·Bm·m``.
    cap_offset_w : float, default=0
        What the windowed-mean cap regulates, relative to the limit: the
        controller holds its own power sensor at the limit, which the energy
        counter reads this many watts off (the H100's capped 1 s mean settles
        ~3 W below 700 W on the counter).
    clock_recovery_delay_s : float, default=0
        How long the power must have allowed a higher clock before the
        controller starts raising it (the onset of the recovery after a cap
        load; the climb then runs at ``clock_recovery_mhz_per_s``).
    core_level_sd, core_level_keep : float, default=0
        The board's level state (session 29, docs/simulated-gpu.md): at each load start
        (another workload than the last, or the first launch after an idle of
        :data:`LEVEL_IDLE_GAP_S` or more) the level is kept with probability
        ``core_level_keep``, else drawn anew from N(0, ``core_level_sd``); the
        core dynamic power ``c·f·V²·(1 − a_idle)·a·θ`` is multiplied by
        ``1 + level`` from the next control step. Real H200s' power at a fixed
        clock and die moves between loads by ~0.5 % and holds within one
        (``benchmarks/burst_levels.py``), but on the fp32 GEMM most and the
        triad not at all, which this board-wide level does not reproduce (it
        failed its rule; no shipped preset sets it). 0 (the default) is a
        board that repeats itself exactly.
    dynamic_per_c : float, default=0
        μ: relative rise per °C above ``t_ref_c`` of the power a load draws
        above the idle board (the activity terms ``Bc·a + Bm·m``); the idle
        toggling stays in the zero-activity power, whose slope is the
        leakage's. 0: a load's power follows temperature only through the
        leakage (thesis eq. 4.6), the same slope loaded and idle.
    cap_on_period : bool, default=False
        False: the controller predicts the next step's power from each 1 ms
        control step's activity and lowers the clock at once. True: it decides
        only on its clock period (``clock_period_s``), from the mean activity
        over the period just ended, so it regulates the mean power over its
        period: loads alternating faster than the period share one clock
        between their own capped clocks (the real H100/H200 in a ladder; see
        :mod:`powermodels.devices.cap_controller`).
    cap_response_s : float, default=0
        Time constant of the controller's own view of the load: it predicts
        the power of a clock from the activity smoothed by a first-order lag
        of this many seconds. 0: from each step's activity (the clock falls
        in the step a load starts). The real H100 holds its top clock for
        ~35 ms after a capped load starts and steps down over ~150 ms (clock
        probes in ``datasets/h100-2026-11-28/capstarts_*``): that start draws
        energy the instant reading barely sees but the counter does
        (docs/twin.md, session 13).
    """

    sm_clock_min_mhz: float = 345.0
    sm_clock_max_mhz: float = 1980.0
    sm_clock_step_mhz: float = 15.0
    mem_clocks_mhz: tuple = (2619.0, 1800.0)
    power_limit_w: float = 700.0
    power_limit_min_w: float = 200.0
    power_limit_max_w: float = 700.0
    p0_w: float = 25.0
    leakage_w: float = 30.0
    leakage_per_c: float = 0.02
    t_ref_c: float = 25.0
    core_w_per_ghz: float = 108.0
    idle_activity: float = 0.02
    mem_w_per_ghz: float = 50.0
    mem_idle_activity: float = 0.1
    voltage_knee_mhz: float = 1200.0
    voltage_slope_per_ghz: float = 0.64
    voltage_knee_width_mhz: float = 40.0
    thermal_resistance_k_per_w: float = 0.07
    thermal_tau_s: float = 5.0
    clock_recovery_mhz_per_s: float = 15000.0
    fine_step_s: float = 2e-4
    control_step_s: float = 1e-3
    thermal_poles: tuple = ()
    cap_window_s: float = 0.0
    cap_headroom_w: float = 0.0
    cap_gain_per_s: float = 0.0
    clock_period_s: float = 0.0
    cap_proportional: float = 0.0
    cap_offset_w: float = 0.0
    cap_repeat: float = 0.0
    mem_heat_share: float = 1.0
    clock_recovery_delay_s: float = 0.0
    cap_on_period: bool = False
    dynamic_per_c: float = 0.0
    cap_response_s: float = 0.0
    core_level_sd: float = 0.0
    core_level_keep: float = 0.0

    def __post_init__(self):
        clocks = self.mem_clocks_mhz
        if len(clocks) < 1 or not all(math.isfinite(v) and v > 0 for v in clocks):
            raise ValueError(f"GPUPhysics: mem_clocks_mhz must be positive clocks, got {clocks!r}")
        if not isinstance(self.cap_on_period, (bool, np.bool_)):
            raise ValueError(f"GPUPhysics: cap_on_period must be True or False, got {self.cap_on_period!r}")
        positive_fields(self, "GPUPhysics", skip=("mem_clocks_mhz", "thermal_poles", "cap_on_period"),
                        nonneg=("voltage_knee_width_mhz", "idle_activity", "mem_idle_activity",
                                "leakage_per_c", "p0_w", "leakage_w", "mem_w_per_ghz",
                                "voltage_slope_per_ghz", "t_ref_c", "voltage_knee_mhz",
                                "cap_window_s", "cap_headroom_w", "cap_gain_per_s", "clock_period_s",
                                "cap_proportional", "clock_recovery_delay_s", "mem_heat_share", "cap_repeat",
                                "dynamic_per_c", "cap_response_s", "core_level_sd", "core_level_keep"),
                        any_sign=("cap_offset_w",))
        poles = tuple(tuple(float(v) for v in pole) for pole in self.thermal_poles)
        if any(len(pole) != 2 or not all(math.isfinite(v) and v > 0 for v in pole) for pole in poles):
            raise ValueError(f"GPUPhysics: thermal_poles must be (R_k_per_w, tau_s) pairs of positive "
                             f"numbers, got {self.thermal_poles!r}")
        object.__setattr__(self, "thermal_poles", poles)
        if self.sm_clock_min_mhz > self.sm_clock_max_mhz:
            raise ValueError("GPUPhysics: sm_clock_min_mhz must not exceed sm_clock_max_mhz")
        if not self.power_limit_min_w <= self.power_limit_w <= self.power_limit_max_w:
            raise ValueError("GPUPhysics: power_limit_w must lie within [power_limit_min_w, power_limit_max_w]")
        for name in ("idle_activity", "mem_idle_activity", "mem_heat_share", "core_level_keep"):
            if getattr(self, name) > 1:
                raise ValueError(f"GPUPhysics: {name} must be <= 1")
        ratio = self.control_step_s / self.fine_step_s
        if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
            raise ValueError("GPUPhysics: control_step_s must be a whole multiple of fine_step_s")

    # -- shapes ----------------------------------------------------------------

    def relative_voltage(self, f_mhz):
        """V(f)/V_min: flat below the knee, linear above, softened over the knee width."""
        f = np.asarray(f_mhz, dtype=float)
        x = f - self.voltage_knee_mhz
        w = self.voltage_knee_width_mhz
        if w > 0:
            # softplus: → max(x, 0) far from the knee, smooth within ~w of it
            above = w * np.logaddexp(0.0, x / w)
        else:
            above = np.maximum(x, 0.0)
        return 1.0 + self.voltage_slope_per_ghz * above / 1000.0

    def power_terms(self, f_mhz, f_mem_mhz, temperature_c):
        """Split power into ``(A, Bc, Bm)`` with ``P = A + Bc·a + Bm·m``.

        ``a`` and ``m`` are the core and memory activities (0..1); ``A`` is the
        power at zero activity (static, leakage, idle toggling).
        """
        f_ghz = np.asarray(f_mhz, dtype=float) / 1000.0
        fm_ghz = np.asarray(f_mem_mhz, dtype=float) / 1000.0
        v = self.relative_voltage(np.asarray(f_mhz, dtype=float))
        leak = self.leakage_w * v * (1.0 + self.leakage_per_c * (np.asarray(temperature_c) - self.t_ref_c))
        core = self.core_w_per_ghz * f_ghz * v * v
        mem = self.mem_w_per_ghz * fm_ghz
        a_idle, m_idle = self.idle_activity, self.mem_idle_activity
        base = self.p0_w + leak + core * a_idle + mem * m_idle
        theta = self.dynamic_scale(temperature_c)
        return base, core * (1.0 - a_idle) * theta, mem * (1.0 - m_idle) * theta

    def dynamic_scale(self, temperature_c):
        """θ = 1 + μ·(T − T_ref): the factor on a load's activity terms at ``temperature_c``."""
        return 1.0 + self.dynamic_per_c * (np.asarray(temperature_c, dtype=float) - self.t_ref_c)

    def power_w(self, f_mhz, f_mem_mhz, temperature_c, activity=0.0, mem_activity=0.0):
        """True power (W) at the given clocks, temperature and activities."""
        a, bc, bm = self.power_terms(f_mhz, f_mem_mhz, temperature_c)
        return a + bc * np.asarray(activity, dtype=float) + bm * np.asarray(mem_activity, dtype=float)

    def idle_temperature_c(self, ambient_c: float, f_mhz: float, f_mem_mhz: float) -> float:
        """Steady-state temperature of the idle GPU: solves ``T = T_amb + R·P_idle(T)``."""
        # P_idle is linear in T: P = p + q·T
        p1 = float(self.power_w(f_mhz, f_mem_mhz, 1.0))
        p0 = float(self.power_w(f_mhz, f_mem_mhz, 0.0))
        q = p1 - p0
        r = self.total_thermal_resistance_k_per_w
        return (ambient_c + r * p0) / (1.0 - r * q)

    @property
    def poles(self) -> tuple:
        """The thermal network as ``((R, τ), ...)``: :attr:`thermal_poles`, else the single pole."""
        return self.thermal_poles or ((self.thermal_resistance_k_per_w, self.thermal_tau_s),)

    @property
    def total_thermal_resistance_k_per_w(self) -> float:
        """Steady-state temperature rise per watt of the whole network."""
        return float(sum(r for r, _ in self.poles))

    def leakage_slope_w_per_c(self, f_mhz) -> float:
        """dP/dT at a fixed clock and zero activity (W/°C): κ·V(f)·λ, the α of thesis eq. 4.6.

        A load adds ``μ·(Bc·a + Bm·m)`` at ``t_ref_c`` (``dynamic_per_c``).
        """
        return float(self.leakage_w * self.relative_voltage(f_mhz) * self.leakage_per_c)


def clock_table(physics: GPUPhysics) -> np.ndarray:
    """Supported SM clocks in MHz, ascending."""
    n = round((physics.sm_clock_max_mhz - physics.sm_clock_min_mhz) / physics.sm_clock_step_mhz)
    return physics.sm_clock_min_mhz + physics.sm_clock_step_mhz * np.arange(n + 1)
