"""Campaigns on a Dask LocalCluster of simulated GPUs: same rows as serial, per GPU, worker SIGKILL, Ctrl-C."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
import warnings

import pytest

distributed = pytest.importorskip("distributed")

from powermodels import schema  # noqa: E402
from powermodels.campaigns import CampaignSpec, finished_keys, load_campaign, plan, run_campaign  # noqa: E402
from powermodels.cli import main  # noqa: E402
from powermodels.integrations.dask_cluster import DaskExecutor, _per_gpu_run, check_same_gpu  # noqa: E402

SPEC = {
    "kernels": {"fp32": {"sample": 8, "seed": 0}, "stream_copy": "default"},
    "protocol": "naive",
    "repeats": 2,
    "device": "simulated",
    "device_kwargs": {"seed": 0},
}


def _rows(runs):
    return sorted(zip(runs[schema.KERNEL], runs[schema.CONFIG], runs[schema.REPEAT], strict=True))


@pytest.fixture(scope="module")
def client():
    # processes=True: the kill test needs worker processes; 2 single-threaded workers fit 2 cores
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=logging.ERROR)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def test_cluster_rows_equal_serial_and_resume_is_shared(client, tmp_path):
    serial = run_campaign(SPEC, tmp_path / "serial", progress=False)
    spread = run_campaign(SPEC, tmp_path / "cluster", executor=DaskExecutor(client), progress=False)
    assert _rows(spread) == _rows(serial) and len(spread) == len(plan(CampaignSpec.from_dict(SPEC)))
    assert set(spread[schema.RUN_ID]) == set(serial[schema.RUN_ID])  # the same keys: one resume scheme
    # one simulated GPU per worker, each with its own seed and UUID; the host is recorded
    assert set(spread[schema.DEVICE_UUID]) <= {"SIM-hopper-0", "SIM-hopper-1"}
    assert spread[schema.HOST].notna().all()
    meta = json.loads((tmp_path / "cluster" / "metadata.json").read_text())
    assert len(meta["devices"]) == 2
    runs, traces = load_campaign(tmp_path / "cluster")
    assert set(traces[schema.RUN_ID]) == set(runs[schema.RUN_ID])
    # a serial folder resumed on the cluster (and back) has nothing left to do
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "serial" / "runs").iterdir()}
    assert len(run_campaign(SPEC, tmp_path / "serial", executor=DaskExecutor(client), progress=False)) == len(serial)
    assert len(run_campaign(SPEC, tmp_path / "cluster", progress=False)) == len(spread)
    assert all(p.stat().st_mtime_ns == m for p, m in mtimes.items())


def test_per_gpu_measures_every_run_on_every_board(client, tmp_path):
    spec = dict(SPEC, kernels={"fp32": ["nr_outer=8", "nr_outer=16"]})
    runs = run_campaign(spec, tmp_path, executor=DaskExecutor(client, per_gpu=True), progress=False)
    base = plan(CampaignSpec.from_dict(spec))
    assert len(runs) == 2 * len(base) and runs[schema.RUN_ID].is_unique
    per_board = {uuid: _rows(part) for uuid, part in runs.groupby(schema.DEVICE_UUID)}
    assert sorted(per_board) == ["SIM-hopper-0", "SIM-hopper-1"]
    assert per_board["SIM-hopper-0"] == per_board["SIM-hopper-1"] and len(per_board["SIM-hopper-0"]) == len(base)
    assert len(run_campaign(spec, tmp_path, executor=DaskExecutor(client, per_gpu=True), progress=False)) == len(runs)


def test_ctrl_c_cancels_and_resume_finishes(client, tmp_path, monkeypatch):
    from powermodels.campaigns import store as campaign_store

    real, calls = campaign_store.CampaignStore.write_run, []

    def interrupted(self, key, row, trace):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.append(key)
        real(self, key, row, trace)

    monkeypatch.setattr(campaign_store.CampaignStore, "write_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_campaign(SPEC, tmp_path, executor=DaskExecutor(client), progress=False)
    assert finished_keys(tmp_path) == set(calls)
    monkeypatch.setattr(campaign_store.CampaignStore, "write_run", real)
    time.sleep(0.2)  # let the cancelled tasks drain
    runs = run_campaign(SPEC, tmp_path, executor=DaskExecutor(client), progress=False)
    assert len(runs) == len(plan(CampaignSpec.from_dict(SPEC))) and runs[schema.RUN_ID].is_unique


@pytest.mark.parametrize("per_gpu", [False, True], ids=["spread", "per-gpu"])
def test_worker_sigkill_mid_campaign_loses_and_duplicates_nothing(client, tmp_path, per_gpu):
    # the module's cluster is shared: the worker an earlier case killed must be back, or a
    # per-GPU campaign sees one board and rightly plans only its runs
    client.wait_for_workers(2, timeout=60)
    spec = dict(SPEC, protocol="continuous", protocol_params={"duration_s": 0.05},
                kernels={"fp32": "all", "stream_copy": "all"} if not per_gpu else {"fp32": "all"},
                repeats=1 if per_gpu else 2)
    expected = {r.key for r in plan(CampaignSpec.from_dict(spec))}
    if per_gpu:  # the killed worker's board: its pinned runs wait for the restarted worker
        expected = {_per_gpu_run(r, u).key for r in plan(CampaignSpec.from_dict(spec))
                    for u in ("SIM-hopper-0", "SIM-hopper-1")}
    result: dict = {}
    thread = threading.Thread(target=lambda: result.setdefault(
        "runs", run_campaign(spec, tmp_path, executor=DaskExecutor(client, per_gpu=per_gpu), progress=False)))
    thread.start()
    deadline = time.monotonic() + 60
    while len(finished_keys(tmp_path)) < 6 and time.monotonic() < deadline:
        time.sleep(0.005)
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    killed_at = len(finished_keys(tmp_path))
    thread.join(timeout=90)
    assert not thread.is_alive()
    assert 6 <= killed_at < len(expected), "the worker must be killed mid-campaign"
    runs = result["runs"]  # Dask ran the dead worker's runs again elsewhere
    assert set(runs[schema.RUN_ID]) == expected and runs[schema.RUN_ID].is_unique
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "runs").iterdir()}
    again = run_campaign(spec, tmp_path, executor=DaskExecutor(client, per_gpu=per_gpu), progress=False)  # nothing to do
    assert len(again) == len(expected) and all(p.stat().st_mtime_ns == m for p, m in mtimes.items())
    assert not list(tmp_path.rglob("*.tmp"))


def test_cli_cluster_address_and_errors(client, tmp_path, capsys):
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(dict(SPEC, kernels={"fp32": "default"})))
    out = tmp_path / "c"
    address = client.scheduler.address
    assert main(["campaign", str(spec), "--out", str(out), "--no-progress", "--cluster", address]) == 0
    assert "campaign: 2/2 runs finished" in capsys.readouterr().out
    assert main(["campaign", str(spec), "--out", str(tmp_path / "boards"), "--no-progress",
                 "--cluster", address, "--per-gpu"]) == 0
    printed = capsys.readouterr().out
    assert "campaign: 4/4 runs finished" in printed and "device_uuid" in printed  # 2 runs on each board
    for args, message in [(["--per-gpu"], "--per-gpu and --workers need --cluster"),
                          (["--cluster", "nowhere"], "expected 'local', 'local-cuda' or a scheduler address"),
                          (["--cluster", "local", "--device", "nvml"], "use --cluster local-cuda"),
                          (["--cluster", "local", "--workers", "0"], "--workers must be >= 1")]:
        assert main(["campaign", str(spec), "--out", str(tmp_path / "e"), *args]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    with pytest.raises(ValueError, match="not both"):
        from powermodels.measuring.runner import make_runner

        run_campaign(SPEC, tmp_path / "x", executor=DaskExecutor(client), runner=make_runner("simulated"))


def test_a_worker_whose_sensor_is_another_gpu_is_refused():
    uuid = "GPU-1b2c3d4e-0000-1111-2222-333344445555"
    check_same_gpu(uuid, uuid.upper())  # the same board
    check_same_gpu(uuid, None)  # nothing to compare (no CuPy)
    with pytest.raises(RuntimeError, match="CUDA device 0 = GPU-99"):
        check_same_gpu(uuid, "GPU-99999999-0000-1111-2222-333344445555")


def test_local_cuda_without_dask_cuda_is_one_line_naming_the_extra(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "dask_cuda", None)  # as if dask-cuda were not installed
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(dict(SPEC, kernels={"fp32": "default"})))
    assert main(["campaign", str(spec), "--out", str(tmp_path / "c"), "--cluster", "local-cuda"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'powermodels[cuda-cluster]'" in err[0], err


def test_a_campaign_on_two_boards_reports_their_spread_and_maps_them_with_a_probe(client, tmp_path, capsys):
    from powermodels.boards import BoardSpreadWarning
    from powermodels.campaigns.boards import PROBE_DIR, load_normalised_runs

    spec = dict(SPEC, kernels={"fp32": {"sample": 3, "seed": 0}}, repeats=2,
                board_probe={"kernels": {"stream_copy": "default", "fp32": "default"}, "repeats": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoardSpreadWarning)  # whether the simulated boards differ is seed luck
        runs = run_campaign(spec, tmp_path / "c", executor=DaskExecutor(client, per_gpu=True), progress=False)
    meta = json.loads((tmp_path / "c" / "metadata.json").read_text())
    boards = meta["boards"]
    assert boards["devices"] == ["SIM-hopper-0", "SIM-hopper-1"] and boards["configurations_on_several_boards"] == 3
    fit = meta["board_normalisation"]
    assert fit["model"] == "scale" and set(fit["gain"]) == set(boards["devices"])
    assert fit["gain"][fit["reference"]] == 1.0 and len(fit["probe"]) == 2
    # the probe is a campaign of its own: every probe run on both boards, resumable
    probe_runs = load_campaign(tmp_path / "c" / PROBE_DIR)[0]
    assert len(probe_runs) == 2 * 2 * 2 and probe_runs[schema.DEVICE_UUID].nunique() == 2
    normalised = load_normalised_runs(tmp_path / "c")
    other = [u for u in boards["devices"] if u != fit["reference"]][0]
    row = normalised[normalised[schema.DEVICE_UUID] == other].iloc[0]
    assert row[schema.NORMALISED_ENERGY_J] == pytest.approx(row[schema.ENERGY_J] / fit["gain"][other])
    assert len(runs) == 3 * 2 * 2
    # the command prints the medians per board and what was recorded
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BoardSpreadWarning)
        assert main(["campaign", str(spec_file), "--out", str(tmp_path / "c"), "--no-progress",
                     "--cluster", client.scheduler.address, "--per-gpu"]) == 0
    out = capsys.readouterr().out
    assert "boards: 2; 3 configuration(s) measured on several" in out and "board probe (scale, 2" in out
    assert out.count("SIM-hopper-") >= 6   # one line per configuration and board


def test_board_spread_is_warned_when_boards_differ(client, tmp_path, monkeypatch):
    from powermodels import boards as board_analysis

    # the simulated boards as measured, then one of them read 5 % high: beyond any 2σ of the naive protocol
    real = board_analysis.board_spread

    def one_board_high(runs, **kw):
        runs = runs.copy()
        high = runs[schema.DEVICE_UUID] == "SIM-hopper-1"
        runs.loc[high, schema.ENERGY_J] *= 1.05
        return real(runs, **kw)

    monkeypatch.setattr("powermodels.campaigns.boards.board_spread", one_board_high)
    spec = dict(SPEC, kernels={"fp32": "default"}, repeats=3)
    with pytest.warns(board_analysis.BoardSpreadWarning, match="differ by more than 2σ"):
        run_campaign(spec, tmp_path / "w", executor=DaskExecutor(client, per_gpu=True), progress=False)
