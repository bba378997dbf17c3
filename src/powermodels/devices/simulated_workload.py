"""What a kernel launch does to the simulated GPU: its time at given clocks and its activity.

:class:`SimulatedWorkload` is the twin of a real kernel for
:class:`~powermodels.devices.simulated.SimulatedGPU`: launch time from DSO
eq. 2 or the rational law of thesis eq. 4.5, and how busy the launch keeps
the SMs and the memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import finite

__all__ = ["EXAMPLE_WORKLOADS", "SimulatedWorkload"]


@dataclass(frozen=True)
class SimulatedWorkload:
    """What one kernel launch does to the simulated GPU.

    Parameters
    ----------
    name : str
        Workload name.
    core_work : float, default=0
        β of DSO eq. 2 in MHz·s: the core-bound time is ``core_work / f_core``.
    mem_work : float, default=0
        α of DSO eq. 2 in MHz·s: the memory-bound time is ``mem_work / f_mem``.
    t0_s : float, default=0
        Fixed time per launch (t⁰ of DSO eq. 2), independent of the clocks.
    activity : float, default=1
        Core activity 0..1 while the launch runs (scales c·f·V²).
    mem_activity : float, default=0
        Memory activity 0..1 while the launch runs (scales γ·f_mem).
    time_model : {"dso", "rational"}, default="dso"
        ``"dso"``: ``T = t0 + max(α/f_mem, β/f_core)`` (DSO eq. 2).
        ``"rational"``: ``T = a/(1 + b·f) + c/(1 + d·f)`` with ``f`` the SM
        clock in MHz and ``rational = (a, b, c, d)`` (thesis eq. 4.5).
    rational : tuple of 4 floats, optional
        Coefficients of the rational law; required for ``time_model="rational"``.
    level_sd, level_keep : float, default=0
        This workload's own level state (session 30, docs/simulated-gpu.md): at each of its load starts (a launch
        of it after another workload's, or after :data:`~powermodels.devices.physics.LEVEL_IDLE_GAP_S` or more
        without one) its level is kept with probability ``level_keep``, else drawn anew from N(0, ``level_sd``)
        (always drawn at its first start); while it runs, the core dynamic power is multiplied by ``1 + level``.
        Real H200s' fp32 GEMM moves between load starts by ~0.5 % and holds within one, the triad does not
        (``benchmarks/burst_levels.py``). 0 (the default): the workload repeats itself exactly. The levels fitted on
        23 H200s failed their clean test on four never-seen ones (session 31), so no shipped preset sets them.
    """

    name: str = "workload"
    core_work: float = 0.0
    mem_work: float = 0.0
    t0_s: float = 0.0
    activity: float = 1.0
    mem_activity: float = 0.0
    time_model: str = "dso"
    rational: tuple | None = None
    level_sd: float = 0.0
    level_keep: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"SimulatedWorkload: name must be a non-empty string, got {self.name!r}")
        for arg in ("core_work", "mem_work", "t0_s"):
            finite(f"SimulatedWorkload: {arg}", getattr(self, arg), minimum=0.0)
        for arg in ("activity", "mem_activity", "level_keep"):
            finite(f"SimulatedWorkload: {arg}", getattr(self, arg), minimum=0.0, maximum=1.0)
        # a level sd of 1 would let the core dynamic power reach zero in one draw in six: no board does that
        finite("SimulatedWorkload: level_sd", self.level_sd, minimum=0.0, maximum=0.5)
        if self.time_model not in ("dso", "rational"):
            raise ValueError(
                f"SimulatedWorkload: time_model must be 'dso' or 'rational', got {self.time_model!r}")
        if self.time_model == "dso":
            if self.core_work == 0 and self.mem_work == 0 and self.t0_s == 0:
                raise ValueError("SimulatedWorkload: core_work, mem_work and t0_s are all 0 "
                                 "(a launch must take time)")
        else:
            coeffs = self.rational
            if coeffs is None or len(coeffs) != 4:
                raise ValueError(f"SimulatedWorkload: rational must be (a, b, c, d) for "
                                 f"time_model='rational', got {coeffs!r}")
            for c in coeffs:
                finite("SimulatedWorkload: rational", c)
            object.__setattr__(self, "rational", tuple(float(c) for c in coeffs))

    def time_s(self, sm_clock_mhz, mem_clock_mhz):
        """Time of one launch (s) at the given clocks (MHz); arrays broadcast."""
        f = np.asarray(sm_clock_mhz, dtype=float)
        fm = np.asarray(mem_clock_mhz, dtype=float)
        if np.any(~np.isfinite(f)) or np.any(f <= 0):
            raise ValueError(f"time_s: sm_clock_mhz must be finite and > 0, got {sm_clock_mhz!r}")
        if np.any(~np.isfinite(fm)) or np.any(fm <= 0):
            raise ValueError(f"time_s: mem_clock_mhz must be finite and > 0, got {mem_clock_mhz!r}")
        if self.time_model == "dso":
            t = self.t0_s + np.maximum(self.mem_work / fm, self.core_work / f)  # DSO eq. 2
        else:
            a, b, c, d = self.rational
            t = a / (1.0 + b * f) + c / (1.0 + d * f) + 0.0 * fm  # thesis eq. 4.5
        return float(t) if np.ndim(t) == 0 else t


#: Ready-made workloads for demos and tests (Hopper-like at 1980/2619 MHz).
EXAMPLE_WORKLOADS: dict[str, SimulatedWorkload] = {
    # FMA chain: compute-bound, 10 ms per launch at 1980 MHz
    "fp32": SimulatedWorkload("fp32", core_work=19.8, t0_s=0.0, activity=1.0, mem_activity=0.02),
    # STREAM-like copy: memory-bound, 5 ms per launch at 2619 MHz
    "stream": SimulatedWorkload("stream", core_work=2.0, mem_work=13.095, activity=0.25,
                                mem_activity=1.0),
    # GEMM: compute-bound with heavy memory traffic (power-capped at 700 W once hot)
    "gemm": SimulatedWorkload("gemm", core_work=9.9, mem_work=6.0, t0_s=5e-6, activity=1.0,
                              mem_activity=0.8),
    # tiny kernel, far shorter than the 0.2 ms grid
    "tiny": SimulatedWorkload("tiny", core_work=0.0198, t0_s=0.0, activity=0.9, mem_activity=0.1),
}
