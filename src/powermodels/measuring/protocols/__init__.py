"""Measurement protocols, one module each: traces in, run-table rows out.

Each protocol drives a :class:`~powermodels.measuring.runner.Runner` (a real GPU
or the simulated one — the same code) and turns the trace it recorded into one
run-table row (:data:`schema.RUN_TABLE`):

=================  ==========================================================
``naive``          one launch, one reading right after it (the practice Yang
                   §V-B criticises): ``energy = P_reading × t_kernel``.
``continuous``     Kernel Tuner style: repeat the workload for ≥ ``duration_s``
                   (1 s) and take ``median(power) × t_kernel``.
``good_practice``  Yang §V-A: ≥ 32 repetitions or ≥ ``min_duration_s``,
                   several trials separated by random delays, readings during
                   the rise time discarded, readings shifted by the sensor
                   delay, and — when the averaging window is a fraction of the
                   update period — evenly spaced controlled delays that shift
                   the load's phase against the sensor.
``steady_state``   Wattchmen §3.3: idle power first, then run until power and
                   temperature settle, then take the energy from the counter
                   over a steady window.
``counter``        the default (:mod:`.counter`, ~1 s): back-to-back
                   launches, energy-counter difference between two observed
                   counter updates / the launches between them; falls back to
                   ``good_practice`` where the device has no counter
                   (:func:`default_protocol`).
=================  ==========================================================

Every row carries the per-launch time (CUDA events, or the simulated
launch times), power, energy per launch, mean temperature and observed clocks,
and — where the runner knows it (simulated truth, external meter) — the
reference energy over exactly the same launches.

The shared helpers (trace windows, launch counts, counter updates) are public
in :mod:`.launches`; :class:`Protocol` and :class:`Measurement` in :mod:`.base`;
the protocols by name in :mod:`.registry`.
"""

from __future__ import annotations

from .base import Measurement, Protocol
from .continuous import Continuous
from .counter import Counter
from .good_practice import GoodPractice
from .launches import counter_power_w, sensor_updates
from .naive import Naive
from .registry import DEFAULT_PROTOCOL, PROTOCOLS, default_protocol, make_protocol
from .steady_state import SteadyState

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "Continuous",
    "Counter",
    "GoodPractice",
    "Measurement",
    "Naive",
    "Protocol",
    "SteadyState",
    "counter_power_w",
    "default_protocol",
    "make_protocol",
    "sensor_updates",
]
