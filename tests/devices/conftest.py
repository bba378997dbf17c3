"""Fixtures for the device tests: a fake ``pynvml`` in place of nvidia-ml-py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

FAKE_PYNVML = Path(__file__).resolve().parents[1] / "fake_pynvml.py"


def _load_fake_loader():
    spec = importlib.util.spec_from_file_location("_fake_pynvml_loader", FAKE_PYNVML)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def fake_nvml(monkeypatch):
    """A fresh fake pynvml (tests/fake_pynvml.py) installed as ``sys.modules["pynvml"]``."""
    fake = _load_fake_loader().load("pynvml")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


@pytest.fixture
def nvml_device(fake_nvml):
    """An NVMLDevice over the fake, with instant restore retries; closed afterwards."""
    from powermodels.devices.nvml import NVMLDevice

    device = NVMLDevice(0)
    device.restore_retry_delay_s = 0.0
    yield device
    device.close()
