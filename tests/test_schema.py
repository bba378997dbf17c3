"""The table contract rejects bad tables with a ValueError naming the column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels import schema


def _trace(n=5):
    return pd.DataFrame(
        {
            schema.RUN_ID: ["r"] * n,
            schema.T_S: np.arange(n) * 1e-3,
            schema.POWER_INSTANT_W: np.linspace(100, 200, n),
            schema.ENERGY_COUNTER_J: [1.0] + [np.nan] * (n - 1),
            schema.THROTTLE_REASONS: np.zeros(n, dtype=np.int64),
        }
    )


def _runs(n=3):
    return pd.DataFrame(
        {
            schema.KERNEL: ["k"] * n,
            schema.CONFIG: [f"c{i}" for i in range(n)],
            schema.TIME_S: np.full(n, 1e-3),
            schema.POWER_W: np.full(n, 300.0),
            schema.ENERGY_J: np.full(n, 0.3),
        }
    )


def test_valid_tables_pass_unchanged():
    trace = _trace()
    assert schema.validate_trace_table(trace) is trace
    runs = _runs()
    assert schema.validate_run_table(runs) is runs


@pytest.mark.parametrize(
    ("mutate", "column", "problem"),
    [
        (lambda d: d.drop(columns=[schema.T_S]), schema.T_S, "missing"),
        (lambda d: d.assign(**{schema.T_S: d[schema.T_S][::-1].to_numpy()}), schema.T_S, "not sorted"),
        (lambda d: d.assign(**{schema.T_S: np.zeros(len(d))}), schema.T_S, "duplicate"),
        (lambda d: d.assign(**{schema.POWER_INSTANT_W: -d[schema.POWER_INSTANT_W]}),
         schema.POWER_INSTANT_W, "negative"),
        (lambda d: d.assign(**{schema.POWER_INSTANT_W: np.r_[np.inf, d[schema.POWER_INSTANT_W][1:]]}),
         schema.POWER_INSTANT_W, "infinite"),
        (lambda d: d.assign(**{schema.T_S: np.r_[np.nan, d[schema.T_S][1:]]}), schema.T_S, "NaN"),
        (lambda d: d.assign(**{schema.POWER_INSTANT_W: ["x"] * len(d)}),
         schema.POWER_INSTANT_W, "dtype"),
        (lambda d: d.iloc[:1], None, "at least 2"),
    ],
)
def test_trace_table_rejections_name_column(mutate, column, problem):
    with pytest.raises(ValueError, match=problem) as info:
        schema.validate_trace_table(mutate(_trace()))
    if column is not None:
        assert repr(column) in str(info.value)


def test_time_may_restart_in_each_run():
    a, b = _trace(), _trace()
    b[schema.RUN_ID] = "s"
    schema.validate_trace_table(pd.concat([a, b], ignore_index=True))


def test_run_table_rejects_nan_energy_and_names_required_extra():
    runs = _runs()
    runs.loc[1, schema.ENERGY_J] = np.nan
    with pytest.raises(ValueError, match=f"{schema.ENERGY_J!r} has 1 NaN"):
        schema.validate_run_table(runs)
    with pytest.raises(ValueError, match=f"{schema.SM_CLOCK_MHZ!r} is missing"):
        schema.validate_run_table(_runs(), required=[schema.SM_CLOCK_MHZ])


def test_non_dataframe_rejected():
    with pytest.raises(ValueError, match="DataFrame"):
        schema.validate_run_table(np.zeros((3, 5)))


def test_trace_matrix():
    X = np.ones((4, 10))
    np.testing.assert_array_equal(schema.validate_trace_matrix(X), X)
    with pytest.raises(ValueError, match="2-D"):
        schema.validate_trace_matrix(np.ones(10))
    df = pd.DataFrame(X, columns=[f"t{i}" for i in range(10)])
    df.iloc[2, 3] = np.nan
    with pytest.raises(ValueError, match="'t3'"):
        schema.validate_trace_matrix(df)
    with pytest.raises(ValueError, match="negative"):
        schema.validate_trace_matrix(-X)
    with pytest.raises(ValueError, match="time point"):
        schema.validate_trace_matrix(np.ones((3, 1)))


def test_instruction_table():
    table = pd.DataFrame(
        {schema.WORKLOAD: ["a", "b"], schema.TIME_S: [1.0, 2.0], schema.ENERGY_J: [3.0, 4.0],
         f"{schema.OPCODE_PREFIX}FFMA": [10.0, 0.0]}
    )
    schema.validate_instruction_table(table)
    assert schema.opcode_columns(table) == [f"{schema.OPCODE_PREFIX}FFMA"]
    with pytest.raises(ValueError, match="no opcode columns"):
        schema.validate_instruction_table(table.drop(columns=[f"{schema.OPCODE_PREFIX}FFMA"]))
    table.loc[0, f"{schema.OPCODE_PREFIX}FFMA"] = -1
    with pytest.raises(ValueError, match="negative"):
        schema.validate_instruction_table(table)
