"""Characterise and correct the built-in power sensor (Yang et al.; FinGraV).

Characterisation (scikit-learn estimators, fitted on trace tables of a known load):
:class:`UpdatePeriod`, :class:`StepResponse`, :class:`BoxcarWindow`,
:class:`SteadyStateGain`; :func:`characterize_traces` runs them for every reading.
Correction: :func:`window_aware_energy` (ours), :func:`good_practice_energy`
(Yang §V-A), :func:`naive_energy`. Fine-grain profiles: :mod:`powermodels.sensor.fingrav`.
"""

from ._coverage import covered_time
from ._series import counter_power
from .correction import (
    EnergyEstimate,
    delag,
    discard_rise,
    good_practice_energy,
    naive_energy,
    phase_shift_gaps,
    window_aware_energy,
)
from .gain import SteadyStateGain
from .report import Characterization, attach_load, attach_loads, characterize_traces, write_report
from .transient import RESPONSE_KINDS, StepResponse
from .update_period import UpdatePeriod
from .window import BoxcarWindow

__all__ = [
    "RESPONSE_KINDS",
    "BoxcarWindow",
    "Characterization",
    "EnergyEstimate",
    "SteadyStateGain",
    "StepResponse",
    "UpdatePeriod",
    "attach_load",
    "attach_loads",
    "characterize_traces",
    "counter_power",
    "covered_time",
    "delag",
    "discard_rise",
    "good_practice_energy",
    "naive_energy",
    "phase_shift_gaps",
    "window_aware_energy",
    "write_report",
]
