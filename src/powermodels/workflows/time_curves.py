"""Time-vs-clock curves of a calibration: one point per clock, the form chosen by clock-grouped CV.

Two forms describe a kernel's time against its core clock:

* thesis eq. 4.5, ``T(f) = a/(1 + b·f) + c/(1 + d·f)`` (§4.5): a smooth fall to a plateau;
* DSO eq. 2, ``T = t0 + max(α/f_m, β/f_c)`` (Wang et al., §IV-B, the "DVFS roofline"): a sharp
  knee where the kernel turns memory-bound.

**One point per clock.** The thesis fits eq. 4.5 to one point per locked clock (§4.5). Under
natural DVFS the launches are not spread evenly over the clocks: the power-cap controller holds
a capped kernel at a few clocks for most of its launches (on the H100 recording
``datasets/h100-2026-11-25-session5/natural_dvfs``, 70 % of the bf16 GEMM's 20 071 kept batches
lie within 1 450–1 475 MHz and 41 at 1 980 MHz). A least-squares fit per launch then fits the
clock the controller preferred and bends away from the curve elsewhere (−4 % at the top clock,
+3.8 % at 1 700 MHz, both training clocks). :func:`clock_points` makes the launches one point
per clock step (median clock and median time, robust to a slow launch), as the thesis' sweep
gives.

**Form by CV on the training clocks.** :func:`select_time_form` leaves out each interior
training clock point in turn, fits both forms on the rest and keeps the form with the lower
MAPE on the left-out points (interior only: the held-out band it stands for is interior too).
It sees only the rows it is given, so in a held-out-band validation it never sees the band.

**Which clock points to fit, by the same CV.** A clock the GPU passed through in one batch gives a
point of a few launches, and those are the launches a state the SM-clock probe does not see can
spoil. On the real H100 GPU-ae8fffca (``datasets/h100-probe-2026-11-25``) the memory-bound CuPy
triad ran 338 µs in one burst and 360 µs in another at the same probed 1,440 MHz, and 355–390 µs
in the first batches after a pressure load at 1,320–1,545 MHz (the memory-side state the power cap
left, which the SM clock does not show); fitted with equal weight, those few-launch points put DSO
eq. 2's knee at ~1,680 MHz where the kernel is flat from ~1,600 MHz, and the held-out 1,604–1,726
MHz band missed by 3.2 %. :func:`select_time_fit` therefore chooses, with the form, the fewest
launches a clock point needs to be fitted (:data:`MIN_LAUNCHES_GRID`), by the same
leave-one-clock-out CV: every candidate is scored on the same left-out points (all of them,
whatever their launches), so a threshold wins only where it predicts the training clocks better.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import schema
from ..models import DVFSTimeModel, RationalTimeModel

__all__ = ["MIN_LAUNCHES_GRID", "TIME_FORMS", "clock_points", "fit_time_form", "select_time_fit", "select_time_form"]

#: the time forms a calibration chooses between: name → what the report calls it
TIME_FORMS = {"rational": "eq. 4.5", "dso": "DSO eq. 2"}

#: fewest clock points the CV needs (three interior points to leave out, two ends to keep)
_MIN_CV_POINTS = 5

#: candidates for the fewest launches a clock point needs to be fitted (chosen by CV)
MIN_LAUNCHES_GRID = (1, 3, 5, 10)


def clock_points(rows: pd.DataFrame, step_mhz: float) -> pd.DataFrame:
    """One row per clock step: median core clock, memory clock and time, and the launch count.

    Parameters
    ----------
    rows : DataFrame
        ``sm_clock_mhz``, ``time_s`` and optionally ``mem_clock_mhz`` (one row per launch
        or per locked-clock point).
    step_mhz : float
        Clocks in one step of this width count as one clock.

    Returns
    -------
    DataFrame
        ``sm_clock_mhz``, ``mem_clock_mhz`` (NaN when absent), ``time_s``, ``launches``;
        sorted by clock.
    """
    f = rows[schema.SM_CLOCK_MHZ].to_numpy(float)
    fm = (rows[schema.MEM_CLOCK_MHZ].to_numpy(float) if schema.MEM_CLOCK_MHZ in rows
          else np.full(len(rows), math.nan))
    table = pd.DataFrame({"step": np.round(f / step_mhz), schema.SM_CLOCK_MHZ: f, schema.MEM_CLOCK_MHZ: fm,
                          schema.TIME_S: rows[schema.TIME_S].to_numpy(float)})
    points = table.groupby("step", sort=True).agg(
        **{schema.SM_CLOCK_MHZ: (schema.SM_CLOCK_MHZ, "median"),
           schema.MEM_CLOCK_MHZ: (schema.MEM_CLOCK_MHZ, "median"),
           schema.TIME_S: (schema.TIME_S, "median"), schema.LAUNCHES: (schema.TIME_S, "size")})
    return points.reset_index(drop=True)


def fit_time_form(form: str, points: pd.DataFrame):
    """Fit ``form`` (a key of :data:`TIME_FORMS`) to clock points; returns ``predict(rows)``.

    DSO eq. 2 takes a missing memory clock as one constant (the median of those read, else
    an arbitrary 1 MHz: with one memory clock only the plateau α/f_m is identified, and
    predictions at that memory clock do not depend on the value).
    """
    y = points[schema.TIME_S].to_numpy(float)
    if form == "rational":
        model = RationalTimeModel(clock_column=schema.SM_CLOCK_MHZ).fit(points[[schema.SM_CLOCK_MHZ]], y)
        return lambda rows: model.predict(rows[[schema.SM_CLOCK_MHZ]])
    if form == "dso":
        # without a memory-clock reading (a recording whose NVML trace was lost) the memory
        # clock is taken as one unknown constant: α/f_m is then one plateau (DSO eq. 2 with a
        # single f_m; on the H100 recordings HBM held 2 619 MHz throughout)
        fm = points[schema.MEM_CLOCK_MHZ].to_numpy(float)
        fill = float(np.median(fm[np.isfinite(fm)])) if np.isfinite(fm).any() else 1.0
        cols = [schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]

        def filled(rows):
            return rows[cols].fillna({schema.MEM_CLOCK_MHZ: fill})

        model = DVFSTimeModel(clock_column=schema.SM_CLOCK_MHZ, memory_clock_column=schema.MEM_CLOCK_MHZ).fit(
            filled(points), y)
        return lambda rows: model.predict(filled(rows))
    raise ValueError(f"time form must be one of {', '.join(TIME_FORMS)}, got {form!r}")


def select_time_form(points: pd.DataFrame) -> tuple[str, dict[str, float]]:
    """The form with the lower leave-one-clock-out MAPE over the interior clock points.

    Parameters
    ----------
    points : DataFrame
        :func:`clock_points` of the training rows only.

    Returns
    -------
    form : str
        ``"rational"`` or ``"dso"``; ``"rational"`` (the thesis' form) when there are fewer
        than five points (no CV possible).
    cv_mape_pct : dict
        Per form, the mean leave-one-clock-out MAPE (%); empty when no CV ran.
    """
    forms = list(TIME_FORMS)
    if len(points) < _MIN_CV_POINTS:
        return "rational", {}
    points = points.sort_values(schema.SM_CLOCK_MHZ).reset_index(drop=True)
    y = points[schema.TIME_S].to_numpy(float)
    errors = {form: [] for form in forms}
    for i in range(1, len(points) - 1):
        train = points.drop(index=i)
        for form in forms:
            predicted = float(fit_time_form(form, train)(points.iloc[[i]])[0])
            errors[form].append(abs(predicted - y[i]) / y[i])
    cv = {form: 100.0 * float(np.mean(e)) for form, e in errors.items()}
    return min(forms, key=lambda form: (cv[form], form != "rational")), cv


def select_time_fit(points: pd.DataFrame, min_launches_grid=MIN_LAUNCHES_GRID) -> tuple[str, int, dict[str, float]]:
    """The form and the fewest launches per fitted clock point, by leave-one-clock-out CV.

    Each interior point is left out in turn; every candidate (form × minimum launches) is fitted
    on the other points that have at least that many launches and scored on the left-out point,
    whatever its own launches. A candidate left with fewer than four points for any left-out
    point is not compared.

    Parameters
    ----------
    points : DataFrame
        :func:`clock_points` of the training rows only.
    min_launches_grid : sequence of int
        Candidate minimum launches per fitted point.

    Returns
    -------
    form : str
        ``"rational"`` or ``"dso"``.
    min_launches : int
        Fit only the points with at least this many launches.
    cv_mape_pct : dict
        Per candidate (``"dso≥5"``), its mean leave-one-clock-out MAPE (%); empty when no CV ran
        (then ``("rational", 1)``, the thesis' form on every point).
    """
    if len(points) < _MIN_CV_POINTS:
        return "rational", 1, {}
    points = points.sort_values(schema.SM_CLOCK_MHZ).reset_index(drop=True)
    y = points[schema.TIME_S].to_numpy(float)
    n = points[schema.LAUNCHES].to_numpy(float)
    candidates = [(form, int(m)) for m in sorted(set(min_launches_grid)) for form in TIME_FORMS]
    errors = {c: [] for c in candidates}
    for i in range(1, len(points) - 1):
        train_all = points.drop(index=i)
        for form, m in candidates:
            train = train_all.loc[n[train_all.index] >= m]
            if len(train) < _MIN_CV_POINTS - 1:
                errors[(form, m)] = None
                continue
            if errors[(form, m)] is not None:
                errors[(form, m)].append(abs(float(fit_time_form(form, train)(points.iloc[[i]])[0]) - y[i]) / y[i])
    cv = {c: 100.0 * float(np.mean(e)) for c, e in errors.items() if e}
    if not cv:
        return "rational", 1, {}
    # ties go to the thesis' form and to fitting more points
    form, m = min(cv, key=lambda c: (cv[c], c[0] != "rational", c[1]))
    return form, m, {f"{f}≥{k}": v for (f, k), v in cv.items()}
