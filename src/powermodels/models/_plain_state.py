"""Fitted state in plain containers, so the safe calibration format can store it.

The safe calibration format (:mod:`powermodels.io`, skops.io) stores numpy
arrays, Python scalars, str-keyed dicts, lists and tuples, and refuses
anything it would have to unpickle. An estimator that keeps pandas objects or
tuple-keyed dicts in its fitted state mixes in :class:`PlainStateMixin`: its
``__getstate__`` turns those into plain containers and ``__setstate__`` turns
them back, so pickling and the safe format give the same object.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["PlainStateMixin"]

_SERIES = "__powermodels_series__"
_FRAME = "__powermodels_frame__"
_ITEMS = "__powermodels_items__"


def _plain_index(index: pd.Index):
    values = index.tolist()
    return {"values": values, "name": index.name,
            "dtype": None if index.dtype == object else str(index.dtype)}


def _index(spec) -> pd.Index:
    return pd.Index(spec["values"], name=spec["name"], dtype=spec["dtype"] or object)


def _encode(value):
    if isinstance(value, pd.Series):
        values = value.to_numpy()
        return {_SERIES: True, "values": values.tolist() if values.dtype == object else values,
                "index": _plain_index(value.index), "name": value.name}
    if isinstance(value, pd.DataFrame):
        return {_FRAME: True, "columns": {str(i): _encode(value.iloc[:, i]) for i in range(value.shape[1])},
                "order": [str(c) for c in value.columns], "index": _plain_index(value.index)}
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        return {_ITEMS: [(k, _encode(v)) for k, v in value.items()]}
    if isinstance(value, dict):
        return {k: _encode(v) for k, v in value.items()}
    return value


def _decode(value):
    if isinstance(value, dict):
        if value.get(_SERIES) is True:
            return pd.Series(np.asarray(value["values"]) if not isinstance(value["values"], list)
                             else value["values"], index=_index(value["index"]), name=value["name"])
        if value.get(_FRAME) is True:
            cols = [_decode(value["columns"][str(i)]) for i in range(len(value["order"]))]
            frame = pd.concat(cols, axis=1) if cols else pd.DataFrame(index=_index(value["index"]))
            frame.columns = [c.name for c in cols] if cols else frame.columns
            frame.index = _index(value["index"])
            return frame
        if _ITEMS in value and len(value) == 1:
            return {k: _decode(v) for k, v in value[_ITEMS]}
        return {k: _decode(v) for k, v in value.items()}
    return value


class PlainStateMixin:
    """Mix in before ``BaseEstimator``: pandas/tuple-keyed fitted state pickles as plain containers."""

    def __getstate__(self):
        state = super().__getstate__()
        return {k: _encode(v) for k, v in state.items()}

    def __setstate__(self, state):
        super().__setstate__({k: _decode(v) for k, v in state.items()})
