"""The replay's ambient from the recording: a twin-made recording whose inlet warms is read back."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from powermodels import schema
from powermodels.twin.ambient import ambient_at, initial_ambient, recorded_ambient
from powermodels.twin.compare import twin_compare
from powermodels.twin.replay import replay

from .test_twin import known_preset

#: the inlet warms by 12 °C over the recording (a hot slot, like GPU-620707cb's 32 → 46 °C)
DRIFT = pd.DataFrame({schema.T_S: [0.0, 72.0], "ambient_c": [30.0, 42.0]})


def drifting_schedule() -> pd.DataFrame:
    """Idle stretches (12 s) between three 10 s series."""
    rows = [("thermal", "-", -1, "idle", 0.0, 6.0)]
    t = 6.0
    for rep, w in enumerate(["gemm", "bf16", "gemm"]):
        rows.append(("thermal", w, rep, "series", t, t + 10.0))
        rows.append(("thermal", "-", -1, "idle", t + 10.0, t + 22.0))
        t += 22.0
    return pd.DataFrame(rows, columns=[schema.RECORDING_PHASE, schema.WORKLOAD, schema.REPEAT, schema.PHASE_KIND,
                                       schema.T0_S, schema.T1_S])


@pytest.fixture(scope="module")
def drifted():
    preset = known_preset()
    return preset, replay(drifting_schedule(), preset, seed=1, poll_s=2e-3, ambient=DRIFT,
                          ambient_source="test: 30 → 42 °C")


def test_known_ambient_drift_is_recovered(drifted):
    preset, rec = drifted
    assert rec.provenance["ambient"]["range_c"] == [30.0, 42.0]
    points = recorded_ambient(rec, preset)
    assert len(points) == 4  # every idle stretch of 3 s or more
    truth = np.interp(points[schema.T_S], DRIFT[schema.T_S], DRIFT["ambient_c"])
    assert np.max(np.abs(points["ambient_c"] - truth)) < 0.7, points
    # from the past only: a stretch's value starts at its end, the earlier one holds until then
    causal = recorded_ambient(rec, preset, causal=True)
    ends = points[schema.T1_S].to_numpy()
    assert ambient_at(causal, ends[1] - 0.01) == pytest.approx(points["ambient_c"].iloc[0])
    assert ambient_at(causal, ends[1] + 0.01) == pytest.approx(points["ambient_c"].iloc[1])


def test_replay_on_the_recorded_ambient_follows_the_drift(drifted, tmp_path):
    preset, rec = drifted
    fixed = twin_compare(rec, preset, tmp_path / "preset", ambient="preset")
    followed = twin_compare(rec, preset, tmp_path / "recorded", ambient="recorded")
    cool = fixed[schema.CHECK_METRIC].str.startswith("cooling")
    assert fixed.loc[cool, schema.CHECK_ERROR].abs().max() > 4.0  # the preset's 30 °C misses the warmed inlet
    assert followed.loc[cool, schema.CHECK_ERROR].abs().max() <= 1.0
    assert "recorded: 4 idle stretches" in followed.attrs["ambient"]
    assert "the preset's 30.0 °C (constant)" in fixed.attrs["ambient"]
    assert (tmp_path / "preset" / "twin" / "provenance.json").read_text().count("constant")
    assert "Ambient temperature of the replay: recorded" in (tmp_path / "recorded" / "comparison.md").read_text()
    with pytest.raises(ValueError, match="ambient 'inlet' is not one of"):
        twin_compare(rec, preset, tmp_path / "bad", ambient="inlet")


def test_recorded_ambient_needs_idle_stretches(drifted):
    preset, rec = drifted
    with pytest.raises(ValueError, match="no idle stretch of 30 s"):
        recorded_ambient(rec, preset, min_idle_s=30.0)


def test_cli_twin_compare_says_which_ambient(drifted, tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.recording import write_recording

    preset, rec = drifted
    folder = write_recording(rec, tmp_path / "rec")
    preset_file = tmp_path / "known.json"
    from powermodels.twin import save_preset
    save_preset(preset, preset_file)
    assert main(["twin-compare", str(folder), "--preset", str(preset_file), "--out", str(tmp_path / "cmp"),
                 "--ambient", "recorded-causal"]) == 0
    assert "ambient: recorded: 4 idle stretches" in capsys.readouterr().out


def test_the_replay_reads_the_recordings_own_idle_ambient_by_default(tmp_path):
    # a board in a warmer slot than the preset's fitting board: the recording runs at 37 °C inlet, the preset
    # says 30 °C; by default (since session 11) the replay reads its ambient from the idle stretches, each
    # from its end on; the initial ambient (the first idle stretch only, the default of sessions 9-10) too
    preset = known_preset()
    warm = pd.DataFrame({schema.T_S: [0.0], "ambient_c": [37.0]})
    rec = replay(drifting_schedule(), preset, seed=1, poll_s=2e-3, ambient=warm, ambient_source="test: 37 °C")
    initial = initial_ambient(rec, preset)
    assert len(initial) == 1 and initial[schema.T0_S].iloc[0] == 0.0
    assert initial["ambient_c"].iloc[0] == pytest.approx(37.0, abs=0.7)
    default = twin_compare(rec, preset, tmp_path / "default")
    first = twin_compare(rec, preset, tmp_path / "initial", ambient="initial")
    fixed = twin_compare(rec, preset, tmp_path / "preset", ambient="preset")
    assert default.attrs["ambient"].startswith("recorded: ") and "from the past only" in default.attrs["ambient"]
    assert first.attrs["ambient"].startswith("initial: ")
    cooling = lambda t: t.loc[t[schema.CHECK_METRIC].str.startswith("cooling"), schema.CHECK_ERROR].abs().max()  # noqa: E731
    assert max(cooling(default), cooling(first)) <= 1.0 < cooling(fixed)


def test_initial_ambient_needs_an_idle_stretch_before_the_first_load(drifted):
    preset, rec = drifted
    late = rec.phases.copy()
    late.loc[0, schema.T1_S] = 1.0  # the first idle is too short to read: the first readable one is after a load
    with pytest.raises(ValueError, match="comes after a load"):
        initial_ambient(replace(rec, phases=late), preset)


REPO = __import__("pathlib").Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("folder, warm", [
    ("h100-2026-11-27/raw_recording_ladder_84fc649a", True),   # recorded right after an 8-minute call
    ("h100-2026-11-27/raw_recording_ladder_f73aad1d", False),  # a board at rest
])
def test_a_recording_that_starts_warm_is_flagged(folder, warm):
    """Fails before: the initial ambient of the real H100 GPU-84fc649a (46.4 °C, 8.3 °C above every later
    idle stretch's) was taken silently and the replay's cooling ran 10–13 °C hot."""
    from powermodels.recording import read_recording
    from powermodels.twin.compare import WARM_START_C, replay_ambient, warm_start_note

    path = REPO / "datasets" / folder
    if not path.is_dir():
        pytest.skip(f"{folder} is not in this checkout")
    rec = read_recording(path)
    for ambient in ("initial", "recorded-causal"):  # the causal profile holds the first value at first too
        _, note = replay_ambient(rec, "h100-sxm", ambient)
        assert ("WARNING" in note and "started warm" in note) == warm
    # the note reads the later stretches only to flag: the profile is the first stretch's alone
    profile = initial_ambient(rec, "h100-sxm")
    assert len(profile) == 1
    assert warm_start_note(rec, "h100-sxm", float(profile[schema.AMBIENT_C].iloc[0]) - 10 * WARM_START_C) == ""


def test_replay_setup_is_what_twin_compare_replays_with(drifted):
    """``replay_setup``: the adapted preset and the recorded-causal ambient, as the two calls give them."""
    from powermodels.twin.adapt import adapt_workloads
    from powermodels.twin.compare import replay_ambient, replay_setup

    preset, real = drifted
    adapted, profile = replay_setup(real, preset)
    expected, _ = adapt_workloads(preset, real)
    assert adapted == expected
    pd.testing.assert_frame_equal(profile, replay_ambient(real, expected, "recorded-causal")[0])
    assert replay_setup(real, preset, "preset")[1] is None
