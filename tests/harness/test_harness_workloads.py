"""Kernel registry: search spaces, restrictions, config ids, kernel sources, simulated twins."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from powermodels import workloads


def test_sgemm_search_space_has_at_least_100_valid_configs():
    space = workloads.search_space("sgemm")
    assert len(space) >= 100
    assert len(space) < len(workloads.search_space("sgemm", restrict=False))
    ids = [workloads.config_id("sgemm", c) for c in space]
    assert len(set(ids)) == len(ids)
    for c in space:
        assert c["MWG"] % c["MDIMC"] == 0 and c["NWG"] % c["NDIMC"] == 0
        assert 64 <= c["MDIMC"] * c["NDIMC"] <= 1024
        assert (c["MWG"] // c["MDIMC"]) * (c["NWG"] // c["NDIMC"]) <= 64
        assert c["SA"] or c["VWM"] == 1


@pytest.mark.parametrize(
    ("config", "broken"),
    [
        ({"MWG": 16, "MDIMC": 32}, "MWG % MDIMC"),
        ({"MDIMC": 8, "NDIMC": 4}, None),  # 4 is not in the space but the restriction is on threads
        ({"MWG": 128, "NWG": 128, "MDIMC": 8, "NDIMC": 8}, "thread tile"),
        ({"SA": 0, "VWM": 4}, "VWM == 1 when SA == 0"),
        ({"MDIMC": 32, "NDIMC": 32, "MWG": 32, "NWG": 32, "KWG": 32}, None),
    ],
)
def test_sgemm_restrictions_name_the_broken_rule(config, broken):
    reasons = workloads.invalid_reasons("sgemm", config)
    if broken is None:
        if config.get("NDIMC") == 4:
            assert any("threads" in r for r in reasons)
        else:
            assert reasons == []
    else:
        assert any(broken in r for r in reasons)
        with pytest.raises(ValueError, match="invalid"):
            workloads.validate_config("sgemm", config)


def test_config_id_roundtrip_and_errors():
    cid = workloads.config_id("fp32", {"nr_outer": 8})
    assert cid == "block_size_x=1024,nr_outer=8,nr_inner=1024"
    assert workloads.parse_config("fp32", cid) == {"block_size_x": 1024, "nr_outer": 8, "nr_inner": 1024}
    with pytest.raises(ValueError, match="unknown parameter"):
        workloads.parse_config("fp32", "bogus=1")
    with pytest.raises(ValueError, match="not an integer"):
        workloads.parse_config("fp32", "nr_outer=x")
    with pytest.raises(ValueError, match="unknown kernel"):
        workloads.get_kernel("nope")


def test_kernel_sources_are_found_in_the_tree():
    for name, spec in workloads.KERNELS.items():
        source = workloads.kernel_source(name)
        assert f"{spec.function}(" in source
        for param in spec.tune_params:
            assert param in source


def test_simulated_twins_scale_with_frequency_and_config():
    pytest.importorskip("powermodels.devices.simulated")
    fp32 = workloads.simulated_workload("fp32")
    short = workloads.simulated_workload("fp32", {"nr_outer": 8})
    assert short.time_s(1980, 2619) == pytest.approx(fp32.time_s(1980, 2619) / 8, rel=0.05)
    assert fp32.time_s(990, 2619) > 1.9 * fp32.time_s(1980, 2619)
    triad = workloads.simulated_workload("stream_triad")
    # memory-bound: the core clock barely matters, the memory clock does
    assert triad.time_s(990, 2619) == pytest.approx(triad.time_s(1980, 2619), rel=0.05)
    assert triad.time_s(1980, 1300) > 1.5 * triad.time_s(1980, 2619)
    times = {workloads.config_id("sgemm", c): workloads.simulated_workload("sgemm", c).time_s(1980, 2619)
             for c in workloads.search_space("sgemm")[:200]}
    assert max(times.values()) > 2 * min(times.values())  # configs differ, as on a real GPU


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("config", [
    {"MWG": 128, "NWG": 64, "KWG": 32, "MDIMC": 16, "NDIMC": 16, "VWM": 4, "VWN": 2, "SA": 1, "SB": 1},
    {"MWG": 16, "NWG": 32, "KWG": 16, "MDIMC": 8, "NDIMC": 8, "VWM": 1, "VWN": 1, "SA": 0, "SB": 0},
])
def test_sgemm_compiles_for_hopper(tmp_path, config):
    flags = [f"-D{k}={v}" for k, v in workloads.validate_config("sgemm", config).items()]
    src = workloads.kernels_dir() / "sgemm.cu"
    subprocess.run(["nvcc", "-arch=sm_90", "-cubin", *flags, "-o", str(tmp_path / "k.cubin"), str(src)],
                   check=True, capture_output=True)
