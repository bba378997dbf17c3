"""Calibration files: round trip, tamper detection, incompatible versions and schemas."""

from __future__ import annotations

import json
import struct

import numpy as np
import pandas as pd
import pytest

from powermodels import io as pmio
from powermodels import schema
from powermodels.models.frequency import FrequencyPowerModel


@pytest.fixture
def model():
    f = np.arange(800.0, 2001.0, 100.0)
    X = pd.DataFrame({schema.SM_CLOCK_MHZ: f})
    return FrequencyPowerModel(frequency_column=schema.SM_CLOCK_MHZ).fit(X, 50 + 0.07 * f)


def _rewrite_header(path, edit):
    data = path.read_bytes()
    pos = len(pmio.MAGIC)
    (n,) = struct.unpack(">Q", data[pos : pos + 8])
    header = json.loads(data[pos + 8 : pos + 8 + n])
    edit(header)
    blob = json.dumps(header).encode()
    path.write_bytes(pmio.MAGIC + struct.pack(">Q", len(blob)) + blob + data[pos + 8 + n :])


def test_round_trip_with_metadata(tmp_path, model):
    path = pmio.save_calibration(model, tmp_path / "cal" / "fp.pmcal",
                                 {"device": "NVIDIA H100", "driver": "580.65", "note": "test"})
    loaded, meta = pmio.load_calibration(path, return_metadata=True)
    assert loaded.knee_mhz_ == model.knee_mhz_
    assert meta["device"] == "NVIDIA H100" and meta["driver"] == "580.65" and meta["note"] == "test"
    assert meta["schema"] == [schema.SM_CLOCK_MHZ]
    assert meta["package_version"] and meta["date"].endswith("+00:00")
    assert pmio.read_metadata(path)["object"].endswith("FrequencyPowerModel")
    assert pmio.load_calibration(path, expected_schema=[schema.SM_CLOCK_MHZ]).a_ == model.a_


def test_tampered_payload_is_refused(tmp_path, model):
    path = pmio.save_calibration(model, tmp_path / "fp.pmcal")
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(pmio.CalibrationError, match="tampered"):
        pmio.load_calibration(path)


def test_incompatible_major_version(tmp_path, model):
    path = pmio.save_calibration(model, tmp_path / "fp.pmcal")
    _rewrite_header(path, lambda h: h["metadata"].update(package_version="99.0.0"))
    with pytest.raises(pmio.CalibrationError, match="major version"):
        pmio.load_calibration(path)


def test_schema_mismatch(tmp_path, model):
    path = pmio.save_calibration(model, tmp_path / "fp.pmcal")
    with pytest.raises(pmio.CalibrationError, match="schema differs"):
        pmio.load_calibration(path, expected_schema=[schema.POWER_W])


def test_not_a_calibration_file(tmp_path):
    bad = tmp_path / "x.pmcal"
    bad.write_bytes(b"hello")
    with pytest.raises(ValueError, match="not a powermodels calibration"):
        pmio.load_calibration(bad)
    with pytest.raises(ValueError, match="no such"):
        pmio.load_calibration(tmp_path / "missing.pmcal")
    with pytest.raises(ValueError, match="metadata"):
        pmio.save_calibration(object(), tmp_path / "y.pmcal", metadata={"x": object()})
