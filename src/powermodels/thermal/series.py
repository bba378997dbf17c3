"""What a measurement would read at each point of a warm-up, raw and at a reference temperature.

Given a trace of one workload running back to back from a known start (a
recorded warm-up: the raw H100 recording's 25 s series, the simulated GPU, or
a benchmark's own run), :func:`series_states` takes the energy per launch the
``counter`` protocol's window would give when started cold (``load_s`` 0.3),
warm and hot, and over a long reference span (the 12 s reference method's
2–14 s), each moved to one reference temperature with an α learned from the
first ≤ 10 s of the same trace (:func:`~.alpha.fit_alpha`) or given. This is
issue 19's test — the three states within 1 % of each other and of the
reference once normalised — applied to any recording, without a GPU.

Under the power cap a window whose spans still drift is extended (up to
``max_settle_s``) until the controller settled (:func:`~.spans.cap_settled`);
the row says how long (``settle_s``) and whether it never settled
(``transient``), as the protocol does.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema
from ..energy_counter import aligned_window
from .alpha import AlphaNotIdentified, fit_alpha, usable_spans, with_board_prior
from .normalise import POWER_CAPPED, AlphaEstimate, normalise
from .spans import CAP_POWER_TOLERANCE, cap_settled, counter_spans, power_capped, thermal_state

__all__ = ["DEFAULT_STATES", "series_states", "settled_window", "window_measurement"]

#: (state, seconds of the workload's own load before the window) of issue 19's test.
DEFAULT_STATES = (("cold", 0.3), ("warm", 10.0), ("hot", 20.0))


def window_measurement(trace: pd.DataFrame, launches: np.ndarray, start_s: float, end_s: float) -> dict:
    """The ``counter`` protocol's figures over the counter-aligned window inside ``[start_s, end_s]``.

    Returns
    -------
    dict
        ``energy_j`` (per launch), ``power_w``, ``time_s`` (per launch),
        ``energy_uncertainty_j``, ``temperature_c`` and ``sm_clock_mhz`` (mean readings),
        ``temperature_start_c``, ``temperature_end_c`` (schema names).

    Raises
    ------
    ValueError
        When fewer than two counter updates fall inside.
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    w = aligned_window(trace, iv, start_s, end_s)
    if w is None:
        raise ValueError(f"window_measurement: fewer than two energy-counter updates in [{start_s:.3f}, "
                         f"{end_s:.3f}] s")
    inside = (iv[:, 1] > w.start_s) & (iv[:, 0] < w.end_s)
    time_per_launch = float(np.mean(iv[inside, 1] - iv[inside, 0]))
    return {schema.ENERGY_J: w.energy_per_launch_j, schema.POWER_W: w.energy_per_launch_j / time_per_launch,
            schema.TIME_S: time_per_launch, schema.ENERGY_UNCERTAINTY_J: w.uncertainty_j,
            schema.TEMPERATURE_C: _window_mean(trace, schema.TEMPERATURE_C, w.start_s, w.end_s),
            schema.SM_CLOCK_MHZ: _window_mean(trace, schema.SM_CLOCK_MHZ, w.start_s, w.end_s),
            **thermal_state(trace, w.start_s, w.end_s)}


def _window_mean(trace: pd.DataFrame, column: str, start_s: float, end_s: float) -> float:
    if column not in trace.columns:
        return math.nan
    t = trace[schema.T_S].to_numpy(dtype=float)
    v = trace[column].to_numpy(dtype=float)[(t >= start_s) & (t <= end_s)]
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else math.nan


def settled_window(trace: pd.DataFrame, launches: np.ndarray, start_s: float, *, window_s: float = 1.0,
                   max_settle_s: float = 5.0, step_s: float = 0.1, lookback_s: float = 1.0,
                   tolerance: float = CAP_POWER_TOLERANCE, power_limit_w: float | None = None
                   ) -> tuple[float, float, bool]:
    """Where a ``window_s`` window starting at ``start_s`` ends up under the power cap.

    Without the cap reason in the window: ``(start_s, 0, False)``. With it,
    the window moves later in ``step_s`` steps until the spans of its last
    ``lookback_s`` hold the power within ``tolerance`` of ``power_limit_w`` (without a limit: of the
    ``lookback_s`` before; :func:`~.spans.cap_settled`), at most ``max_settle_s``.

    Returns
    -------
    start_s, settle_s : float
        The window's start and how much load was added before it.
    transient : bool
        True when the controller had not settled by ``max_settle_s``.
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    first = counter_spans(trace, iv, start_s=start_s, end_s=start_s + window_s, updates_per_span=1)
    if not power_capped(first, share=0.0):
        return start_s, 0.0, False
    extra = 0.0
    while extra <= max_settle_s + 1e-9:
        end = start_s + window_s + extra
        spans = counter_spans(trace, iv, start_s=start_s, end_s=end, updates_per_span=1)
        if cap_settled(spans, lookback_s=lookback_s, tolerance=tolerance, power_limit_w=power_limit_w):
            return start_s + extra, extra, False
        extra += step_s
    return start_s + max_settle_s, max_settle_s, True


def series_states(trace: pd.DataFrame, launches: np.ndarray, *, load_start_s: float,
                  states=DEFAULT_STATES, window_s: float = 1.0, reference_s=(2.0, 14.0),
                  alpha: AlphaEstimate | None = None, learn_s: float = 10.0, skip_s: float = 0.5,
                  reference_temperature_c: float | None = None, max_settle_s: float = 5.0,
                  power_limit_w: float | None = None) -> tuple[pd.DataFrame,
                                                                                               AlphaEstimate | None]:
    """Cold, warm and hot windows and the long reference of one warm-up, raw and normalised.

    Parameters
    ----------
    trace : pandas.DataFrame
        Trace table of the warm-up (``energy_counter_j``, ``temperature_c``, ...).
    launches : array of shape (n, 2)
        Its launches, back to back from ``load_start_s``.
    load_start_s : float
        When the load started (the GPU idle before).
    states : sequence of (str, float)
        Name and seconds of load before each window (:data:`DEFAULT_STATES`).
    window_s : float, default=1.0
        Length of each state's window (the protocol's ≈ 1 s).
    reference_s : (float, float), default=(2, 14)
        The reference span, seconds of load (the 12 s reference skips 2 s).
    alpha : AlphaEstimate, optional
        The α to use; by default learned from ``[skip_s, learn_s]`` of this
        trace (the bounded first-time learning; a power-capped fit shrunk toward
        the capped prior, :func:`~.alpha.with_board_prior`). Not identified: the figures
        at the reference temperature are NaN.
    reference_temperature_c : float, optional
        ``T_ref``; by default the learned α's (the middle of its range).
    max_settle_s : float, default=5.0
        Longest extension of a window under the power cap.
    power_limit_w : float, optional
        The board's enforced power limit (the recording's provenance): a capped window is
        settled only at it (:func:`~.spans.cap_settled`).

    Returns
    -------
    table : pandas.DataFrame
        One row per state and one for the reference: ``thermal_state``,
        ``load_s``, the :func:`window_measurement` figures, ``settle_s``,
        ``transient`` and the :func:`~.normalise.normalise` fields.
    alpha : AlphaEstimate or None
    """
    iv = np.asarray(launches, dtype=float).reshape(-1, 2)
    if alpha is None:
        spans = counter_spans(trace, iv, start_s=load_start_s + skip_s, end_s=load_start_s + learn_s)
        spans = usable_spans(spans)
        try:
            alpha = fit_alpha(spans)
        except AlphaNotIdentified:
            alpha = None
        if alpha is not None and alpha.regime == POWER_CAPPED:  # as the protocol: toward the capped prior
            alpha = with_board_prior(alpha, [], alpha.power_w)
    t_ref = reference_temperature_c
    if t_ref is None and alpha is not None:
        t_ref = alpha.reference_temperature_c
    rows = []
    for name, load_s in states:
        start, settle, transient = settled_window(trace, iv, load_start_s + load_s, window_s=window_s,
                                                  max_settle_s=max_settle_s, power_limit_w=power_limit_w)
        m = window_measurement(trace, iv, start, start + window_s)
        rows.append({schema.THERMAL_STATE: name, schema.LOAD_S: start - load_start_s, **m,
                     schema.SETTLE_S: settle, schema.TRANSIENT: transient})
    m = window_measurement(trace, iv, load_start_s + reference_s[0], load_start_s + reference_s[1])
    rows.append({schema.THERMAL_STATE: "reference", schema.LOAD_S: float(reference_s[0]), **m,
                 schema.SETTLE_S: 0.0, schema.TRANSIENT: False})
    for row in rows:
        if alpha is not None and t_ref is not None:
            row.update(normalise(energy_j=row[schema.ENERGY_J], power_w=row[schema.POWER_W],
                                 time_s=row[schema.TIME_S], temperature_c=row[schema.TEMPERATURE_C],
                                 alpha=alpha, reference_temperature_c=t_ref,
                                 energy_uncertainty_j=row[schema.ENERGY_UNCERTAINTY_J]))
    return pd.DataFrame(rows), alpha
