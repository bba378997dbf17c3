"""powermodels.measure(): any workload, default protocol, clear errors before the device opens."""

from __future__ import annotations

import subprocess
import sys

import pytest

import powermodels
from powermodels import schema
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.protocols import GoodPractice
from powermodels.measuring.runner import SimulatedRunner
from powermodels.workloads import CallableWorkload, SimulatedTwin


def test_import_stays_light():
    code = ("import sys, powermodels; print(any(m.startswith(('powermodels.harness', 'powermodels.measuring', "
            "'powermodels.workloads', 'powermodels.campaigns', 'powermodels.microbench')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    assert "measure" in dir(powermodels) and powermodels.SimulatedTwin is SimulatedTwin


def test_measure_a_bare_callable_with_the_default_protocol():
    m = powermodels.measure(lambda: None, device="simulated", simulated=SimulatedTwin(time_s=2e-3))
    row = m.row
    assert row[schema.PROTOCOL] == "counter" and row[schema.KERNEL] == "<lambda>"
    assert row[schema.TIME_S] == pytest.approx(2e-3)
    assert row[schema.ENERGY_J] == pytest.approx(row[schema.REFERENCE_ENERGY_J], rel=0.02)


def test_measure_registry_names_protocols_by_name_and_object():
    runner = SimulatedRunner(SimulatedGPU(seed=2))
    m = powermodels.measure("fp32", device=runner, protocol="good_practice", config="nr_outer=8",
                            trials=2, random_state=0)
    assert m.row["nr_outer"] == 8 and m.row[schema.PROTOCOL] == "good_practice"
    w = CallableWorkload(lambda: None, name="w", simulated=SimulatedTwin(time_s=1e-3))
    m = powermodels.measure(w, device=runner, protocol=GoodPractice(trials=2))
    assert m.row[schema.KERNEL] == "w"


@pytest.mark.parametrize("kwargs, match", [
    ({"workload": "fp32", "config": "nr_outer=x"}, "not an integer"),
    ({"workload": "nope"}, "neither a registry kernel"),
    ({"workload": lambda: None}, "has no simulated twin"),
    ({"workload": "fp32", "protocol": GoodPractice(), "trials": 2}, "set them on the object"),
    ({"workload": "fp32", "protocol": "bogus"}, "unknown protocol"),
    ({"workload": "fp32", "device": 3}, "device must be"),
])
def test_measure_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        powermodels.measure(kwargs.pop("workload"), **{"device": "simulated", **kwargs})
