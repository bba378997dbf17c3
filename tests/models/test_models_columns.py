"""One column convention for every estimator (issue 23; docs/columns.md).

The new user's trial of issue 23: a public sweep of another GPU, a table with
``benchmark``, ``suite`` (text), ``mem_clock_mhz`` (memory clock first) and
``core_clock_mhz``. Every estimator must fit on the column it is told to read
or fail with a message naming the column it used; unread text columns are
ignored; the old parameter names work for one release with a FutureWarning.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.utils._param_validation import InvalidParameterError

from powermodels import schema
from powermodels.models import (
    DVFSEnergyModel,
    DVFSPowerModel,
    DVFSTimeModel,
    EnergyModel,
    FrequencyCorrection,
    FrequencyPowerModel,
    RationalTimeModel,
)
from powermodels.models.dvfs_targets import kernel_parameters
from powermodels.utils import all_estimators

CORE = np.arange(800.0, 1801.0, 100.0)


def _power(fc):
    return 60.0 + 0.07 * fc * (1 + 0.6 * np.maximum(fc - 1300.0, 0) / 1000) ** 2


def _time(fc):
    return 2e-4 + 1.5 / fc


def new_user_table(memory_clocks=(6500.0,)) -> pd.DataFrame:
    """The issue's table: text first, the memory clock before the core clock, foreign names."""
    rows = [{"benchmark": "micro", "suite": "nv-dvfs", "mem_clock_mhz": m, "core_clock_mhz": c}
            for m in memory_clocks for c in CORE]
    df = pd.DataFrame(rows)
    df["power"] = _power(df["core_clock_mhz"]) + 0.01 * df["mem_clock_mhz"]
    df["time"] = _time(df["core_clock_mhz"])
    return df


X_COLUMNS = ["benchmark", "suite", "mem_clock_mhz", "core_clock_mhz"]


# ------------------------------------------------------------ the new user's trial


@pytest.mark.parametrize("cls", [FrequencyPowerModel, RationalTimeModel])
def test_one_clock_models_fail_on_the_default_naming_the_column(cls):
    df = new_user_table()
    with pytest.raises(ValueError, match=r"column 'sm_clock_mhz' \(clock_column\) is missing; X has "
                                         r"\['benchmark', 'suite', 'mem_clock_mhz', 'core_clock_mhz'\]"):
        cls().fit(df[X_COLUMNS], df["power"])


@pytest.mark.parametrize(("cls", "target"), [(FrequencyPowerModel, "power"), (RationalTimeModel, "time")])
def test_one_clock_models_fit_the_named_column_and_ignore_text(cls, target):
    df = new_user_table()
    table = cls(clock_column="core_clock_mhz").fit(df[X_COLUMNS], df[target])
    plain = cls().fit(df[["core_clock_mhz"]].to_numpy(), df[target])  # one unnamed column: the clock
    np.testing.assert_allclose(table.predict(df[X_COLUMNS]), plain.predict_at(df["core_clock_mhz"]))
    np.testing.assert_allclose(table.predict(df[X_COLUMNS]), df[target], rtol=0.01)


@pytest.mark.parametrize("cls", [FrequencyPowerModel, RationalTimeModel])
@pytest.mark.parametrize(("memory_clocks", "phrase"), [
    ((6500.0,), r"1 distinct clock \(6500 MHz\)"),
    ((6500.0, 7000.0), r"2 distinct clocks \(6500, 7000 MHz\)"),
])
def test_too_few_clocks_names_the_column_and_counts_right(cls, memory_clocks, phrase):
    # The trap: pointed at the memory clock. The message names the column and is right
    # for any number of clocks (it said "2 distinct clock(s) ... a single clock identifies nothing").
    df = new_user_table(memory_clocks)
    with pytest.raises(ValueError, match=rf"column 'mem_clock_mhz' \(clock_column\) holds {phrase}; "
                                         r"the four-parameter curve needs at least 3"):
        cls(clock_column="mem_clock_mhz").fit(df[X_COLUMNS], df["power"])


@pytest.mark.parametrize("cls", [FrequencyPowerModel, RationalTimeModel, DVFSPowerModel])
def test_a_text_column_that_is_read_is_named(cls):
    df = new_user_table()
    with pytest.raises(ValueError, match=r"column 'benchmark' \(clock_column\) is not numeric: it holds "
                                         r"text \('micro'\)"):
        cls(clock_column="benchmark").fit(df[X_COLUMNS], df["power"])


@pytest.mark.parametrize(("cls", "y"), [(DVFSPowerModel, "power"), (DVFSTimeModel, "time"),
                                        (DVFSEnergyModel, ["time", "power"])])
def test_dvfs_models_fit_named_columns_in_any_order(cls, y):
    df = new_user_table((5000.0, 6500.0))
    est = cls(clock_column="core_clock_mhz", memory_clock_column="mem_clock_mhz").fit(df[X_COLUMNS], df[y])
    swapped = cls(clock_column=1, memory_clock_column=0).fit(
        df[["mem_clock_mhz", "core_clock_mhz"]].to_numpy(), df[y])
    np.testing.assert_allclose(est.predict(df[X_COLUMNS]),
                               swapped.predict(df[["mem_clock_mhz", "core_clock_mhz"]].to_numpy()))
    with pytest.raises(ValueError, match=r"column 'sm_clock_mhz' \(clock_column\) is missing"):
        cls(memory_clock_column="mem_clock_mhz").fit(df[X_COLUMNS], df[y])


def test_run_table_estimators_use_the_same_names():
    df = new_user_table().rename(columns={"core_clock_mhz": "f", "power": "p", "time": "t"})
    corr = FrequencyCorrection(power_column="p", clock_column="f").fit(df)
    out = corr.transform(df)
    assert (out["benchmark"] == "micro").all()  # text passes through untouched
    np.testing.assert_allclose(out["p"], corr.reference_power_w_, atol=0.5)
    energy = EnergyModel(power_column="p", time_column="t", clock_column="f", time="model").fit(df)
    np.testing.assert_allclose(energy.predict(df), df["p"] * df["t"], rtol=1e-3)
    with pytest.raises(ValueError, match=r"column 'sm_clock_mhz' \(clock_column\) is missing"):
        EnergyModel(power_column="p", time_column="t", time="model").fit(df)


def test_every_clock_reading_estimator_takes_clock_column_with_the_schema_default():
    expected = {"clock_column": schema.SM_CLOCK_MHZ, "memory_clock_column": schema.MEM_CLOCK_MHZ,
                "power_column": schema.POWER_W, "time_column": schema.TIME_S,
                "temperature_column": schema.TEMPERATURE_C}
    seen = set()
    for name, cls in all_estimators():
        if not cls.__module__.startswith("powermodels.models."):
            continue
        params = inspect.signature(cls.__init__).parameters
        for param, default in expected.items():
            if param in params:
                seen.add(param)
                assert params[param].default == default, f"{name}.{param}"
        # positions are never a default: a table with other columns would be read silently wrong
        for param in params:
            if param.endswith("_column") and param != "group_column":
                assert not isinstance(params[param].default, int), f"{name}.{param} defaults to a position"
    assert seen == set(expected)


# ------------------------------------------------------------ deprecated names


OLD_NAMES = [
    (FrequencyPowerModel, {"frequency_column": "core_clock_mhz"}, {"clock_column": "core_clock_mhz"}, "power"),
    (RationalTimeModel, {"frequency_column": "core_clock_mhz"}, {"clock_column": "core_clock_mhz"}, "time"),
    (DVFSPowerModel, {"core_clock_column": "core_clock_mhz", "mem_clock_column": "mem_clock_mhz"},
     {"clock_column": "core_clock_mhz", "memory_clock_column": "mem_clock_mhz"}, "power"),
    (DVFSTimeModel, {"core_clock_column": "core_clock_mhz", "mem_clock_column": "mem_clock_mhz"},
     {"clock_column": "core_clock_mhz", "memory_clock_column": "mem_clock_mhz"}, "time"),
]


@pytest.mark.parametrize(("cls", "old", "new", "target"), OLD_NAMES, ids=lambda v: getattr(v, "__name__", ""))
def test_old_parameter_names_work_with_a_future_warning(cls, old, new, target):
    df = new_user_table((5000.0, 6500.0))
    with pytest.warns(FutureWarning, match=rf"{next(iter(old))} is now {next(iter(new))}") as record:
        before = cls(**old).fit(df[X_COLUMNS], df[target])
    assert all(w.filename == __file__ for w in record)  # points at the caller's line
    after = cls(**new).fit(df[X_COLUMNS], df[target])
    np.testing.assert_allclose(before.predict(df[X_COLUMNS]), after.predict(df[X_COLUMNS]))
    assert clone(before).get_params()[next(iter(old))] == old[next(iter(old))]
    with pytest.raises(ValueError, match=rf"pass {next(iter(new))} only"):
        cls(**old, **{next(iter(new)): 0}).fit(df[X_COLUMNS], df[target])


def test_old_names_of_the_run_table_estimators():
    df = new_user_table().rename(columns={"core_clock_mhz": schema.SM_CLOCK_MHZ, "power": schema.POWER_W,
                                          "time": schema.TIME_S})
    with pytest.warns(FutureWarning, match="frequency_column is now clock_column"):
        FrequencyCorrection(frequency_column=schema.SM_CLOCK_MHZ).fit(df)
    with pytest.warns(FutureWarning, match="frequency_column is now clock_column"):
        EnergyModel(frequency_column=schema.SM_CLOCK_MHZ, time="model").fit(df)
    runs = df.assign(**{schema.KERNEL: "k", schema.MEM_CLOCK_MHZ: df["mem_clock_mhz"]})
    with pytest.warns(FutureWarning, match="core_clock_column is now clock_column"):
        kernel_parameters(runs, core_clock_column=schema.SM_CLOCK_MHZ, voltage_knee_mhz=1300.0,
                          voltage_slope_per_ghz=0.6, detect=False)


def test_unnamed_array_keeps_the_old_positions_for_one_release():
    X = np.column_stack([np.repeat(CORE, 2), np.tile([5000.0, 6500.0], CORE.size)])
    t = _time(X[:, 0])
    with pytest.warns(FutureWarning, match=r"clock_column='sm_clock_mhz' \(the default\) names no column; "
                                           "using column 0 as before"):
        legacy = DVFSTimeModel().fit(X, t)
    np.testing.assert_allclose(legacy.predict(X), DVFSTimeModel(0, 1).fit(X, t).predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a single unnamed column is the clock: no warning
        FrequencyPowerModel().fit(CORE[:, None], _power(CORE))


# ------------------------------------------------------------ parameter validation


@pytest.mark.parametrize("est", [
    FrequencyPowerModel(max_iter=0), FrequencyPowerModel(knee_in_gap="middle"), RationalTimeModel(clock_column=1.5),
    DVFSTimeModel(loss="l1"), DVFSPowerModel(huber_scale=-1.0), DVFSPowerModel(voltage_knee_mhz=-5.0),
    FrequencyCorrection(reference_frequency_mhz=-5.0), FrequencyCorrection(model="fpm"),
    EnergyModel(time="bogus"), EnergyModel(time_model=FrequencyPowerModel()),
], ids=repr)
def test_bad_parameters_are_refused_by_name(est):
    df = new_user_table().rename(columns={"core_clock_mhz": schema.SM_CLOCK_MHZ, "power": schema.POWER_W,
                                          "time": schema.TIME_S})
    df[schema.MEM_CLOCK_MHZ] = df["mem_clock_mhz"]
    bad = next(k for k, v in est.get_params(deep=False).items() if v != type(est)().get_params(deep=False)[k])
    with pytest.raises(InvalidParameterError, match=rf"The '{bad}' parameter of {type(est).__name__}"):
        est.fit(df, df[schema.POWER_W])


# ------------------------------------------------------------ files saved before the rename


def _as_saved_before_the_rename(est, renamed: dict, added=()):
    """``est``'s state as version 0.1 wrote it: old parameter names, no added parameters."""
    state = dict(est.__getstate__())  # a copy: on Python ≥ 3.11 it is the object's own __dict__
    for old, new in renamed.items():
        state[old] = state.pop(new)
    for name in added:
        state.pop(name)
    old = type(est).__new__(type(est))
    old.__setstate__(state)
    return old


def test_estimators_saved_before_the_rename_load_and_predict_the_same():
    df = new_user_table((5000.0, 6500.0)).rename(columns={"core_clock_mhz": schema.SM_CLOCK_MHZ,
                                                          "power": schema.POWER_W, "time": schema.TIME_S})
    df[schema.MEM_CLOCK_MHZ] = df["mem_clock_mhz"]
    cases = [
        (FrequencyPowerModel().fit(df, df[schema.POWER_W]), {"frequency_column": "clock_column"},
         ("knee_in_gap",)),
        (RationalTimeModel().fit(df, df[schema.TIME_S]), {"frequency_column": "clock_column"}, ()),
        (DVFSTimeModel().fit(df, df[schema.TIME_S]),
         {"core_clock_column": "clock_column", "mem_clock_column": "memory_clock_column"}, ()),
        (EnergyModel(time="model").fit(df), {"frequency_column": "clock_column"}, ()),
    ]
    for est, renamed, added in cases:
        old = _as_saved_before_the_rename(est, renamed, added)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the user wrote no old name: no FutureWarning
            np.testing.assert_allclose(old.predict(df), est.predict(df))
            assert old.get_params() == {**est.get_params(), **{k: "deprecated" for k in renamed},
                                        **({"knee_in_gap": "free"} if added else {})}
            clone(old).fit(df, df[schema.TIME_S] if isinstance(est, RationalTimeModel | DVFSTimeModel)
                           else df[schema.POWER_W])


def test_a_fitted_gap_round_trips_the_safe_calibration_format(tmp_path):
    from powermodels.io import load_calibration, save_calibration

    f = np.arange(600.0, 2001.0, 100.0)
    keep = (f < 1100.0) | (f > 1400.0)
    model = FrequencyPowerModel().fit(f[keep, None], _power(f[keep]))
    assert model.knee_gap_mhz_ == (1000.0, 1500.0)
    back = load_calibration(save_calibration(model, tmp_path / "m.pmcal"))
    assert back.knee_gap_mhz_ == model.knee_gap_mhz_ and back.get_params() == model.get_params()


@pytest.mark.shared_data
def test_the_real_h100_calibration_file_of_version_0_1_still_loads(shared_data):
    """A calibrate file written before the rename (real H100, 2026-11-24) loads and predicts."""
    from powermodels.io import load_calibration

    path = shared_data / "h100-2026-11-24" / "natural_dvfs" / "calibration.pmcal"
    if not path.is_file():
        pytest.skip(f"{path} is absent")
    cal = load_calibration(path)
    X = pd.DataFrame({schema.SM_CLOCK_MHZ: [1200.0, 1500.0, 1980.0], schema.MEM_CLOCK_MHZ: 2619.0})
    kernel = next(iter(cal["dvfs_time"].estimators_))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        time_s = cal["dvfs_time"].estimators_[kernel].predict(X)
        cal["power_global"].predict(X[[schema.SM_CLOCK_MHZ]])
    # the same numbers as before the rename (computed with main at aed07b7)
    np.testing.assert_allclose(time_s, [0.00270922, 0.00233545, 0.00223316], rtol=1e-5)
    assert cal["power_global"].knee_in_gap == "free"
