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


#: Simulated work a test of a refused or bounded measurement may ask for before it is called a hang
#: (issue 25: runs that never ended, or grew ~450 MB/s). A bound on work, not on wall-clock time,
#: so a loaded machine never fails it and an unbounded run fails at once.
MAX_SIMULATED_LAUNCHES = 1_000_000
MAX_SIMULATED_S = 120.0


@pytest.fixture
def simulated_work(monkeypatch) -> dict:
    """The work the test's simulated GPUs did, ``{"launches": n, "seconds": simulated s}``.

    A request that would pass :data:`MAX_SIMULATED_LAUNCHES` launches or
    :data:`MAX_SIMULATED_S` simulated seconds fails the test before it runs.
    """
    from powermodels.devices.simulated import SimulatedGPU

    done = {"launches": 0, "seconds": 0.0}

    def bounded(method, launches_of, seconds_of):
        def call(self, *args, **kwargs):
            done["launches"] += launches_of(*args, **kwargs)
            if done["launches"] > MAX_SIMULATED_LAUNCHES or done["seconds"] + seconds_of(*args, **kwargs) \
                    > MAX_SIMULATED_S:
                pytest.fail(f"unbounded: the simulated GPU was asked for {done['launches']:,} launches / "
                            f"more than {MAX_SIMULATED_S:g} s after {done['seconds']:.3g} s")
            start = self.now()
            try:
                return method(self, *args, **kwargs)
            finally:
                done["seconds"] += self.now() - start

        return call

    def no_launches(*args, **kwargs):
        return 0

    def no_seconds(*args, **kwargs):
        return 0.0

    monkeypatch.setattr(SimulatedGPU, "run", bounded(
        SimulatedGPU.run, lambda workload, launches=1, gap_s=0.0: int(launches), no_seconds))
    monkeypatch.setattr(SimulatedGPU, "idle", bounded(SimulatedGPU.idle, no_launches, lambda seconds: seconds))
    monkeypatch.setattr(SimulatedGPU, "step", bounded(
        SimulatedGPU.step, no_launches, lambda duration_s, amplitude=1.0: duration_s))
    monkeypatch.setattr(SimulatedGPU, "square_wave", bounded(
        SimulatedGPU.square_wave, lambda on_s, off_s, periods, amplitude=1.0: int(periods),
        lambda on_s, off_s, periods, amplitude=1.0: (on_s + off_s) * periods))
    return done
