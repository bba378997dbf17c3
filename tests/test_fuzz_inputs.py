"""Bounded property-based fuzz of campaign specs and CLI options (issue 25, "done means").

Every generated case either completes (within the protocol's bound) or exits
non-zero with ONE line naming the field or option — never a hang, a
traceback, an "unexpected" error or a silently coerced value. Simulated GPU,
tiny workloads; the example counts keep it to ~30 s on two cores.
"""

from __future__ import annotations

import json
import math
import time

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from powermodels.cli import main  # noqa: E402

FIELDS = ("kernels", "protocol", "protocol_params", "repeats", "sm_clocks_mhz", "allow_clock_changes",
          "device", "device_kwargs", "exclusive", "workloads")
ODD = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True, allow_infinity=True),
                st.text(max_size=4), st.lists(st.integers(0, 2), max_size=2),
                st.dictionaries(st.text(max_size=3), st.integers(0, 2), max_size=2))
GOOD = {
    "kernels": st.just({"fp32": ["nr_outer=8"]}),
    "protocol": st.sampled_from(["naive", "counter"]),
    "protocol_params": st.just({}),
    "repeats": st.integers(1, 2),
    "sm_clocks_mhz": st.none(),
    "allow_clock_changes": st.booleans(),
    "device": st.just("simulated"),
    "device_kwargs": st.fixed_dictionaries({}, optional={"seed": st.integers(0, 3),
                                                         "preset": st.sampled_from(["hopper", "volta"])}),
    "exclusive": st.booleans(),
}


@st.composite
def specs(draw):
    """A valid small spec with up to two fields replaced by odd values (or an odd top level)."""
    if draw(st.integers(0, 19)) == 0:
        return draw(ODD)
    spec = {name: draw(strategy) for name, strategy in GOOD.items()}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=2, unique=True)):
        spec[name] = draw(ODD)
    return spec


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "unexpected" not in lines[0] and "Traceback" not in err, err
    return lines[0]


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(spec=specs())
def test_campaign_specs_complete_or_fail_in_one_line(tmp_path_factory, capsys, spec):
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "spec.json"
    path.write_text(json.dumps(spec, allow_nan=True))
    started = time.monotonic()
    rc = main(["campaign", str(path), "--out", str(folder / "out"), "--no-progress"])
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    assert elapsed < 30
    if rc == 0:  # accepted: then every value had its exact type (nothing coerced)
        assert isinstance(spec, dict) and type(spec["repeats"]) is int
        assert type(spec["allow_clock_changes"]) is bool and type(spec["exclusive"]) is bool
        assert f"{len(spec['kernels']['fp32']) * spec['repeats']}/" in out
    else:
        line = _one_error_line(err)
        assert rc == 1 and ("campaign spec" in line or "campaign config" in line), line


PARAMS = {"window_s": st.one_of(st.floats(0.05, 0.3), st.floats(allow_nan=True), st.text(max_size=3)),
          "min_updates": st.one_of(st.integers(1, 3), st.integers(10**6, 10**12), st.floats()),
          "settle_s": st.one_of(st.floats(0, 0.2), st.floats(allow_infinity=True)),
          "max_duration_s": st.one_of(st.floats(0.5, 3), st.floats(-5, 0), st.booleans())}


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(params=st.dictionaries(st.sampled_from(sorted(PARAMS)), st.none(), max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: PARAMS[k] for k in keys})),
    index=st.one_of(st.just("0"), st.sampled_from(["-1", "2", "1.5", "x"])),
    twin_time=st.one_of(st.none(), st.sampled_from([1e-9, 1e6, 0.01, float("nan"), -1.0])))
def test_measure_options_complete_in_bounds_or_fail_in_one_line(capsys, params, index, twin_time):
    argv = ["measure", "--device", "simulated", "--index", index, "--protocol", "counter"]
    for key, value in params.items():
        argv += ["--protocol-param", f"{key}={_text(value)}"]
    if twin_time is not None:
        argv += ["--callable", "os:getcwd", "--simulated", json.dumps({"time_s": twin_time})]
    started = time.monotonic()
    try:
        rc = main(argv)
    except SystemExit as stop:  # argparse usage errors
        rc = stop.code
        assert rc == 2
    elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    limit = params.get("max_duration_s", 5.0)
    assert elapsed < 30
    if rc == 0:
        assert index == "0" and (twin_time is None or 0 < twin_time <= limit)
        assert isinstance(limit, float) and limit > 0 and math.isfinite(limit)
    else:
        line = _one_error_line(err)
        assert "--" in line or "protocol" in line or "max_duration_s" in line or "launch" in line \
            or "twin" in line.lower() or "time_s" in line, line
