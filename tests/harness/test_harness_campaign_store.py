"""The campaign store: small rows, resume from names, no trace read, old folders, half-written runs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from powermodels import schema
from powermodels.campaigns import (
    CampaignSpec,
    finished_keys,
    load_campaign,
    load_runs,
    plan,
    run_campaign,
)
from powermodels.campaigns.store import CampaignStore

SPEC = {
    "kernels": {"fp32": ["nr_outer=8", "nr_outer=16"], "stream_triad": "default"},
    "protocol": "naive",
    "repeats": 2,
    "device": "simulated",
    "device_kwargs": {"seed": 0},
}


def test_rows_are_small_json_commit_markers_and_traces_a_dataset(tmp_path):
    runs = run_campaign(SPEC, tmp_path, progress=False)
    keys = {r.key for r in plan(CampaignSpec.from_dict(SPEC))}
    assert set(runs[schema.RUN_ID]) == keys == finished_keys(tmp_path)
    rows = sorted((tmp_path / "runs").glob("*.json"))
    assert len(rows) == 6 and max(p.stat().st_size for p in rows) < 2048  # a one-row parquet was 16 kB
    assert json.loads(rows[0].read_text())[schema.RUN_ID] == rows[0].stem
    # device and host of every run are recorded
    assert runs[schema.DEVICE_UUID].eq("SIM-hopper-0").all() and runs[schema.HOST].str.len().gt(0).all()
    schema.validate_run_table(runs)
    # traces/ reads as one parquet dataset, with the same rows as load_campaign
    _, traces = load_campaign(tmp_path)
    dataset = pd.read_parquet(tmp_path / "traces")
    assert len(dataset) == len(traces) and set(dataset[schema.RUN_ID]) == keys
    assert not (tmp_path / "traces.parquet").exists()  # no step concatenates every trace
    assert len(pd.read_parquet(tmp_path / "runs.parquet")) == 6


def test_resume_reads_no_trace_and_no_finished_run(tmp_path, monkeypatch):
    from powermodels.campaigns import store as campaign_store

    monkeypatch.setattr(campaign_store, "INDEX_AFTER", 1)
    run_campaign(SPEC, tmp_path, progress=False, max_runs=5)
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "runs").glob("*.json")}
    before_keys = finished_keys(tmp_path)

    read, real_read_parquet = [], pd.read_parquet

    def no_trace(path, *args, **kwargs):
        read.append(Path(path).name)
        if Path(path).parent.name == "traces":
            raise AssertionError(f"resume read a trace: {path}")
        return real_read_parquet(path, *args, **kwargs)

    monkeypatch.setattr(pd, "read_parquet", no_trace)
    opened = []
    real_open = open

    def spy_open(path, *args, **kwargs):
        opened.append(Path(path).name)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr("builtins.open", spy_open)
    runs = run_campaign(SPEC, tmp_path, progress=False)
    monkeypatch.undo()
    assert len(runs) == 6 and runs[schema.RUN_ID].is_unique
    assert read == ["_index.parquet"]  # the five earlier rows in one read, from the index
    assert not {f"{k}.json" for k in before_keys} & set(opened)  # no earlier row file opened
    for name, mtime in before.items():
        assert (tmp_path / "runs" / name).stat().st_mtime_ns == mtime


def test_half_written_run_is_redone_once(tmp_path):
    run_campaign(SPEC, tmp_path, progress=False, max_runs=3)
    todo = [r.key for r in plan(CampaignSpec.from_dict(SPEC)) if r.key not in finished_keys(tmp_path)]
    # killed between the trace and the row, and in the middle of another write
    store = CampaignStore(tmp_path)
    store.trace_path(todo[0]).write_bytes(b"not parquet: cut short")
    (tmp_path / "runs" / f".{todo[1]}.json.123.tmp").write_text('{"kernel": ')
    (tmp_path / "traces" / f".{todo[1]}.parquet.123.tmp").write_bytes(b"")
    runs, traces = load_campaign(tmp_path)
    assert len(runs) == 3 and set(traces[schema.RUN_ID]) == set(runs[schema.RUN_ID])
    runs = run_campaign(SPEC, tmp_path, progress=False)
    assert len(runs) == 6 and runs[schema.RUN_ID].is_unique
    assert not list(tmp_path.rglob("*.tmp"))
    _, traces = load_campaign(tmp_path)
    assert set(traces[schema.RUN_ID]) == set(runs[schema.RUN_ID])
    assert (traces.groupby(schema.RUN_ID)[schema.T_S].is_monotonic_increasing).all()


def test_folders_of_the_old_layout_load_and_resume(tmp_path):
    """Before: one-row ``runs/<key>.parquet`` parts and a ``traces.parquet``; they still count."""
    run_campaign(SPEC, tmp_path, progress=False, max_runs=4)
    new = CampaignStore(tmp_path).run_table()
    for key in sorted(finished_keys(tmp_path))[:3]:  # turn three runs into old parts
        row = json.loads((tmp_path / "runs" / f"{key}.json").read_text())
        pd.DataFrame([row]).to_parquet(tmp_path / "runs" / f"{key}.parquet", index=False)
        (tmp_path / "runs" / f"{key}.json").unlink()
    mixed = load_runs(tmp_path)
    pd.testing.assert_frame_equal(mixed[new.columns], new, check_dtype=False)
    runs = run_campaign(SPEC, tmp_path, progress=False)
    assert len(runs) == 6 and runs[schema.RUN_ID].is_unique and len(list((tmp_path / "runs").glob("*.json"))) == 3


def test_index_is_a_cache_of_the_rows(tmp_path, monkeypatch):
    from powermodels.campaigns import store as campaign_store

    monkeypatch.setattr(campaign_store, "INDEX_AFTER", 1)
    run_campaign(SPEC, tmp_path, progress=False, max_runs=4)
    store = CampaignStore(tmp_path)
    full = store.run_table()
    index = tmp_path / "runs" / "_index.parquet"
    assert len(pd.read_parquet(index)) == 4
    # a row committed after the index was written is read from its file
    run_campaign(SPEC, tmp_path, progress=False, max_runs=1)
    now = store.run_table()
    assert len(now) == 5 and len(pd.read_parquet(index)) == 5
    same = now.loc[now[schema.RUN_ID].isin(full[schema.RUN_ID]), full.columns].reset_index(drop=True)
    pd.testing.assert_frame_equal(same, full, check_dtype=False)  # index rows == file rows (NaN: float)
    # a broken index is ignored (the row files are the truth); only some keys
    index.write_bytes(b"garbage")
    assert len(store.run_table()) == 5
    some = sorted(finished_keys(tmp_path))[:2]
    assert list(store.run_table(some)[schema.RUN_ID]) == some
    # an index row whose row file is gone does not count
    run_campaign(SPEC, tmp_path, progress=False, max_runs=0)
    (tmp_path / "runs" / f"{some[0]}.json").unlink()
    assert some[0] not in set(store.run_table()[schema.RUN_ID]) and len(store.run_table()) == 4


def test_bad_keys_and_empty_folder(tmp_path):
    store = CampaignStore(tmp_path / "c", create=True)
    with pytest.raises(ValueError, match="invalid run key"):
        store.write_run("../x", {}, pd.DataFrame({"t_s": [0.0]}))
    assert store.run_table().empty and store.trace_table().empty
    assert load_runs(tmp_path / "c").empty                    # an existing folder, nothing finished: empty
    assert finished_keys(tmp_path / "missing") == set()       # (a new campaign's folder: nothing done yet)


@pytest.mark.parametrize("reader", ["load_runs", "load_campaign", "load_normalised_runs"])
def test_reading_a_missing_campaign_folder_names_it(tmp_path, reader):
    """load_runs on a mistyped folder returned an empty table, as if nothing had finished."""
    from powermodels.campaigns import boards, run

    read = getattr(boards, reader, None) or getattr(run, reader)
    (tmp_path / "a-file").write_text("")
    for path, what in ((tmp_path / "missing", "does not exist"), (tmp_path / "a-file", "is not a folder")):
        with pytest.raises(FileNotFoundError) as info:
            read(path)
        assert str(info.value).count("\n") == 0 and f"campaign folder {str(path)!r} {what}" in str(info.value)
