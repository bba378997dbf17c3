"""Atomic durable writes (issue 25, finding 5): a failed write leaves the previous file intact."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from powermodels import files
from powermodels import io as pmio
from powermodels import schema
from powermodels.models.frequency import FrequencyPowerModel


@pytest.fixture
def model():
    f = np.arange(800.0, 2001.0, 100.0)
    X = pd.DataFrame({schema.SM_CLOCK_MHZ: f})
    return FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(X, 50 + 0.07 * f)


_CHILD = textwrap.dedent("""
    import resource, signal, sys
    import numpy as np, pandas as pd
    from powermodels import io as pmio, schema
    from powermodels.models.frequency import FrequencyPowerModel
    if sys.argv[2] == "ignore":  # EFBIG as an OSError instead of the SIGXFSZ kill
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    f = np.arange(800.0, 2001.0, 100.0)
    model = FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(
        pd.DataFrame({schema.SM_CLOCK_MHZ: f}), 60 + 0.05 * f)
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))  # `ulimit -f 2`, as in the issue
    pmio.save_calibration(model, sys.argv[1], {"note": "x" * 4000}, compress=0)
""")


@pytest.mark.parametrize("on_limit", ["killed", "ignore"])
def test_a_failed_recalibration_keeps_the_previous_file(tmp_path, model, on_limit):
    path = tmp_path / "calibration.pmcal"
    pmio.save_calibration(model, path, {"device": "good"})
    before = path.read_bytes()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(path), on_limit], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0  # the write did fail (SIGXFSZ or EFBIG)
    assert path.read_bytes() == before
    assert pmio.load_calibration(path).a_ == model.a_
    if on_limit == "ignore":  # an error that Python saw cleans its temporary file up
        assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.pmcal"]


def test_an_error_while_writing_keeps_the_old_contents_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "metadata.json"
    files.write_json(path, {"spec": "old"})

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        files.write_json(path, {"spec": "new"})
    monkeypatch.undo()
    assert path.read_text() == '{\n  "spec": "old"\n}'
    assert [p.name for p in tmp_path.iterdir()] == ["metadata.json"]


def test_unserialisable_json_never_touches_the_disk(tmp_path):
    path = tmp_path / "a.json"
    files.write_json(path, [1], indent=None)
    with pytest.raises(TypeError):
        files.write_json(path, {"x": object()})
    assert path.read_text() == "[1]" and len(list(tmp_path.iterdir())) == 1


def test_atomic_open_text_and_parquet(tmp_path):
    with files.atomic_open(tmp_path / "t.txt", "w") as fh:
        fh.write("ü")
    assert (tmp_path / "t.txt").read_text(encoding="utf-8") == "ü"
    df = pd.DataFrame({"a": [1, 2]})
    with files.atomic_open(tmp_path / "sub" / "x.parquet") as fh:
        df.to_parquet(fh, index=False)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "sub" / "x.parquet"), df)
    with pytest.raises(ValueError, match="mode must be"):
        with files.atomic_open(tmp_path / "y", "a"):
            pass


def test_replace_folder_gives_everything_back_when_the_last_rename_fails(tmp_path, monkeypatch):
    folder = tmp_path / "set"
    files.replace_folder(folder, lambda tmp: (tmp / "a.txt").write_text("old"), ["a.txt"])
    (folder / "other.txt").write_text("not the set's")
    real, into_place = os.replace, []

    def fail_into_place(src, dst):
        if str(dst) == str(folder) and not into_place:   # the new set into place (the old one is aside)
            into_place.append(src)
            raise OSError("rename failed")
        return real(src, dst)

    monkeypatch.setattr(files.os, "replace", fail_into_place)
    with pytest.raises(OSError, match="rename failed"):
        files.replace_folder(folder, lambda tmp: (tmp / "a.txt").write_text("new"), ["a.txt"])
    monkeypatch.undo()
    assert into_place and sorted(p.name for p in tmp_path.iterdir()) == ["set"]
    assert (folder / "a.txt").read_text() == "old" and (folder / "other.txt").read_text() == "not the set's"
