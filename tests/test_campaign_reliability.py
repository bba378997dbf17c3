"""Campaigns and protocols under attack (issue 25 findings 1, 2, 3, 9): bounded, never stale, never mixed."""

from __future__ import annotations

import json
import time
import warnings

import pytest

from powermodels import schema
from powermodels.campaigns import CampaignSpec, load_runs, plan, run_campaign
from powermodels.cli import main
from powermodels.measuring.protocols import make_protocol
from powermodels.measuring.runner import make_runner

SPEC = {"kernels": {"fp32": ["nr_outer=8", "nr_outer=16"]}, "protocol": "naive", "repeats": 2,
        "device": "simulated", "device_kwargs": {"seed": 0}}


# ------------------------------------------------------------------ 1: bounded


@pytest.mark.parametrize("params, expect", [
    ({"window_s": 1e9}, "more than max_duration_s=5"),
    ({"min_updates": 10**9}, "more than max_duration_s=5"),
    ({"min_updates": 1e9}, "'min_updates'] must be an integer, got 1000000000.0"),
    ({"window_s": 2.0, "max_duration_s": 1.0}, "more than max_duration_s=1"),
])
def test_counter_refuses_what_cannot_fit_its_bound_up_front(params, expect, simulated_work):
    """Issue 25 #1: --protocol-param window_s=1e9 / min_updates=1e9 ran forever."""
    with make_runner("simulated") as runner, pytest.raises(ValueError, match=expect.replace("[", r"\[")):
        make_protocol("counter", **params).measure(runner, "fp32")
    assert simulated_work["seconds"] < 1  # refused before measuring (an unbounded run fails the fixture)


@pytest.mark.parametrize("name, params", [
    ("continuous", {"duration_s": 1e6}),
    ("good_practice", {"min_duration_s": 1e6}),
    ("steady_state", {"measure_s": 1e6}),
])
def test_every_protocol_has_a_bound(name, params):
    with make_runner("simulated") as runner, \
            pytest.raises(ValueError, match="max_duration_s|a measurement takes at most 1,000,000"):
        make_protocol(name, **params).measure(runner, "fp32")


@pytest.mark.parametrize("twin, expect", [
    ('{"time_s": 1e-9}', "a launch of 1e-09 s needs 299,999,998 launches"),  # grew ~450 MB/s before
    ('{"time_s": 1e6}', "one launch of 'getcwd' takes 1e+06 s, more than max_duration_s=5"),
])
def test_measure_refuses_twins_it_cannot_measure_in_bounds(capsys, twin, expect, simulated_work):
    """Issue 25 #1: `measure --callable os:getcwd --simulated '{"time_s": 1e-9}'` grew without bound."""
    rc = main(["measure", "--device", "simulated", "--callable", "os:getcwd", "--simulated", twin])
    err = capsys.readouterr().err
    assert rc == 1 and err.count("\n") == 1 and expect in err, err
    assert simulated_work["seconds"] < 1  # refused before measuring (an unbounded run fails the fixture)


# ------------------------------------------------------------------ 2: stale index


def test_index_never_returns_a_deleted_and_remeasured_row(tmp_path, monkeypatch):
    """Issue 25 #2: after deleting runs/K.json and resuming, load_runs() returned the old row."""
    from powermodels.campaigns import store as store_module

    monkeypatch.setattr(store_module, "INDEX_AFTER", 1)
    run_campaign(SPEC, tmp_path, progress=False)
    assert (tmp_path / "runs" / "_index.parquet").exists()
    key = sorted(p.stem for p in (tmp_path / "runs").glob("*.json"))[0]
    old = json.loads((tmp_path / "runs" / f"{key}.json").read_text())
    (tmp_path / "runs" / f"{key}.json").unlink()
    time.sleep(0.01)  # a distinct modification time even on coarse clocks
    runs = run_campaign(SPEC, tmp_path, progress=False)
    new = json.loads((tmp_path / "runs" / f"{key}.json").read_text())
    assert new[schema.WALL_S] != old[schema.WALL_S]  # measured again
    for table in (runs, load_runs(tmp_path)):
        row = table.loc[table[schema.RUN_ID] == key].iloc[0]
        assert row[schema.WALL_S] == new[schema.WALL_S]
    import pandas as pd

    full = pd.read_parquet(tmp_path / "runs.parquet")
    assert full.loc[full[schema.RUN_ID] == key, schema.WALL_S].item() == new[schema.WALL_S]


# ------------------------------------------------------------------ 3: campaign identity


def test_run_key_covers_device_settings_and_protocol_parameters():
    keys = {tuple(r.key for r in plan(CampaignSpec.from_dict(spec))) for spec in (
        SPEC, {**SPEC, "device_kwargs": {"seed": 1}}, {**SPEC, "device_kwargs": {"seed": 0, "preset": "volta"}},
        {**SPEC, "protocol_params": {"power_column": schema.POWER_INSTANT_W}}, {**SPEC, "device": "auto"})}
    assert len(keys) == 5


@pytest.mark.parametrize("change, named", [
    ({"device_kwargs": {"seed": 1}}, "device_kwargs.seed: 0 -> 1"),
    ({"device_kwargs": {"seed": 0, "preset": "volta"}}, 'device_kwargs.preset: null -> "volta"'),
    ({"protocol_params": {"power_column": schema.POWER_INSTANT_W}}, "protocol_params.power_column"),
    ({"kernels": {"stream_triad": "default"}}, "kernels."),
    ({"repeats": 3}, "repeats: 2 -> 3"),
])
def test_resume_with_a_changed_spec_refuses_naming_the_change(tmp_path, capsys, change, named):
    """Issue 25 #3: a changed spec resumed into the same --out reported the old rows as finished."""
    first = run_campaign(SPEC, tmp_path, progress=False)
    meta = (tmp_path / "metadata.json").read_text()
    with pytest.raises(ValueError, match="was measured with another spec") as info:
        run_campaign({**SPEC, **change}, tmp_path, progress=False)
    assert named in str(info.value) and "--restart" in str(info.value)
    assert (tmp_path / "metadata.json").read_text() == meta
    assert len(load_runs(tmp_path)) == len(first)
    runs = run_campaign({**SPEC, **change}, tmp_path, progress=False, restart=True)  # anew, when asked
    assert len(runs) == len(plan(CampaignSpec.from_dict({**SPEC, **change})))
    aside = list(tmp_path.glob("previous-*"))
    assert len(aside) == 1 and len(list((aside[0] / "runs").glob("*.json"))) == len(first)
    assert json.loads((tmp_path / "metadata.json").read_text())["spec"]["repeats"] == \
        {**SPEC, **change}["repeats"]


def test_cli_resume_refuses_and_restart_starts_anew(tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    out = tmp_path / "c"
    assert main(["campaign", str(spec), "--out", str(out), "--no-progress"]) == 0
    spec.write_text(json.dumps({**SPEC, "device_kwargs": {"seed": 4}}))
    capsys.readouterr()
    assert main(["campaign", str(spec), "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "device_kwargs.seed: 0 -> 4" in err
    assert main(["campaign", str(spec), "--out", str(out), "--no-progress", "--restart"]) == 0
    assert "4/4 runs finished" in capsys.readouterr().out


# ------------------------------------------------------------------ 9: corrupt run file


@pytest.mark.parametrize("damage", ['{"kernel": "fp3', "", "[1, 2]"])
def test_corrupt_run_file_is_set_aside_named_and_measured_again(tmp_path, damage):
    """Issue 25 #9: a truncated runs/K.json failed every resume without naming the file."""
    run_campaign(SPEC, tmp_path, progress=False)
    key = sorted(p.stem for p in (tmp_path / "runs").glob("*.json"))[1]
    path = tmp_path / "runs" / f"{key}.json"
    path.write_text(damage)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runs = run_campaign(SPEC, tmp_path, progress=False)
    said = [str(w.message) for w in caught if "unreadable" in str(w.message)]
    assert said and str(path) in said[0] and "measured again" in said[0]
    assert len(runs) == 4 and key in set(runs[schema.RUN_ID])
    assert json.loads(path.read_text())[schema.RUN_ID] == key
    kept = list((tmp_path / "runs" / "_corrupt").iterdir())
    assert len(kept) == 1 and kept[0].read_text() == damage


# ------------------------------------------------------------------ specs are code


def test_a_callable_outside_the_specs_folder_needs_an_explicit_option(tmp_path, capsys):
    """Issue 25: {"callable": "/abs/path/evil.py:f"} imported and ran that file, even on the simulated GPU."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    marker = tmp_path / "ran"
    (elsewhere / "evil.py").write_text(f"open({str(marker)!r}, 'w').close()\ndef f():\n    pass\n")
    folder = tmp_path / "spec"
    folder.mkdir()
    spec = folder / "spec.json"
    entry = {"callable": str(elsewhere / "evil.py") + ":f", "simulated": {"time_s": 0.01}}
    spec.write_text(json.dumps({"workloads": [entry], "device": "simulated", "repeats": 1, "protocol": "naive"}))
    assert main(["campaign", str(spec), "--out", str(tmp_path / "c"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is outside the spec's folder" in err and "--allow-code-outside" in err
    assert not marker.exists()
    spec.write_text(json.dumps({"workloads": [{**entry, "callable": "../elsewhere/evil.py:f"}],
                                "device": "simulated", "repeats": 1, "protocol": "naive"}))
    assert main(["campaign", str(spec), "--out", str(tmp_path / "c"), "--no-progress"]) == 1
    assert not marker.exists()
    assert main(["campaign", str(spec), "--out", str(tmp_path / "c"), "--no-progress",
                 "--allow-code-outside"]) == 0
    assert marker.exists()


# ------------------------------------------------------------------ 4, 11, 12 through the command


@pytest.mark.parametrize("text, named", [
    # 4: a string never turns on clock changes or exclusive mode (both were true before)
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "sm_clocks_mhz": [1500], '
     '"allow_clock_changes": "no"}', "'allow_clock_changes' must be true or false, got 'no'"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "exclusive": "false"}',
     "'exclusive' must be true or false, got 'false'"),
    # 11: each error names its field
    ("null", "campaign spec must be a table (JSON object), got None"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "repeats": Infinity}',
     "'repeats' must be a finite number, got inf"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "protocol": "good_practice", '
     '"protocol_params": {"trials": NaN}}', "'protocol_params'['trials'] must be a finite number, got nan"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "protocol_params": [1]}',
     "'protocol_params' must be a table"),
    ('{"kernels": {"fp32": "default"}, "device": 1}', "'device' must be one of"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "device_kwargs": {"colour": 1}}',
     "'device_kwargs': unknown key(s) ['colour']"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "device_kwargs": [1]}',
     "'device_kwargs' must be a table"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "sm_clocks_mhz": "1000", '
     '"allow_clock_changes": true}', "'sm_clocks_mhz' must be a list, got '1000'"),
    ('{"kernels": {"fp32": {"sample": NaN}}, "device": "simulated"}', "['sample'] must be a finite number"),
    ('{"kernels": {"fp32": {"sample": 2, "seed": "x"}}, "device": "simulated"}',
     "'kernels'['fp32']['seed'] must be an integer >= 0, got 'x'"),
    ("[" * 5000 + "]" * 5000, "nested deeper than 32 levels"),
    # 12: nothing accepted silently
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "repeats": 2.9}', "got 2.9"),
    ('{"kernels": {"fp32": {"sample": 2.5}}, "device": "simulated"}', "got 2.5"),
    ('{"kernels": {"fp32": null}, "device": "simulated"}', "got None"),
    ('{"kernels": {"fp32": {"sample": 2, "sead": 1}}, "device": "simulated"}', "unknown key(s) ['sead']"),
    ('{"kernels": {"fp32": "default"}, "device": "simulated", "sm_clocks_mhz": [1500, 1500.0], '
     '"allow_clock_changes": true}', "clock 1500.0 is listed twice"),
])
def test_campaign_command_refuses_bad_specs_in_one_line(tmp_path, capsys, text, named):
    """Issue 25 #4, #11, #12 as a user meets them: `powermodels campaign spec.json`."""
    spec = tmp_path / "spec.json"
    spec.write_text(text)
    assert main(["campaign", str(spec), "--out", str(tmp_path / "c"), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and "unexpected" not in err, err
    assert not (tmp_path / "c" / "runs").exists()  # refused before anything was measured
