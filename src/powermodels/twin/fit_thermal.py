"""Deprecated path of :mod:`powermodels.thermal.foster` (warns; goes away in the next release)."""

from powermodels.deprecation import moved_module

moved_module(__name__, "powermodels.thermal.foster")
