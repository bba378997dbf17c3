"""Deprecated path of :mod:`powermodels.instruction_energy.tables` (warns; goes away in the next release)."""

from powermodels.deprecation import moved_module

moved_module(__name__, "powermodels.instruction_energy.tables")
