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
    return FrequencyPowerModel(clock_column=schema.SM_CLOCK_MHZ).fit(X, 50 + 0.07 * f)


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


# ------------------------------------------------------------ the safe format

import hashlib  # noqa: E402
import os  # noqa: E402
import pickle  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fitted_estimators import all_fitted, doc_pipelines, outputs  # noqa: E402


def _write_raw(path, header, payload):
    header = dict(header, sha256=hashlib.sha256(payload).hexdigest(), payload_bytes=len(payload))
    blob = json.dumps(header).encode()
    path.write_bytes(pmio.MAGIC + struct.pack(">Q", len(blob)) + blob + payload)
    return path


class _RunsCode:
    """Unpickling calls os.system: the classic malicious pickle."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _header(fmt):
    return {"format_version": pmio.FORMAT_VERSION, "payload_format": fmt,
            "metadata": {"package_version": pmio._package_version(), "schema": None}}


def test_default_format_is_skops_and_trusted_list_is_explicit(tmp_path, model):
    path = pmio.save_calibration(model, tmp_path / "fp.pmcal")
    data = path.read_bytes()
    assert b'"payload_format": "skops"' in data and b"PK" in data  # a zip archive, not a pickle
    names = pmio.trusted_types()
    assert "powermodels.models.frequency.FrequencyPowerModel" in names
    assert not any(n.startswith(("os.", "posix.", "builtins.", "subprocess.")) for n in names)


def test_crafted_pickle_payload_is_refused_without_running_code(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(_RunsCode(marker))
    for fmt in ("joblib", "skops"):  # honest label, and a pickle passed off as skops
        bad = _write_raw(tmp_path / f"evil_{fmt}.pmcal", _header(fmt), payload)
        with pytest.raises(pmio.CalibrationError, match="pickle|corrupt skops"):
            pmio.load_calibration(bad)
    assert not marker.exists()


def test_crafted_skops_payload_naming_a_function_is_refused(tmp_path):
    import skops.io as sio

    marker = tmp_path / "pwned"
    payload = sio.dumps({"call": os.system, "arg": f"touch {marker}"})
    bad = _write_raw(tmp_path / "evil.pmcal", _header("skops"), payload)
    with pytest.raises(pmio.CalibrationError, match=r"trusted list: \['posix.system'\]|trusted list: \['nt.system'\]"):
        pmio.load_calibration(bad)
    assert not marker.exists()


def test_a_file_naming_an_estimators_former_module_still_loads(tmp_path, monkeypatch):
    """KalmanFilter1D moved from models/smoothing.py to models/kalman.py; older files name smoothing."""
    import skops.io as sio

    from powermodels.models.kalman import KalmanFilter1D

    Z = 200.0 + np.abs(np.random.default_rng(0).normal(0.0, 20.0, (2, 50)))
    fitted = KalmanFilter1D(Q=0.1).fit(Z)
    with monkeypatch.context() as patch:  # the file the version before the move wrote
        patch.setattr(KalmanFilter1D, "__module__", "powermodels.models.smoothing")
        payload = sio.dumps(fitted)
    assert sio.get_untrusted_types(data=payload) == ["powermodels.models.smoothing.KalmanFilter1D"]
    loaded = pmio.load_calibration(_write_raw(tmp_path / "kalman.pmcal", _header("skops"), payload))
    assert type(loaded) is KalmanFilter1D
    np.testing.assert_array_equal(loaded.transform(Z), fitted.transform(Z))


def test_old_pickle_file_loads_only_when_trusted(tmp_path, model):
    import io as _io

    import joblib

    buf = _io.BytesIO()
    joblib.dump(model, buf)
    old = _write_raw(tmp_path / "old.pmcal", {"format_version": 1, "metadata": {
        "package_version": pmio._package_version(), "schema": None}}, buf.getvalue())
    with pytest.raises(pmio.CalibrationError, match=r"pickle \(format 1.*trusted=True"):
        pmio.load_calibration(old)
    assert pmio.load_calibration(old, trusted=True).a_ == model.a_
    path = pmio.save_calibration(model, tmp_path / "j.pmcal", format="joblib")
    with pytest.raises(pmio.CalibrationError, match="trusted=True"):
        pmio.load_calibration(path)
    assert pmio.load_calibration(path, trusted=True).knee_mhz_ == model.knee_mhz_


def test_saving_an_untrusted_type_says_so(tmp_path):
    with pytest.raises(ValueError, match="safe loader would refuse.*format='joblib'"):
        pmio.save_calibration({"f": os.getcwd}, tmp_path / "x.pmcal")
    with pytest.raises(ValueError, match="format must be"):
        pmio.save_calibration({}, tmp_path / "x.pmcal", format="pickle")


def _fitted_attributes(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def _same(a, b):
    if isinstance(a, (pd.Series, pd.DataFrame)):
        return a.equals(b)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and np.isnan(a):
        return isinstance(b, float) and np.isnan(b)
    if hasattr(a, "get_params") or hasattr(a, "__dataclass_fields__") or callable(a):
        return type(a) is type(b)
    try:
        return bool(a == b)
    except Exception:
        return type(a) is type(b)


CASES = all_fitted() + doc_pipelines()


@pytest.mark.parametrize("name, est, X", CASES, ids=[c[0] for c in CASES])
def test_every_estimator_and_doc_pipeline_round_trips_safely(tmp_path, name, est, X):
    path = pmio.save_calibration(est, tmp_path / "c.pmcal")
    loaded = pmio.load_calibration(path)  # the default, safe loader
    assert type(loaded) is type(est)
    before, after = outputs(est, X), outputs(loaded, X)
    assert before.keys() == after.keys()
    for method in before:
        np.testing.assert_array_equal(after[method], before[method], err_msg=f"{name}.{method}")
    fitted = _fitted_attributes(est)
    assert fitted or before, f"{name}: nothing to compare"
    for key, value in fitted.items():
        assert _same(value, getattr(loaded, key)), f"{name}.{key} differs after the round trip"


def test_all_estimators_covered():
    from powermodels.utils import all_estimators

    assert {n for n, _ in all_estimators()} <= {c[0] for c in CASES}


@pytest.mark.parametrize("fields", [{"metadata": [1]}, {"metadata": {}, "format_version": "3"}],
                         ids=["metadata-list", "format-version-text"])
def test_malformed_header_fields_are_a_calibration_error(tmp_path, fields):
    payload = b"payload"
    header = {"sha256": hashlib.sha256(payload).hexdigest(), **fields}
    blob = json.dumps(header).encode()
    path = tmp_path / "bad.pmcal"
    path.write_bytes(pmio.MAGIC + struct.pack(">Q", len(blob)) + blob + payload)
    for read in (pmio.load_calibration, pmio.read_metadata):
        with pytest.raises(pmio.CalibrationError, match="corrupt header"):
            read(path)
