"""The simulated GPU's level state (GPUPhysics.core_level_*): a load's power level kept or drawn at each load start."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from powermodels.devices.physics import LEVEL_IDLE_GAP_S, GPUPhysics
from powermodels.devices.simulated import SimulatedGPU, SimulatedWorkload

GEMM = SimulatedWorkload("gemm", core_work=4.0, mem_work=1.0, t0_s=1e-4, activity=0.9, mem_activity=0.2)
FMA = SimulatedWorkload("fma", core_work=4.0, mem_work=0.1, t0_s=1e-4, activity=0.7, mem_activity=0.0)


def load_power(gpu: SimulatedGPU, workload: SimulatedWorkload, launches: int) -> float:
    """True mean power over the load's second half (its level applies from the next control step)."""
    times = gpu.run(workload, launches)
    start, end = float(times[len(times) // 2, 0]), float(times[-1, 1])
    return gpu.true_energy_j(start, end) / (end - start)


def bursts(physics: GPUPhysics, *, seed: int = 0, n: int = 40) -> np.ndarray:
    """``n`` gemm loads, each after an fma load, at the board's settled temperature: the gemm's powers."""
    gpu = SimulatedGPU(physics=physics, seed=seed)
    gpu.run(GEMM, 2000)  # warm the die so that leakage hardly moves between the loads compared
    out = []
    for _ in range(n):
        gpu.run(FMA, 20)
        out.append(load_power(gpu, GEMM, 60))
    return np.asarray(out)


def relative_levels(physics: GPUPhysics, n: int = 40) -> np.ndarray:
    """Each gemm load's power over the same load's on the board without the state, minus 1 (the die's drift out)."""
    return bursts(physics, n=n) / bursts(dataclasses.replace(physics, core_level_sd=0.0), n=n) - 1.0


def test_a_board_without_the_state_repeats_itself_and_draws_nothing():
    plain = GPUPhysics()
    assert plain.core_level_sd == 0.0 and plain.core_level_keep == 0.0
    p = bursts(plain, n=12)
    # only the die's slow warming separates the loads: a smooth drift, no load off its neighbours
    assert np.max(np.abs(np.diff(p, 2))) < 0.05
    # the default draws from no random stream, so the same seed gives exactly the same run as a state of sd 0
    assert np.array_equal(p, bursts(dataclasses.replace(plain, core_level_keep=0.7), n=12))


def test_drawn_levels_spread_the_loads_and_a_kept_level_holds():
    rel = relative_levels(dataclasses.replace(GPUPhysics(), core_level_sd=0.01, core_level_keep=0.0))
    # the core dynamic power moves by ~1 %, a load's total power by somewhat less (idle and memory stay)
    assert 0.003 < np.std(rel) < 0.012
    assert abs(np.corrcoef(rel[:-1], rel[1:])[0, 1]) < 0.45  # every load start draws anew
    kept = relative_levels(dataclasses.replace(GPUPhysics(), core_level_sd=0.01, core_level_keep=1.0))
    assert np.std(kept) < 2e-4  # never drawn (kept from the start, level 0): the board without the state
    # kept with probability 0.9 at each of a burst's two load starts: consecutive bursts mostly share their level
    rel = relative_levels(dataclasses.replace(GPUPhysics(), core_level_sd=0.01, core_level_keep=0.9), n=60)
    assert np.corrcoef(rel[:-1], rel[1:])[0, 1] > 0.4


def held_then_paused(physics: GPUPhysics) -> np.ndarray:
    """Five gemm batches run on without a pause, then eight after a pause of 1.5 × LEVEL_IDLE_GAP_S each."""
    gpu = SimulatedGPU(physics=physics, seed=3)
    gpu.run(GEMM, 2000)
    powers = [load_power(gpu, GEMM, 60) for _ in range(5)]
    for _ in range(8):
        gpu.idle(LEVEL_IDLE_GAP_S * 1.5)
        powers.append(load_power(gpu, GEMM, 60))
    return np.asarray(powers)


def test_a_load_holds_its_level_and_an_idle_starts_a_new_load():
    physics = dataclasses.replace(GPUPhysics(), core_level_sd=0.02, core_level_keep=0.0)
    rel = held_then_paused(physics) / held_then_paused(dataclasses.replace(physics, core_level_sd=0.0)) - 1.0
    # the same workload run on without a pause is one load: batch after batch keeps the level drawn at its start
    assert np.ptp(rel[:5]) < 1e-4 and abs(rel[0]) > 1e-3
    # after an idle of LEVEL_IDLE_GAP_S the same workload is a new load: its level is drawn anew each time
    assert np.std(rel[5:]) > 3e-3 and len(np.unique(np.round(rel[4:], 5))) == 9


def test_level_state_is_checked():
    with pytest.raises(ValueError, match="core_level_sd"):
        GPUPhysics(core_level_sd=-0.01)
    with pytest.raises(ValueError, match="core_level_keep must be <= 1"):
        GPUPhysics(core_level_keep=1.5)


# each workload's own level (SimulatedWorkload.level_*, session 30)

def own_bursts(gemm: SimulatedWorkload, fma: SimulatedWorkload = FMA, *, n: int = 30) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rounds of an fma load then a gemm load on a warm board: each load's power (fma, gemm)."""
    gpu = SimulatedGPU(physics=GPUPhysics(), seed=0)
    gpu.run(GEMM, 2000)
    fmas, gemms = [], []
    for _ in range(n):
        fmas.append(load_power(gpu, fma, 60))
        gemms.append(load_power(gpu, gemm, 60))
    return np.asarray(fmas), np.asarray(gemms)


def test_a_workload_level_moves_that_workload_only():
    plain_fma, plain_gemm = own_bursts(GEMM)
    fma, gemm = own_bursts(dataclasses.replace(GEMM, level_sd=0.01, level_keep=0.0))
    rel_gemm, rel_fma = gemm / plain_gemm - 1.0, fma / plain_fma - 1.0
    # the gemm's core dynamic power moves by ~1 % per load, its total power by somewhat less
    assert 0.003 < np.std(rel_gemm) < 0.012
    # the fma loop has no level: only the die, warmed a little differently by the gemm, moves it
    assert np.max(np.abs(rel_fma)) < 0.1 * np.std(rel_gemm)
    # kept at every load start after the first draw: one level for all the gemm's loads, not zero
    _, held = own_bursts(dataclasses.replace(GEMM, level_sd=0.01, level_keep=1.0))
    rel_held = held / plain_gemm - 1.0
    assert abs(np.mean(rel_held)) > 1e-3 and np.std(rel_held) < 0.05 * abs(np.mean(rel_held))


def test_workload_levels_at_zero_draw_nothing():
    # a workload without a level (the default) leaves the run exactly as before, whatever its keep
    assert np.array_equal(own_bursts(GEMM, n=6)[1], own_bursts(dataclasses.replace(GEMM, level_keep=0.7), n=6)[1])


def test_workload_level_is_checked():
    with pytest.raises(ValueError, match="level_sd"):
        dataclasses.replace(GEMM, level_sd=-0.01)
    with pytest.raises(ValueError, match="level_sd"):
        dataclasses.replace(GEMM, level_sd=0.8)
    with pytest.raises(ValueError, match="level_keep"):
        dataclasses.replace(GEMM, level_keep=1.2)
