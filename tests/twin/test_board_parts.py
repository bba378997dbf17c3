"""Boards pooled by part number: the part read from a recording, the domains pooled apart, the preset picked by part."""

from dataclasses import replace

import pytest

from powermodels import schema
from powermodels.board_calibration import (
    board_levels,
    board_part_number,
    part_preset,
    pooled_preset,
)
from powermodels.board_calibration.parts import part_number_from_smi_log
from powermodels.recording import write_recording
from powermodels.twin.replay import replay

from .test_twin_board import board, schedule

#: two boards per part: (uuid, part number, core factor, memory factor); the "-001" part draws 30 % more memory power
BOARDS = (("GPU-a0", "P-000", 1.00, 1.00), ("GPU-a1", "P-000", 1.02, 0.98),
          ("GPU-b0", "P-001", 0.99, 1.30), ("GPU-b1", "P-001", 1.01, 1.32))

SMI_LOG = """
==============NVSMI LOG==============
Attached GPUs                                          : 2
GPU 00000000:00:05.0
    Product Name                                       : NVIDIA H200
    Board Part Number                                  : 692-2G520-0282-000
    GPU UUID                                           : GPU-aaaa
GPU 00000000:00:06.0
    Product Name                                       : NVIDIA H200
    Board Part Number                                  : 692-2G520-0282-001
    GPU UUID                                           : GPU-bbbb
GPU 00000000:00:07.0
    Board Part Number                                  : N/A
    GPU UUID                                           : GPU-cccc
"""


@pytest.fixture(scope="module")
def recordings():
    recs = []
    for seed, (uuid, part, core, memory) in enumerate(BOARDS):
        preset = board()
        ph = preset.physics
        other = replace(preset, physics=replace(ph, core_w_per_ghz=ph.core_w_per_ghz * core,
                                                mem_w_per_ghz=ph.mem_w_per_ghz * memory))
        rec = replay(schedule(), other, seed=seed, poll_s=2e-3, start_temperature_c=40.0)
        rec.provenance.update(uuid=uuid, board_part_number=part)
        recs.append(rec)
    return recs


@pytest.fixture(scope="module")
def levels(recordings):
    return board_levels(board(), recordings, thermal=False, domains=True)


def test_the_part_number_is_read_from_the_gpus_own_section_of_the_log():
    assert part_number_from_smi_log(SMI_LOG, "GPU-aaaa") == "692-2G520-0282-000"
    assert part_number_from_smi_log(SMI_LOG, "GPU-bbbb") == "692-2G520-0282-001"
    assert part_number_from_smi_log(SMI_LOG, "GPU-cccc") == ""  # N/A is not a part number
    assert part_number_from_smi_log(SMI_LOG, "GPU-dddd") == ""


def test_a_recording_gives_its_part_from_the_provenance_else_its_log(recordings, tmp_path):
    assert board_part_number(recordings[2]) == "P-001"
    older = replace(recordings[0], provenance={k: v for k, v in recordings[0].provenance.items()
                                               if k != schema.BOARD_PART_NUMBER} | {"uuid": "GPU-bbbb"})
    assert board_part_number(older) == ""  # no provenance field, no folder
    folder = write_recording(older, tmp_path / "older", extra={"nvidia_smi.txt": SMI_LOG.encode()})
    assert board_part_number(replace(older, path=folder)) == "692-2G520-0282-001"


def test_levels_carry_each_boards_core_memory_and_part(levels):
    per = levels.drop_duplicates(schema.RECORDING_NAME).set_index(schema.DEVICE_UUID)
    for uuid, part, core, memory in BOARDS:
        assert per.loc[uuid, schema.BOARD_PART_NUMBER] == part
        assert per.loc[uuid, schema.CORE_SCALE] == pytest.approx(core, abs=0.02)
        assert per.loc[uuid, schema.MEMORY_SCALE] == pytest.approx(memory, abs=0.04)


def test_domains_pool_moves_the_memory_of_one_part_only(levels):
    preset = board()
    high = levels.loc[levels[schema.BOARD_PART_NUMBER] == "P-001"]
    pooled = pooled_preset(preset, high, scale="domains", thermal=False, name="b-part001")
    report = pooled.fit["pooled_boards"]
    assert report["part_numbers"] == ["P-001"] and report["domain_boards"] == 2
    assert pooled.physics.mem_w_per_ghz == pytest.approx(preset.physics.mem_w_per_ghz * 1.31, rel=0.04)
    assert pooled.physics.core_w_per_ghz == pytest.approx(preset.physics.core_w_per_ghz * 1.00, rel=0.02)
    # pooled over both parts, one factor for the board splits the difference and fits neither part's memory
    both = pooled_preset(preset, levels, scale="board", thermal=False)
    assert both.fit["pooled_boards"]["part_numbers"] == ["P-000", "P-001"]
    assert abs(both.physics.mem_w_per_ghz / preset.physics.mem_w_per_ghz - 1.31) > 0.15


def test_domains_pool_needs_the_domain_levels(recordings):
    plain = board_levels(board(), recordings[:2], thermal=False)
    with pytest.raises(ValueError, match="needs board_levels"):
        pooled_preset(board(), plain, scale="domains")


def test_the_preset_of_the_boards_part_is_picked(levels, recordings):
    low = pooled_preset(board(), levels.loc[levels[schema.BOARD_PART_NUMBER] == "P-000"], scale="domains",
                        thermal=False, name="b-part000")
    high = pooled_preset(board(), levels.loc[levels[schema.BOARD_PART_NUMBER] == "P-001"], scale="domains",
                         thermal=False, name="b-part001")
    assert part_preset(recordings[3], [low, high]).name == "b-part001"
    assert part_preset(recordings[0], [low, high]).name == "b-part000"
    both = pooled_preset(board(), levels, scale="domains", thermal=False, name="b-both")
    with pytest.raises(ValueError, match="P-001 matches 0 of the presets"):
        part_preset(recordings[3], [low, both])
    unknown = replace(recordings[0], provenance={**recordings[0].provenance, schema.BOARD_PART_NUMBER: ""})
    with pytest.raises(ValueError, match="part number is not recorded"):
        part_preset(unknown, [low, high])


def test_memory_of_one_part_the_rest_over_every_board(levels, recordings):
    preset = board()
    high = pooled_preset(preset, levels, scale="domains", thermal=False, name="b-mem001", memory_part="P-001")
    low = pooled_preset(preset, levels, scale="domains", thermal=False, name="b-mem000", memory_part="P-000")
    report = high.fit["pooled_boards"]
    assert report["memory_part"] == "P-001" and report["memory_boards"] == 2 and report["domain_boards"] == 4
    assert high.physics.mem_w_per_ghz == pytest.approx(preset.physics.mem_w_per_ghz * 1.31, rel=0.04)
    assert low.physics.mem_w_per_ghz == pytest.approx(preset.physics.mem_w_per_ghz * 0.99, rel=0.04)
    # the core is every board's median, the same in both presets
    assert high.physics.core_w_per_ghz == low.physics.core_w_per_ghz
    assert high.physics.core_w_per_ghz == pytest.approx(preset.physics.core_w_per_ghz * 1.005, rel=0.02)
    assert part_preset(recordings[2], [low, high]).name == "b-mem001"
    assert part_preset(recordings[1], [low, high]).name == "b-mem000"
    with pytest.raises(ValueError, match="memory_part needs scale='domains'"):
        pooled_preset(preset, levels, scale="board", memory_part="P-001")
    with pytest.raises(ValueError, match="part number P-002"):
        pooled_preset(preset, levels, scale="domains", memory_part="P-002")


def test_cli_twin_compare_picks_the_preset_of_the_boards_part(levels, recordings, tmp_path, capsys):
    from powermodels.cli import main
    from powermodels.twin.preset import save_preset

    files = [save_preset(pooled_preset(board(), levels, scale="domains", thermal=False, name=f"b-mem{p[-3:]}",
                                       memory_part=p), tmp_path / f"b-mem{p[-3:]}.json") for p in ("P-000", "P-001")]
    folder = write_recording(recordings[3], tmp_path / "rec")
    argv = ["twin-compare", str(folder), "--preset", str(files[0]), "--preset", str(files[1]),
            "--out", str(tmp_path / "cmp"), "--cap-seeds", "1"]
    assert main(argv) == 0
    assert "twin-compare: b-mem001 (board part number P-001)" in capsys.readouterr().err
    # a board of a part no preset stands for is one line, before any replay
    other = replace(recordings[3], provenance={**recordings[3].provenance, schema.BOARD_PART_NUMBER: "P-009"})
    folder = write_recording(other, tmp_path / "rec9")
    assert main(["twin-compare", str(folder), "--preset", str(files[0]), "--preset", str(files[1]),
                 "--out", str(tmp_path / "cmp9")]) != 0
    assert "P-009 matches 0 of the presets" in capsys.readouterr().err
    assert not (tmp_path / "cmp9" / "comparison.csv").exists()
