"""``benchmarks/gpu_new_boards.sh``: the device driver records new boards only, one tar each (a fake nvidia-smi and
a stub recorder stand in for the GPUs; no GPU is touched)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OLD = "GPU-ca97db10-5893-4976-75c5-68b53720f6a5"
NEW = "GPU-0123abcd-0000-0000-0000-000000000000"

FAKE_SMI = f"""#!{sys.executable}
import sys
boards = {{0: "{OLD}", 1: "{NEW}"}}
args = sys.argv[1:]
if "-i" in args:
    print(boards[int(args[args.index("-i") + 1])])
elif "--query-gpu=index,uuid" in args:
    print("\\n".join(f"{{i}}, {{u}}" for i, u in boards.items()))
else:
    print("index, uuid")
"""

STUB_RECORDER = f"""#!{sys.executable}
import os, sys
out = sys.argv[sys.argv.index("--out") + 1]
os.makedirs(out)
open(os.path.join(out, "provenance.json"), "w").write('{{"args": "%s", "gpu": "%s"}}'
                                                   % (" ".join(sys.argv[1:]), os.environ["CUDA_VISIBLE_DEVICES"]))
print("recorded")
"""


@pytest.fixture
def repo(tmp_path):
    """A repository root with the driver, the real known_boards.py and a stub recorder; nvidia-smi faked on PATH."""
    bench = tmp_path / "repo" / "benchmarks"
    bench.mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "gpu_new_boards.sh", bench)
    shutil.copy(ROOT / "benchmarks" / "known_boards.py", bench)
    (bench / "gpu_raw_recording.py").write_text(STUB_RECORDER)
    tools = tmp_path / "bin"
    tools.mkdir()
    smi = tools / "nvidia-smi"
    smi.write_text(FAKE_SMI)
    smi.chmod(0o755)
    os.symlink(sys.executable, tools / "python3")
    return tmp_path


def run_driver(repo: Path, known: list[str]) -> subprocess.CompletedProcess:
    (repo / "repo" / "known_uuids.txt").write_text("".join(u + "\n" for u in known))
    out = repo / "out"
    out.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{repo / 'bin'}{os.pathsep}{os.environ['PATH']}", "OUT": str(out),
           "TMPDIR": str(repo)}
    return subprocess.run(["bash", "benchmarks/gpu_new_boards.sh", "raw_recording", "30", "--lead-idle", "45"],
                          cwd=repo / "repo", env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash and tar")
def test_only_the_new_board_is_recorded_and_tarred(repo):
    done = run_driver(repo, [OLD])
    assert done.returncode == 0, done.stderr
    tars = sorted(p.name for p in (repo / "out").iterdir())
    assert tars == ["raw_recording_0123abcd.tar.gz"]
    with tarfile.open(repo / "out" / tars[0]) as tar:
        names = tar.getnames()
        log = tar.extractfile("raw_recording_0123abcd/rec_log.txt").read().decode()
        provenance = tar.extractfile("raw_recording_0123abcd/provenance.json").read().decode()
    assert "raw_recording_0123abcd/provenance.json" in names
    assert "recorded" in log and "rc=0" in log
    assert '"gpu": "1"' in provenance and "--lead-idle 45" in provenance


@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("tar") is None, reason="needs bash and tar")
def test_a_machine_of_known_boards_records_nothing(repo):
    done = run_driver(repo, [OLD, NEW])
    assert done.returncode == 3
    assert list((repo / "out").iterdir()) == []
