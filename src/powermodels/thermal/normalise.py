"""α, its uncertainty and its source, and a row's energy moved to a reference temperature.

At a fixed clock a GPU's power rises linearly with die temperature (leakage;
thesis §4.2.2): ``α = ΔP/ΔT`` in W/°C (eq. 4.6), and a power measured at
temperature ``T`` is moved to a reference ``T_ref`` with eq. 4.7,
``P_ref = P − α·(T − T_ref)``. The energy per launch follows as
``E_ref = P_ref · t`` with the measured time per launch ``t`` (at a fixed
clock the time does not depend on temperature).

α is a property of the board at a clock, not a constant: on three H100s the
same GEMM gave 0.29, 0.19 and 0.18 %/°C, and a slope learned over a 5 °C
warm-up came out 0.10 instead of 0.29 %/°C on a repeat
(``../shared/data/h100-2026-11-25-raw/``, README). So every α carries its
1-σ uncertainty, and the figure at the reference temperature carries
``t·|T − T_ref|·σ_α`` on top of the window's own uncertainty.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .. import schema

__all__ = [
    "ASSUMED_ALPHA_PER_C",
    "ASSUMED_ALPHA_UNCERTAINTY_PER_C",
    "CAPPED_PRIOR_PER_C",
    "CAPPED_PRIOR_UNCERTAINTY_PER_C",
    "FIXED_CLOCK",
    "POWER_CAPPED",
    "AlphaEstimate",
    "assumed_alpha",
    "check_reference_temperature",
    "normalise",
]

#: Regime of an α: the clock held still (leakage slope, eq. 4.6), or the power cap moved it.
FIXED_CLOCK = "fixed_clock"
POWER_CAPPED = "power_capped"

#: The assumption used when no α is known for a GPU (source ``assumed``): the relative slope
#: of power with temperature, 0.25 %/°C, 1 σ 0.12 %/°C. It spans what was measured at a fixed
#: clock on three H100 boards (0.18–0.32 %/°C, ``../shared/data`` READMEs); the wide
#: uncertainty is carried into ``energy_at_ref_uncertainty_j``, so an assumed α never looks
#: better than it is. Learning α on the GPU (:mod:`.learning`) replaces it.
ASSUMED_ALPHA_PER_C = 0.0025
ASSUMED_ALPHA_UNCERTAINTY_PER_C = 0.0012

#: The assumption for power-capped work (``alpha_regime = power_capped``, source ``assumed``): the
#: relative slope of *energy per launch* with temperature at the cap, 0.096 %/°C, 1 σ 0.038 %/°C.
#: At the cap the power is pinned (thesis eq. 4.6–4.7: leakage that grows takes its watts from the
#: dynamic power), so the controller lowers the clock and the energy changes through the time per
#: launch (eq. 4.5), not through the power: ``d ln E/dT = d ln P/dT + (d ln t/d ln f)(d ln f/dT)``,
#: far below the fixed-clock leakage slope. Fitted (:func:`~.alpha.capped_prior_from_slopes`) on
#: two real H100 boards' continuous capped bf16 GEMM 8192² after the controller settled —
#: GPU-0b4f1a7f 0.076 ± 0.051, GPU-620707cb 0.108 ± 0.039 %/°C — and checked on a third,
#: GPU-14ab84a0, 0.091 ± 0.083 %/°C (``benchmarks/capped_slope_real.py``). A ≤ 10 s warm-up does
#: not identify it (± 0.36–0.42 %/°C at 95 % on 0b4f1a7f and 620707cb; 14ab84a0 warmed < 3 °C), so a
#: learned capped α is shrunk toward it.
CAPPED_PRIOR_PER_C = 0.00096
CAPPED_PRIOR_UNCERTAINTY_PER_C = 0.00038


@dataclass(frozen=True)
class AlphaEstimate:
    """A leakage slope α with its uncertainty and where it came from.

    Attributes
    ----------
    alpha_w_per_c : float
        α, W/°C (thesis eq. 4.6): the slope of energy per launch with
        temperature expressed in W/°C at the fit's mean time per launch (at a
        fixed clock, the power slope), so eq. 4.7 moves power and energy alike.
    uncertainty_w_per_c : float
        1-σ uncertainty of α.
    source : str
        One of :data:`powermodels.schema.ALPHA_SOURCES`.
    regime : str
        :data:`FIXED_CLOCK` or :data:`POWER_CAPPED`.
    power_w : float
        Mean power of the data α was fitted on (for the relative slope); NaN if unknown.
    temperature_min_c, temperature_max_c : float
        Temperature range the fit saw (NaN if none).
    spans : int
        Energy-counter spans the fit used (0 if not fitted).
    sm_clock_mhz : float
        Mean SM clock of the fit's data (NaN if unknown).
    reference_temperature_c : float
        The reference temperature stored with a learned α (NaN if none): the
        middle of the fitted range, so later rows of the same workload share
        one reference without the caller naming one.
    detail : str
        One line saying how α was obtained.
    pooled : int
        How many workloads' α were pooled into this one (0: fitted on its own data).
    """

    alpha_w_per_c: float
    uncertainty_w_per_c: float
    source: str
    regime: str = FIXED_CLOCK
    power_w: float = math.nan
    temperature_min_c: float = math.nan
    temperature_max_c: float = math.nan
    spans: int = 0
    sm_clock_mhz: float = math.nan
    reference_temperature_c: float = math.nan
    detail: str = ""
    pooled: int = 0

    def __post_init__(self):
        if self.source not in schema.ALPHA_SOURCES:
            raise ValueError(f"AlphaEstimate: source must be one of {schema.ALPHA_SOURCES}, got {self.source!r}")
        if (self.source == "pooled") != (self.pooled > 0):
            raise ValueError(f"AlphaEstimate: source 'pooled' goes with pooled >= 1 (the workloads pooled), got "
                             f"source {self.source!r} with pooled={self.pooled!r}")
        if self.regime not in (FIXED_CLOCK, POWER_CAPPED):
            raise ValueError(f"AlphaEstimate: regime must be {FIXED_CLOCK!r} or {POWER_CAPPED!r}, "
                             f"got {self.regime!r}")
        if not math.isfinite(self.alpha_w_per_c):
            raise ValueError(f"AlphaEstimate: alpha_w_per_c must be finite, got {self.alpha_w_per_c!r}")
        if not (self.uncertainty_w_per_c >= 0):
            raise ValueError("AlphaEstimate: uncertainty_w_per_c must be >= 0, got "
                             f"{self.uncertainty_w_per_c!r}")

    @property
    def relative_per_c(self) -> float:
        """α as a share of the fit's mean power per °C (``0.0025`` = 0.25 %/°C); NaN if unknown."""
        return self.alpha_w_per_c / self.power_w if self.power_w > 0 else math.nan

    @property
    def temperature_range_c(self) -> float:
        """Width of the fitted temperature range, °C (NaN if not fitted)."""
        return self.temperature_max_c - self.temperature_min_c

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> AlphaEstimate:
        """The estimate :meth:`as_dict` wrote (unknown keys are refused by the constructor).

        Entries written before ``pooled`` was a source (session 5's H100 caches) said ``learned``
        for a pool (``pooled`` ≥ 1); they read back as ``pooled``, what they are.
        """
        data = dict(data)
        if data.get("source") == "learned" and int(data.get("pooled", 0) or 0) > 0:
            data["source"] = "pooled"
        return cls(**data)


def assumed_alpha(power_w: float, regime: str = FIXED_CLOCK) -> AlphaEstimate:
    """The package's assumption for a GPU whose α is unknown, at a measured power ``power_w``.

    At a fixed clock :data:`ASSUMED_ALPHA_PER_C` of the power per °C with a 1-σ of
    :data:`ASSUMED_ALPHA_UNCERTAINTY_PER_C` (the leakage slope); under the power cap
    (``regime`` :data:`POWER_CAPPED`) :data:`CAPPED_PRIOR_PER_C` ± :data:`CAPPED_PRIOR_UNCERTAINTY_PER_C`,
    the slope of energy per launch at the cap (the clock, not the power, follows the temperature).
    The row's ``alpha_source`` says ``assumed`` and ``alpha_regime`` which of the two.
    """
    p = float(power_w)
    if not (math.isfinite(p) and p > 0):
        raise ValueError(f"assumed_alpha: power_w must be finite and > 0, got {power_w!r}")
    if regime == POWER_CAPPED:
        return AlphaEstimate(CAPPED_PRIOR_PER_C * p, CAPPED_PRIOR_UNCERTAINTY_PER_C * p, "assumed",
                             regime=POWER_CAPPED, power_w=p,
                             detail=f"assumed {100 * CAPPED_PRIOR_PER_C:.3f} ± {100 * CAPPED_PRIOR_UNCERTAINTY_PER_C:.3f}"
                                    " %/°C of energy per launch at the power cap (three real H100 boards; "
                                    "no capped α known for this GPU)")
    return AlphaEstimate(ASSUMED_ALPHA_PER_C * p, ASSUMED_ALPHA_UNCERTAINTY_PER_C * p, "assumed", regime=regime,
                         power_w=p, detail=f"assumed {100 * ASSUMED_ALPHA_PER_C:.2f} ± "
                         f"{100 * ASSUMED_ALPHA_UNCERTAINTY_PER_C:.2f} %/°C of the measured power "
                         "(no α known for this GPU)")


def check_reference_temperature(value, name: str = "reference temperature") -> float:
    """``value`` as a float °C, or a one-line ValueError naming ``name`` and the value.

    Accepts numbers and numeric strings; a reference outside −40…150 °C is no die temperature.
    """
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a temperature in °C, got {value!r}") from None
    if not math.isfinite(t) or not -40.0 <= t <= 150.0:
        raise ValueError(f"{name}: {value!r} is not a die temperature (expected -40 to 150 °C)")
    return t


def normalise(*, energy_j: float, power_w: float, time_s: float, temperature_c: float,
              alpha: AlphaEstimate, reference_temperature_c: float,
              energy_uncertainty_j: float = math.nan) -> dict:
    """A row's power and energy per launch at ``reference_temperature_c`` (thesis eq. 4.7).

    Parameters
    ----------
    energy_j, power_w, time_s : float
        The row's energy per launch, mean power and time per launch.
    temperature_c : float
        The row's (window-mean) die temperature.
    alpha : AlphaEstimate
        The slope to use.
    reference_temperature_c : float
        ``T_ref``.
    energy_uncertainty_j : float, optional
        The window's own 1-σ energy uncertainty; NaN when unknown (then only
        α's share is reported).

    Returns
    -------
    dict
        Row fields (schema names): ``power_at_ref_w``, ``energy_at_ref_j``,
        ``energy_at_ref_uncertainty_j``, ``reference_temperature_c``,
        ``alpha_w_per_c``, ``alpha_uncertainty_w_per_c``, ``alpha_source``,
        ``alpha_regime``. Where the temperature is unknown the figures are NaN.
    """
    t_ref = check_reference_temperature(reference_temperature_c, "reference_temperature_c")
    fields = {
        schema.REFERENCE_TEMPERATURE_C: t_ref,
        schema.CORRECTION_ALPHA_W_PER_C: float(alpha.alpha_w_per_c),
        schema.ALPHA_UNCERTAINTY_W_PER_C: float(alpha.uncertainty_w_per_c),
        schema.ALPHA_SOURCE: alpha.source,
        schema.ALPHA_REGIME: alpha.regime,
    }
    dt = float(temperature_c) - t_ref
    t = float(time_s)
    if not (math.isfinite(dt) and math.isfinite(t) and math.isfinite(float(energy_j))):
        return {**fields, schema.POWER_AT_REF_W: math.nan, schema.ENERGY_AT_REF_J: math.nan,
                schema.ENERGY_AT_REF_UNCERTAINTY_J: math.nan}
    shift_w = float(alpha.alpha_w_per_c) * dt  # eq. 4.7
    energy_ref = float(energy_j) - shift_w * t
    power_ref = float(power_w) - shift_w
    from_alpha = t * abs(dt) * float(alpha.uncertainty_w_per_c)
    own = float(energy_uncertainty_j)
    own = own * energy_ref / float(energy_j) if math.isfinite(own) and float(energy_j) > 0 else 0.0
    return {**fields, schema.POWER_AT_REF_W: power_ref, schema.ENERGY_AT_REF_J: energy_ref,
            schema.ENERGY_AT_REF_UNCERTAINTY_J: math.hypot(own, from_alpha)}
