"""benchmarks/gpu_raw_recording.py --ladder without a GPU: the alternation's rows, on a stand-in for CuPy.

The stand-in's events read the host clock and a "launch" sleeps, so the loop runs as on a GPU whose
launches are synchronous; what is checked is the bookkeeping the real run depends on.
"""

from __future__ import annotations

import time
from collections import Counter
from types import SimpleNamespace

import pytest

from benchmark_scripts import load_benchmark


@pytest.fixture(scope="module")
def raw():
    return load_benchmark("gpu_raw_recording")


class _Event:
    def __init__(self):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


_CUDA = SimpleNamespace(Event=_Event, get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3,
                        runtime=SimpleNamespace(deviceSynchronize=lambda: None))


def _recorder(raw):
    rec = object.__new__(raw.Recorder)  # no GPU: the probe kernel is replaced below
    rec.cp, rec.t0 = SimpleNamespace(cuda=_CUDA), time.perf_counter()
    rec.probe_meta, rec.launch_rows, rec.phase_rows, rec.n_probes = [], [], [], 0

    def probe(workload, batch):
        rec.probe_meta.append((workload, batch))
        rec.n_probes += 1

    rec._launch_probe = probe
    return rec


def test_the_ladder_alternates_both_loads_with_a_probe_before_every_batch(raw):
    from powermodels.natural_dvfs.natural_recording import Ladder

    rec = _recorder(raw)
    work = {"w": (lambda: time.sleep(3e-4), 2), "p": (lambda: time.sleep(5e-4), 1)}
    raw._ladder(Ladder(shares=(0.5,), hold_s=0.06, tail_s=0.02, cycle_s=0.004), rec, work, ["w"], "p", 1.0)
    kinds = [(r[0], r[1], r[3]) for r in rec.phase_rows]
    assert kinds == [("ladder", "w", "ladder"), ("ladder", "w", "burst")]
    rows = rec.launch_rows  # (workload, phase, repeat, batch, start, end, launches, time per launch)
    names = Counter(r[0] for r in rows)
    assert set(names) == {"w", "p"} and names["p"] >= 5
    keys = [(r[0], r[1], r[2], r[3]) for r in rows]
    assert len(keys) == len(set(keys))  # the tail goes on numbering the workload's batches
    t0, t1 = rec.phase_rows[0][4], rec.phase_rows[0][5]
    step = sorted((r for r in rows if t0 <= r[4] and r[5] <= t1), key=lambda r: r[4])
    switches = sum(a[0] != b[0] for a, b in zip(step, step[1:]))
    assert switches >= 8  # the loads take turns, cycle after cycle
    assert Counter(m[0] for m in rec.probe_meta) == names  # one probe before every batch


def test_the_lead_idle_is_the_first_phase_and_its_length_is_an_option(raw):
    """Fails before: the lead idle was a fixed 5 s, too short to see a warm board cool
    (GPU-84fc649a's raw recording read 54 °C throughout it and was replayed 10–13 °C hot)."""
    rec = _recorder(raw)
    raw.lead_idle(rec, 0.05)
    (row,) = rec.phase_rows
    assert row[:4] == ("natural", "-", -1, "idle")
    assert 0.04 < row[5] - row[4] < 0.5
    with pytest.raises(SystemExit):
        raw.main(["--out", "/tmp/unused", "--lead-idle", "1"])


def test_capstarts_repeat_the_capped_load_from_idle_and_end_on_an_idle(raw):
    """The capstarts part: N × [idle, the capped load], each start its own ``series`` entry (repeat k)."""
    rec = _recorder(raw)
    work = {"torch_bf16_matmul_8192": (lambda: time.sleep(3e-4), 1)}
    args = SimpleNamespace(cap_starts=3, cap_idle=0.02, cap_series=0.03, parts=["capstarts"])
    raw._cap_starts(args, rec, work, "torch_bf16_matmul_8192", 1.0)
    kinds = [(r[0], r[1], r[2], r[3]) for r in rec.phase_rows]
    assert kinds == [("capstart", "-", 0, "idle"), ("capstart", "torch_bf16_matmul_8192", 0, "series"),
                     ("capstart", "-", 1, "idle"), ("capstart", "torch_bf16_matmul_8192", 1, "series"),
                     ("capstart", "-", 2, "idle"), ("capstart", "torch_bf16_matmul_8192", 2, "series"),
                     ("capstart", "-", 3, "idle")]
    keys = [(r[0], r[1], r[2], r[3]) for r in rec.launch_rows]
    assert len(keys) == len(set(keys)) and {k[2] for k in keys} == {0, 1, 2}
    for (_, _, _, _, a, b), k in zip(rec.phase_rows[1::2], range(3)):  # every launch inside its own start
        inside = [r for r in rec.launch_rows if r[2] == k]
        assert inside and all(a - 1e-3 <= r[4] and r[5] <= b + 1e-3 for r in inside)


def test_capstarts_refuse_a_series_too_short_to_settle(raw):
    with pytest.raises(SystemExit):
        raw.main(["--out", "/tmp/unused", "--parts", "capstarts", "--cap-series", "5"])


def test_capstarts_cycle_several_rests_over_the_starts(raw):
    """``--cap-idle 15 60``: short and long rests alternate, each start's rest its own idle phase."""
    rec = _recorder(raw)
    work = {"torch_bf16_matmul_8192": (lambda: time.sleep(3e-4), 1)}
    args = SimpleNamespace(cap_starts=4, cap_idle=[0.01, 0.06], cap_series=0.02, parts=["capstarts"])
    raw._cap_starts(args, rec, work, "torch_bf16_matmul_8192", 1.0)
    rests = [r[5] - r[4] for r in rec.phase_rows if r[3] == "idle"]
    assert len(rests) == 5
    assert all(r < 0.04 for r in rests[0:4:2]) and all(r > 0.055 for r in rests[1:4:2])
    assert rests[4] > 0.055  # the last idle is the longest rest
    with pytest.raises(SystemExit):
        raw.main(["--out", "/tmp/unused", "--parts", "capstarts", "--cap-idle", "15", "2"])


def test_the_nvml_handle_is_the_board_cuda_runs_on(raw):
    """With ``CUDA_VISIBLE_DEVICES=1`` CUDA's device 0 is NVML's device 1: matched by PCI bus id."""
    buses = ["00000000:19:00.0", "00000000:3B:00.0"]
    nv = SimpleNamespace(
        nvmlDeviceGetCount=lambda: 2, nvmlDeviceGetHandleByIndex=lambda i: f"handle{i}",
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=buses[int(h[-1])].encode()))

    def cupy_on(bus):
        return SimpleNamespace(cuda=SimpleNamespace(Device=lambda i: SimpleNamespace(pci_bus_id=bus)))

    assert raw.nvml_handle_of_cuda_device(nv, cupy_on("0000:3B:00.0")) == "handle1"
    assert raw.nvml_handle_of_cuda_device(nv, cupy_on("0000:19:00.0")) == "handle0"
    with pytest.raises(RuntimeError, match="PCI bus id"):
        raw.nvml_handle_of_cuda_device(nv, cupy_on("0000:5D:00.0"))


def test_the_memory_temperature_is_read_by_its_value_type_and_nan_when_unsupported(raw):
    import math

    pynvml = pytest.importorskip("pynvml")

    def nvml_answering(ret, value_type, **member):
        value = pynvml.c_nvmlValue_t()
        for name, number in member.items():
            setattr(value, name, number)
        field = SimpleNamespace(nvmlReturn=ret, valueType=value_type, value=value)
        return SimpleNamespace(NVML_FI_DEV_MEMORY_TEMP=pynvml.NVML_FI_DEV_MEMORY_TEMP, NVML_SUCCESS=0,
                               nvmlDeviceGetFieldValues=lambda h, ids: [field])

    assert raw.memory_temperature_c(nvml_answering(0, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, uiVal=47), "h") == 47.0
    assert raw.memory_temperature_c(nvml_answering(0, pynvml.NVML_VALUE_TYPE_SIGNED_INT, siVal=51), "h") == 51.0
    assert raw.memory_temperature_c(nvml_answering(0, pynvml.NVML_VALUE_TYPE_DOUBLE, dVal=48.5), "h") == 48.5
    assert math.isnan(raw.memory_temperature_c(nvml_answering(3, pynvml.NVML_VALUE_TYPE_UNSIGNED_INT, uiVal=47), "h"))


def test_the_board_part_number_is_recorded_and_empty_when_not_reported(raw):
    def failing(handle):
        raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")

    assert raw.board_part_number(SimpleNamespace(nvmlDeviceGetBoardPartNumber=lambda h: "692-2G520-0282-001"),
                                 "h") == "692-2G520-0282-001"
    assert raw.board_part_number(SimpleNamespace(nvmlDeviceGetBoardPartNumber=lambda h: b"692-2G520-0282-000"),
                                 "h") == "692-2G520-0282-000"
    assert raw.board_part_number(SimpleNamespace(nvmlDeviceGetBoardPartNumber=failing), "h") == ""
    assert raw.board_part_number(SimpleNamespace(), "h") == ""  # an old pynvml without the call


@pytest.mark.parametrize("probed", [False, True])
def test_the_natural_pressure_is_timed_and_probed_only_when_asked(raw, probed):
    """--probe-pressure: the pressure's launches become launch rows with a probe before each batch, their
    (workload, phase, repeat, batch) unique although every workload's cycles reuse the repeat numbers."""
    import numpy as np

    rec = _recorder(raw)
    rec.busy = lambda fn, seconds: (time.perf_counter(), time.perf_counter() + seconds)  # untimed: no rows
    work = {"torch_bf16_matmul_8192": (lambda: time.sleep(3e-4), 1), "a": (lambda: time.sleep(2e-4), 1),
            "b": (lambda: time.sleep(2e-4), 1)}
    args = SimpleNamespace(cycles=2, probe_pressure=probed)
    raw._natural(args, rec, work, np.random.default_rng(0), 0.01, ["a", "b"])
    kinds = Counter((r[1], r[3]) for r in rec.phase_rows)
    assert kinds == {("torch_bf16_matmul_8192", "pressure"): 8, ("a", "burst"): 4, ("b", "burst"): 4}
    pressure_rows = [r for r in rec.launch_rows if r[0] == "torch_bf16_matmul_8192"]
    keys = [(r[0], r[1], r[2], r[3]) for r in rec.launch_rows]
    assert len(keys) == len(set(keys))
    if not probed:
        assert not pressure_rows and all(w != "torch_bf16_matmul_8192" for w, _ in rec.probe_meta)
        return
    assert pressure_rows and {r[1] for r in pressure_rows} == {"natural"}
    assert sorted(r[3] for r in pressure_rows) == list(range(len(pressure_rows)))  # numbered on across the part
    probed_batches = {b for w, b in rec.probe_meta if w == "torch_bf16_matmul_8192"}
    assert probed_batches == {r[3] for r in pressure_rows}
    entries = [(rep, a, b) for _, _, rep, kind, a, b in rec.phase_rows if kind == "pressure"]
    for r in pressure_rows:  # every pressure launch inside a pressure entry of its own repeat
        assert any(r[2] == rep and a - 1e-3 <= r[4] and r[5] <= b + 1e-3 for rep, a, b in entries)
