"""docs/sensor.md's table of real boards states the instant window each recording measured, with its board."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd
import pytest

# Not ``from conftest import``: with several conftest.py files under tests/, the name ``conftest`` is
# whichever was imported first in a full run (tests/devices/conftest.py), so the paths are made here.
REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "datasets"
SHARED_DATA = Path(os.environ.get("POWERMODELS_SHARED_DATA", REPO.parent / "shared" / "data"))

SENSOR_MD = REPO / "docs" / "sensor.md"
FINGRAV_FIT = re.compile(r"window (?P<window>[\d.]+) ms \[(?P<lo>[\d.]+), (?P<hi>[\d.]+)\], delay (?P<delay>[\d.]+) ms")


def _row(recording: str) -> str:
    """The line of the real-boards table that names ``recording``."""
    rows = [line for line in SENSOR_MD.read_text(encoding="utf-8").splitlines()
            if line.startswith("|") and f"`{recording}`" in line]
    assert len(rows) == 1, f"docs/sensor.md: no single table row names {recording}"
    return rows[0]


@pytest.mark.parametrize("recording, board, root", [
    ("datasets/h100-2026-11-25-session5/fingrav/fingrav_nvml.md", "GPU-0b4f1a7f", DATASETS.parent),
    ("datasets/h200-2026-11-27/fingrav_25027b10/fingrav_nvml.md", "GPU-25027b10", DATASETS.parent),
    pytest.param("../shared/data/h100-2026-11-24/fingrav/fingrav_nvml.md", "not recorded", SHARED_DATA.parents[1],
                 marks=pytest.mark.shared_data),
])
def test_the_fingrav_windows_are_the_recordings_own(recording, board, root):
    """The page showed the simulated 24.2 ms only; the session-5 H100 measured 26.01 ms on GPU-0b4f1a7f."""
    fit = FINGRAV_FIT.search((root / recording.removeprefix("../")).read_text(encoding="utf-8"))
    row = _row(recording)
    assert board in row
    assert f"{fit['window']} ms [{fit['lo']}, {fit['hi']}]" in row and f"{fit['delay']} ms" in row


@pytest.mark.shared_data
def test_the_sensor_window_runs_are_the_recordings_own():
    recording = "../shared/data/h100-2026-11-24/sensor_window/sensor_window_nvml.md"
    runs = pd.read_csv(SHARED_DATA / "h100-2026-11-24" / "sensor_window" / "sensor_window_nvml.csv")
    row = _row(recording)
    window = runs["window_ms"]
    assert f"{window.min():.2f}–{window.max():.2f} ms (median {window.median():.2f})" in row
    assert f"[{runs['lo_ms'].min():.1f}, {runs['hi_ms'].max():.1f}]" in row
    assert f"{runs['delay_ms'].min():.1f}–{runs['delay_ms'].max():.1f} ms" in row
