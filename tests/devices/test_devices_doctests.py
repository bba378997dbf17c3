"""The docstring examples of the devices package run and print what they claim."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["base", "simulated", "physics", "sensor_emulation", "nvml"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(f"powermodels.devices.{name}")
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
