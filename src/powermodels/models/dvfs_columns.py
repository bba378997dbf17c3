"""Reading the (core, memory) clock pair of the DSO DVFS estimators (Wang et al., §IV-B).

The DVFS estimators of :mod:`powermodels.models.dvfs` read two columns of
``X``, the core clock (``clock_column``, default ``sm_clock_mhz``) and the
memory clock (``memory_clock_column``, default ``mem_clock_mhz``), by name
in a DataFrame or by position, following the convention of
:mod:`powermodels.models._columns`; other columns are ignored. Both clocks
must be MHz > 0, since DSO eq. 2 divides by them. The old parameter names
``core_clock_column``/``mem_clock_column`` keep working until 0.3 with a
``FutureWarning``.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_array, check_consistent_length, column_or_1d, validate_data

from powermodels import schema
from powermodels.models._columns import (
    column_index,
    column_label,
    numeric_column,
    renamed_parameter,
    table_array,
)

__all__ = ["CLOCK_FAILS", "Y2_FAILS", "clock_pair", "fit_clock_pair"]


def clock_pair(est, X):
    """``(core, memory)`` clocks (MHz) of ``X`` for ``predict`` (checks ``X`` against ``fit``'s)."""
    fc, fm, _, _ = _read_clocks(est, X, fitting=False)
    return fc, fm


def _read_clocks(est, X, *, fitting: bool):
    """Clocks, validated ``X`` and the two columns' labels (``reset`` when ``fitting``)."""
    X = table_array(X)
    validate_data(est, X, reset=fitting, skip_check_array=True)
    core = renamed_parameter(est, "clock_column", "core_clock_column", warn=fitting)
    memory = renamed_parameter(est, "memory_clock_column", "mem_clock_column", warn=fitting)
    # Until 0.3 an X without column names falls back to the old default positions (0, 1).
    ic = column_index(X, core, "clock_column", legacy=0, default=schema.SM_CLOCK_MHZ)
    im = column_index(X, memory, "memory_clock_column", legacy=1, default=schema.MEM_CLOCK_MHZ)
    if ic == im:
        raise ValueError(f"clock_column and memory_clock_column both name column {column_label(X, ic)!r}")
    out = []
    for j, param in ((ic, "clock_column"), (im, "memory_clock_column")):
        values = numeric_column(X, j, param, nonnegative=True, unit=" MHz")
        if values.size and values.min() <= 0:
            raise ValueError(f"column {column_label(X, j)!r} ({param}) has a clock of {values.min():g} MHz; "
                             "clocks must be MHz > 0 (DSO eq. 2 divides by them)")
        out.append(values)
    return out[0], out[1], X, (column_label(X, ic), column_label(X, im))


def fit_clock_pair(est, X, y, *, multi_output: bool = False):
    """Clocks and numeric target of ``fit``; at least two distinct (core, memory) pairs.

    One pair cannot tell a clock-dependent term from a constant one (DSO
    eq. 1–2 fitted through one point), so it is an error, not a silent fit.
    """
    est._validate_params()
    if y is None:
        raise ValueError(f"{type(est).__name__} requires y to be passed, but the target y is None")
    fc, fm, X, labels = _read_clocks(est, X, fitting=True)
    y = check_array(y, ensure_2d=False, dtype="numeric", input_name="y")
    if not multi_output:
        y = column_or_1d(y, warn=True)
    check_consistent_length(X, y)
    if fc.size < 2:
        raise ValueError(f"Found array with {fc.size} sample(s) (shape={X.shape}) while a minimum of 2 "
                         "is required.")
    if np.unique(np.column_stack([fc, fm]), axis=0).shape[0] < 2:
        raise ValueError(f"{type(est).__name__}: every sample is at the same clock pair "
                         f"({fc[0]:g}, {fm[0]:g}) MHz in columns {labels[0]!r}, {labels[1]!r}; the clock "
                         "dependence is not identified (need at least 2 distinct clock pairs)")
    return fc, fm, y


CLOCK_FAILS = {
    # With the positive_only tag the checks shift X to X - X.min() (sklearn 1.9,
    # _enforce_estimator_tags_X), which puts exactly one 0 in the data; a 0 MHz
    # clock is refused because eq. 2 divides by f_c and f_m. No honest tag or
    # parameter makes the check data strictly positive, so these stay declared.
    name: "clock columns must hold MHz > 0; the check's X - X.min() feeds a 0 MHz clock"
    for name in (
        "check_dict_unchanged", "check_dont_overwrite_parameters", "check_dtype_object",
        "check_estimators_dtypes", "check_estimators_fit_returns_self",
        "check_estimators_nan_inf", "check_estimators_overwrite_params",
        "check_f_contiguous_array_estimator", "check_fit2d_predict1d",
        "check_fit_check_is_fitted", "check_fit_idempotent", "check_fit_score_takes_y",
        "check_methods_sample_order_invariance", "check_methods_subset_invariance",
        "check_n_features_in", "check_n_features_in_after_fitting",
        "check_readonly_memmap_input", "check_regressors_no_decision_function",
        "check_supervised_y_2d",
    )
}
Y2_FAILS = {
    # DVFSEnergyModel needs y = (time, power); the checks give one target column.
    name: "y must hold two columns (time_s, power_w); the check gives one"
    for name in (
        "check_estimators_pickle", "check_pipeline_consistency",
        "check_regressor_data_not_an_array", "check_regressor_multioutput",
        "check_regressors_int", "check_regressors_train",
    )
}
