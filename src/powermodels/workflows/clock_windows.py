"""Deprecated path of :mod:`powermodels.natural_dvfs.clock_windows` (warns; goes away in the next release)."""

from powermodels.deprecation import moved_module

moved_module(__name__, "powermodels.natural_dvfs.clock_windows")
