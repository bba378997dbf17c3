"""Shared fixtures and markers: GPU tests skip cleanly without a GPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("POWERMODELS_SHARED_DATA", REPO.parent / "shared" / "data"))
DATASETS = REPO / "datasets"


def _gpu_present() -> bool:
    try:
        from powermodels.devices import nvml_available

        if not nvml_available(0):
            return False
        import cupy  # noqa: F401

        return True
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    gpu = None
    for item in items:
        if "gpu" in item.keywords:
            if gpu is None:
                gpu = _gpu_present()
            if not gpu:
                item.add_marker(pytest.mark.skip(reason="needs an NVIDIA GPU with NVML and CuPy"))
        if "shared_data" in item.keywords and not SHARED_DATA.is_dir():
            item.add_marker(pytest.mark.skip(reason=f"{SHARED_DATA} is absent"))


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory, monkeypatch):
    """Every test gets its own settings-journal folder (never the user's ~/.local/state)."""
    monkeypatch.setenv("POWERMODELS_STATE_DIR", str(tmp_path_factory.mktemp("state")))


@pytest.fixture
def shared_data() -> Path:
    """The folder of public measured data beside the checkout (../shared/data)."""
    return SHARED_DATA


@pytest.fixture
def datasets() -> Path:
    """The project's own measured data (datasets/)."""
    return DATASETS
