"""Campaigns on the SimulatedGPU: tables, metadata, clock opt-in, resume, SIGKILL mid-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from powermodels import schema
from powermodels.campaigns import (
    CampaignSpec,
    finished_keys,
    load_campaign,
    load_spec,
    plan,
    run_campaign,
)
from powermodels.cli import main

pytest.importorskip("powermodels.devices.simulated")

SRC = Path(__file__).resolve().parents[2] / "src"

SMALL = {
    "kernels": {"fp32": ["nr_outer=8", "nr_outer=16"], "stream_triad": "default"},
    "protocol": "continuous",
    "protocol_params": {"duration_s": 0.2},
    "repeats": 2,
    "device": "simulated",
    "device_kwargs": {"seed": 0},
}


def _check_tables(out, expected):
    runs, traces = load_campaign(out)
    schema.validate_run_table(runs, required=[schema.RUN_ID, schema.REPEAT])
    schema.validate_trace_table(traces)
    assert len(runs) == expected
    assert runs[schema.RUN_ID].is_unique
    assert set(traces[schema.RUN_ID]) == set(runs[schema.RUN_ID])
    return runs, traces


def test_campaign_writes_run_and_trace_tables_with_metadata(tmp_path):
    runs = run_campaign(SMALL, tmp_path, progress=False)
    assert len(runs) == 6 == len(plan(CampaignSpec.from_dict(SMALL)))
    _check_tables(tmp_path, 6)
    consolidated = pd.read_parquet(tmp_path / "runs.parquet")
    assert len(consolidated) == 6
    assert sorted(consolidated[schema.REPEAT].unique()) == [0, 1]
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert "Simulated" in meta["device"]["name"] and meta["spec"]["protocol"] == "continuous"
    assert "settings_at_start" in meta


def test_board_probe_on_one_board_and_bad_probes(tmp_path):
    from powermodels.campaigns.boards import PROBE_DIR, load_normalised_runs

    with pytest.raises(ValueError, match="no board normalisation: add a 'board_probe'"):
        run_campaign(dict(SMALL, kernels={"fp32": "default"}, repeats=1), tmp_path / "plain", progress=False)
        load_normalised_runs(tmp_path / "plain")
    spec = dict(SMALL, kernels={"fp32": "default"}, repeats=1,
                board_probe={"kernels": {"stream_triad": "default"}, "repeats": 2})
    runs = run_campaign(spec, tmp_path / "c", progress=False)
    meta = json.loads((tmp_path / "c" / "metadata.json").read_text())
    assert "boards" not in meta                       # one board: no spread to report
    fit = meta["board_normalisation"]                 # one board: its own reference, gain 1
    assert list(fit["gain"].values()) == [1.0] and fit["probe"] == ["block_size_x=256,vector_width=4"]
    assert len(load_campaign(tmp_path / "c" / PROBE_DIR)[0]) == 2 and len(runs) == 1
    assert load_normalised_runs(tmp_path / "c")[schema.NORMALISED_ENERGY_J].tolist() == runs[schema.ENERGY_J].tolist()
    for probe, match in [("sgemm", "must be a table"), ({"kernel": {}}, r"unknown key\(s\) \['kernel'\]"),
                         ({"repeats": 2}, "nothing to measure"),
                         ({"kernels": {"fp32": "default"}, "repeats": 0}, "'repeats' must be an integer >= 1"),
                         ({"kernels": {"fp32": "default"}, "model": "linear"}, "'model' must be one of")]:
        with pytest.raises(ValueError, match=match):
            CampaignSpec.from_dict(dict(SMALL, board_probe=probe))


def test_restart_sets_the_board_probe_aside_with_the_runs(tmp_path):
    """A restart left board_probe/ in place: the old probe runs counted as finished in the new run."""
    from powermodels.campaigns.boards import PROBE_DIR

    probe = {"kernels": {"stream_triad": "default"}, "repeats": 2}
    run_campaign(dict(SMALL, kernels={"fp32": "default"}, repeats=1, board_probe=probe), tmp_path, progress=False)
    old_rows = {p.name: p.read_bytes() for p in (tmp_path / PROBE_DIR / "runs").glob("*.json")}
    assert len(old_rows) == 2
    before_restart = time.time_ns()
    run_campaign(dict(SMALL, kernels={"fp32": ["nr_outer=8"]}, repeats=1, board_probe=probe), tmp_path,
                 progress=False, restart=True)
    (aside,) = tmp_path.glob("previous-*")
    kept = {p.name: p.read_bytes() for p in (aside / PROBE_DIR / "runs").glob("*.json")}
    assert kept == old_rows                                  # the old probe, kept aside like the runs
    new_rows = list((tmp_path / PROBE_DIR / "runs").glob("*.json"))
    assert len(new_rows) == 2 and all(p.stat().st_mtime_ns >= before_restart for p in new_rows)  # measured anew


def test_campaign_resumes_and_skips_finished_runs(tmp_path):
    run_campaign(SMALL, tmp_path, progress=False, max_runs=2)
    first = {k: (tmp_path / "runs" / f"{k}.json").stat().st_mtime_ns for k in finished_keys(tmp_path)}
    assert len(first) == 2
    assert not (tmp_path / "runs.parquet").exists()  # unfinished: no consolidated table yet
    run_campaign(SMALL, tmp_path, progress=False)
    _check_tables(tmp_path, 6)
    for key, mtime in first.items():  # finished runs were not measured again
        assert (tmp_path / "runs" / f"{key}.json").stat().st_mtime_ns == mtime


def test_campaign_clock_sweep_needs_opt_in_and_restores(tmp_path):
    spec = dict(SMALL, kernels={"fp32": ["nr_outer=8"]}, repeats=1, sm_clocks_mhz=[1200, None])
    with pytest.raises(ValueError, match="allow_clock_changes"):
        CampaignSpec.from_dict(spec)
    from powermodels.devices.simulated import SimulatedGPU
    from powermodels.measuring.runner import SimulatedRunner

    gpu = SimulatedGPU(seed=0)
    runs = run_campaign(dict(spec, allow_clock_changes=True), tmp_path, progress=False,
                        runner=SimulatedRunner(gpu))
    locked = runs.loc[runs[schema.SM_CLOCK_REQUESTED_MHZ] == 1200]
    free = runs.loc[runs[schema.SM_CLOCK_REQUESTED_MHZ].isna()]
    assert len(locked) == len(free) == 1
    assert locked[schema.SM_CLOCK_MHZ].iloc[0] == pytest.approx(1200, abs=15)
    assert locked[schema.TIME_S].iloc[0] > 1.4 * free[schema.TIME_S].iloc[0]
    assert gpu.current_settings().sm_clock_mhz is None  # restored


def test_spec_files_json_and_toml(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(SMALL))
    assert load_spec(tmp_path / "c.json").repeats == 2
    (tmp_path / "c.toml").write_text(
        'protocol = "naive"\nrepeats = 1\ndevice = "simulated"\n[kernels]\nfp32 = "default"\n'
    )
    assert load_spec(tmp_path / "c.toml").protocol == "naive"
    (tmp_path / "bad.json").write_text(json.dumps({"kernels": {"fp32": "all"}, "colour": "red"}))
    with pytest.raises(ValueError, match="colour"):
        load_spec(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="unknown kernel"):
        CampaignSpec.from_dict({"kernels": {"nope": "default"}})
    with pytest.raises(FileNotFoundError):
        load_spec(tmp_path / "missing.json")
    spec = CampaignSpec.from_dict({"kernels": {"sgemm": {"sample": 120, "seed": 1}}, "repeats": 3})
    assert len(plan(spec)) == 360


def test_campaign_killed_with_sigkill_resumes_without_loss_or_duplicates(tmp_path):
    spec = {
        "kernels": {"fp32": "all", "stream_copy": "all"},
        "protocol": "continuous",
        "protocol_params": {"duration_s": 0.3},
        "repeats": 2,
        "device": "simulated",
    }
    config = tmp_path / "campaign.json"
    config.write_text(json.dumps(spec))
    out = tmp_path / "out"
    expected = {r.key for r in plan(CampaignSpec.from_dict(spec))}
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "powermodels.cli", "campaign", str(config), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(finished_keys(out)) < 5 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = finished_keys(out)
    assert proc.returncode == -signal.SIGKILL
    assert 5 <= len(killed_at) < len(expected), "the campaign must be killed mid-way"
    # a killed run may leave a trace part or a temporary file, never a run row without its trace
    for key in killed_at:
        assert (out / "traces" / f"{key}.parquet").exists()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    runs, _ = _check_tables(out, len(expected))
    assert set(runs[schema.RUN_ID]) == expected
    assert not list(out.rglob("*.tmp"))  # the killed write's temporary file was cleaned up
    assert len(pd.read_parquet(out / "runs.parquet")) == len(expected)


def test_measure_and_campaign_commands(tmp_path, capsys):
    row = tmp_path / "row.parquet"
    assert main(["measure", "--device", "simulated", "--kernel", "fp32", "--config", "nr_outer=8",
                 "--protocol", "good_practice", "--param", "trials=2", "--param", "random_state=0",
                 "--out", str(row), "--trace-out", str(tmp_path / "trace.parquet")]) == 0
    table = pd.read_parquet(row)
    assert table[schema.PROTOCOL].iloc[0] == "good_practice" and table["nr_outer"].iloc[0] == 8
    schema.validate_trace_table(pd.read_parquet(tmp_path / "trace.parquet"))
    assert "energy_j" in capsys.readouterr().out
    (tmp_path / "c.json").write_text(json.dumps(dict(SMALL, repeats=1)))
    assert main(["campaign", str(tmp_path / "c.json"), "--out", str(tmp_path / "camp"), "--no-progress"]) == 0
    assert "3/3 runs" in capsys.readouterr().out
    assert main(["measure", "--device", "simulated", "--protocol", "nope"]) == 1
