"""The twin's other checks: default protocol vs reference, sensor window, host stalls, slow clock recovery."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.devices.simulated import SimulatedGPU
from powermodels.devices.simulated_workload import SimulatedWorkload
from powermodels.twin import load_preset
from powermodels.twin.fit import fit_twin
from powermodels.twin.protocol import protocol_errors
from powermodels.twin.replay import host_stalls, replay
from powermodels.twin.sensor_check import sensor_window_check

from .test_twin import known_preset, schedule


def real_rows() -> pd.DataFrame:
    """Two rows shaped like ../shared/data/h100-2026-11-24/*/comparison.csv (values made up)."""
    return pd.DataFrame({
        "workload": ["fp32", "tiled"], "kind": ["callable", "source (campaign)"], "config": ["", "b=32"],
        "protocol": ["counter", "counter"], "time_s": [2.6e-3, 8e-3], "sm_clock_mhz": [1980.0, 1980.0],
        "temperature_c": [55.0, 52.0], "reference_power_w": [660.0, 480.0], "error_pct": [-0.2, -2.5],
        "wall_measure_s": [1.1, 1.3]})


def test_protocol_errors_replay_the_real_rows_on_the_twin():
    table = protocol_errors("h100-sxm", real_rows(), reference_s=3.0, skip_s=1.0)
    assert list(table["workload"]) == ["fp32", "tiled"]
    assert np.isfinite(table["twin_error_pct"]).all() and table["twin_error_pct"].abs().max() < 10
    assert (table["difference_points"] == table["twin_error_pct"] - table["real_error_pct"]).all()
    assert ((table["twin_activity"] > 0) & (table["twin_activity"] <= 1)).all()
    with pytest.raises(ValueError, match="lacks column.*reference_power_w"):
        protocol_errors("h100-sxm", real_rows().drop(columns="reference_power_w"))


def test_sensor_window_check_measures_the_twins_sensor():
    preset = load_preset("h100-sxm")
    real = pd.DataFrame({"window_ms": [17.0, 18.4, 22.0], "delay_ms": [6.0, 10.0, 13.0]})
    table = sensor_window_check(preset, real, seconds=4.0)
    assert list(table[schema.CHECK_REAL]) == [18.4, 10.0]
    # the twin's sensor, characterised like a GPU, shows the window and delay it was given
    assert table[schema.CHECK_TWIN].iloc[0] == pytest.approx(preset.sensor.instant_window_s * 1e3, abs=3.0)
    assert table[schema.CHECK_TWIN].iloc[1] == pytest.approx(preset.sensor.delay_s * 1e3, abs=3.0)
    with pytest.raises(ValueError, match="lacks column.*delay_ms"):
        sensor_window_check(preset, real.drop(columns="delay_ms"))


def test_memory_power_heats_the_die_by_its_share():
    ph = replace(known_preset().physics, cap_window_s=0.0)
    triad = SimulatedWorkload("triad", core_work=1e-3 * 1980, activity=0.2, mem_activity=0.9)
    temps = []
    for share in (1.0, 0.0):
        gpu = SimulatedGPU(physics=replace(ph, mem_heat_share=share), seed=0, ambient_c=30.0)
        gpu.run(triad, launches=3000)
        t = gpu.now()
        temps.append(gpu.read().temperature_c)
    # the memory's watts through each pole, as far as it has charged after t seconds
    watts = float(ph.power_terms(1980.0, 2619.0, 50.0)[2]) * 0.9
    rise = sum(r * (1.0 - np.exp(-t / tau)) for r, tau in ph.thermal_poles) * watts
    assert temps[0] - temps[1] == pytest.approx(rise, abs=1.0)  # readings are whole degrees


@pytest.fixture(scope="module")
def stalled():
    """A twin-made recording whose series has one 0.12 s host stall inside a batch."""
    rec = replay(schedule(), known_preset(), seed=1, poll_s=2e-3, start_temperature_c=40.0)
    la = rec.launches.copy()
    i = int(la.index[la[schema.RECORDING_PHASE] == "thermal"][200])
    la.loc[i, schema.END_S] += 0.12
    return replace(rec, launches=la), float(la.loc[i, schema.START_S])


def test_host_stalls_idle_the_replay(stalled):
    rec, at = stalled
    stalls = host_stalls(rec)
    assert stalls.shape == (1, 2) and stalls[0, 0] == at and stalls[0, 1] == pytest.approx(0.12, abs=0.005)
    again = replay(rec, known_preset(), seed=1, poll_s=2e-3)
    la = again.launches
    gaps = la[schema.START_S].to_numpy()[1:] - la[schema.END_S].to_numpy()[:-1]
    inside = (la[schema.START_S].to_numpy()[1:] > at) & (la[schema.START_S].to_numpy()[1:] < at + 0.2)
    assert gaps[inside].max() == pytest.approx(0.12, abs=0.01)  # the twin idled where the host stalled


def test_bursts_below_the_top_clock_are_fitted_at_their_real_clock(made_bursts):
    # on the H100 the clock stays a bin or two below the top for a while after a cap load, while NVML
    # reads the top: here the clock workload's launches say 1950 MHz from 0.1 s into its bursts
    rec = made_bursts
    fma = (rec.launches[schema.WORKLOAD] == "fma").to_numpy()
    la = rec.launches.copy()
    starts = np.sort(rec.phase_rows(kind="burst")[schema.T0_S].to_numpy(float))
    s = la[schema.START_S].to_numpy(float)
    since = s - starts[np.clip(np.searchsorted(starts, s, side="right") - 1, 0, None)]
    # every burst but the first (whose launches at the top clock give the clock workload's fastest time)
    late = fma & (since > 0.1) & (la[schema.REPEAT] > 0).to_numpy()
    la.loc[late, schema.TIME_S] *= 1980.0 / 1950.0
    slow = replace(rec, launches=la)
    kwargs = dict(clock_workload="fma", search_cap_gains=False,
                  workload_times={"bf16": {"t_fast_s": 1.5e-3, "clock_share": 1.0}})
    plain, corrected = fit_twin(rec, **kwargs), fit_twin(slow, **kwargs)
    assert "burst_clock" not in plain.fit
    assert corrected.fit["burst_clock"]["median_clock_mhz"] == pytest.approx(1950.0, abs=8.0)
    # the bursts drew their power at 1950 MHz: at the top clock they would have drawn more (~1.5 % of
    # the core's share), and the workload fitted on them with its series draws more too
    assert corrected.fit["burst_clock"]["median_added_w"] > 3.0
    p = [f.physics.power_w(1980.0, 2619.0, 50.0, f.workload("gemm").workload.activity,
                           f.workload("gemm").workload.mem_activity) for f in (plain, corrected)]
    assert p[1] > p[0]


@pytest.fixture(scope="module")
def made_bursts():
    return replay(schedule(), known_preset(), seed=3, poll_s=2e-3, start_temperature_c=40.0)


def test_h200_preset_loads_by_name_and_says_what_it_borrowed():
    p = load_preset("h200")
    # the instant window and delay: median of the 5 characterize runs on H200 GPU-c314a989 (session 9)
    assert p.physics.mem_clocks_mhz == (3201.0,) and p.sensor.instant_window_s == pytest.approx(0.01958, abs=1e-4)
    assert p.sensor.delay_s == pytest.approx(0.00928, abs=1e-4) and "c314a989" in p.provenance["identified"]["instant_window"]
    assert "leakage_per_c" in p.provenance["borrowed_from_h100_sxm"] and p.provenance["not_identified"]
    assert {"fp32_long", "stream_triad", "cublas_hgemm_8192"} <= set(p.workloads)
    # a heatsink pole (minutes) from another H200 board's idles between loads: its 63 s run alone saw none
    slow_r, slow_tau = max(p.physics.thermal_poles, key=lambda pole: pole[1])
    assert slow_tau > 60.0 and slow_r > 0.01
    assert p.fit["thermal"]["other_board"]["uuid"] == "GPU-0a8f0427"
    gpu = p.gpu(seed=0)
    gpu.run(p.workload("cublas_hgemm_8192").workload, launches=2000)  # the HGEMM holds the cap
    assert gpu.true_energy_j(gpu.now() - 1.0, gpu.now()) == pytest.approx(700.0, rel=0.03)
    gpu.idle(0.5)
    gpu.run(p.workload("fp32_long").workload, launches=1500)  # ~3.3 s at ~354 W
    assert gpu.true_energy_j(gpu.now() - 1.0, gpu.now()) == pytest.approx(354.0, rel=0.03)


def test_a_dead_beat_cap_holds_the_window_and_repeats_its_swings():
    # cap_repeat=1 with a large proportional gain: the window's energy is held at limit x window, so a
    # capped start from idle runs at the headroom, drops as the window fills, and its 1 s mean is flat
    ph = replace(known_preset().physics, cap_proportional=1000.0, cap_gain_per_s=0.0, cap_repeat=1.0)
    gpu = SimulatedGPU(physics=ph, seed=0, ambient_c=30.0)
    gpu.idle(2.0)
    t0 = gpu.now()
    gpu.run(SimulatedWorkload("bf16", core_work=1.5e-3 * 1980, activity=1.0, mem_activity=0.5), launches=5000)
    means = [gpu.true_energy_j(t0 + a, t0 + a + 1.0) for a in np.arange(1.0, 5.0, 0.25)]
    assert max(abs(m / ph.power_limit_w - 1.0) for m in means) < 0.015  # every 1 s window after the first
    first = gpu.true_energy_j(t0, t0 + 0.5) / 0.5
    assert first > ph.power_limit_w + 0.5 * ph.cap_headroom_w  # the start runs into the headroom


def test_compare_reads_a_float_throttle_column(made_bursts):
    # session 5's raw recording (GPU-620707cb) stores throttle_reasons as float64: the cap rows are
    # still found from its bits (twin-compare stopped with a TypeError on it before)
    from powermodels.twin.compare import compare_recordings

    rec = made_bursts
    assert (rec.trace[schema.THROTTLE_REASONS].astype(int) & 0x4).any()  # the bf16 pressure loads cap
    as_float = replace(rec, trace=rec.trace.astype({schema.THROTTLE_REASONS: "float64"}))
    as_int = compare_recordings(rec, rec)
    got = compare_recordings(as_float, rec)
    pd.testing.assert_frame_equal(got, as_int)


def test_a_workload_at_its_real_power_runs_uncapped_on_the_fitted_preset():
    # the fp32 GEMM's twin is written for the default simulated GPU (activity 0.95); on h100-sxm that
    # activity is ~1440 W and the cap holds it near 1440 MHz, where the real H100 runs it uncapped at
    # 1980 MHz, 609-666 W (session 5 thermal rows). At its real power it runs at the top clock.
    preset = load_preset("h100-sxm")
    written = SimulatedWorkload("fp32", core_work=2.7e-3 * 1980, activity=0.95, mem_activity=0.3)
    at = preset.at_power(written, 660.0, temperature_c=60.0)
    assert at.core_work == written.core_work and at.mem_activity == written.mem_activity
    assert float(preset.physics.power_w(1980, preset.physics.mem_clocks_mhz[0], 60.0, at.activity,
                                        at.mem_activity)) == pytest.approx(660.0)
    clocks = {}
    for name, w in (("written", written), ("at_power", at)):
        gpu = preset.gpu(seed=0)
        gpu.start_at_temperature(55.0)
        gpu.run(w, launches=1500)  # ~4 s back to back
        clocks[name] = gpu.read().sm_clock_mhz
    assert clocks["at_power"] >= 1970.0 and clocks["written"] < 1700.0
    with pytest.raises(ValueError, match="power_w"):
        preset.at_power(written, float("nan"))


def test_h200_raw_preset_is_fitted_to_the_raw_h200_recording():
    p = load_preset("h200-raw")
    fitted = p.provenance["fitted_from"][0]
    assert fitted["uuid"].startswith("GPU-168e6658") and fitted["recording"] == "datasets/h200-2026-11-27/raw_recording_168e6658"
    assert set(p.provenance["borrowed_from_h100_sxm"]) == {"cap_proportional", "cap_gain_per_s", "cap_repeat",
                                                            "cap_offset_w"}
    assert "held_out_folds" in p.provenance["validation"]
    assert set(p.workloads) == {"cupy_fma_loop", "cupy_fp32_matmul_4096", "cupy_triad_256MiB",
                                "torch_bf16_matmul_8192"}
    assert len(p.physics.thermal_poles) == 2 and p.physics.power_limit_w == 700.0
    gpu = p.gpu(seed=0)
    gpu.run(p.workload("torch_bf16_matmul_8192").workload, launches=3000)  # the bf16 GEMM holds the cap
    assert gpu.true_energy_j(gpu.now() - 1.0, gpu.now()) == pytest.approx(700.0, rel=0.03)
