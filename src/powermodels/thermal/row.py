"""The thermal fields of one run-table row: what a protocol adds to the energy it measured.

A protocol that measured a window gets the α to use from
:func:`powermodels.measuring.alpha_warmup.row_alpha` (a calibration file's, the
caller's, the cached or newly learned one, the board's pool or the assumption,
in that order) and calls :func:`thermal_fields` for
the row's temperature at the window's start and end and its figures at the
reference temperature (thesis eq. 4.7).
"""

from __future__ import annotations

import math

from .. import schema
from .normalise import FIXED_CLOCK, POWER_CAPPED, AlphaEstimate, assumed_alpha, check_reference_temperature, normalise
from .spans import thermal_state

__all__ = ["alpha_from_calibration", "given_alpha", "thermal_fields", "window_alpha", "window_thermal_fields"]


def given_alpha(alpha_w_per_c: float, uncertainty_w_per_c: float = 0.0, source: str = "given") -> AlphaEstimate:
    """An α the caller states (``source`` ``given``, or ``file`` for a calibration's)."""
    try:
        a, u = float(alpha_w_per_c), float(uncertainty_w_per_c)
    except (TypeError, ValueError):
        raise ValueError(f"alpha: expected numbers in W/°C, got {alpha_w_per_c!r} ± {uncertainty_w_per_c!r}") from None
    if not (math.isfinite(a) and math.isfinite(u) and u >= 0):
        raise ValueError(f"alpha: need a finite α and an uncertainty >= 0 (W/°C), got {alpha_w_per_c!r} ± "
                         f"{uncertainty_w_per_c!r}")
    return AlphaEstimate(a, u, source, detail=f"{source}: {a:.4g} ± {u:.2g} W/°C")


def alpha_from_calibration(models: dict, meta: dict) -> tuple[AlphaEstimate | None, float | None]:
    """A ``powermodels calibrate`` file's α (``source = file``) and its ``T_ref``; (None, None) without one.

    ``models`` and ``meta`` as :func:`powermodels.workflows.calibration_apply.load` returns them.
    """
    temperature = models.get("temperature") if isinstance(models, dict) else None
    alpha = getattr(temperature, "alpha_w_per_c_", None)
    if alpha is None or not math.isfinite(float(alpha)):
        return None, None
    stderr = float(getattr(temperature, "alpha_stderr_w_per_c_", 0.0) or 0.0)
    t_ref = meta.get("reference_temperature_c")
    est = given_alpha(float(alpha), stderr if math.isfinite(stderr) else 0.0, source="file")
    return est, (float(t_ref) if t_ref is not None else None)


def thermal_fields(trace, start_s: float, end_s: float, *, energy_j: float, power_w: float, time_s: float,
                   temperature_c: float, alpha: AlphaEstimate, reference_temperature_c: float | None = None,
                   energy_uncertainty_j: float = math.nan) -> dict:
    """Temperature at the window's start and end, and the figures at ``T_ref`` (schema names).

    ``T_ref`` is ``reference_temperature_c`` when given (the calibration's or
    ``--ref-temperature``), else the one stored with a learned α (the middle of
    the range it was learned over, so every row of that workload on that board
    shares it), else the row's own temperature rounded to a whole °C.
    """
    fields = thermal_state(trace, start_s, end_s)
    fields.update(_at_reference(energy_j=energy_j, power_w=power_w, time_s=time_s, temperature_c=temperature_c,
                                alpha=alpha, reference_temperature_c=reference_temperature_c,
                                energy_uncertainty_j=energy_uncertainty_j))
    return fields


def _at_reference(*, energy_j, power_w, time_s, temperature_c, alpha, reference_temperature_c,
                  energy_uncertainty_j) -> dict:
    """:func:`~.normalise.normalise` at the ``T_ref`` :func:`thermal_fields` documents; NaN figures
    (α still named) when there is no temperature at all (a device without the reading)."""
    if reference_temperature_c is not None:
        t_ref = check_reference_temperature(reference_temperature_c, "reference_temperature_c")
    elif math.isfinite(alpha.reference_temperature_c):
        t_ref = alpha.reference_temperature_c
    elif math.isfinite(temperature_c):
        t_ref = float(round(temperature_c))
    else:
        return {schema.REFERENCE_TEMPERATURE_C: math.nan, schema.ENERGY_AT_REF_J: math.nan,
                schema.POWER_AT_REF_W: math.nan, schema.ENERGY_AT_REF_UNCERTAINTY_J: math.nan,
                schema.CORRECTION_ALPHA_W_PER_C: alpha.alpha_w_per_c,
                schema.ALPHA_UNCERTAINTY_W_PER_C: alpha.uncertainty_w_per_c,
                schema.ALPHA_SOURCE: alpha.source, schema.ALPHA_REGIME: alpha.regime}
    return normalise(energy_j=energy_j, power_w=power_w, time_s=time_s, temperature_c=temperature_c, alpha=alpha,
                     reference_temperature_c=t_ref, energy_uncertainty_j=energy_uncertainty_j)


def window_alpha(*, uuid: str, driver: str = "", power_w: float, sm_clock_mhz: float = math.nan,
                 capped: bool = False, given: AlphaEstimate | None = None, cache_dir=None,
                 board=None) -> AlphaEstimate:
    """The α of a window around code the package cannot re-run (an :class:`~powermodels.meter.EnergyMeter`
    window, a ``measure -- CMD`` program run): as a callable's row (:func:`~powermodels.measuring.alpha_warmup.row_alpha`)
    without the warm-up — ``given`` if any; else the board's learned fixed-clock α at this clock, pooled
    (:func:`~.alpha.board_alpha`, the state folder's α cache for GPU ``uuid``); else the assumption at
    ``power_w``. A capped window (the power-cap reason seen) takes the assumption in the capped regime:
    the pool is of fixed-clock α. ``board`` (the cache's entries for ``uuid``, read once by the caller)
    spares a read of the cache file per window.
    """
    from .alpha import board_alpha
    from .alpha_cache import AlphaCache

    if given is not None:
        return given
    if not capped and uuid and math.isfinite(sm_clock_mhz) and math.isfinite(power_w) and power_w > 0:
        if board is None:
            board = AlphaCache(cache_dir).entries(uuid, driver=driver)
        pooled = board_alpha(board, sm_clock_mhz, power_w)
        if pooled is not None:
            return pooled
    return assumed_alpha(power_w, POWER_CAPPED if capped else FIXED_CLOCK)


def window_thermal_fields(*, energy_j: float, time_s: float, temperature_c: float, alpha: AlphaEstimate,
                          reference_temperature_c: float | None = None,
                          energy_uncertainty_j: float = math.nan) -> dict:
    """The figures at ``T_ref`` of a whole window (energy and mean power over its time, thesis eq. 4.7).

    ``T_ref`` as :func:`thermal_fields` picks it (given, else α's stored one, else the window's
    temperature rounded). The window's start and end temperatures are the meter's own columns.
    """
    return _at_reference(energy_j=energy_j, power_w=energy_j / time_s if time_s > 0 else math.nan, time_s=time_s,
                         temperature_c=temperature_c, alpha=alpha, reference_temperature_c=reference_temperature_c,
                         energy_uncertainty_j=energy_uncertainty_j)
