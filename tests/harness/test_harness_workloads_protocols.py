"""Every workload kind through every protocol and a campaign, on the simulated GPU via its twin."""

from __future__ import annotations

import json

import numpy as np
import pytest

from powermodels import schema
from powermodels.campaigns import load_runs, load_spec, plan, run_campaign
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.protocols import PROTOCOLS, make_protocol
from powermodels.measuring.runner import SimulatedRunner
from powermodels.workloads import CallableWorkload, SimulatedTwin, SourceKernel, kernels_dir

EXAMPLE = kernels_dir() / "examples" / "matmul_tiled.cu"

#: short settings so every protocol runs in well under a second of wall time
FAST = {"naive": {}, "continuous": {"duration_s": 0.2},
        "good_practice": {"trials": 2, "min_duration_s": 1.0, "max_delay_s": 0.1, "random_state": 0},
        "steady_state": {"idle_s": 0.2, "chunk_s": 0.1, "measure_s": 0.3, "max_duration_s": 1.0}}


def _kinds():
    source = SourceKernel(EXAMPLE, "matmul_kernel", {"block_size_x": [16, 32], "tile_size_x": [1, 2, 4]},
                          problem_size=(4096, 4096), arguments=[np.zeros(16, np.float32)] * 3,
                          grid_div_x=["block_size_x", "tile_size_x"], grid_div_y=[],
                          simulated=SimulatedTwin(time_s="8e-3 / tile_size_x", activity=0.85))
    fn = CallableWorkload(lambda: None, name="step", simulated=SimulatedTwin(time_s=3e-3, activity=0.7))
    return {"registry": ("stream_triad", None), "source": (source, {"tile_size_x": 2}), "callable": (fn, None)}


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
@pytest.mark.parametrize("kind", ["registry", "source", "callable"])
def test_every_kind_runs_through_every_protocol(kind, protocol):
    workload, config = _kinds()[kind]
    runner = SimulatedRunner(SimulatedGPU(seed=1))
    m = make_protocol(protocol, **FAST.get(protocol, {})).measure(runner, workload, config)
    row = m.row
    name = workload if isinstance(workload, str) else workload.name
    assert row[schema.KERNEL] == name and row[schema.PROTOCOL] == protocol
    if kind == "source":
        assert row[schema.CONFIG] == "block_size_x=16,tile_size_x=2" and row["tile_size_x"] == 2
        assert row[schema.TIME_S] == pytest.approx(4e-3, rel=1e-6)
    if kind == "callable":
        assert row[schema.CONFIG] == "" and row[schema.TIME_S] == pytest.approx(3e-3, rel=1e-6)
    assert np.isfinite(row[schema.ENERGY_J]) and row[schema.ENERGY_J] > 0
    assert np.isfinite(row[schema.REFERENCE_ENERGY_J])
    if protocol in ("good_practice", "counter", "steady_state"):  # the trustworthy ones
        assert row[schema.ENERGY_J] == pytest.approx(row[schema.REFERENCE_ENERGY_J], rel=0.06)


def _spec(tmp_path, extra_workloads=()):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "mm.cu").write_text(EXAMPLE.read_text())
    (tmp_path / "steps.py").write_text("def step():\n    pass\n")
    spec = {
        "protocol": "good_practice", "protocol_params": FAST["good_practice"], "repeats": 1,
        "device": "simulated",
        "workloads": [
            {"source": "kernels/mm.cu", "kernel": "matmul_kernel", "configs": "all",
             "tune_params": {"block_size_x": [16, 32, 64], "tile_size_x": [1, 2, 4]},
             "restrictions": ["block_size_x * tile_size_x <= 128"],
             "problem_size": [4096, 4096], "grid_div_x": ["block_size_x", "tile_size_x"], "grid_div_y": [],
             "arguments": [{"zeros": "float32", "size": 64}, {"random": "float32", "size": 64},
                           {"scalar": 4096, "dtype": "int32"}],
             "simulated": {"time_s": "4e-3 / tile_size_x", "activity": "0.6 + 0.1 * tile_size_x"}},
            {"callable": "steps.py:step", "simulated": {"time_s": 2e-3}},
            *extra_workloads,
        ],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    return path


def test_campaign_of_a_source_and_a_callable_from_a_spec_file(tmp_path):
    spec = load_spec(_spec(tmp_path))
    runs = plan(spec)
    assert len(runs) == 8 + 1  # 8 configs pass the restriction, plus the callable
    table = run_campaign(spec, tmp_path / "out", progress=False)
    assert sorted(table[schema.KERNEL].unique()) == ["matmul_kernel", "step"]
    mm = table[table[schema.KERNEL] == "matmul_kernel"]
    assert set(mm["tile_size_x"]) == {1, 2, 4}
    err = (table[schema.ENERGY_J] - table[schema.REFERENCE_ENERGY_J]) / table[schema.REFERENCE_ENERGY_J]
    assert err.abs().max() < 0.06


def test_campaign_stops_at_a_bad_workload_and_keeps_the_finished_rows(tmp_path):
    spec = load_spec(_spec(tmp_path, [{"callable": "steps.py:step", "name": "no_twin"}]))
    with pytest.raises(ValueError, match="callable workload 'no_twin' has no simulated twin"):
        run_campaign(spec, tmp_path / "out", progress=False)
    assert len(load_runs(tmp_path / "out")) == 9  # every row before it is kept
    (tmp_path / "b").mkdir()
    bad = [{"source": "kernels/mm.cu", "kernel": "mm", "name": "x"}]
    with pytest.raises(ValueError, match="no __global__ function 'mm'"):
        load_spec(_spec(tmp_path / "b", bad))  # before anything runs


@pytest.mark.parametrize("entry, match", [
    ({"source": "kernels/mm.cu"}, "needs 'kernel'"),
    ({"callable": "steps.py:step", "tune": 1}, r"unknown key\(s\) \['tune'\]"),
    ({"callable": "steps.py:step", "source": "x.cu"}, "exactly one of"),
    ({"source": "kernels/mm.cu", "kernel": "matmul_kernel", "arguments": [{"random": "float32"}]},
     "needs a 'size'"),
    ({"source": "kernels/mm.cu", "kernel": "matmul_kernel", "tune_params": {"block_size_x": [16]},
      "restrictions": ["block_size_x > 16"], "configs": "all"}, "reject all 1 configurations"),
])
def test_bad_workload_entries_are_named(tmp_path, entry, match):
    with pytest.raises(ValueError, match=match):
        plan(load_spec(_spec(tmp_path, [{"name": "extra", **entry}])))


def test_the_example_toml_campaign_plans_the_whole_search_space():
    spec = load_spec(kernels_dir() / "examples" / "matmul_campaign.toml")
    runs = plan(spec)
    assert len(runs) == 36 and {r.kernel for r in runs} == {"matmul_kernel"}
    w = spec.workload("matmul_kernel")
    times = [w.simulated(r.config).time_s(1980, 2619) for r in runs]
    assert max(times) > 3 * min(times)  # the twin's time follows the tiling
