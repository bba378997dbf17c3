"""Deprecated: moved to :mod:`powermodels.measuring.reference` (this path warns and goes away in the next release)."""

from powermodels.harness import alias_module

alias_module(__name__)
