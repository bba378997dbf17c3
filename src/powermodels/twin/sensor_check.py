"""Characterise a twin's power sensor as the real GPU's was, and compare (issue 27: within ±3 ms).

``powermodels characterize --design mixed`` on the real H100 (``../shared/data/
h100-2026-11-24/sensor_window``: five runs) fitted the instant reading's
averaging window and delay. :func:`sensor_window_check` runs the same
experiments (:func:`powermodels.sensor.experiments.record`) and the same
fit (:func:`powermodels.sensor.report.characterize_traces`) on the twin and
states the twin's window and delay beside the real runs' median.

The shipped presets take their instant window and delay from that same
median (``fit-twin --instant-window-ms/--instant-delay-ms``): this is a
check that the twin's sensor, measured the way a user measures a GPU, shows
them — not a held-out validation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from .preset import load_preset

__all__ = ["TARGET_MS", "sensor_window_check"]

#: issue 27: the twin's instant window and delay within this many ms of the real ones
TARGET_MS = 3.0


def sensor_window_check(preset, real, *, seconds: float = 9.0, design: str = "mixed",
                        seed: int = 0) -> pd.DataFrame:
    """The instant reading's window and delay: real runs' median vs the twin's, one row each.

    Parameters
    ----------
    preset : TwinPreset or str
    real : str, Path or DataFrame
        A ``sensor_window_nvml.csv`` (columns ``window_ms``, ``delay_ms``; one
        row per ``characterize`` run) or its table.
    seconds : float, default=9
        Load of the window experiment (as ``characterize --seconds``).
    design : str, default="mixed"
        ``characterize --design`` (the real runs used ``mixed``).
    seed : int, default=0
        Seeds the twin's sensor phase and noise.

    Returns
    -------
    DataFrame
        ``metric``, ``real`` (median of the runs), ``real_range`` (min–max),
        ``twin``, ``error`` (ms), ``target``, ``unit``, ``within``.
    """
    from ..measuring.runner import make_runner
    from ..sensor.experiments import record
    from ..sensor.report import characterize_traces

    table = pd.read_csv(Path(real)) if not isinstance(real, pd.DataFrame) else real
    missing = [c for c in ("window_ms", "delay_ms") if c not in table.columns]
    if missing:
        raise ValueError(f"sensor_window_check: the real table lacks column(s) {', '.join(missing)}")
    twin = load_preset(preset)
    gpu = twin.gpu(seed=seed, history_s=None)
    runner = make_runner(gpu, sample_period_s=min(1e-3, twin.sensor.update_period_s / 50))
    with runner:
        square, step, _ = record(runner, seconds=seconds, design=design, log=lambda message: None)
    fitted = characterize_traces(square, step).row(schema.POWER_INSTANT_W)
    rows = []
    for name, column, value in (("instant power reading: averaging window", "window_ms", fitted[schema.WINDOW_S]),
                                ("instant power reading: delay", "delay_ms", fitted[schema.DELAY_S])):
        runs = table[column].to_numpy(float)
        a, b = float(np.median(runs)), float(value) * 1e3
        rows.append({schema.CHECK_METRIC: name, schema.CHECK_REAL: a,
                     schema.CHECK_REAL_RANGE: f"{runs.min():.1f}-{runs.max():.1f}", schema.CHECK_TWIN: b,
                     schema.CHECK_ERROR: b - a, schema.CHECK_TARGET: TARGET_MS, schema.CHECK_UNIT: "ms",
                     schema.CHECK_WITHIN: bool(np.isfinite(b) and abs(b - a) <= TARGET_MS)})
    return pd.DataFrame(rows)
