"""``benchmarks/known_boards.py``: a lent machine's GPUs checked against every board recorded before any load."""

from __future__ import annotations

import pytest

from benchmark_scripts import load_benchmark

OLD = "GPU-ca97db10-5893-4976-75c5-68b53720f6a5"
NEW = "GPU-0123abcd-0000-0000-0000-000000000000"


@pytest.fixture(scope="module")
def script():
    return load_benchmark("known_boards")


@pytest.fixture
def known_file(script, tmp_path):
    """A datasets tree naming one board in a provenance and another only in a parquet file (which is not read)."""
    recording = tmp_path / "datasets" / "h200" / "raw_recording_ca97db10"
    recording.mkdir(parents=True)
    (recording / "provenance.json").write_text(f'{{"uuid": "{OLD}"}}')
    (recording / "trace.parquet").write_bytes(NEW.encode())
    out = tmp_path / "known_uuids.txt"
    assert script.main(["--write", str(out), "--root", str(tmp_path / "datasets"),
                        "--root", str(tmp_path / "absent")]) == 0
    assert out.read_text() == f"{OLD}\n"
    return out


def test_a_machine_with_a_new_board_lists_its_index(script, known_file, tmp_path, capsys):
    listing = tmp_path / "listing.txt"
    listing.write_text(f"0, {OLD}\n1, {NEW}\n")
    assert script.main(["--check", str(known_file), "--listing", str(listing)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [f"known 0 {OLD}", f"NEW 1 {NEW}", "new: 1"]


def test_a_machine_of_known_boards_stops_the_driver(script, known_file, tmp_path, capsys):
    listing = tmp_path / "listing.txt"
    listing.write_text(f"0, {OLD}\n")
    assert script.main(["--check", str(known_file), "--listing", str(listing)]) == script.NO_NEW_BOARD
    assert capsys.readouterr().out.splitlines()[-1] == "new:"


def test_bad_listings_are_refused(script, known_file, tmp_path, capsys):
    listing = tmp_path / "listing.txt"
    for text, message in (("0, not-a-uuid\n", "not an 'index, uuid' line"), ("\n", "listed no GPU")):
        listing.write_text(text)
        assert script.main(["--check", str(known_file), "--listing", str(listing)]) == 2
        assert message in capsys.readouterr().err
    assert script.main(["--check", str(tmp_path / "missing.txt"), "--listing", str(listing)]) == 2
    with pytest.raises(SystemExit):
        script.main(["--listing", str(listing)])  # --write or --check is required
