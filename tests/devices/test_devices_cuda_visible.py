"""NVMLDevice opens the GPU CUDA runs on: CUDA_VISIBLE_DEVICES remaps indices, UUIDs, MIG; CuPy's bus id."""

from __future__ import annotations

import sys
import warnings
from types import SimpleNamespace

import pytest

from powermodels.devices.cuda_visible import parse_cuda_visible_devices
from powermodels.devices.nvml import NVMLDevice


@pytest.fixture
def four(fake_nvml, monkeypatch):
    """Four identical fake GPUs; no CUDA_VISIBLE_DEVICES, no CuPy."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    fake_nvml.add_gpus(3)
    return [fake_nvml.gpu, *(g for _, g in fake_nvml.extra_gpus)]


def _opened(index=0):
    dev = NVMLDevice(index)
    try:
        return dev.info
    finally:
        dev.close()


@pytest.mark.parametrize("value, entries", [
    (None, None), ("", []), ("-1", []), ("NoDevFiles", []), ("0", ["0"]),
    (" 2, 3 ", ["2", "3"]), ("1,,2", ["1"]), ("0,2,x,1", ["0", "2"]),
    ("GPU-ab12,MIG-cd34", ["GPU-ab12", "MIG-cd34"]),
])
def test_parse_follows_cudas_rules(value, entries):
    assert parse_cuda_visible_devices(value) == entries


def test_remapped_indices_open_the_listed_gpus_not_nvml_index(four, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    info = _opened(0)
    assert info.uuid == four[2].uuid != four[0].uuid      # NVML index 0 would be the wrong GPU
    assert info.extra["resolved_by"] == "CUDA_VISIBLE_DEVICES index"
    assert info.extra["pci_bus_id"] == four[2].pci_bus_id and info.extra["nvml_index"] == 2
    assert _opened(1).uuid == four[3].uuid
    with pytest.raises(ValueError, match="CUDA device 2 does not exist.*2 GPU"):
        NVMLDevice(2)


def test_uuid_entries_and_unique_prefixes(four, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{four[3].uuid},{four[1].uuid[:12]}")
    assert _opened(0).uuid == four[3].uuid
    info = _opened(1)
    assert info.uuid == four[1].uuid and info.extra["resolved_by"] == "CUDA_VISIBLE_DEVICES uuid"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-0000")  # every fake UUID starts so
    with pytest.raises(ValueError, match="matches 4 GPUs"):
        NVMLDevice(0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-ffffffff-none")
    with pytest.raises(ValueError, match="matches 0 GPUs"):
        NVMLDevice(0)


def test_mig_entries_open_the_parent_gpu_and_warn(four, monkeypatch):
    four[1].mig_uuids = ["MIG-11111111-2222-3333-4444-555555555555"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", four[1].mig_uuids[0])
    with pytest.warns(UserWarning, match="whole GPU"):
        info = _opened(0)
    assert info.uuid == four[1].uuid and info.extra["resolved_by"] == "CUDA_VISIBLE_DEVICES mig"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"MIG-{four[2].uuid}/1/0")  # pre-R470 form
    with pytest.warns(UserWarning, match="whole GPU"):
        assert _opened(0).uuid == four[2].uuid


def test_nothing_visible_is_a_clear_error(four, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    with pytest.raises(ValueError, match="makes 0 GPU"):
        NVMLDevice(0)


def test_unset_means_nvml_order_and_mixed_gpus_warn(four, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # identical GPUs: CUDA's order is NVML's
        info = _opened(1)
    assert info.uuid == four[1].uuid and info.extra["resolved_by"] == "nvml index"
    four[3].name = "Fake A100"
    with pytest.warns(UserWarning, match="CUDA_DEVICE_ORDER=PCI_BUS_ID"):
        _opened(1)
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _opened(1)


def test_cupy_pci_bus_id_wins_when_cupy_is_loaded(four, monkeypatch):
    # CuPy's format has a 4-digit domain; NVML's busId an 8-digit one
    buses = ["0000:" + g.pci_bus_id.split(":", 1)[1].lower() for g in four]
    order = [3, 0, 2, 1]  # what CUDA's enumeration happens to be
    runtime = SimpleNamespace(deviceGetPCIBusId=lambda i: buses[order[i]])
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=runtime)))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")  # would say NVML 0; CUDA knows better
    info = _opened(0)
    assert info.uuid == four[3].uuid and info.extra["resolved_by"] == "cupy pci bus id"
    assert _opened(3).uuid == four[1].uuid


def test_single_gpu_default_is_unchanged(fake_nvml, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    info = _opened(0)
    assert info.uuid == fake_nvml.gpu.uuid and info.extra["nvml_index"] == 0
