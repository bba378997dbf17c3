"""Bad input, systematically: every public estimator and every table validator.

Each *kind* of bad input (NaN, inf, empty, one row, wrong shape, strings,
unsorted time, missing or misspelled columns, a single clock, singular NNLS
systems, ...) is a function that corrupts valid data; hypothesis draws where
(which row, which column) and how much. Every case must raise a ``ValueError``
whose message names the problem (a pattern per kind), raised from our code or
scikit-learn's validation — never from inside numpy/scipy, never a hang
(alarm), never a silent result. ``derandomize=True`` and few examples keep it
deterministic and fast.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sklearn.base import clone
from sklearn.utils import get_tags

from powermodels import schema
from powermodels.utils import all_estimators

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fitted_estimators import fitted, instance  # noqa: E402

SETTINGS = settings(max_examples=2, derandomize=True, deadline=None, database=None,
                    phases=[Phase.explicit, Phase.generate],  # no shrinking: a failure names its case
                    suppress_health_check=list(HealthCheck))
# one drawn example per (estimator, kind): 650 cases stay within CI's budget
ESTIMATOR_SETTINGS = settings(SETTINGS, max_examples=1)
HANG_S = 20

# --------------------------------------------------------------------------- checking


@contextmanager
def _alarm(seconds):
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def hang(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s (a hang)")

    previous = signal.signal(signal.SIGALRM, hang)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


_INSIDE = (os.sep + "numpy" + os.sep, os.sep + "scipy" + os.sep, os.sep + "pandas" + os.sep)
# scikit-learn's input validation: the contract every estimator shares (its common checks expect
# e.g. a TypeError for non-numeric objects, check_dtype_object); errors raised through it count
# as clear when they name the problem, wherever numpy/pandas raised them inside it.
_SKLEARN_VALIDATION = os.sep.join(("sklearn", "utils", "validation.py"))
OUTCOMES: dict = {"ValueError (ours)": 0, "ValueError (sklearn validation)": 0,
                  "TypeError (sklearn validation)": 0}


def expect_clear_error(call, pattern: str, label: str) -> None:
    """``call()`` must raise a ValueError matching ``pattern``, not from inside numpy/scipy/pandas."""
    import re

    try:
        with _alarm(HANG_S):
            result = call()
    except (ValueError, TypeError) as err:
        frames = traceback.extract_tb(err.__traceback__)
        where = frames[-1].filename if frames else ""
        via_sklearn = any(f.filename.endswith(_SKLEARN_VALIDATION) for f in frames)
        if isinstance(err, TypeError) and not via_sklearn:
            pytest.fail(f"{label}: TypeError instead of ValueError ({where}:{frames[-1].lineno}): {err}")
        assert via_sklearn or not any(p in where for p in _INSIDE), (
            f"{label}: {type(err).__name__} raised inside {where}: {err}")
        assert re.search(pattern, str(err), re.IGNORECASE), (
            f"{label}: message does not name the problem ({pattern!r}): {err}")
        OUTCOMES[f"{type(err).__name__} ({'sklearn validation' if via_sklearn else 'ours'})"] = \
            OUTCOMES.get(f"{type(err).__name__} ({'sklearn validation' if via_sklearn else 'ours'})", 0) + 1
        return
    except Exception as err:  # noqa: BLE001 - the point: anything else is a failure
        where = traceback.extract_tb(err.__traceback__)[-1]
        pytest.fail(f"{label}: {type(err).__name__} instead of ValueError "
                    f"({where.filename}:{where.lineno}): {err}")
    pytest.fail(f"{label}: silent result instead of an error: {type(result).__name__}")


# ------------------------------------------------------------------- estimator kinds

NAN = r"nan|missing|NA\b|NAType"
INF = r"inf"
EMPTY = r"0 sample|empty|at least|minimum|no rows|too few|fewer|needs"
SHAPE = r"2D|2-D|1D|1-D|dim|reshape|shape"
LENGTH = r"inconsistent|length|number of samples|rows|mismatch|same"
DTYPE = r"string|str|numeric|convert|dtype|complex|float|object|type"
FEATURES = r"feature|column"


def _frame(X):
    X = np.asarray(X, dtype=float)
    return pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])])


# Estimators that read some columns of a table and pass the others through (a table may carry
# kernel/config names): bad values go in the columns they read (their _check_instance's).
READS = {"FrequencyCorrection": [0, 1], "TemperatureCorrection": [0, 1], "EnergyModel": [0, 1],
         "FrequencyPowerModel": [1], "RationalTimeModel": [1],
         "GroupedEstimator": [1]}  # column 0 is the group label: any value is a valid label
_reads: list = []


def _columns(X):
    return _reads or list(range(X.shape[1]))


def _cell(draw, X):
    i = draw(st.integers(0, X.shape[0] - 1))
    j = draw(st.sampled_from(_columns(X)))
    return i, j


def _with(X, i, j, value, dtype=None):
    out = X.copy()
    if dtype is not None:
        out = out.astype(dtype)
    out.iat[i, j] = value
    return out


# fit-time kinds: (name, pattern, needs_y, make(draw, X, y) -> (X', y'))
FIT_KINDS = [
    ("NaN in X", NAN, False, lambda d, X, y: (_with(X, *_cell(d, X), np.nan), y)),
    ("+inf in X", INF, False, lambda d, X, y: (_with(X, *_cell(d, X), np.inf), y)),
    ("-inf in X", INF, False, lambda d, X, y: (_with(X, *_cell(d, X), -np.inf), y)),
    ("all-NaN X", NAN, False, lambda d, X, y: (X * np.nan, y)),
    ("NaN column in X", NAN, False,
     lambda d, X, y: (X.assign(**{X.columns[d(st.sampled_from(_columns(X)))]: np.nan}), y)),
    ("pd.NA in a nullable column", NAN, False,
     lambda d, X, y: (_with(X.astype("Float64"), *_cell(d, X), pd.NA), y)),
    ("empty X", EMPTY, False, lambda d, X, y: (X.iloc[:0], None if y is None else y[:0])),
    ("one row", EMPTY, False, lambda d, X, y: (X.iloc[:1], None if y is None else y[:1])),
    ("X 1-D", SHAPE, False, lambda d, X, y: (X.iloc[:, 0].to_numpy(), y)),
    ("X 3-D", SHAPE, False, lambda d, X, y: (X.to_numpy()[:, :, None], y)),
    ("X None", SHAPE + "|none|expected", False, lambda d, X, y: (None, y)),
    ("X a scalar", SHAPE + "|scalar|expected", False, lambda d, X, y: (3.0, y)),
    ("X a string", SHAPE + "|" + DTYPE, False, lambda d, X, y: ("abc", y)),
    ("X strings", DTYPE, False, lambda d, X, y: (X.astype(str).replace(r".*", "abc", regex=True), y)),
    ("X string numbers", DTYPE, False, lambda d, X, y: (X.to_numpy().astype(str), y)),
    ("X object column with a word", DTYPE, False,
     lambda d, X, y: (_with(X, *_cell(d, X), "oops", dtype=object), y)),
    ("X complex", DTYPE, False, lambda d, X, y: (X.to_numpy() + 1j, y)),
    ("X datetime column", DTYPE, False,
     lambda d, X, y: (X.assign(**{X.columns[_columns(X)[0]]: pd.Timestamp("2026-01-01")}), y)),
    ("X lists in cells", DTYPE + "|sequence|shape", False,
     lambda d, X, y: (_with(X, *_cell(d, X), [1.0, 2.0], dtype=object), y)),
    ("X ragged rows", SHAPE + "|sequence|inhomogeneous|" + DTYPE, False,
     lambda d, X, y: ([list(r) for r in X.to_numpy()[:-1]] + [[1.0] * (X.shape[1] + 1)], y)),
    ("X duplicate column names", r"duplicate|unique|column|feature", False,
     lambda d, X, y: (X.set_axis([X.columns[0]] * X.shape[1], axis=1) if X.shape[1] > 1 else
                      pd.concat([X, X], axis=1), y)),
    ("NaN in y", NAN, True, lambda d, X, y: (X, np.where(np.arange(len(y)) == d(st.integers(0, len(y) - 1)), np.nan, y.T).T)),
    ("inf in y", INF, True, lambda d, X, y: (X, np.where(np.arange(len(y)) == d(st.integers(0, len(y) - 1)), np.inf, y.T).T)),
    ("all-NaN y", NAN, True, lambda d, X, y: (X, y * np.nan)),
    ("y shorter than X", LENGTH, True,
     lambda d, X, y: (X, y[: -d(st.integers(1, max(1, len(y) - 1)))])),
    ("y None", r"requires y|y.*none|none|target", True, lambda d, X, y: (X, None)),
    ("y strings", DTYPE + "|unknown label|continuous", True, lambda d, X, y: (X, np.full(y.shape, "abc"))),
    ("y a scalar", SHAPE + "|scalar|length|" + LENGTH, True, lambda d, X, y: (X, 1.0)),
]

# predict-time kinds, on a fitted estimator: (name, pattern, make(draw, X) -> X')
PREDICT_KINDS = [
    ("predict: NaN in X", NAN, lambda d, X: _with(X, *_cell(d, X), np.nan)),
    ("predict: inf in X", INF, lambda d, X: _with(X, *_cell(d, X), np.inf)),
    ("predict: a column missing", FEATURES, lambda d, X: X.drop(columns=X.columns[-1])),
    ("predict: an extra column", FEATURES, lambda d, X: X.assign(extra=1.0)),
    ("predict: a misspelled column", FEATURES,
     lambda d, X: X.rename(columns={X.columns[-1]: X.columns[-1] + "_typo"})),
    ("predict: columns reordered", FEATURES + "|order",
     lambda d, X: X[X.columns[::-1]] if X.shape[1] > 1 else X.rename(columns={X.columns[0]: "zz"})),
    ("predict: empty X", EMPTY, lambda d, X: X.iloc[:0]),
    ("predict: X 1-D", SHAPE, lambda d, X: X.iloc[:, 0].to_numpy()),
    ("predict: X 3-D", SHAPE, lambda d, X: X.to_numpy()[:, :, None]),
    ("predict: X None", SHAPE + "|none|expected", lambda d, X: None),
    ("predict: X strings", DTYPE, lambda d, X: X.astype(str).replace(r".*", "abc", regex=True)),
    ("predict: X string numbers", DTYPE, lambda d, X: X.to_numpy().astype(str)),
    ("predict: X complex", DTYPE, lambda d, X: X.to_numpy() + 1j),
]
UNFITTED = ("predict before fit", r"not fitted")


def _method(est):
    for name in ("predict", "transform"):
        if hasattr(est, name):
            return name
    return None


_BASE: dict = {}


def _base(name, cls):
    """Valid (X as a DataFrame, y) for ``name``; corruption works on copies."""
    if name not in _BASE:
        _BASE[name] = _valid_data(name, cls)
    X, y = _BASE[name]
    return X.copy(), y.copy()


def _valid_data(name, cls):
    from fitted_estimators import _blobs, _dvfs_grid, _square_wave

    if name == "BoxcarWindow":
        X, y = _square_wave()
    elif name == "UpdatePeriod":
        t = np.arange(0, 2, 1e-3)
        X, y = t[:, None], np.floor(t / 0.1)
    elif name.startswith("DVFS") and name != "DVFSParameterPredictor":
        X, t, p = _dvfs_grid()
        y = {"DVFSEnergyModel": np.column_stack([t, p]), "DVFSPowerModel": p,
             "DVFSTimeModel": t}[name]
    else:
        X, y = _blobs(instance(cls))
    return _frame(X), np.asarray(y, dtype=float)


ESTIMATORS = all_estimators()
_FITTED: dict = {}


def _fitted_on_frame(name, cls):
    if name not in _FITTED:
        X, y = _base(name, cls)
        est = clone(fitted(name, cls)[0]).fit(X, y)
        _FITTED[name] = (est, X, y)
    return _FITTED[name]


def _supervised(cls) -> bool:
    return get_tags(instance(cls)).target_tags.required


# Kinds that are not bad input for an estimator, with the reason.
NOT_BAD = {
    ("GHFilter", "one row"): "each row is an independent run: one run is a valid input",
    ("KalmanFilter1D", "one row"): "each row is an independent run",
    ("MovingAverage", "one row"): "each row is an independent run",
    ("TraceEnergy", "one row"): "each row is an independent run (calibration='none')",
    ("EnergyModel", "one row"): "energy of one measurement: P x t needs no fit",
    ("GroupedEstimator", "one row"): "the inner LinearRegression fits one sample (sklearn's choice)",
    ("DVFSParameterPredictor", "one row"): "MLPRegressor fits one sample (sklearn's choice)",
    ("InstructionEnergyModel", "one row"): "fits under-determined systems by design, reporting "
                                            "identifiable_ per opcode",
    **{(name, kind): "scikit-learn's validation with an explicit float dtype parses numeric text "
       "(numpy's astype); the estimator inherits it (the table validators refuse text)"
       for name in ("DVFSParameterPredictor", "GHFilter", "KalmanFilter1D", "MovingAverage",
                    "TraceEnergy")
       for kind in ("X string numbers", "predict: X string numbers")},
}
# Array-only estimators (a DataFrame means a trace table with named columns to them).
ARRAY_ONLY = {"BoxcarWindow", "SteadyStateGain", "StepResponse", "UpdatePeriod"}
FRAME_ONLY_KINDS = {"pd.NA in a nullable column", "X duplicate column names"}


def _as_input(name, X):
    if name in ARRAY_ONLY and isinstance(X, pd.DataFrame):
        return X.to_numpy()
    return X


def estimator_cases():
    cases = []
    for name, cls in ESTIMATORS:
        for kind in FIT_KINDS:
            if kind[2] and not _supervised(cls):
                continue  # y is ignored by this estimator
            if (name, kind[0]) in NOT_BAD or (name in ARRAY_ONLY and kind[0] in FRAME_ONLY_KINDS):
                continue
            cases.append((name, cls, "fit", kind))
        if _method(instance(cls)) is not None:
            cases += [(name, cls, "predict", kind) for kind in PREDICT_KINDS
                      if (name, kind[0]) not in NOT_BAD]
            cases.append((name, cls, "unfitted", UNFITTED))
    return cases


CASES = estimator_cases()


@pytest.mark.parametrize("name, cls, stage, kind", CASES,
                         ids=[f"{c[0]}-{c[3][0]}" for c in CASES])
@ESTIMATOR_SETTINGS
@given(data=st.data())
def test_estimator_bad_input(name, cls, stage, kind, data):
    draw = data.draw
    label = f"{name} {kind[0]}"
    _reads[:] = READS.get(name, [])
    if stage == "fit":
        _, pattern, _, make = kind
        X, y = _base(name, cls)
        Xb, yb = make(draw, X, y)
        Xb = _as_input(name, Xb)
        est = clone(instance(cls))
        if name in ("BoxcarWindow",):
            est.set_params(max_window_s=0.3)
        expect_clear_error(lambda: est.fit(Xb, yb), pattern, label)
    elif stage == "predict":
        _, pattern, make = kind
        est, X, _ = _fitted_on_frame(name, cls)
        Xb = make(draw, X)
        expect_clear_error(lambda: getattr(est, _method(est))(Xb), pattern, label)
    else:
        _, pattern = kind
        est = clone(instance(cls))
        X, _ = _base(name, cls)
        expect_clear_error(lambda: getattr(est, _method(est))(X), pattern, label)


# ----------------------------------------------- degenerate data, per estimator family


def _clock_frame(f, extra=None):
    return pd.DataFrame({schema.SM_CLOCK_MHZ: np.asarray(f, dtype=float), **(extra or {})})


def _degenerate_cases():
    from powermodels.models import (
        DVFSPowerModel,
        DVFSTimeModel,
        FrequencyPowerModel,
        InstructionEnergyModel,
        RationalTimeModel,
        TemperatureCorrection,
    )
    from powermodels.sensor.update_period import UpdatePeriod
    from powermodels.sensor.window import BoxcarWindow

    f = np.arange(800.0, 2001.0, 100.0)
    single = np.full(13, 1410.0)
    cases = [
        ("FrequencyPowerModel: a single clock", r"clock|distinct|identif|vary",
         lambda: FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame(single), 100 + 0 * single)),
        ("FrequencyPowerModel: two clocks", r"clock|distinct|identif|at least",
         lambda: FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame([900.0, 1500.0]), [100.0, 150.0])),
        ("FrequencyPowerModel: negative power", r"negative|power",
         lambda: FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame(f), -(50 + 0.07 * f))),
        ("FrequencyPowerModel: absurd power", r"power|plausible|absurd|above",
         lambda: FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame(f), 1e12 + f)),
        ("FrequencyPowerModel: negative clock", r"clock|negative|positive",
         lambda: FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame(-f), 50 + 0.07 * f)),
        ("RationalTimeModel: a single clock", r"clock|distinct|identif|vary",
         lambda: RationalTimeModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame(single), 1e-3 + 0 * single)),
        ("RationalTimeModel: negative time", r"negative|time",
         lambda: RationalTimeModel(clock_column=schema.SM_CLOCK_MHZ).fit(
             _clock_frame(f), -1e-3 / f)),
        ("TemperatureCorrection: missing power column", r"power_w|missing|column",
         lambda: TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ).fit(pd.DataFrame({
             schema.SM_CLOCK_MHZ: 1410.0, schema.TEMPERATURE_C: np.linspace(40, 70, 10)}))),
        ("DVFSPowerModel: a single clock pair", r"clock|distinct|identif|vary|singular",
         lambda: DVFSPowerModel(0, 1).fit(np.column_stack([single, np.full(13, 2619.0)]),
                                      np.linspace(100, 120, 13))),
        ("DVFSTimeModel: a single clock pair", r"clock|distinct|identif|vary|singular",
         lambda: DVFSTimeModel(0, 1).fit(np.column_stack([single, np.full(13, 2619.0)]),
                                     np.full(13, 1e-3))),
        ("InstructionEnergyModel: all-zero opcode counts (singular NNLS)",
         r"opcode|zero|singular|identif|count|no instructions",
         lambda: InstructionEnergyModel().fit(pd.DataFrame({
             "op:FFMA": np.zeros(6), "op:LDG": np.zeros(6), schema.TIME_S: np.linspace(1, 2, 6)}),
             np.linspace(10, 20, 6))),
        ("InstructionEnergyModel: negative opcode count", r"negative|op:",
         lambda: InstructionEnergyModel().fit(pd.DataFrame({
             "op:FFMA": -np.arange(1.0, 7.0), schema.TIME_S: np.linspace(1, 2, 6)}),
             np.linspace(10, 20, 6))),
        ("UpdatePeriod: a constant reading", r"change|constant|updates|fewer|at least",
         lambda: UpdatePeriod().fit(np.arange(0, 2, 1e-3)[:, None], np.full(2000, 70.0))),
        ("UpdatePeriod: time not increasing", r"time|sorted|increas|monoton|duplicate",
         lambda: UpdatePeriod().fit(np.full((2000, 1), 1.0), np.floor(np.arange(2000) / 100))),
        ("BoxcarWindow: a constant load", r"change|constant|vary|updates|load|fewer",
         lambda: BoxcarWindow(max_window_s=0.3).fit(
             np.c_[np.arange(0, 3, 5e-4), np.ones(6000)], np.full(6000, 0.5))),
    ]
    return cases


DEGENERATE = _degenerate_cases()


@pytest.mark.parametrize("label, pattern, call", DEGENERATE,
                         ids=[c.values[0] if hasattr(c, "values") else c[0] for c in DEGENERATE])
def test_degenerate_data(label, pattern, call):
    expect_clear_error(call, pattern, label)


def test_single_temperature_is_a_named_warning_by_design():
    """TemperatureCorrection keeps alpha = 0 (no correction) and says why: a warning, not silence."""
    from powermodels.models import TemperatureCorrection
    from powermodels.models.temperature import WeakTemperatureCorrelationWarning

    with pytest.warns(WeakTemperatureCorrelationWarning, match="temperature does not vary"):
        est = TemperatureCorrection(group_column=schema.SM_CLOCK_MHZ).fit(pd.DataFrame({
            schema.SM_CLOCK_MHZ: 1410.0, schema.TEMPERATURE_C: np.full(10, 60.0),
            schema.POWER_W: np.linspace(200, 210, 10)}))
    assert est.alpha_w_per_c_ == 0.0


# ------------------------------------------------------------------------ validators


def _trace():
    t = np.arange(0.0, 1.0, 0.01)
    return pd.DataFrame({schema.RUN_ID: "r1", schema.T_S: t,
                         schema.POWER_INSTANT_W: 200 + 10 * np.sin(t),
                         schema.TEMPERATURE_C: 50.0, schema.SM_CLOCK_MHZ: 1980.0,
                         schema.THROTTLE_REASONS: np.zeros(len(t), dtype=np.int64)})


def _runs():
    n = 6
    return pd.DataFrame({schema.KERNEL: "fp32", schema.CONFIG: [f"c{i}" for i in range(n)],
                         schema.TIME_S: np.linspace(1e-3, 2e-3, n), schema.POWER_W: 300.0,
                         schema.ENERGY_J: np.linspace(0.3, 0.6, n), schema.REPEAT: np.arange(n),
                         schema.TEMPERATURE_C: 55.0})


def _instructions():
    n = 5
    return pd.DataFrame({schema.WORKLOAD: [f"w{i}" for i in range(n)], schema.TIME_S: 1.0,
                         schema.ENERGY_J: np.linspace(100, 200, n), "op:FFMA": np.arange(n) * 1e6,
                         "op:LDG": 1e5})


TABLES = {
    "validate_trace_table": (schema.validate_trace_table, _trace, schema.TRACE_TABLE),
    "validate_run_table": (schema.validate_run_table, _runs, schema.RUN_TABLE),
    "validate_instruction_table": (schema.validate_instruction_table, _instructions,
                                   schema.INSTRUCTION_TABLE),
    "validate_table": (lambda df: schema.validate_table(df, schema.RUN_TABLE), _runs, schema.RUN_TABLE),
}


def _numeric_required(spec):
    return [c.name for c in spec.required if c.kind == "float" and not c.nullable]


def _pick(draw, names):
    return names[draw(st.integers(0, len(names) - 1))]


def _set(df, column, row, value, dtype=None):
    out = df.copy()
    if dtype is not None:
        out[column] = out[column].astype(dtype)
    out.loc[out.index[row], column] = value
    return out


# (name, pattern, applies(spec) -> bool, make(draw, df, spec) -> df')
TABLE_KINDS = [
    ("not a DataFrame (list)", r"DataFrame", None, lambda d, df, s: df.to_dict("records")),
    ("not a DataFrame (ndarray)", r"DataFrame", None, lambda d, df, s: df.to_numpy()),
    ("None", r"DataFrame", None, lambda d, df, s: None),
    ("a dict of columns", r"DataFrame", None, lambda d, df, s: df.to_dict("list")),
    ("no columns at all", r"missing", None, lambda d, df, s: pd.DataFrame()),
    ("empty (header only)", r"row", None, lambda d, df, s: df.iloc[:0]),
    ("too few rows", r"row", lambda s: s.min_rows > 1, lambda d, df, s: df.iloc[:1]),
    ("a required column missing", r"missing",
     None, lambda d, df, s: df.drop(columns=_pick(d, [c.name for c in s.required]))),
    ("a required column misspelled", r"missing",
     None, lambda d, df, s: df.rename(columns={(c := _pick(d, [c.name for c in s.required])): c + "s"})),
    ("a required column upper-cased", r"missing",
     None, lambda d, df, s: df.rename(columns={(c := _pick(d, [c.name for c in s.required])): c.upper()})),
    ("NaN in a required number", r"NaN",
     None, lambda d, df, s: _set(df, _pick(d, _numeric_required(s)), d(st.integers(0, len(df) - 1)), np.nan)),
    ("+inf in a number", r"infinite",
     None, lambda d, df, s: _set(df, _pick(d, _numeric_required(s)), d(st.integers(0, len(df) - 1)), np.inf)),
    ("-inf in a number", r"infinite",
     None, lambda d, df, s: _set(df, _pick(d, _numeric_required(s)), d(st.integers(0, len(df) - 1)), -np.inf)),
    ("pd.NA in a nullable float", r"NaN|missing",
     None, lambda d, df, s: _set(df, _numeric_required(s)[-1], 0, pd.NA, dtype="Float64")),
    ("negative value", r"negative|out-of-range",
     lambda s: any(c.minimum == 0 for c in s.required if c.kind == "float"),
     lambda d, df, s: _set(df, _pick(d, [c.name for c in s.required if c.kind == "float" and c.minimum == 0]),
                           d(st.integers(0, len(df) - 1)), -d(st.floats(1e-3, 1e6)))),
    ("absurd power", r"plausible maximum",
     lambda s: any(c.name.endswith("_w") for c in s.required),
     lambda d, df, s: _set(df, [c.name for c in s.required if c.name.endswith("_w")][0],
                           d(st.integers(0, len(df) - 1)), d(st.floats(1e6, 1e300)))),
    ("absurd temperature", r"out-of-range|plausible",
     lambda s: schema.TEMPERATURE_C in s.columns,
     lambda d, df, s: df.assign(**{schema.TEMPERATURE_C: d(st.sampled_from([500.0, -273.0, 1e9]))})),
    ("absurd clock", r"out-of-range|plausible|negative",
     lambda s: schema.SM_CLOCK_MHZ in s.columns,
     lambda d, df, s: df.assign(**{schema.SM_CLOCK_MHZ: d(st.sampled_from([1e7, -5.0]))})),
    ("string numbers", r"dtype", None,
     lambda d, df, s: df.assign(**{(c := _pick(d, _numeric_required(s))): df[c].astype(str)})),
    ("words in a number column", r"dtype", None,
     lambda d, df, s: _set(df, _pick(d, _numeric_required(s)), 0, "oops", dtype=object)),
    ("object dtype numbers", r"dtype", None,
     lambda d, df, s: df.assign(**{(c := _pick(d, _numeric_required(s))): df[c].astype(object)})),
    ("bool in a number column", r"dtype", None,
     lambda d, df, s: df.assign(**{_pick(d, _numeric_required(s)): True})),
    ("complex numbers", r"dtype|complex", None,
     lambda d, df, s: df.assign(**{(c := _pick(d, _numeric_required(s))): df[c] + 1j})),
    ("datetimes in a number column", r"dtype", None,
     lambda d, df, s: df.assign(**{_pick(d, _numeric_required(s)): pd.Timestamp("2026-01-01")})),
    ("timedeltas in a number column", r"dtype", None,
     lambda d, df, s: df.assign(**{_pick(d, _numeric_required(s)): pd.Timedelta("1s")})),
    ("lists in a number column", r"dtype", None,
     lambda d, df, s: _set(df, _pick(d, _numeric_required(s)), 0, [1.0, 2.0], dtype=object)),
    ("numbers in a text column", r"dtype",
     lambda s: any(c.kind == "str" for c in s.required),
     lambda d, df, s: df.assign(**{[c.name for c in s.required if c.kind == "str"][0]: 1.5})),
    ("missing text", r"missing value",
     lambda s: any(c.kind == "str" for c in s.required),
     lambda d, df, s: _set(df, [c.name for c in s.required if c.kind == "str"][0], 0, None)),
    ("fractional integer column", r"dtype",
     lambda s: any(c.kind == "int" for c in s.optional),
     lambda d, df, s: df.assign(**{[c.name for c in s.optional if c.kind == "int"][0]: 1.5})),
    ("negative integer column", r"negative|out-of-range",
     lambda s: schema.REPEAT in s.columns,
     lambda d, df, s: df.assign(**{schema.REPEAT: -1})),
    ("NaN in an optional non-nullable int", r"NaN|dtype",
     lambda s: schema.REPEAT in s.columns,
     lambda d, df, s: _set(df.assign(**{schema.REPEAT: 0.0}), schema.REPEAT, 0, np.nan)),
    ("duplicate column names", r"duplicate", None,
     lambda d, df, s: pd.concat([df, df[[c.name for c in s.required][-1:]]], axis=1)),
    ("unsorted time", r"not sorted",
     lambda s: s.time_column is not None,
     lambda d, df, s: df.iloc[::-1].reset_index(drop=True)),
    ("one time step backwards", r"not sorted",
     lambda s: s.time_column is not None,
     lambda d, df, s: _set(df, s.time_column, (i := d(st.integers(1, len(df) - 1))),
                           df[s.time_column].iloc[i - 1] - d(st.floats(1e-6, 1.0)))),
    ("duplicate time stamp", r"duplicate time",
     lambda s: s.time_column is not None,
     lambda d, df, s: _set(df, s.time_column, (i := d(st.integers(1, len(df) - 1))),
                           df[s.time_column].iloc[i - 1])),
    ("NaN time", r"NaN",
     lambda s: s.time_column is not None,
     lambda d, df, s: _set(df, s.time_column, d(st.integers(0, len(df) - 1)), np.nan)),
    ("every time equal", r"duplicate time",
     lambda s: s.time_column is not None,
     lambda d, df, s: df.assign(**{s.time_column: 1.0})),
    ("run id missing", r"missing",
     lambda s: s.group_column is not None,
     lambda d, df, s: _set(df, s.group_column, d(st.integers(0, len(df) - 1)), None)),
    ("no opcode columns", r"opcode",
     lambda s: s is schema.INSTRUCTION_TABLE,
     lambda d, df, s: df.drop(columns=schema.opcode_columns(df))),
    ("negative opcode count", r"negative",
     lambda s: s is schema.INSTRUCTION_TABLE,
     lambda d, df, s: _set(df, "op:FFMA", d(st.integers(0, len(df) - 1)), -1.0)),
    ("NaN opcode count", r"NaN",
     lambda s: s is schema.INSTRUCTION_TABLE,
     lambda d, df, s: _set(df, "op:LDG", d(st.integers(0, len(df) - 1)), np.nan)),
    ("string opcode count", r"dtype",
     lambda s: s is schema.INSTRUCTION_TABLE,
     lambda d, df, s: df.assign(**{"op:LDG": "many"})),
    ("index with duplicates and NaN energy", r"NaN",
     lambda s: schema.ENERGY_J in s.columns,
     lambda d, df, s: _set(df.set_axis([0] * len(df)), schema.ENERGY_J, 0, np.nan)),
]


def table_cases():
    out = []
    for name, (_, _, spec) in TABLES.items():
        for kind in TABLE_KINDS:
            if kind[2] is None or kind[2](spec):
                out.append((name, kind))
    return out


TABLE_CASES = table_cases()


@pytest.mark.parametrize("validator, kind", TABLE_CASES, ids=[f"{v}-{k[0]}" for v, k in TABLE_CASES])
@SETTINGS
@given(data=st.data())
def test_table_validator_bad_input(validator, kind, data):
    check, make_df, spec = TABLES[validator]
    name, pattern, _, make = kind
    bad = make(data.draw, make_df(), spec)
    expect_clear_error(lambda: check(bad), pattern, f"{validator}: {name}")


def _matrix():
    return pd.DataFrame(np.full((4, 6), 200.0), columns=[f"t{i}" for i in range(6)])


MATRIX_KINDS = [
    ("1-D", r"2-D", lambda d, M: M.iloc[0].to_numpy()),
    ("3-D", r"2-D", lambda d, M: M.to_numpy()[:, :, None]),
    ("a scalar", r"2-D", lambda d, M: 3.0),
    ("None", r"2-D|number|None", lambda d, M: None),
    ("empty", r"time point|row|empty", lambda d, M: M.iloc[:0]),
    ("no rows, no columns", r"time point|row|empty", lambda d, M: pd.DataFrame()),
    ("one time point", r"time point", lambda d, M: M.iloc[:, :1]),
    ("NaN", r"NaN", lambda d, M: _with(M, *_cell(d, M), np.nan)),
    ("+inf", r"infinite", lambda d, M: _with(M, *_cell(d, M), np.inf)),
    ("-inf", r"infinite", lambda d, M: _with(M, *_cell(d, M), -np.inf)),
    ("negative power", r"negative", lambda d, M: _with(M, *_cell(d, M), -d(st.floats(1e-3, 1e5)))),
    ("absurd power", r"plausible|absurd|above", lambda d, M: _with(M, *_cell(d, M), d(st.floats(1e6, 1e300)))),
    ("words", r"number|numeric|dtype|string", lambda d, M: _with(M, *_cell(d, M), "oops", dtype=object)),
    ("string numbers", r"number|numeric|dtype|string", lambda d, M: M.astype(str)),
    ("complex", r"complex|number|dtype", lambda d, M: M.to_numpy() + 1j),
    ("ragged rows", r"ragged|shape|sequence|inhomogeneous|number", lambda d, M: [[1.0, 2.0], [1.0]]),
    ("lists in cells", r"number|sequence|dtype", lambda d, M: _with(M, *_cell(d, M), [1.0], dtype=object)),
    ("datetimes", r"number|numeric|dtype", lambda d, M: M.assign(t0=pd.Timestamp("2026-01-01"))),
    ("pd.NA", r"NaN", lambda d, M: _with(M.astype("Float64"), *_cell(d, M), pd.NA)),
]


@pytest.mark.parametrize("kind", MATRIX_KINDS, ids=[k[0] for k in MATRIX_KINDS])
@SETTINGS
@given(data=st.data())
def test_trace_matrix_bad_input(kind, data):
    name, pattern, make = kind
    bad = make(data.draw, _matrix())
    expect_clear_error(lambda: schema.validate_trace_matrix(bad), pattern, f"validate_trace_matrix: {name}")


def test_counts():
    """The counts the issue asks for (printed with -s)."""
    per_estimator = {}
    for name, _, stage, kind in CASES:
        per_estimator[name] = per_estimator.get(name, 0) + 1
    kinds = {k[0] for *_, k in CASES} | {c.values[0] if hasattr(c, "values") else c[0]
                                          for c in DEGENERATE}
    table_kinds = {k[0] for _, k in TABLE_CASES} | {k[0] for k in MATRIX_KINDS}
    print(f"estimator kinds: {len(kinds)}; estimator cases: {len(CASES) + len(DEGENERATE)}; "
          f"per estimator: {per_estimator}")
    print(f"validator kinds: {len(table_kinds)}; validator cases: {len(TABLE_CASES) + len(MATRIX_KINDS)}")
    print(f"not bad input for that estimator: {len(NOT_BAD)} (reasons in NOT_BAD)")
    print(f"outcomes so far (whole file run): {OUTCOMES}")
    assert len(FIT_KINDS) + len(PREDICT_KINDS) + 1 >= 40
    assert len(TABLE_KINDS) >= 40
    assert set(per_estimator) == {n for n, _ in ESTIMATORS}
