"""``benchmarks/twin_unseen_boards.py``: presets replayed on boards they never saw, one table."""

from dataclasses import replace

import pandas as pd
import pytest

from benchmark_scripts import load_benchmark
from powermodels import schema
from powermodels.recording import write_recording
from powermodels.twin.preset import save_preset
from powermodels.twin.replay import replay

from .test_twin_board import board, schedule

UUID = "GPU-0123abcd-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def script():
    return load_benchmark("twin_unseen_boards")


@pytest.fixture(scope="module")
def unseen(tmp_path_factory):
    """A twin-made recording of another board (5 % more dynamic power), its preset, and the board's preset."""
    folder = tmp_path_factory.mktemp("unseen")
    rec = replay(schedule(), board(core_w_per_ghz=230.0 * 1.05, p0_w=19.0), seed=1, poll_s=2e-3,
                 start_temperature_c=40.0)
    rec = replace(rec, provenance={**rec.provenance, "uuid": UUID})
    path = write_recording(rec, folder / "raw_recording_0123abcd")
    preset = save_preset(board(), folder / "blind.json")
    fitted = board()
    fitted = replace(fitted, provenance={**fitted.provenance, "fitted_from": [{"uuid": UUID}]})
    return path, preset, save_preset(fitted, folder / "fitted.json")


def test_replays_each_preset_and_reads_back_what_is_done(script, unseen, tmp_path, capsys):
    path, preset, _ = unseen
    argv = [str(path), "--preset", str(preset), "--preset", f"{preset}:board", "--out", str(tmp_path),
            "--plot", str(tmp_path / "warmup.png")]
    assert script.main(argv) == 0
    assert "2 replays to run (0 read back)" in capsys.readouterr().out
    rows = pd.read_csv(tmp_path / "rows.csv")
    assert set(rows["preset"]) == {str(preset), f"{preset}:board"} and set(rows["board"]) == {"0123abcd"}
    assert (tmp_path / "blind" / "raw_recording_0123abcd" / "comparison.csv").exists()
    assert (tmp_path / "blind-board" / "raw_recording_0123abcd" / "comparison.csv").exists()
    assert (tmp_path / "warmup.png").stat().st_size > 0
    warm = rows.loc[rows[schema.CHECK_METRIC].str.startswith(script.WARMUP)].set_index(["preset", "workload"])[schema.CHECK_ERROR].abs()
    # the board-blind preset misses the other board's 5 %; calibrated to the board, it does not
    assert warm[(str(preset), "gemm")] > 2.0
    assert warm[(f"{preset}:board", "gemm")] < 1.0
    summary = (tmp_path / "summary.md").read_text()
    assert "warm-up within 1 %" in summary and "gemm worst %" in summary
    # a second run replays nothing: every folder already holds its comparison
    assert script.main(argv) == 0
    assert "0 replays to run (2 read back)" in capsys.readouterr().out


def test_a_preset_that_saw_the_board_is_refused(script, unseen, tmp_path, capsys):
    path, _, fitted = unseen
    with pytest.raises(SystemExit):
        script.main([str(path), "--preset", str(fitted), "--out", str(tmp_path)])
    assert "fitted to or pooled over 0123abcd" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_an_unknown_scale_is_refused_before_any_replay(script, unseen, tmp_path, capsys):
    path, preset, _ = unseen
    with pytest.raises(SystemExit):
        script.main([str(path), "--preset", f"{preset}:memory", "--out", str(tmp_path)])
    assert "must be board, workload or domains" in capsys.readouterr().err
    for bare in ("-bursts", "memory-bursts"):  # "-bursts" ends a scale; it is not one
        with pytest.raises(SystemExit):
            script.main([str(path), "--preset", f"{preset}:{bare}", "--out", str(tmp_path)])
        assert "must be board, workload or domains (each may end in -bursts)" in capsys.readouterr().err


def test_labels_name_the_power_and_thermal_calibrations(script):
    assert script.parse_label("h200-raw") == (["h200-raw"], "", "")
    assert script.parse_label("h200-raw:domains") == (["h200-raw"], "domains", "")
    assert script.parse_label("h200-raw:domains:network") == (["h200-raw"], "domains", "network")
    assert script.parse_label("h200-raw::network") == (["h200-raw"], "", "network")
    assert script.parse_label("part:a,b") == (["a", "b"], "", "")
    assert script.parse_label("part:a,b:domains:network") == (["a", "b"], "domains", "network")
    assert script.folder_name("part:a,b:domains:network") == "by-part-a-domains-thermal-network"
    assert script.folder_name("h200-raw:domains:network") == "h200-raw-domains-thermal-network"
    assert script.folder_name("h200-raw::scale") == "h200-raw-thermal-scale"
    assert script.folder_name("part:x/h200-raw-part-000.json,b") == "by-part-h200-raw-part-000"
    # a last ":cap=F" (a pooled capped clock factor) is not part of the thermal field
    assert script.parse_label("h200-raw:domains:network:cap=1.0446") == (["h200-raw"], "domains", "network")
    assert script.cap_factor("h200-raw:domains:network:cap=1.0446") == 1.0446
    assert script.cap_factor("h200-raw:domains:network") is None
    assert script.folder_name("h200-raw:domains:network:cap=1.0446") == "h200-raw-domains-thermal-network-cap1.0446"
    # the board's own capped clock (":cap"), with its probed cycles (":cap-probes"); an ending "@AMBIENT"
    for label, own, folder in (("h200-raw:domains:network:cap", "clock", "h200-raw-domains-thermal-network-cap"),
                               ("h200-raw:domains:network:cap-probes", "probes",
                                "h200-raw-domains-thermal-network-cap-probes"),
                               ("h200-raw:domains:network:cap-rate", "rate", "h200-raw-domains-thermal-network-cap-rate")):
        assert script.parse_label(label) == (["h200-raw"], "domains", "network")
        assert script.own_cap(label) == own and script.cap_factor(label) is None
        assert script.folder_name(label) == folder
    assert script.own_cap("h200-raw:domains:network:cap=1.0446") is False
    # "-recorded-ambient": the capped clock fit replays at the recording's ambient (session 28)
    for label, own, folder in (("h200-raw:domains:network:cap-recorded-ambient", "clock",
                                "h200-raw-domains-thermal-network-cap-recorded-ambient"),
                               ("h200-raw:domains:network:cap-probes-recorded-ambient", "probes",
                                "h200-raw-domains-thermal-network-cap-probes-recorded-ambient")):
        assert script.parse_label(label) == (["h200-raw"], "domains", "network")
        assert script.own_cap(label) == own and script.own_cap_ambient(label) == "recorded"
        assert script.folder_name(label) == folder
    assert script.own_cap_ambient("h200-raw:domains:network:cap-probes") == "preset"
    # a scale ending in "-bursts" reads the natural part's bursts instead of the series (session 28)
    assert script.parse_label("h200-raw:domains-bursts:network") == (["h200-raw"], "domains-bursts", "network")
    assert script.folder_name("h200-raw:domains-bursts:network") == "h200-raw-domains-bursts-thermal-network"
    assert script.own_cap_ambient("h200-raw:domains:network") == "preset"
    held = "h200-raw:domains:network:cap-probes@recorded"
    assert script.parse_label(held) == (["h200-raw"], "domains", "network") and script.own_cap(held) == "probes"
    assert script.replay_ambient_of(held) == "recorded"
    assert script.replay_ambient_of("h200-raw:domains") == "recorded-causal"
    assert script.folder_name(held) == "h200-raw-domains-thermal-network-cap-probes-ambient-recorded"
    assert script.folder_name("h200-raw:domains:network:cap=1.0446@initial") == (
        "h200-raw-domains-thermal-network-cap1.0446-ambient-initial")


@pytest.mark.parametrize(("suffix", "message"), [
    (":board:poles", "must be scale, network, network-widen, network-keep or network-preset"),
    (":board@warmest", "the ambient after '@' must be one of"),
    (":board::cap-probes:cap=1.02", "exclude each other"),
    (":board::cap-rate-recorded-ambient", "':cap-rate' always fits at the recording's ambient"),
])
def test_an_unknown_thermal_calibration_or_ambient_is_refused_before_any_replay(script, unseen, tmp_path, capsys,
                                                                                suffix, message):
    path, preset, _ = unseen
    with pytest.raises(SystemExit):
        script.main([str(path), "--preset", f"{preset}{suffix}", "--out", str(tmp_path)])
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_a_preset_moved_to_boards_probes_counts_them_as_seen(script):
    # h100-sxm-probed read five H100s' capped bf16 through their clock probes: none of them is unseen to it
    assert {"549d5430", "5bad9bd9", "84fc649a", "f73aad1d", "620707cb"} <= script.preset_boards("h100-sxm-probed")
    assert "549d5430" not in script.preset_boards("h100-sxm")


def test_a_label_s_ambient_reaches_the_replay(script, unseen, tmp_path):
    path, preset, _ = unseen
    script.replay_one(f"{preset}@initial", str(path), str(tmp_path / "initial"))
    script.replay_one(str(preset), str(path), str(tmp_path / "default"))
    assert "Ambient temperature of the replay: initial:" in (tmp_path / "initial" / "comparison.md").read_text()
    default = (tmp_path / "default" / "comparison.md").read_text()
    assert "Ambient temperature of the replay: recorded:" in default and "from the past only" in default


def test_seeds_each_gives_every_recording_its_own_seed(script, unseen, tmp_path, monkeypatch):
    import shutil

    path, preset, _ = unseen
    other = shutil.copytree(path, tmp_path / "copy" / "raw_recording_0123abcd")
    jobs = []
    # the replays themselves are tested above: here only the seed each job is given
    monkeypatch.setattr(script, "replay_one", lambda *job: jobs.append(job) or "done")
    monkeypatch.setattr(script, "collect", lambda *a: pd.DataFrame())
    monkeypatch.setattr(script, "summary", lambda rows: pd.DataFrame({"preset": []}))
    for seeds, expected in (("same", [0, 0]), ("each", [1, 2])):
        jobs.clear()
        out = tmp_path / seeds
        out.mkdir()
        script.main([str(path), str(other), "--preset", str(preset), "--out", str(out), "--seeds", seeds])
        # every recording, in the order given, gets its position from 1 (each) or seed 0 (same, the default)
        assert [(job[1], job[4]) for job in jobs] == list(zip([str(path), str(other)], expected, strict=True))
