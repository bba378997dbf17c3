"""Strict checks of specs and options (issue 25 findings 4, 11, 12): one line naming field and value."""

from __future__ import annotations

import json
import math

import pytest

from powermodels import validation as v
from powermodels.cli_options import option_integer, option_number
from powermodels.devices.sensor_emulation import PRESETS
from powermodels.measuring.protocols import PROTOCOLS


def spec_error(data):
    with pytest.raises(v.InputError) as info:
        v.check_campaign_spec(data, protocols=PROTOCOLS, presets=list(PRESETS))
    message = str(info.value)
    assert "\n" not in message and message.startswith("campaign spec")
    return message


BASE = {"kernels": {"fp32": "default"}, "device": "simulated"}


@pytest.mark.parametrize("field, value, expect", [
    # 4: a string never turns on clock changes or exclusive mode
    ("allow_clock_changes", "no", "'allow_clock_changes' must be true or false, got 'no'"),
    ("exclusive", "false", "'exclusive' must be true or false, got 'false'"),
    ("exclusive", 1, "'exclusive' must be true or false, got 1"),
    # 11: errors that name the problem
    ("repeats", math.inf, "'repeats' must be an integer >= 1 and <= 10000, got inf"),
    ("repeats", None, "'repeats' must be an integer"),
    ("repeats", [2], "'repeats' must be an integer"),
    ("repeats", "two", "'repeats' must be an integer >= 1 and <= 10000, got 'two'"),
    ("repeats", math.nan, "got nan"),
    ("protocol_params", [1], "'protocol_params' must be a table (JSON object), got [1]"),
    ("device", 1, "'device' must be one of ['auto', 'nvml', 'simulated'], got 1"),
    ("device_kwargs", {"colour": 1}, "'device_kwargs': unknown key(s) ['colour']"),
    ("device_kwargs", {"seed": "x"}, "'device_kwargs'['seed'] must be an integer >= 0, got 'x'"),
    ("device_kwargs", {"preset": ["hopper"]}, "'device_kwargs'['preset'] must be one of"),
    ("sm_clocks_mhz", "1000", "'sm_clocks_mhz' must be a list, got '1000'"),
    # 12: nothing accepted silently
    ("repeats", 2.9, "'repeats' must be an integer >= 1 and <= 10000, got 2.9"),
    ("repeats", True, "got True"),
    ("repeats", 10**9, "got 1000000000"),
])
def test_one_line_errors_name_the_field(field, value, expect):
    data = {**BASE, field: value}
    if field == "sm_clocks_mhz":
        data["allow_clock_changes"] = True
    assert expect in spec_error(data)


@pytest.mark.parametrize("configs, expect", [
    (None, "'kernels'['fp32'] must be 'default', 'all', a list of configs or {'sample': n, 'seed': s}, got None"),
    ({"sample": 2.5}, "'kernels'['fp32']['sample'] must be an integer >= 1, got 2.5"),
    ({"sample": math.nan}, "'kernels'['fp32']['sample'] must be an integer >= 1, got nan"),
    ({"sample": -1}, "got -1"),
    ({"sample": 2, "seed": "x"}, "'kernels'['fp32']['seed'] must be an integer >= 0, got 'x'"),
    ({"sample": 2, "sead": 1}, "'kernels'['fp32']: unknown key(s) ['sead']"),
    ("some", "got 'some'"),
    ([{"block": math.inf}], "'kernels'['fp32'][0]['block'] must be a finite number"),
    ([3], "'kernels'['fp32'][0] must be a table of parameter values"),
])
def test_configs(configs, expect):
    assert expect in spec_error({**BASE, "kernels": {"fp32": configs}})


def test_protocol_params_are_typed_by_the_protocol():
    assert "'protocol_params'['trials'] must be an integer, got nan" in spec_error(
        {**BASE, "protocol": "good_practice", "protocol_params": {"trials": math.nan}})
    assert "'protocol_params'['trials'] must be an integer, got 2.5" in spec_error(
        {**BASE, "protocol": "good_practice", "protocol_params": {"trials": 2.5}})
    assert "'protocol_params'['window_s'] must be a finite number, got 'x'" in spec_error(
        {**BASE, "protocol_params": {"window_s": "x"}})
    assert "unknown parameter(s) ['windw_s'] for 'counter'" in spec_error(
        {**BASE, "protocol_params": {"windw_s": 1}})
    assert "'protocol' must be one of" in spec_error({**BASE, "protocol": "fast"})
    ok = v.check_campaign_spec({**BASE, "protocol_params": {"window_s": 1, "alpha_w_per_c": None}},
                               protocols=PROTOCOLS)
    assert ok["protocol_params"] == {"window_s": 1, "alpha_w_per_c": None}  # unchanged


def test_clocks_listed_twice_and_clock_opt_in():
    assert "'sm_clocks_mhz'[1]: clock 1500.0 is listed twice" in spec_error(
        {**BASE, "sm_clocks_mhz": [1500, 1500.0], "allow_clock_changes": True})
    assert "needs 'allow_clock_changes': true" in spec_error({**BASE, "sm_clocks_mhz": [1500]})
    assert "'sm_clocks_mhz'[0] must be a finite number > 0, got -5" in spec_error(
        {**BASE, "sm_clocks_mhz": [-5], "allow_clock_changes": True})


@pytest.mark.parametrize("data, expect", [
    (None, "campaign spec must be a table (JSON object), got None"),
    ([1], "campaign spec must be a table (JSON object), got [1]"),
    ({**BASE, "workloads": [{"callable": 3}]}, "'workloads'[0]['callable'] must be a non-empty string, got 3"),
    ({**BASE, "workloads": [{"program": "ls"}]}, "'workloads'[0]['program'] must be a list, got 'ls'"),
    ({**BASE, "workloads": [{"registry": "x", "source": "y"}]}, "'workloads'[0]: give exactly one of"),
    ({**BASE, "workloads": {"a": 1}}, "'workloads' must be a list"),
    ({**BASE, "kernels": ["fp32"]}, "'kernels' must be a table"),
    ({**BASE, "repeets": 2}, "campaign spec: unknown key(s) ['repeets']"),
])
def test_spec_structure(data, expect):
    assert expect in spec_error(data)


def test_deeply_nested_json_is_one_line_not_a_recursion_error():
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(v.InputError, match="nested deeper than 32 levels"):
        v.parse_json(deep, "campaign config 'x.json'")
    nested = json.dumps({"kernels": {"fp32": [{"a": 1}]}, "workloads": [{"registry": "x", "simulated": {
        "a": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}]})
    with pytest.raises(v.InputError, match="nested deeper"):
        v.parse_json(nested, "x")
    with pytest.raises(v.InputError, match=r"x: 'protocol_params'\['trials'\] must be a finite number, got nan"):
        v.parse_json('{"protocol_params": {"trials": NaN}}', "x")
    with pytest.raises(v.InputError, match=r"x: 'sm_clocks_mhz'\[1\] must be a finite number, got inf"):
        v.parse_json('{"sm_clocks_mhz": [1500, Infinity]}', "x")
    with pytest.raises(v.InputError, match="x: invalid JSON"):
        v.parse_json('{"repeats": ', "x")


def test_scalar_checks_return_values_unchanged():
    assert v.check_integer("n", 3, minimum=1) == 3 and type(v.check_integer("n", 3)) is int
    assert v.check_number("x", 2) == 2.0 and v.check_boolean("b", False) is False
    for bad in (True, "1", 1.0, None):
        with pytest.raises(v.InputError, match="n must be an integer"):
            v.check_integer("n", bad)
    for bad in (math.nan, -math.inf, "1", True):
        with pytest.raises(v.InputError, match="x must be a finite number"):
            v.check_number("x", bad)
    with pytest.raises(v.InputError, match=r"x must be a finite number > 0 and <= 5, got 5.5"):
        v.check_number("x", 5.5, above=0, maximum=5)
    with pytest.raises(v.InputError, match="got 'aaaa"):
        v.check_string("s", "a" * 500, choices=["b"])
    assert len(str(pytest.raises(v.InputError, v.check_list, "l", "a" * 500).value)) < 120


def test_option_types_for_argparse(capsys):
    import argparse

    parser = argparse.ArgumentParser(prog="p")
    parser.add_argument("--seconds", type=option_number(above=0))
    parser.add_argument("--index", type=option_integer(minimum=0))
    assert parser.parse_args(["--seconds", "0.5", "--index", "2"]).index == 2
    for argv, expect in [(["--seconds", "nan"], "argument --seconds: must be a finite number > 0, got 'nan'"),
                         (["--seconds", "x"], "got 'x'"), (["--seconds", "0"], "got '0'"),
                         (["--index", "-1"], "argument --index: must be an integer >= 0, got '-1'"),
                         (["--index", "2.5"], "got '2.5'"), (["--index", "1e3"], "got '1e3'")]:
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert expect in capsys.readouterr().err
