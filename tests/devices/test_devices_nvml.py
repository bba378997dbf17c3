"""NVMLDevice on the fake pynvml: readings, units, unsupported reads, setters, open_device."""

from __future__ import annotations

import math
import sys
import types

import pytest

from powermodels.devices import open_device
from powermodels.devices.base import Reading, Settings
from powermodels.devices.nvml import NVMLDevice, nvml_gpu_count

# ------------------------------------------------------------------ readings


def test_read_converts_nvml_units(nvml_device, fake_nvml):
    reading = nvml_device.read()
    assert isinstance(reading, Reading)
    assert reading.power_instant_w == pytest.approx(71.25)
    assert reading.power_average_w == pytest.approx(70.5)
    assert reading.power_usage_w == pytest.approx(71.0)
    assert reading.temperature_c == 31.0
    assert reading.sm_clock_mhz == 1980.0
    assert reading.mem_clock_mhz == 2619.0
    assert reading.throttle_reasons == 0
    fake_nvml.gpu.throttle_reasons = fake_nvml.nvmlClocksEventReasonSwPowerCap
    assert nvml_device.read().throttle_reasons == 0x4


def test_read_uses_one_field_call_for_both_power_fields(nvml_device, fake_nvml):
    fake_nvml.calls.clear()
    nvml_device.read()
    field_calls = [args for name, args in fake_nvml.calls if name == "nvmlDeviceGetFieldValues"]
    assert len(field_calls) == 1
    assert list(field_calls[0][1]) == [
        fake_nvml.NVML_FI_DEV_POWER_INSTANT,
        fake_nvml.NVML_FI_DEV_POWER_AVERAGE,
    ]
    # the slow energy counter is not part of read()
    assert fake_nvml.count("nvmlDeviceGetTotalEnergyConsumption") == 0


def test_now_is_monotonic_and_stamps_readings(nvml_device):
    t0 = nvml_device.now()
    reading = nvml_device.read()
    t1 = nvml_device.now()
    assert t0 <= reading.t_s <= t1


def test_energy_counter_in_joules(nvml_device, fake_nvml):
    assert nvml_device.read_energy_j() == pytest.approx(123_456.789)
    fake_nvml.gpu.energy_mj += 2_500
    assert nvml_device.read_energy_j() == pytest.approx(123_459.289)


def test_info_supported_clocks_and_limits(nvml_device):
    info = nvml_device.info
    assert (info.name, info.kind, info.index, info.driver) == (
        "Fake H100 80GB HBM3",
        "nvml",
        0,
        "580.00.00",
    )
    assert info.uuid.startswith("GPU-")
    clocks = nvml_device.supported_clocks()
    assert list(clocks) == [2619.0, 1593.0]  # memory clocks, descending
    assert clocks[2619.0][0] == 1980.0 and clocks[2619.0][-1] == 345.0
    assert clocks[2619.0] == sorted(clocks[2619.0], reverse=True)
    assert nvml_device.power_limits_w() == (200.0, 700.0, 700.0)
    assert nvml_device.default_power_limit_w() == 700.0
    assert nvml_device.enforced_power_limit_w() == 700.0


def test_current_settings_reports_only_the_power_limit(nvml_device, fake_nvml):
    fake_nvml.gpu.power_limit_mw = 450_000
    fake_nvml.gpu.sm_locked = (1200, 1200)  # NVML cannot read this back
    assert nvml_device.current_settings() == Settings(None, None, 450.0)


# ----------------------------------------------------- unsupported and broken reads

READ_FUNCTIONS = {
    "nvmlDeviceGetPowerUsage": "power_usage_w",
    "nvmlDeviceGetTemperature": "temperature_c",
    "nvmlDeviceGetClockInfo": "sm_clock_mhz",
}


@pytest.mark.parametrize("function, attribute", sorted(READ_FUNCTIONS.items()))
def test_unsupported_read_is_nan_and_not_retried(nvml_device, fake_nvml, function, attribute):
    fake_nvml.unsupported(function)
    first = nvml_device.read()
    assert math.isnan(getattr(first, attribute))
    assert not math.isnan(first.power_instant_w)  # the rest still reads
    calls = fake_nvml.count(function)
    for _ in range(50):
        assert math.isnan(getattr(nvml_device.read(), attribute))
    assert fake_nvml.count(function) == calls  # remembered: not called again
    assert any(function in reason for reason in nvml_device.unavailable.values())


def test_unsupported_power_field_is_nan_per_field(nvml_device, fake_nvml):
    fake_nvml.unsupported_field(fake_nvml.NVML_FI_DEV_POWER_INSTANT)
    reading = nvml_device.read()
    assert math.isnan(reading.power_instant_w)
    assert reading.power_average_w == pytest.approx(70.5)
    assert "field_186" in nvml_device.unavailable


def test_field_values_call_unsupported_gives_nan_powers(nvml_device, fake_nvml):
    fake_nvml.unsupported("nvmlDeviceGetFieldValues")
    for _ in range(10):
        reading = nvml_device.read()
    assert math.isnan(reading.power_instant_w) and math.isnan(reading.power_average_w)
    assert reading.power_usage_w == pytest.approx(71.0)
    assert fake_nvml.count("nvmlDeviceGetFieldValues") == 1


def test_short_field_answer_is_nan_not_a_crash(nvml_device, fake_nvml, monkeypatch):
    full = fake_nvml.nvmlDeviceGetFieldValues
    monkeypatch.setattr(fake_nvml, "nvmlDeviceGetFieldValues", lambda h, ids: full(h, ids)[:1])
    reading = nvml_device.read()
    assert reading.power_instant_w == pytest.approx(71.25)
    assert math.isnan(reading.power_average_w)


def test_transient_error_is_nan_once_then_retried(nvml_device, fake_nvml):
    fake_nvml.fail_nth("nvmlDeviceGetPowerUsage", 1, fake_nvml.NVML_ERROR_TIMEOUT)
    assert math.isnan(nvml_device.read().power_usage_w)
    assert nvml_device.read().power_usage_w == pytest.approx(71.0)
    assert "power_usage" not in nvml_device.unavailable


def test_permanently_failing_reads_never_raise(nvml_device, fake_nvml):
    for function in (
        "nvmlDeviceGetFieldValues",
        "nvmlDeviceGetPowerUsage",
        "nvmlDeviceGetTemperature",
        "nvmlDeviceGetClockInfo",
        "nvmlDeviceGetCurrentClocksEventReasons",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetSupportedMemoryClocks",
        "nvmlDeviceGetPowerManagementLimitConstraints",
        "nvmlDeviceGetPowerManagementLimit",
    ):
        fake_nvml.fail_always(function, fake_nvml.NVML_ERROR_GPU_IS_LOST)
    reading = nvml_device.read()
    values = [v for k, v in reading.as_dict().items() if k not in ("t_s", "throttle_reasons")]
    assert all(math.isnan(v) for v in values)
    assert reading.throttle_reasons == 0
    assert math.isnan(nvml_device.read_energy_j())
    assert nvml_device.supported_clocks() == {}
    assert all(math.isnan(v) for v in nvml_device.power_limits_w())
    assert nvml_device.current_settings() == Settings(None, None, None)


def test_unsupported_energy_counter_is_nan(nvml_device, fake_nvml):
    fake_nvml.unsupported("nvmlDeviceGetTotalEnergyConsumption")
    assert math.isnan(nvml_device.read_energy_j())
    assert math.isnan(nvml_device.read_energy_j())
    assert fake_nvml.count("nvmlDeviceGetTotalEnergyConsumption") == 1


def test_throttle_reasons_fall_back_to_pre_r535_name(nvml_device, fake_nvml):
    fake_nvml.remove("nvmlDeviceGetCurrentClocksEventReasons")  # old nvidia-ml-py
    fake_nvml.gpu.throttle_reasons = 0x4
    assert nvml_device.read().throttle_reasons == 0x4
    assert nvml_device.read().throttle_reasons == 0x4
    assert fake_nvml.count("nvmlDeviceGetCurrentClocksThrottleReasons") == 2


def test_throttle_reasons_fall_back_when_driver_lacks_function(nvml_device, fake_nvml):
    fake_nvml.fail_always(
        "nvmlDeviceGetCurrentClocksEventReasons", fake_nvml.NVML_ERROR_FUNCTION_NOT_FOUND
    )
    fake_nvml.gpu.throttle_reasons = 0x4
    assert nvml_device.read().throttle_reasons == 0x4
    assert fake_nvml.count("nvmlDeviceGetCurrentClocksEventReasons") == 1


def test_unsupported_name_and_uuid_still_open(fake_nvml):
    fake_nvml.unsupported("nvmlDeviceGetName")
    fake_nvml.unsupported("nvmlDeviceGetUUID")
    device = NVMLDevice(0)
    assert device.info.name == "NVIDIA GPU 0" and device.info.uuid == ""
    device.close()


# --------------------------------------------------------------- opening/closing


@pytest.mark.parametrize("index", [-1, 1.5, "0", True])
def test_bad_index_is_a_value_error(fake_nvml, index):
    with pytest.raises(ValueError, match="index"):
        NVMLDevice(index)
    assert fake_nvml.calls == []


def test_missing_gpu_index_raises_and_shuts_nvml_down(fake_nvml):
    with pytest.raises(fake_nvml.NVMLError):
        NVMLDevice(3)
    assert fake_nvml.gpu.initialised == 0


def test_close_shuts_down_once(fake_nvml):
    device = NVMLDevice(0)
    assert fake_nvml.gpu.initialised == 1
    device.close()
    device.close()
    assert fake_nvml.count("nvmlShutdown") == 1 and fake_nvml.gpu.initialised == 0
    assert math.isnan(device.read().power_usage_w)  # reading a closed device: NaN, no crash


# ------------------------------------------------------------------ nvml_gpu_count


def test_gpu_count_with_fake(fake_nvml):
    fake_nvml.gpu.count = 2
    assert nvml_gpu_count() == 2
    assert fake_nvml.gpu.initialised == 0  # init and shutdown paired


@pytest.mark.parametrize(
    "function, code",
    [
        ("nvmlInit", 9),  # driver not loaded
        ("nvmlInit", 12),  # libnvidia-ml.so.1 not found
        ("nvmlDeviceGetCount", 999),
    ],
)
def test_gpu_count_is_zero_when_nvml_fails(fake_nvml, function, code):
    fake_nvml.fail_always(function, code)
    assert nvml_gpu_count() == 0


def test_gpu_count_is_zero_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    assert nvml_gpu_count() == 0


def test_gpu_count_ignores_failing_shutdown(fake_nvml):
    fake_nvml.fail_always("nvmlShutdown")
    assert nvml_gpu_count() == 1


# --------------------------------------------------------------------- open_device


@pytest.fixture
def stub_simulated(monkeypatch):
    """A stand-in SimulatedGPU, so the auto choice is tested whatever simulated.py holds."""

    class StubSimulatedGPU:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    module = types.ModuleType("powermodels.devices.simulated")
    module.SimulatedGPU = StubSimulatedGPU
    monkeypatch.setitem(sys.modules, "powermodels.devices.simulated", module)
    return StubSimulatedGPU


def test_auto_picks_simulated_without_gpu_and_says_so(monkeypatch, capsys, stub_simulated):
    monkeypatch.setattr("powermodels.devices.nvml.nvml_gpu_count", lambda: 0)
    device = open_device("auto", seed=3)
    assert isinstance(device, stub_simulated) and device.kwargs == {"seed": 3}
    assert "simulated GPU" in capsys.readouterr().err


def test_auto_picks_simulated_when_driver_missing(fake_nvml, capsys, stub_simulated):
    fake_nvml.fail_always("nvmlInit", fake_nvml.NVML_ERROR_DRIVER_NOT_LOADED)
    assert isinstance(open_device("auto"), stub_simulated)
    assert "no NVIDIA GPU found" in capsys.readouterr().err


def test_auto_picks_nvml_with_gpu_and_says_so(fake_nvml, capsys, stub_simulated):
    device = open_device("auto")
    assert isinstance(device, NVMLDevice)
    assert "NVML" in capsys.readouterr().err
    device.close()


def test_auto_quiet_says_nothing(fake_nvml, capsys):
    open_device("auto", quiet=True).close()
    assert capsys.readouterr().err == ""


def test_auto_index_beyond_count_is_simulated(fake_nvml, stub_simulated):
    assert isinstance(open_device("auto", index=1, quiet=True), stub_simulated)


def test_auto_with_the_real_simulated_gpu(monkeypatch):
    simulated = pytest.importorskip("powermodels.devices.simulated")
    monkeypatch.setattr("powermodels.devices.nvml.nvml_gpu_count", lambda: 0)
    device = open_device("auto", quiet=True)
    assert isinstance(device, simulated.SimulatedGPU)
    assert device.info.kind == "simulated"


def test_open_device_rejects_unknown_kind():
    with pytest.raises(ValueError, match="kind"):
        open_device("cuda")
