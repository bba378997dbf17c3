"""α from a warm-up's energy-counter spans, by regime, with a physics check (thesis eq. 4.6).

α is fitted on what it is used to move: the spans' energy per launch against
their temperature, a least-squares slope in J/°C per launch, expressed in W/°C
at the fit's mean time per launch (``α = slope / t``), so eq. 4.7 applies
unchanged to power and energy.

**Fixed clock.** With the clock held, the time per launch is constant and this
is the power slope of eq. 4.6 (leakage). Fitting energy rather than power also
catches a clock that sags under an unchanged reading: on the raw H100
recording the FMA loop (time ∝ 1/clock) got 0.8 % slower over its warm-up
while NVML read 1980 MHz throughout, so its power rose 0.10 %/°C but its energy
per launch 0.31 %/°C. Physics check: α must be positive; a slope ≤ 0, or a
temperature range too narrow to tell (a GPU already hot barely warms), is
:class:`AlphaNotIdentified`.

**Power-capped** (the cap clock-event reason active, the clock moving): the
controller holds power near the limit and lowers the clock as the die warms;
this regime is modelled separately: the power is pinned, so the energy per launch moves through the
time per launch (eq. 4.5), 0.08–0.11 %/°C on three real H100 boards' capped bf16 GEMM
(:data:`~.normalise.CAPPED_PRIOR_PER_C`), fitted only on spans after the controller settled
(:func:`usable_spans`: its overshoot is not a temperature effect), and checked
against physics: at a fixed power, leakage that grows takes its watts from
the dynamic power, so the energy per launch cannot rise faster than the
fixed-clock leakage slope (at most :data:`CAPPED_MAX_PER_C`) nor fall
significantly; outside that the controller was still moving. A capped fit is shrunk toward the capped prior
(:func:`with_board_prior`), never toward the fixed-clock leakage slope.

The uncertainty is the least-squares standard error inflated for the spans'
autocorrelation (a warm-up's residuals are not independent: they follow the
slow heatsink and the controller), ``n_eff = n·(1 − ρ)/(1 + ρ)`` with ρ the
lag-1 autocorrelation of the residuals, plus the temperature reading's 1 °C
quantisation over the range (σ = 1/√12 °C at each end).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from .normalise import (
    ASSUMED_ALPHA_PER_C,
    ASSUMED_ALPHA_UNCERTAINTY_PER_C,
    FIXED_CLOCK,
    POWER_CAPPED,
    AlphaEstimate,
    assumed_alpha,
)
from .spans import power_capped, settled_spans

__all__ = ["CAPPED_MAX_PER_C", "AlphaAssumedWarning", "AlphaNotIdentified", "board_alpha", "board_prior", "capped_prior_from_slopes", "fit_alpha", "pooled_alpha",
           "regime_of", "shrunk_alpha", "slope_with_uncertainty", "usable_spans", "with_board_prior"]


class AlphaNotIdentified(ValueError):
    """The spans do not identify α (too few, too narrow a temperature range, or α ≤ 0 at a fixed clock)."""


def regime_of(spans: pd.DataFrame, *, clock_tolerance_mhz: float = 30.0) -> str:
    """:data:`POWER_CAPPED` when the cap reason dominates or the SM clock moved by more than
    ``clock_tolerance_mhz`` across the spans, else :data:`FIXED_CLOCK`."""
    clock = spans[schema.SM_CLOCK_MHZ].to_numpy(dtype=float) if len(spans) else np.empty(0)
    clock = clock[np.isfinite(clock)]
    moved = clock.size > 1 and float(clock.max() - clock.min()) > clock_tolerance_mhz
    return POWER_CAPPED if power_capped(spans) or moved else FIXED_CLOCK


def usable_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """The spans of a warm-up α is fitted on: all at a fixed clock; under the power cap, those
    after the controller settled (:func:`~.spans.settled_spans`: its overshoot is no temperature effect)."""
    if len(spans) and regime_of(spans) == POWER_CAPPED:
        return settled_spans(spans)
    return spans


def fit_alpha(spans: pd.DataFrame, *, min_spans: int = 5, min_range_c: float = 3.0,
              regime: str | None = None, source: str = "learned") -> AlphaEstimate:
    """α and its 1-σ uncertainty from ``spans`` (:func:`~.spans.counter_spans`).

    Parameters
    ----------
    spans : pandas.DataFrame
        Energy-counter spans of one workload at one configuration.
    min_spans : int, default=5
        Fewest spans with a temperature.
    min_range_c : float, default=3.0
        Narrowest temperature range (max − min of the spans' mean temperatures)
        that identifies a slope; the reading is whole °C.
    regime : str, optional
        Force :data:`FIXED_CLOCK` or :data:`POWER_CAPPED`; by default :func:`regime_of`.
    source : str, default="learned"
        Recorded on the estimate.

    Raises
    ------
    AlphaNotIdentified
        With the reason (count, range, or α ≤ 0 at a fixed clock).
    """
    missing = [c for c in (schema.POWER_W, schema.ENERGY_J, schema.TEMPERATURE_C, schema.TIME_S)
               if c not in spans.columns]
    if missing:
        raise ValueError(f"fit_alpha: span table lacks column(s) {missing}")
    temp = spans[schema.TEMPERATURE_C].to_numpy(dtype=float)
    ok = np.isfinite(temp)
    used = spans.loc[ok]
    temp = temp[ok]
    if len(used) < min_spans:
        raise AlphaNotIdentified(f"{len(used)} span(s) with a temperature, need {min_spans}")
    width = float(temp.max() - temp.min())
    if width < min_range_c:
        raise AlphaNotIdentified(f"the temperature moved {width:.1f} °C, need {min_range_c:g} °C to fit a slope "
                                 "(start from a cooler GPU, or pool α over this board's workloads)")
    regime = regime_of(used) if regime is None else regime
    time_s = float(used[schema.TIME_S].mean())
    power = used[schema.POWER_W].to_numpy(dtype=float)
    slope, stderr = slope_with_uncertainty(temp, used[schema.ENERGY_J].to_numpy(dtype=float))
    slope, stderr = slope / time_s, stderr / time_s  # J/°C per launch → W/°C at the mean time per launch
    if regime == FIXED_CLOCK and slope <= 0:
        raise AlphaNotIdentified(f"α = {slope:.3g} W/°C ≤ 0 at a fixed clock over {temp.min():.0f}–"
                                 f"{temp.max():.0f} °C: leakage cannot fall with temperature "
                                 "(the warm-up mixed states, or the clock moved)")
    if regime == POWER_CAPPED:
        _check_capped(slope, stderr, float(power.mean()), temp)
    mean_power = float(power.mean())
    clock = used[schema.SM_CLOCK_MHZ].to_numpy(dtype=float) if schema.SM_CLOCK_MHZ in used else np.empty(0)
    clock = clock[np.isfinite(clock)]
    return AlphaEstimate(
        alpha_w_per_c=float(slope), uncertainty_w_per_c=float(stderr), source=source, regime=regime,
        power_w=mean_power, temperature_min_c=float(temp.min()), temperature_max_c=float(temp.max()),
        spans=len(used), sm_clock_mhz=float(clock.mean()) if clock.size else math.nan,
        reference_temperature_c=float(round(0.5 * (temp.min() + temp.max()))),
        detail=f"{source} from {len(used)} counter spans over {temp.min():.1f}–{temp.max():.1f} °C "
               f"({100 * slope / mean_power:.3f} ± {100 * stderr / mean_power:.3f} %/°C, {regime})",
    )


#: Largest relative slope a power-capped workload's energy may have: the leakage slope at a fixed
#: clock bounds it (at a fixed power, leakage that grows takes its watts from the dynamic power, so
#: the clock, and 1/energy per launch, fall by less than the leakage share grows); taken as the
#: assumption's upper 3 σ, 0.25 + 3 × 0.12 %/°C.
CAPPED_MAX_PER_C = ASSUMED_ALPHA_PER_C + 3 * ASSUMED_ALPHA_UNCERTAINTY_PER_C


def _check_capped(slope: float, stderr: float, power_w: float, temp: np.ndarray) -> None:
    """Physics check of a power-capped α: within [−2σ, :data:`CAPPED_MAX_PER_C`] of the power."""
    rel, rel_err = slope / power_w, stderr / power_w
    if rel + 2 * rel_err < 0 or rel > CAPPED_MAX_PER_C:
        raise AlphaNotIdentified(
            f"α = {100 * rel:.2f} ± {100 * rel_err:.2f} %/°C under the power cap over {temp.min():.0f}–"
            f"{temp.max():.0f} °C: outside 0–{100 * CAPPED_MAX_PER_C:.2f} %/°C (a capped workload's energy "
            "cannot rise faster with temperature than leakage at a fixed clock; the controller was still moving)")


def slope_with_uncertainty(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of ``y`` on ``x`` (a temperature reading, whole °C) and its 1-σ uncertainty,
    inflated for the residuals' lag-1 autocorrelation and the readings' quantisation (module docstring)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    xc = x - x.mean()
    sxx = float(xc @ xc)
    slope = float(xc @ (y - y.mean())) / sxx
    resid = y - y.mean() - slope * xc
    n = x.size
    s2 = float(resid @ resid) / max(n - 2, 1)
    rho = 0.0
    if n > 3 and float(resid @ resid) > 0:
        rho = float(np.clip(resid[1:] @ resid[:-1] / float(resid @ resid), 0.0, 0.95))
    n_eff = max(n * (1 - rho) / (1 + rho), 3.0)
    stderr = math.sqrt(s2 / sxx * n / n_eff)
    # whole-°C readings: each end of the range is known to ±1/√12 °C
    quantisation = abs(slope) * math.sqrt(2.0 / 12.0) / float(x.max() - x.min())
    return slope, math.hypot(stderr, quantisation)


class AlphaAssumedWarning(UserWarning):
    """No α could be learned or pooled for this GPU: the package's assumption is used."""



def _mean_reference(temps) -> float:
    """The rounded mean of the known reference temperatures (NaN when none is known)."""
    known = [t for t in temps if math.isfinite(t)]
    return float(round(float(np.mean(known)))) if known else math.nan


def pooled_alpha(estimates, sm_clock_mhz: float, *, clock_tolerance_mhz: float = 30.0) -> AlphaEstimate | None:
    """Inverse-variance mean of the learned fixed-clock α in ``estimates`` near ``sm_clock_mhz``; None if none.

    Only α fitted on a workload's own warm-up count (not an earlier pool, not an assumption); the
    result's source is ``pooled``, with ``pooled`` the number of workloads in it.

    The uncertainty is the larger of the weighted mean's and the spread between the
    estimates (they differ by workload on real boards: 0.75–1.34 W/°C on one H100).
    """
    near = [a for a in estimates if a.regime == FIXED_CLOCK and a.uncertainty_w_per_c > 0
            and a.source == "learned" and a.pooled == 0
            and math.isfinite(a.sm_clock_mhz) and abs(a.sm_clock_mhz - sm_clock_mhz) <= clock_tolerance_mhz]
    if not near:
        return None
    wts = np.array([1.0 / a.uncertainty_w_per_c ** 2 for a in near])
    vals = np.array([a.alpha_w_per_c for a in near])
    mean = float(wts @ vals / wts.sum())
    spread = float(vals.std(ddof=1)) if len(near) > 1 else 0.0
    return AlphaEstimate(
        alpha_w_per_c=mean, uncertainty_w_per_c=max(math.sqrt(1.0 / wts.sum()), spread), source="pooled",
        regime=FIXED_CLOCK, power_w=float(np.mean([a.power_w for a in near])),
        temperature_min_c=float(min(a.temperature_min_c for a in near)),
        temperature_max_c=float(max(a.temperature_max_c for a in near)),
        spans=int(sum(a.spans for a in near)), sm_clock_mhz=float(sm_clock_mhz),
        reference_temperature_c=_mean_reference([a.reference_temperature_c for a in near]),
        detail=f"pooled over {len(near)} workload(s) learned on this board at {sm_clock_mhz:.0f} MHz",
        pooled=len(near),
    )


def board_prior(estimates, power_w: float, sm_clock_mhz: float, *, exclude=None) -> AlphaEstimate:
    """What the board's α at a clock is known to be before this workload's own warm-up.

    The package's assumption at ``power_w`` (:func:`~.normalise.assumed_alpha`: 0.25 ± 0.12 %/°C,
    what three H100 boards measured before: the population of boards), combined by inverse variance
    with the board's other learned fixed-clock α at this clock when there are any
    (:func:`pooled_alpha`, in W/°C: α is a property of the board at a clock, thesis §4.2.2) — a
    two-level shrinkage, so one board's few warm-ups refine the population's value rather than
    replace it. ``exclude`` (an estimate) is left out of the pool.
    """
    others = [a for a in estimates if a is not exclude and a != exclude]
    pooled = board_alpha(others, sm_clock_mhz, power_w)
    return assumed_alpha(power_w) if pooled is None else pooled


def board_alpha(estimates, sm_clock_mhz: float, power_w: float) -> AlphaEstimate | None:
    """The board's pooled fixed-clock α at this clock (:func:`pooled_alpha`) shrunk toward the
    assumption at ``power_w`` (:func:`shrunk_alpha`): what a workload without its own fit uses.
    None when the board has no learned α at this clock."""
    pooled = pooled_alpha(estimates, sm_clock_mhz) if math.isfinite(sm_clock_mhz) else None
    if pooled is None or not (math.isfinite(power_w) and power_w > 0):
        return pooled
    return shrunk_alpha(pooled, assumed_alpha(power_w))


def shrunk_alpha(learned: AlphaEstimate, prior: AlphaEstimate) -> AlphaEstimate:
    """``learned`` combined with ``prior`` by inverse variance (both W/°C): the row's α.

    One workload's ≤ 10 s warm-up sees a few °C in whole-°C readings, so its slope is uncertain
    (±25–90 % on the real H100s of session 4); a point estimate used as is over-corrects whenever
    it lands high. Weighting it against what the board's α is known to be (:func:`board_prior`) by
    their variances is the least-squares combination of two measurements of one quantity; a
    precise warm-up keeps its own value, a vague one moves to the prior. The result keeps the
    learned regime, clock, range and stored reference temperature.
    """
    if learned.uncertainty_w_per_c <= 0 or prior.uncertainty_w_per_c <= 0:
        return learned
    w_l, w_p = learned.uncertainty_w_per_c ** -2, prior.uncertainty_w_per_c ** -2
    value = (w_l * learned.alpha_w_per_c + w_p * prior.alpha_w_per_c) / (w_l + w_p)
    sigma = (w_l + w_p) ** -0.5
    share = w_l / (w_l + w_p)
    return replace(learned, alpha_w_per_c=float(value), uncertainty_w_per_c=float(sigma),
                   detail=f"{learned.detail}; shrunk toward the board's prior {prior.alpha_w_per_c:.3g} ± "
                          f"{prior.uncertainty_w_per_c:.2g} W/°C ({prior.source}), own weight {share:.2f}")


def with_board_prior(alpha: AlphaEstimate, board, power_w: float) -> AlphaEstimate:
    """A workload's own learned α shrunk toward its prior (:func:`shrunk_alpha`): at a fixed clock the
    board's (:func:`board_prior` over ``board``, the board's cached α); under the power cap the capped
    assumption (:func:`~.normalise.assumed_alpha` in :data:`~.normalise.POWER_CAPPED`: a ≤ 10 s warm-up
    at the cap sees a few °C after the controller settles, ±0.36–0.42 %/°C at 95 % on two real H100s; the
    third warmed < 3 °C).
    Pooled, assumed, file and given α as they are."""
    if alpha.source != "learned" or alpha.pooled:
        return alpha
    power = alpha.power_w if math.isfinite(alpha.power_w) and alpha.power_w > 0 else power_w
    if alpha.regime == POWER_CAPPED:
        return shrunk_alpha(alpha, assumed_alpha(power, POWER_CAPPED))
    return shrunk_alpha(alpha, board_prior(board, power, alpha.sm_clock_mhz, exclude=alpha))


def capped_prior_from_slopes(slopes_per_c, uncertainties_per_c) -> tuple[float, float]:
    """The power-capped regime's prior from boards' measured slopes (relative, per °C): their
    inverse-variance mean and an uncertainty covering both its own error and the spread between
    boards (combined in quadrature; the spread is the sample sd, what a new board may differ by).

    How :data:`~.normalise.CAPPED_PRIOR_PER_C` was made (``benchmarks/capped_slope_real.py``: fitted on
    two real H100 boards, checked on a third)."""
    s = np.asarray(slopes_per_c, dtype=float)
    u = np.asarray(uncertainties_per_c, dtype=float)
    if s.size == 0 or s.shape != u.shape or not np.all(np.isfinite(s)) or not np.all(u > 0):
        raise ValueError("capped_prior_from_slopes: need matching finite slopes and uncertainties > 0, got "
                         f"{list(s)} ± {list(u)}")
    w = u ** -2.0
    mean = float(w @ s / w.sum())
    spread = float(s.std(ddof=1)) if s.size > 1 else 0.0
    return mean, math.hypot(math.sqrt(1.0 / w.sum()), spread)
