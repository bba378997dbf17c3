"""Emulated NVML power sensor: update period, boxcar windows, gain/offset, quantisation.

What the built-in sensor reports, after Yang et al. §IV (Fig. 14):

* every ``update_period_s`` the firmware publishes new values, at a phase
  fixed at boot that the user cannot control (Yang §IV-C: "the starting point
  of the fluctuation is random");
* the *instant* reading (NVML field 186, ``power.draw.instant``) is the mean
  of the true power over the last ``instant_window_s`` before the update;
* the *average* reading (field 185, ``power.draw.average``) is the mean over
  the last ``average_window_s`` (1 s on Hopper, GA100 and Ada);
* ``nvmlDeviceGetPowerUsage`` returns one of the two: the average on Ampere
  (except GA100) and newer — Yang Fig. 14 ("for the H100 ... the average and
  normal option gives an average over 1 second") and the NVML reference
  ("On Ampere (except GA100) or newer GPUs, the API returns power averaged
  over 1 sec interval") — and the instant value on GA100 and older;
* the error is proportional (Yang §IV-B: a gain within about ±5 %, Fig. 9)
  plus an offset, and values are reported in whole milliwatts;
* the total-energy counter is the exact integral of the true power in whole
  millijoules, published on its own update period (~100 ms on the lent
  Hopper GPU, DESIGN.md). Reading it is slow (~4 ms a call), so a trace
  carries it only every ``energy_read_s``.

All functions here are vectorised over query times and work from ``energy``,
a callable returning the exact integral of the true power from 0 to ``t``
(negative for ``t < 0``, where the GPU is taken to have idled).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ._checks import positive_fields

__all__ = ["PRESETS", "SensorPreset", "boxcar_reading", "energy_counter_reading", "update_index"]


@dataclass(frozen=True)
class SensorPreset:
    """How one GPU generation's built-in sensor behaves (Yang Fig. 14).

    Parameters
    ----------
    name : str
        Preset name.
    update_period_s : float
        Time between published values (Yang §IV-A).
    instant_window_s : float
        Boxcar window of the instant reading (field 186), Yang §IV-C.
    average_window_s : float or None
        Boxcar window of the average reading (field 185); ``None`` when the
        generation has no separate average (it then reads NaN).
    usage : {"instant", "average"}
        Which reading ``nvmlDeviceGetPowerUsage`` returns.
    delay_s : float
        Extra lag between the end of the window and the update. Yang reports
        an instant rise (the value follows at the next update), hence 0.
    gain, offset_w : float
        Steady-state error: reported = gain · true + offset (Yang §IV-B).
    noise_w : float
        Standard deviation of per-update read-out noise (W).
    quantum_w : float
        Reporting resolution (NVML reports milliwatts).
    energy_period_s : float
        Update period of the total-energy counter.
    energy_quantum_j : float
        Resolution of the energy counter (millijoules).
    energy_read_s : float
        Cost of one energy-counter read: a trace carries the counter only
        every this many seconds (~4 ms on Hopper).
    energy_jitter_s : float, default=0
        Each counter update is published up to this much before or after its
        nominal instant (uniform, fixed per update; below half the period).
        The lent H200's updates stay within ~7 ms of a 100.000 ms grid over
        68 s (``datasets/h200/harness_fp32_steady_trace.parquet``).
    clock_period_s : float or None, default=None
        ``None``: the SM/memory clock and temperature readings show the
        present state. A period: they are sensors too, published on this
        grid (at the power readings' phase) and holding the state of
        ``clock_delay_s`` before each update. The H100's clock reading
        changes every ~100 ms in step with the power readings and lags the
        real clock, which recovers from a power cap in 10–20 ms steps
        (``../shared/data/h100-2026-11-25-raw/``).
    clock_delay_s : float, default=0
        Age of the state a clock/temperature reading shows at its update.
    """

    name: str
    update_period_s: float
    instant_window_s: float
    average_window_s: float | None = 1.0
    usage: str = "instant"
    delay_s: float = 0.0
    gain: float = 1.0
    offset_w: float = 0.0
    noise_w: float = 0.3
    quantum_w: float = 1e-3
    energy_period_s: float = 0.1
    energy_quantum_j: float = 1e-3
    energy_read_s: float = 4e-3
    energy_jitter_s: float = 0.0
    clock_period_s: float | None = None
    clock_delay_s: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"SensorPreset: name must be a non-empty string, got {self.name!r}")
        if self.usage not in ("instant", "average"):
            raise ValueError(f"SensorPreset: usage must be 'instant' or 'average', got {self.usage!r}")
        positive_fields(self, "SensorPreset",
                        skip=("name", "usage") + (("average_window_s",) if self.average_window_s is None else ())
                        + (("clock_period_s",) if self.clock_period_s is None else ()),
                        nonneg=("delay_s", "noise_w", "energy_jitter_s", "clock_delay_s"),
                        any_sign=("offset_w",))
        if self.energy_jitter_s >= self.energy_period_s / 2:
            raise ValueError("SensorPreset: energy_jitter_s must be below half of energy_period_s")
        if self.usage == "average" and self.average_window_s is None:
            raise ValueError("SensorPreset: usage='average' needs an average_window_s")


#: Presets after Yang Fig. 14 (update period / averaging window). Gains and
#: offsets are illustrative values inside the ±5 % spread Yang measured
#: (Fig. 9); they differ per preset so that code relying on an exact sensor fails.
PRESETS: dict[str, SensorPreset] = {
    # Volta/Pascal: instant rise, 20 ms update, 10 ms window (no separate 1 s average)
    "volta": SensorPreset("volta", 0.020, 0.010, None, "instant", gain=0.985, offset_w=1.0,
                          energy_period_s=0.020),
    # Turing: 100 ms update, 100 ms window (every joule is seen once)
    "turing": SensorPreset("turing", 0.100, 0.100, None, "instant", gain=1.02, offset_w=-1.5),
    # A100: instant option 25 ms of each 100 ms; power.draw (usage) is that instant value
    "ga100": SensorPreset("ga100", 0.100, 0.025, 1.0, "instant", gain=0.97, offset_w=2.0),
    # H100: instant 25 ms of each 100 ms; average and usage are the past 1 s
    "hopper": SensorPreset("hopper", 0.100, 0.025, 1.0, "average", gain=1.02, offset_w=-1.0),
    # Ada (driver ≥ 530): instant = 100 ms window, average and usage = 1 s
    "ada": SensorPreset("ada", 0.100, 0.100, 1.0, "average", gain=1.03, offset_w=0.5),
}


def update_index(t, period_s: float, phase_s: float) -> np.ndarray:
    """Index ``n`` of the last update at or before ``t`` (updates at ``phase + n·period``)."""
    t = np.asarray(t, dtype=float)
    # the small tolerance keeps a query exactly on an update time on that update
    return np.floor((t - phase_s) / period_s + 1e-9).astype(np.int64)


def boxcar_reading(
    n,
    energy: Callable[[np.ndarray], np.ndarray],
    preset: SensorPreset,
    window_s: float,
    phase_s: float,
    noise: np.ndarray,
) -> np.ndarray:
    """Reported power of update(s) ``n`` for a boxcar window of ``window_s``.

    Parameters
    ----------
    n : array of int
        Update indices (from :func:`update_index`).
    energy : callable
        Exact integral of the true power from 0 to ``t``.
    preset : SensorPreset
        Gain, offset, delay, quantisation.
    window_s : float
        Boxcar length.
    phase_s : float
        Time of update 0.
    noise : ndarray
        Standard-normal draws, one per element of ``n`` (scaled by ``noise_w``).
    """
    u = phase_s + np.asarray(n, dtype=float) * preset.update_period_s
    b = u - preset.delay_s
    mean = (energy(b) - energy(b - window_s)) / window_s
    value = preset.gain * mean + preset.offset_w + preset.noise_w * noise
    return np.maximum(np.round(value / preset.quantum_w) * preset.quantum_w, 0.0)


def energy_counter_reading(t, energy: Callable[[np.ndarray], np.ndarray], preset: SensorPreset,
                           phase_s: float, start_j: float) -> np.ndarray:
    """Total-energy counter at time(s) ``t``: exact integral, whole mJ, last update ≤ t."""
    t = np.asarray(t, dtype=float)
    n = update_index(t, preset.energy_period_s, phase_s)
    if preset.energy_jitter_s > 0:  # a jittered update may move across t either way
        def at(m):
            return phase_s + m * preset.energy_period_s + preset.energy_jitter_s * _unit_jitter(m, phase_s)

        n = np.where(at(n + 1) <= t, n + 1, n)
        n = np.where(at(n) > t, n - 1, n)
        u = at(n) - preset.delay_s
    else:
        u = phase_s + n * preset.energy_period_s - preset.delay_s
    q = preset.energy_quantum_j
    return start_j + np.floor((energy(u)) / q + 1e-9) * q


def _unit_jitter(n, salt: float) -> np.ndarray:
    """Deterministic uniform draw in [-1, 1) per update index (splitmix64 of the index and ``salt``)."""
    with np.errstate(over="ignore"):
        x = (np.asarray(n, dtype=np.int64).astype(np.uint64)
             + np.uint64(int(salt * 1e9) & 0xFFFFFFFF) * np.uint64(0x9E3779B97F4A7C15))
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x = x ^ (x >> np.uint64(31))
    return (x >> np.uint64(11)).astype(float) / 2.0**53 * 2.0 - 1.0
