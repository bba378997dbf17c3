"""Nothing lost on a crash: a natural-DVFS run stopped early leaves a recording `calibrate --from` reads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from powermodels import schema
from powermodels.devices.physics import GPUPhysics
from powermodels.devices.simulated import SimulatedGPU
from powermodels.measuring.runner import make_runner
from powermodels.natural_dvfs.natural_recording import record_natural_dvfs
from powermodels.recording import read_recording
from powermodels.termination import Terminated, terminate_raises
from powermodels.workflows.recording_calibration import calibrate_from
from powermodels.workloads import as_workload

ROOT = Path(__file__).resolve().parents[2]


def _gpu():
    return SimulatedGPU(seed=3, physics=GPUPhysics(power_limit_w=400, control_step_s=0.01,
                                                   clock_recovery_mhz_per_s=5000))


def _items():
    items = []
    for name in ("fp32", "sgemm"):
        w = as_workload(name)
        items.append((w, w.validate_config(w.parse_config(None))))
    return items


def test_terminate_raises_turns_sigterm_into_an_exception_and_restores_the_handler():
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated) as caught, terminate_raises():
        os.kill(os.getpid(), signal.SIGTERM)
    assert str(caught.value) == "stopped by SIGTERM" and caught.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before


def test_a_run_stopped_in_its_last_thermal_series_keeps_every_finished_part(tmp_path):
    """Fails before save_to: the recording lived in memory only and a stopped run wrote nothing."""
    folder = tmp_path / "recording"
    seen = []

    def progress(line):
        seen.append(line)
        if line.startswith("thermal series 2/2"):  # as SIGTERM would, while the last part ends
            raise Terminated(signal.SIGTERM)

    runner = make_runner(_gpu())
    try:
        with pytest.raises(Terminated):
            record_natural_dvfs(runner, _items(), None, cycles=3, burst_s=0.2, series_s=3.0, cool_s=1.0,
                                progress=progress, save_to=folder)
    finally:
        runner.close()
    rec = read_recording(folder)
    assert rec.provenance["complete"] is False and rec.provenance["stopped"] == "stopped by SIGTERM"
    parts = rec.phases.groupby([schema.RECORDING_PHASE, schema.PHASE_KIND]).size().to_dict()
    assert parts[("thermal", "series")] == 2 and parts[("natural", "burst")] == 6
    run = calibrate_from(folder)  # refits what it holds, and says it is partial
    assert len(run.calibration.validation) == 2
    assert any(line.startswith("this recording is partial") and "stopped by SIGTERM" in line
               for line in run.findings)


def test_checkpoints_survive_a_hard_kill(tmp_path):
    """After each workload's part the folder on disk is a readable recording (SIGKILL loses only the running part)."""
    folder = tmp_path / "recording"
    states = []

    def progress(line):
        states.append((line, len(read_recording(folder).launches)))

    runner = make_runner(_gpu())
    try:
        rec = record_natural_dvfs(runner, _items(), None, cycles=3, burst_s=0.2, series_s=1.0, cool_s=0.5,
                                  progress=progress, save_to=folder)
    finally:
        runner.close()
    counts = [n for _, n in states]
    assert len(states) == 4 and counts == sorted(counts) and counts[0] > 0
    final = read_recording(folder)
    assert final.provenance["complete"] is True and len(final.launches) == len(rec.launches)


@pytest.mark.slow
def test_gpu_natural_dvfs_killed_by_timeout_leaves_a_recording(tmp_path):
    """The benchmark under `timeout`'s SIGTERM, on the simulated GPU: its recording is on disk."""
    out = tmp_path / "nd"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpu_natural_dvfs.py"), "--device",
                             "simulated", "--out", str(out), "--cycles", "3", "--burst-s", "0.2",
                             "--pressure-s", "0.5", "--series-s", "60", "--cool-s", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("natural DVFS 4/4"):
            proc.send_signal(signal.SIGTERM)  # in the thermal part: as `timeout` did on the H100
            break
    lines += proc.stdout.readlines()
    assert proc.wait(timeout=120) == 128 + signal.SIGTERM, "".join(lines)
    assert any("the recording so far is in" in line for line in lines)
    rec = read_recording(out / "recording")
    assert rec.provenance["complete"] is False and "SIGTERM" in rec.provenance["stopped"]
    assert set(rec.launches[schema.RECORDING_PHASE]) >= {"natural"}
    assert len(calibrate_from(out / "recording").calibration.validation) >= 1
    assert json.loads((out / "recording" / "provenance.json").read_text())["clock_probe"] is True


def _run_until(args, trigger, env_extra=None):
    """Start a benchmark on the simulated GPU, SIGTERM it when ``trigger(line)`` holds; (rc, output)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=ROOT)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if trigger(line):
            proc.send_signal(signal.SIGTERM)
            break
    lines += proc.stdout.readlines()
    return proc.wait(timeout=120), "".join(lines)


@pytest.mark.slow
def test_gpu_fingrav_killed_mid_session_writes_its_recording(tmp_path):
    rc, text = _run_until([str(ROOT / "benchmarks" / "gpu_fingrav.py"), "--device", "simulated", "--runs", "300",
                           "--out", str(tmp_path)], lambda line: "100 short runs" in line)
    assert rc == 128 + signal.SIGTERM, text
    meta = json.loads((tmp_path / "fingrav_simulated_meta.json").read_text())
    assert meta["complete"] is False and meta["stopped"] == "stopped by SIGTERM"
    import pandas as pd

    launches = pd.read_parquet(tmp_path / "fingrav_simulated_launches.parquet")
    assert (launches["kind"] == "short").any() and len(pd.read_parquet(tmp_path / "fingrav_simulated_trace.parquet"))


@pytest.mark.slow
def test_gpu_thermal_killed_after_a_workload_writes_its_summary(tmp_path):
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, str(ROOT / "benchmarks" / "gpu_thermal.py"), "--device", "simulated",
                             "--idle-s", "2", "--workloads", "cupy_fp32_gemm,cupy_triad,cupy_small,cupy_tiny",
                             "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=ROOT)
    deadline = time.monotonic() + 120
    while not (tmp_path / "thermal_rows.csv").is_file() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)  # after the first workload: as `timeout` would
    text = proc.communicate(timeout=120)[0]
    assert proc.returncode == 128 + signal.SIGTERM, text
    assert (tmp_path / "summary.csv").is_file() and (tmp_path / "alpha_cache.json").is_file()
    assert "stopped (stopped by SIGTERM)" in (tmp_path / "report.md").read_text()


def test_a_failed_flush_of_a_stopped_run_warns_and_keeps_the_error_that_stopped_it(tmp_path, monkeypatch):
    """Fails before the fix: the failed flush was only an ``add_note`` (no warning; on Python 3.10,
    which the package supports, ``add_note`` does not exist and its AttributeError replaced the error)."""
    import powermodels.recording as recording_module

    real_write = recording_module.write_recording

    def write_failing_when_stopped(rec, folder):
        if "stopped" in rec.provenance:
            raise OSError("disk full")
        return real_write(rec, folder)

    monkeypatch.setattr(recording_module, "write_recording", write_failing_when_stopped)

    def progress(line):
        raise KeyboardInterrupt

    runner = make_runner(_gpu())
    try:
        with pytest.raises(KeyboardInterrupt), pytest.warns(RuntimeWarning, match="disk full") as warned:
            record_natural_dvfs(runner, _items(), None, cycles=3, burst_s=0.2, series_s=0.0,
                                progress=progress, save_to=tmp_path / "recording")
    finally:
        runner.close()
    assert any(str(tmp_path / "recording") in str(w.message) for w in warned)
