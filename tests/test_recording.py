"""The raw recording reader/writer (powermodels.recording)."""

import json
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import recording, schema
from powermodels.recording import Recording, RecordingError, read_recording, write_recording


def tiny_recording(probes=False) -> Recording:
    """A two-second recording made by hand: 1 s idle, 1 s of one workload."""
    t = np.arange(0.0, 2.0, 0.01)
    load = t >= 1.0
    trace = pd.DataFrame({
        schema.T_S: t, schema.POWER_INSTANT_W: np.where(load, 400.0, 70.0),
        schema.POWER_AVERAGE_W: np.where(load, 300.0, 70.0),
        schema.SM_CLOCK_MHZ: np.where(load, 1980, 345).astype("int16"),
        schema.MEM_CLOCK_MHZ: np.full(t.size, 2619, dtype="int16"),
        schema.TEMPERATURE_C: np.where(load, 45, 35).astype("int16"),
        schema.THROTTLE_REASONS: np.zeros(t.size, dtype="int64"), schema.READ_S: np.full(t.size, 2e-5)})
    energy = pd.DataFrame({schema.T_S: t[::10], schema.ENERGY_COUNTER_J: 1000.0 + np.cumsum(
        np.where(load[::10], 40.0, 7.0))})
    starts = np.arange(1.0, 2.0, 0.1)
    launches = pd.DataFrame({
        schema.WORKLOAD: "w", schema.RECORDING_PHASE: "thermal", schema.REPEAT: 0,
        schema.BATCH: np.arange(starts.size), schema.START_S: starts, schema.END_S: starts + 0.09,
        schema.LAUNCHES: 1, schema.TIME_S: 0.09})
    phases = pd.DataFrame({
        schema.RECORDING_PHASE: ["thermal", "thermal"], schema.WORKLOAD: ["w", "w"],
        schema.REPEAT: [-1, 0], schema.PHASE_KIND: ["idle", "series"],
        schema.T0_S: [0.0, 1.0], schema.T1_S: [1.0, 2.0]})
    probe = None
    if probes:
        probe = pd.DataFrame({schema.T_S: starts, schema.WORKLOAD: "w", schema.BATCH: np.arange(starts.size),
                              schema.PROBE_CLOCK_MHZ: 1980.0, schema.PROBE_CYCLES: 1.98e6,
                              schema.PROBE_ELAPSED_NS: 1e6})
    prov = {"gpu": "hand-made", "uuid": "GPU-0", "power_limit_w": 700.0, "max_sm_clock_mhz": 1980}
    return Recording(trace, energy, launches, phases, prov, probe)


def test_round_trip(tmp_path):
    rec = tiny_recording(probes=True)
    folder = write_recording(rec, tmp_path / "rec")
    back = read_recording(folder)
    pd.testing.assert_frame_equal(back.trace, rec.trace)
    pd.testing.assert_frame_equal(back.probes, rec.probes)
    assert back.provenance == rec.provenance
    assert back.workloads == ["w"] and back.duration_s == 2.0 and back.name == "rec"
    assert read_recording(folder, probes=False).probes is None
    assert not list(folder.glob("*.tmp"))


def test_board_is_the_uuid_else_the_name(tmp_path):
    rec = tiny_recording()
    assert rec.board == "GPU-0" and read_recording(write_recording(rec, tmp_path / "rec")).board == "GPU-0"
    # A recording built in memory (a twin's replay, a test's) may lack a UUID: its name stands in.
    assert replace(rec, provenance={"gpu": "hand-made"}).board == "hand-made"


def test_window_keeps_the_clock():
    part = tiny_recording().window(1.0, 1.5)
    assert part.trace[schema.T_S].min() == pytest.approx(1.0)
    assert len(part.launches) == 5 and list(part.phases[schema.PHASE_KIND]) == ["idle", "series"]


def test_missing_file_is_one_line(tmp_path):
    folder = write_recording(tiny_recording(), tmp_path / "rec")
    (folder / "energy.parquet").unlink()
    (folder / "provenance.json").unlink()
    with pytest.raises(RecordingError, match=r"missing file\(s\) energy.parquet, provenance.json$"):
        read_recording(folder)
    with pytest.raises(RecordingError, match="no such folder"):
        read_recording(tmp_path / "nothing")


def test_missing_columns_are_named(tmp_path):
    folder = write_recording(tiny_recording(), tmp_path / "rec")
    trace = pd.read_parquet(folder / "trace.parquet").drop(columns=[schema.SM_CLOCK_MHZ, schema.TEMPERATURE_C])
    trace.to_parquet(folder / "trace.parquet")
    with pytest.raises(RecordingError) as err:
        read_recording(folder)
    text = str(err.value)
    assert "\n" not in text and "trace.parquet lacks column(s) sm_clock_mhz, temperature_c" in text


def test_bad_probe_table_and_provenance(tmp_path):
    folder = write_recording(tiny_recording(), tmp_path / "rec")
    pd.DataFrame({schema.T_S: [0.0], schema.WORKLOAD: ["w"]}).to_parquet(folder / "probes.parquet")
    with pytest.raises(RecordingError, match="probes.parquet lacks column.*batch, clock_mhz, cycles, elapsed_ns"):
        read_recording(folder)
    (folder / "probes.parquet").unlink()
    (folder / "provenance.json").write_text(json.dumps({"gpu": "x"}))
    with pytest.raises(RecordingError, match="provenance.json lacks key.*uuid, power_limit_w, max_sm_clock_mhz"):
        read_recording(folder)
    (folder / "provenance.json").write_text("[1]")
    with pytest.raises(RecordingError, match="holds a list"):
        read_recording(folder)
    (folder / "provenance.json").write_text(json.dumps({"gpu": "x", "uuid": "u", "power_limit_w": "700 W",
                                                        "max_sm_clock_mhz": None}))
    with pytest.raises(RecordingError, match=r"power_limit_w is '700 W', expected a number or null$"):
        read_recording(folder)


def test_from_an_empty_or_mismatched_recording_says_so(tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.workflows.recording_calibration import calibrate_from

    rec = tiny_recording(probes=True)
    rec.probes[schema.WORKLOAD] = "other"
    folder = write_recording(rec, tmp_path / "rec")
    # probes that name no workload with timed batches are not silently counted as evidence
    assert any("10 of the 10 probes name workload(s) with no timed batch (other): not used" in line
               for line in calibrate_from(folder).findings)
    launches = pd.read_parquet(folder / "launches.parquet").iloc[:0]
    launches.to_parquet(folder / "launches.parquet", index=False)
    assert main(["calibrate", "--from", str(folder), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "launches.parquet has no timed batches" in err


@pytest.mark.parametrize("change, message", [
    (lambda r: r.energy.__setitem__(schema.ENERGY_COUNTER_J, r.energy[schema.ENERGY_COUNTER_J][::-1].to_numpy()),
     "energy_counter_j' falls"),
    (lambda r: r.launches.__setitem__(schema.END_S, r.launches[schema.START_S] - 1), "end before they start"),
    (lambda r: r.phases.__setitem__(schema.PHASE_KIND, ["idle", "sprint"]), "unknown value"),
    (lambda r: r.trace.__setitem__(schema.T_S, r.trace[schema.T_S][::-1].to_numpy()), "not sorted"),
])
def test_bad_tables_refused_before_writing(tmp_path, change, message):
    rec = tiny_recording()
    change(rec)
    with pytest.raises(RecordingError, match=message):
        write_recording(rec, tmp_path / "rec")
    assert not (tmp_path / "rec").exists()


def test_downsample_keeps_every_change():
    rec = tiny_recording()
    small = recording.downsample_trace(rec.trace)
    assert len(small) == 3  # first row, the step at 1 s, the last row
    assert small[schema.POWER_INSTANT_W].tolist() == [70.0, 400.0, 400.0]


@pytest.mark.shared_data
def test_reads_the_shared_h100_recording(shared_data):
    rec = read_recording(shared_data / "h100-2026-11-25-raw", probes=False)
    assert rec.provenance["power_limit_w"] == 700.0
    assert set(rec.workloads) == {"cupy_fp32_matmul_4096", "cupy_fma_loop", "cupy_triad_256MiB",
                                  "torch_bf16_matmul_8192"}


def test_recording_without_trace_reads_only_when_allowed(tmp_path):
    from powermodels.recording import RecordingError, read_recording, write_recording
    from powermodels.twin import load_preset
    from powermodels.twin.compare import compare_recordings
    from powermodels.twin.metrics import reading_series
    from powermodels.twin.replay import replay
    import pandas as pd
    phases = pd.DataFrame({"phase": ["thermal"] * 2, "workload": ["-", "cupy_fma_loop"], "repeat": [-1, 0],
                           "kind": ["idle", "series"], "t0_s": [0.0, 1.0], "t1_s": [1.0, 3.2]})
    rec = replay(phases, load_preset("h100-sxm"), poll_s=5e-3, start_temperature_c=40.0)
    folder = write_recording(rec, tmp_path / "rec")
    (folder / "trace.parquet").unlink()
    with pytest.raises(RecordingError, match="missing file.*trace.parquet"):
        read_recording(folder)
    bare = read_recording(folder, trace_optional=True)
    assert not bare.has_trace
    with pytest.raises(RecordingError, match="has no trace.parquet.*temperature"):
        reading_series(bare, "temperature_c", [1.0])
    table = compare_recordings(bare, rec)
    assert list(table[schema.CHECK_METRIC]) == ["warm-up energy per launch, worst second"]
    assert "cooling temperature" in table.attrs["not_compared"][0]


def test_downsample_treats_a_reading_the_board_does_not_give_as_unchanged():
    """Fails before: NaN != NaN kept every row of a trace with an all-NaN reading (not downsampled at all)."""
    rec = tiny_recording()
    trace = rec.trace.assign(**{schema.POWER_AVERAGE_W: float("nan")})
    small = recording.downsample_trace(trace)
    assert len(small) == 3
    assert small[schema.POWER_INSTANT_W].tolist() == [70.0, 400.0, 400.0]


def test_downsample_with_brackets_keeps_every_counter_update_where_the_full_trace_has_it():
    """Fails before: without the row before each change an update's lower bracket was the previous
    change (~100 ms earlier), so counter windows on a downsampled trace (gpu_thermal's traces.parquet) moved."""
    from powermodels.energy_counter import counter_updates

    t = np.arange(0.0, 1.0, 0.001)
    trace = pd.DataFrame({schema.T_S: t, schema.ENERGY_COUNTER_J: np.floor(t / 0.1) * 40.0,
                          schema.TEMPERATURE_C: 50.0})
    full = counter_updates(trace)
    kept = recording.downsample_trace(trace, brackets=True)
    assert len(kept) < len(trace) / 20
    for a, b in zip(full, counter_updates(kept)):
        np.testing.assert_array_equal(a, b)
    lo_plain = counter_updates(recording.downsample_trace(trace))[0]
    assert not np.array_equal(lo_plain, full[0])   # what the plain form loses


def test_a_save_stopped_half_way_leaves_the_previous_recording_whole(tmp_path, monkeypatch):
    """Fails before: each file was replaced on its own, so a save stopped after the first files left new
    tables beside the previous save's (natural_recording saves as the recording grows)."""
    old = tiny_recording(probes=True)
    folder = write_recording(old, tmp_path / "rec")
    (folder / "README.md").write_text("kept")
    new = replace(old, trace=old.trace.assign(**{schema.POWER_INSTANT_W: 500.0}),
                  launches=old.launches.assign(**{schema.TIME_S: 0.08}), provenance={**old.provenance, "gpu": "new"})
    real = pd.DataFrame.to_parquet
    written = []

    def stop_at_the_third(df, path, *args, **kwargs):
        written.append(path)
        if len(written) == 3:
            raise OSError("No space left on device")
        return real(df, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_parquet", stop_at_the_third)
    with pytest.raises(OSError, match="No space"):
        write_recording(new, folder)
    monkeypatch.undo()
    back = read_recording(folder)
    pd.testing.assert_frame_equal(back.trace, old.trace)
    pd.testing.assert_frame_equal(back.launches, old.launches)
    assert back.provenance == old.provenance and (folder / "README.md").read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec"]   # no temporary folder left behind


def test_a_new_save_drops_the_previous_saves_files_it_lacks(tmp_path):
    """Fails before: a recording without probes written over one with probes read back the old probes."""
    folder = write_recording(tiny_recording(probes=True), tmp_path / "rec")
    (folder / "notes.txt").write_text("the user's")
    write_recording(tiny_recording(probes=False), folder)
    assert read_recording(folder).probes is None
    assert (folder / "notes.txt").read_text() == "the user's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec"]
