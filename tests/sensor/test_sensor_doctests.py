"""The docstring examples of the sensor package run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["window", "update_period", "transient", "gain", "correction", "fingrav", "_series", "report"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"powermodels.sensor.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
