"""A runner that opened its device from a kind closes it; a device handed in stays open."""

from __future__ import annotations

import sys

import pytest

import powermodels
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.runner import make_runner
from powermodels.workloads import SimulatedTwin


@pytest.fixture
def closed(monkeypatch):
    calls = []
    monkeypatch.setattr(SimulatedGPU, "close", lambda self: calls.append(self), raising=False)
    return calls


def test_runner_closes_the_device_it_opened(closed):
    with make_runner("simulated", device_kwargs={"seed": 0}) as runner:
        dev = runner.device
    assert closed == [dev]


def test_runner_leaves_a_given_device_open(closed):
    dev = powermodels.devices.open_device("simulated", seed=0)
    with make_runner(dev):
        pass
    assert closed == []


def test_measure_closes_the_device_it_opened(closed):
    powermodels.measure(lambda: None, device="simulated", simulated=SimulatedTwin(time_s=2e-3))
    assert len(closed) == 1


def test_program_reference_closes_the_device_it_opened(closed):
    from powermodels.measuring.program import ProgramWorkload, program_reference

    prog = ProgramWorkload([sys.executable, "-c", "pass"], simulated={"activity": 0.8})
    ref = program_reference(prog, "simulated", duration_s=1.0, skip_s=0.2)
    assert ref["runs"] > 0 and len(closed) == 1
