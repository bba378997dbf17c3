"""The board's thermal resistance, read before the first thermal series (board_calibration.thermal)."""

import functools
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from powermodels import schema
from powermodels.board_calibration import calibrated_preset
from powermodels.board_calibration.thermal import (
    NetworkAtBandEdgeWarning,
    calibrate_board_network,
    calibrate_board_thermal,
    pole_factors,
    scaled_resistance,
    widened_band,
)
from powermodels.recording import read_recording
from powermodels.thermal.foster import pole_bands, simulate_foster
from powermodels.twin.ambient import die_heat
from powermodels.twin.replay import replay

from .test_twin import known_preset, schedule

DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def _hotter(preset, k):
    return replace(preset, physics=scaled_resistance(preset.physics, k))


@functools.cache
def board_recording(poles: tuple) -> tuple:
    """The known preset's board with thermal ``poles`` and its replay of ``schedule()`` (seed 3).

    Cached: the tests only read the recording, and two boards are used twice.
    """
    preset = known_preset()
    board = replace(preset, physics=replace(preset.physics, thermal_poles=poles))
    return board, replay(schedule(), board, seed=3, poll_s=2e-3)


@pytest.mark.parametrize("k", [0.8, 1.3])
def test_a_known_boards_resistance_is_found_again(k):
    preset = known_preset()
    rec = replay(schedule(), _hotter(preset, k), seed=3, poll_s=2e-3, start_temperature_c=40.0)
    cal = calibrate_board_thermal(preset, rec, min_rise_c=3.0)
    fit = cal.fit["board_thermal"]
    assert fit["k"] == pytest.approx(k, rel=0.08)
    assert fit["rms_after_c"] <= fit["rms_before_c"]
    # only the resistances change: the time constants and everything else stay the preset's
    assert [tau for _, tau in cal.physics.poles] == [tau for _, tau in preset.physics.poles]
    assert cal.physics.core_w_per_ghz == preset.physics.core_w_per_ghz and cal.name.startswith("known+thermal@")
    # the part read ends where the first series starts: the series and its cooling stay held out
    assert fit["read_s"][1] == pytest.approx(float(rec.phase_rows(kind="series")[schema.T0_S].min()))


def test_the_fitting_board_needs_no_change():
    folder = DATASETS / "h100" / "raw-2026-11-25"
    if not folder.is_dir():
        pytest.skip(f"{folder} is not in this checkout")
    fit = calibrate_board_thermal("h100-sxm", read_recording(folder, probes=False)).fit["board_thermal"]
    assert fit["k"] == pytest.approx(1.0, abs=0.02)  # h100-sxm was fitted to this board (0.998)


def test_a_recording_that_cannot_tell_is_refused():
    preset = known_preset()
    rec = replay(schedule(), preset, seed=3, poll_s=2e-3, start_temperature_c=40.0)
    with pytest.raises(ValueError, match="not identified"):
        calibrate_board_thermal(preset, rec, min_rise_c=100.0)
    no_series = replace(rec, phases=rec.phases.loc[rec.phases[schema.PHASE_KIND] != "series"])
    with pytest.raises(ValueError, match="no series entry"):
        calibrate_board_thermal(preset, no_series)
    with pytest.raises(ValueError, match=r"outside 0\.5-2x"):
        calibrate_board_thermal(_hotter(preset, 0.2), rec, min_rise_c=0.5)


@pytest.mark.parametrize("factors", [(0.8, 1.6), (1.2, 0.7)])
@pytest.mark.parametrize("before_first_series", [True, False])
def test_each_poles_own_factor_is_found_again(factors, before_first_series):
    # a board whose die and heatsink differ from the preset's by different factors, recorded from idle
    preset = known_preset()
    rec = replay(schedule(), _hotter(preset, factors), seed=3, poll_s=2e-3)
    fit = pole_factors(preset, rec, before_first_series=before_first_series)
    assert fit["factors"] == pytest.approx(list(factors), rel=0.12)
    assert fit["rms_c"] < fit["rms_one_factor_c"]  # one factor for both poles cannot bend the curve
    assert fit["time_constants_s"] == [tau for _, tau in preset.physics.poles]
    series_start = float(rec.phase_rows(kind="series")[schema.T0_S].min())
    assert (fit["read_s"][1] <= series_start) == before_first_series


def test_pole_factors_refuses_what_it_cannot_read():
    preset = known_preset()
    rec = replay(schedule(), preset, seed=3, poll_s=2e-3)
    idle_only = replace(rec, trace=rec.trace.loc[rec.trace[schema.T_S] < 2.5],
                        energy=rec.energy.loc[rec.energy[schema.T_S] < 2.5])
    with pytest.raises(ValueError, match=r"not identified"):
        pole_factors(preset, idle_only)
    with pytest.raises(ValueError, match="no trace"):
        pole_factors(preset, replace(rec, trace=rec.trace.iloc[:0]))


def test_a_boards_own_network_is_fitted_before_its_first_series():
    # a board whose die and heatsink respond at other time constants than the preset's
    preset = known_preset()
    board, rec = board_recording(((0.035, 0.3), (0.03, 8.0)))
    with warnings.catch_warnings():
        # the board's slow pole is the band's lower edge itself: widened past it, the refit places it inside
        warnings.simplefilter("error", NetworkAtBandEdgeWarning)
        cal = calibrate_board_network(preset, rec, min_rise_c=3.0)
    assert cal.fit["board_network"]["poles_at_band_edge"] == [1] and cal.fit["board_network"]["poles_unplaced"] == []
    fit = cal.fit["board_network"]
    assert cal.name.startswith("known+network@") and fit["poles_before"] == [list(p) for p in preset.physics.poles]
    series_start = float(rec.phase_rows(kind="series")[schema.T0_S].min())
    assert fit["read_s"][1] == pytest.approx(series_start)
    # held out: the series and the cooling after it, simulated on each network from the recording's own power
    iv, heat = die_heat(rec, preset)
    t = iv[schema.T_S].to_numpy(float)
    later = t > series_start
    truth = simulate_foster(t, heat, board.physics.poles, 0.0)[later]
    err_cal = np.abs(simulate_foster(t, heat, cal.physics.poles, 0.0)[later] - truth).max()
    err_preset = np.abs(simulate_foster(t, heat, preset.physics.poles, 0.0)[later] - truth).max()
    assert err_cal < 0.35 * err_preset
    assert cal.physics.core_w_per_ghz == preset.physics.core_w_per_ghz  # only the network changes


@pytest.mark.filterwarnings("ignore::powermodels.board_calibration.NetworkAtBandEdgeWarning")
def test_calibrated_preset_takes_the_network_first():
    preset = known_preset()
    _, rec = board_recording(((0.035, 0.3), (0.03, 8.0)))
    with pytest.raises(ValueError, match="thermal must be"):
        calibrated_preset(preset, rec, thermal="poles")
    with pytest.raises(ValueError, match="not identified"):
        calibrate_board_network(preset, rec, min_rise_c=100.0)
    net = calibrated_preset(preset, rec, thermal="network")
    assert net.physics.poles == calibrate_board_network(preset, rec).physics.poles


def test_the_command_line_takes_scale_or_network():
    from powermodels.cli import build_parser

    parse = build_parser(["twin-compare"]).parse_args
    base = ["twin-compare", "REC", "--preset", "h200-raw", "--out", "DIR"]
    assert parse(base).calibrate_thermal is False
    assert parse([*base, "--calibrate-thermal"]).calibrate_thermal == "scale"  # as before this option took a value
    assert parse([*base, "--calibrate-thermal", "network"]).calibrate_thermal == "network"


def test_a_time_constant_on_its_bands_edge_is_reported_and_warned():
    """A slow pole below its band (3 s; the band is 8–60 s) ends on the edge: said, not hidden; one inside is not."""
    preset = known_preset()
    fits = {}
    for tau in (3.0, 20.0):
        _, rec = board_recording(((0.035, 0.3), (0.03, tau)))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fits[tau] = calibrate_board_network(preset, rec, min_rise_c=3.0, at_edge="keep").fit["board_network"]
        fits[tau]["warned"] = [str(w.message) for w in caught if w.category is NetworkAtBandEdgeWarning]
    assert fits[3.0]["poles_at_band_edge"] == [1] and fits[3.0]["poles"][1][1] == pytest.approx(8.0)
    assert len(fits[3.0]["warned"]) == 1 and "time constant on an edge of its band (8.0, 60.0)" in fits[3.0]["warned"][0]
    assert fits[20.0]["poles_at_band_edge"] == [] and fits[20.0]["warned"] == []


def test_at_edge_widens_the_band_or_keeps_the_presets_time_constants():
    """On a board whose slow pole (3 s) lies below its band, ``widen`` finds it and ``preset`` keeps the preset's."""
    preset = known_preset()
    _, rec = board_recording(((0.035, 0.3), (0.03, 3.0)))
    with pytest.raises(ValueError, match="at_edge must be"):
        calibrate_board_network(preset, rec, at_edge="fallback")
    assert widened_band(pole_bands(2), 1, 8.0) == (1.0, 60.0) and widened_band(pole_bands(2), 1, 60.0) == (8.0, 180.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NetworkAtBandEdgeWarning)  # only "keep" warns here: the others acted on it
        widened = calibrate_board_network(preset, rec, min_rise_c=3.0).fit["board_network"]  # "widen", the default
        kept = calibrate_board_network(preset, rec, min_rise_c=3.0, at_edge="preset").fit["board_network"]
    assert widened["at_edge"] == "widen" and widened["bands_s"][1] == [1.0, 60.0]
    assert widened["poles_at_band_edge"] == [1] and widened["poles_unplaced"] == []
    assert widened["first_fit"]["poles"][1][1] == pytest.approx(8.0)
    assert 1.5 < widened["poles"][-1][1] < 6.0 and widened["rmse_c"] < widened["first_fit"]["rmse_c"]
    assert [tau for _, tau in kept["poles"]] == pytest.approx([tau for _, tau in preset.physics.poles])
    assert kept["at_edge"] == "preset"
    net = calibrated_preset(preset, rec, thermal="network")
    assert net.fit["board_network"]["poles"] == widened["poles"]
    keep = calibrated_preset(preset, rec, thermal="network", network_at_edge="keep")
    assert keep.fit["board_network"]["poles"][1][1] == pytest.approx(8.0)


def test_a_time_constant_still_on_an_edge_after_widening_is_warned():
    """A slow pole far below even the widened band (0.3 s; widened 1–60 s) is refitted, lands on 1 s, and is said."""
    preset = known_preset()
    _, rec = board_recording(((0.035, 0.05), (0.03, 0.3)))
    with pytest.warns(NetworkAtBandEdgeWarning, match=r"its band \(1.0, 60.0\)"):
        fit = calibrate_board_network(preset, rec, min_rise_c=1.0).fit["board_network"]
    assert 1 in fit["poles_at_band_edge"] and 1 in fit["poles_unplaced"]
    assert fit["first_fit"]["poles"][-1][1] == pytest.approx(8.0) and fit["poles"][-1][1] == pytest.approx(1.0)


def test_a_chain_of_calibrations_names_each_step_and_the_board_once():
    from powermodels.board_calibration.naming import board_preset_name

    uuid = "GPU-8a9ced5c-fc29-f6be-90b7-d7903e6efa79"
    name = board_preset_name("h200-raw-pooled-per-workload", uuid, "network")
    name = board_preset_name(name, uuid, "domains")
    name = board_preset_name(name, uuid, "cap-probes")
    assert name == "h200-raw-pooled-per-workload+network+domains+cap-probes@8a9ced5c"
    # a preset calibrated to one board, then to another, keeps the first board where it was
    assert board_preset_name("b+domains@14a51fa7", uuid, "network") == "b+domains@14a51fa7+network@8a9ced5c"
    # without a GPU UUID the stand-in is used whole: two recordings are not taken for one board
    one, two = (board_preset_name("b", f"raw_recording_{x}", "network") for x in ("aa", "bb"))
    assert one == "b+network@raw_recording_aa" and one != two
    assert board_preset_name(one, "raw_recording_aa", "domains") == "b+network+domains@raw_recording_aa"
