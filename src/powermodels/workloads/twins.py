"""Simulated twins: what a workload does to the simulated GPU, so CI runs every kind without one.

The :class:`~powermodels.devices.simulated.SimulatedGPU` runs
:class:`~powermodels.devices.simulated.SimulatedWorkload` launches: a time vs
the SM and memory clocks (DSO eq. 2, or the rational law of thesis eq. 4.5)
and the core and memory activity while it runs. Two ways lead there:

* the registry kernels have a cost model (FLOPs, bytes, efficiency per
  configuration): :mod:`.registry_cost`;
* a user workload carries a :class:`SimulatedTwin` — the time of one
  execution at the nominal clocks, which clock it scales with, its activity —
  whose fields may be expressions over the tunable parameters, so a tunable
  source kernel's twin changes with its configuration.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

from .expressions import Expression

__all__ = ["NOMINAL_MEM_MHZ", "NOMINAL_SM_MHZ", "SimulatedTwin", "as_twin", "twin_workload"]

#: Clocks at which a twin's ``time_s`` holds (the simulated Hopper's boost and memory clocks).
NOMINAL_SM_MHZ = 1980.0
NOMINAL_MEM_MHZ = 2619.0


@dataclass(frozen=True)
class SimulatedTwin:
    """How a user workload behaves on the simulated GPU.

    Every numeric field may be a number or an expression string over the
    workload's tunable parameters (e.g. ``"2e-3 * 256 / block_size_x"``).

    Parameters
    ----------
    time_s : float or str
        Time of one execution at the nominal clocks (1980 MHz SM, 2619 MHz memory).
    memory_bound : bool, default=False
        The time beyond ``t0_s`` scales with ``1 / f_mem`` (True) or ``1 / f_sm``
        (False) — DSO eq. 2 with one term.
    activity : float or str, default=0.9
        Core activity 0..1 while it runs (power scales with it).
    mem_activity : float or str, optional
        Memory activity 0..1; 0.9 when ``memory_bound``, else 0.1.
    t0_s : float or str, default=0
        Part of ``time_s`` independent of the clocks (launch overheads).
    rational : tuple of 4 floats, optional
        Instead of ``time_s``: thesis eq. 4.5, ``T(f) = a/(1 + b f) + c/(1 + d f)``.
    """

    time_s: float | str | None = None
    memory_bound: bool = False
    activity: float | str = 0.9
    mem_activity: float | str | None = None
    t0_s: float | str = 0.0
    rational: tuple | None = None

    def __post_init__(self):
        if (self.time_s is None) == (self.rational is None):
            raise ValueError("SimulatedTwin: give exactly one of time_s (at the nominal clocks) "
                             "or rational=(a, b, c, d)")

    @classmethod
    def from_dict(cls, data: Mapping) -> SimulatedTwin:
        """A twin from a campaign spec's ``simulated`` table (ValueError naming unknown keys)."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"simulated: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        data = dict(data)
        if data.get("rational") is not None:
            data["rational"] = tuple(data["rational"])
        return cls(**data)

    def _value(self, field: str, config: Mapping):
        value = getattr(self, field)
        if isinstance(value, str):
            value = Expression(value, names=list(config))(config)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ValueError(f"SimulatedTwin: {field} = {getattr(self, field)!r} is not a number") from None

    def workload(self, name: str, config: Mapping | None = None):
        """The :class:`~powermodels.devices.simulated.SimulatedWorkload` for ``config``."""
        from ..devices.simulated import SimulatedWorkload

        config = dict(config or {})
        activity = self._value("activity", config)
        mem_activity = (0.9 if self.memory_bound else 0.1) if self.mem_activity is None \
            else self._value("mem_activity", config)
        if self.rational is not None:
            return SimulatedWorkload(name=name, activity=activity, mem_activity=mem_activity,
                                     time_model="rational", rational=tuple(self.rational))
        time_s, t0 = self._value("time_s", config), self._value("t0_s", config)
        if not (math.isfinite(time_s) and time_s > 0):
            raise ValueError(f"SimulatedTwin: time_s must be > 0, got {time_s} for {name!r}")
        if not 0 <= t0 < time_s:
            raise ValueError(f"SimulatedTwin: t0_s must be in [0, time_s), got {t0} (time_s {time_s})")
        scaled = time_s - t0
        work = {"mem_work": scaled * NOMINAL_MEM_MHZ} if self.memory_bound \
            else {"core_work": scaled * NOMINAL_SM_MHZ}
        return SimulatedWorkload(name=name, t0_s=t0, activity=activity, mem_activity=mem_activity, **work)


def as_twin(obj):
    """``None``, a :class:`SimulatedTwin`, a ``SimulatedWorkload``, a dict, or a callable of the config."""
    if obj is None or isinstance(obj, SimulatedTwin) or callable(obj):
        return obj
    if isinstance(obj, Mapping):
        return SimulatedTwin.from_dict(obj)
    from ..devices.simulated import SimulatedWorkload

    if isinstance(obj, SimulatedWorkload):
        return obj
    raise ValueError(f"simulated: expected a SimulatedTwin, a SimulatedWorkload, a dict or a callable, "
                     f"got {type(obj).__name__}")


def twin_workload(twin, name: str, config: Mapping | None = None):
    """The ``SimulatedWorkload`` that ``twin`` (see :func:`as_twin`) gives for ``config``."""
    from ..devices.simulated import SimulatedWorkload

    if callable(twin) and not isinstance(twin, (SimulatedTwin, SimulatedWorkload)):
        twin = as_twin(twin(dict(config or {})))
    if isinstance(twin, SimulatedTwin):
        return twin.workload(name, config)
    if isinstance(twin, SimulatedWorkload):
        return dataclasses.replace(twin, name=name)
    raise ValueError(f"simulated: the twin of {name!r} gave {type(twin).__name__}, not a SimulatedTwin")
