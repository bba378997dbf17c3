"""scikit-learn estimators. Imports numpy/scipy/pandas/sklearn only — never hardware code."""

# Every public estimator is exported here (DESIGN.md: `from powermodels.models import GHFilter, TraceEnergy`);
# tests/test_common.py checks that this list and powermodels.utils.all_estimators() agree.
from .dvfs import DVFSEnergyModel, DVFSParams, DVFSPowerModel, DVFSTimeModel, fit_voltage_curve
from .dvfs_optimizer import ClockChoice, eta_for_slowdown, optimize_clocks
from .dvfs_predictor import DVFSParameterPredictor, kernel_parameters
from .energy import EnergyModel
from .frequency import FrequencyCorrection, FrequencyPowerModel, fit_frequency_power_batch
from .grouped import GroupedEstimator, compare_per_group_vs_global
from .instruction import InstructionEnergyModel
from .runtime import RationalTimeModel, fit_rational_time_batch
from .smoothing import GHFilter, KalmanFilter1D, MovingAverage
from .temperature import TemperatureCorrection, WeakTemperatureCorrelationWarning
from .trace_energy import TraceEnergy

__all__ = [
    "ClockChoice",
    "DVFSEnergyModel",
    "DVFSParameterPredictor",
    "DVFSParams",
    "DVFSPowerModel",
    "DVFSTimeModel",
    "EnergyModel",
    "FrequencyCorrection",
    "FrequencyPowerModel",
    "GHFilter",
    "GroupedEstimator",
    "InstructionEnergyModel",
    "KalmanFilter1D",
    "MovingAverage",
    "RationalTimeModel",
    "TemperatureCorrection",
    "TraceEnergy",
    "WeakTemperatureCorrelationWarning",
    "compare_per_group_vs_global",
    "eta_for_slowdown",
    "fit_frequency_power_batch",
    "fit_rational_time_batch",
    "fit_voltage_curve",
    "kernel_parameters",
    "optimize_clocks",
]
