"""What a calibration run measured and fitted (:class:`CalibrationRun`).

Its own module so that the calibration workflow (:mod:`.calibrate`) and the refit of a raw
recording (:mod:`.recording_calibration`), which the workflow calls, both build one without
importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .calibration_fit import Calibration

__all__ = ["CalibrationRun"]


@dataclass
class CalibrationRun:
    """What :func:`calibrate` measured and fitted.

    Attributes
    ----------
    points : DataFrame
        Sweep and ramp points (locked clocks); empty on the natural path.
    launches : DataFrame
        Natural-DVFS launches kept for the fit (time, clock, its source and spread, temperature
        per batch); empty on the locked path.
    samples : DataFrame
        Natural-DVFS power: energy-counter blocks of one workload at one known clock.
    calibration : Calibration
        The fitted models and what they could identify.
    device : dict
        Name, UUID and driver of the device measured.
    clocks : DataFrame
        Per workload and clock source: batches kept and dropped for the fits, and why
        (:func:`~powermodels.natural_dvfs.launch_clocks.launch_clock_summary`); empty when the
        run was not fitted from a recording.
    findings : list of str
        What the data can and cannot identify, in words (for the report).
    recording : Recording or None
        Natural DVFS: everything measured (:mod:`powermodels.recording`), to write with
        :func:`powermodels.recording.write_recording` and refit with ``calibrate --from``.
    power_clock : DataFrame
        Power at a held-out clock band from windows whose clock moved
        (:func:`~powermodels.natural_dvfs.mixed_heldout.mixed_power_at_heldout_clocks`, issue 26's
        fixed band; the figure :func:`~powermodels.natural_dvfs.power_target.power_target` reads), one
        row per workload; empty when the run was not fitted from a recording.
    power_clock_relative : DataFrame
        The same with the second declared band: per workload the middle 40–60 % of its own
        window-clock range (``band_rule`` "relative"); not the issue's figure.
    """

    points: pd.DataFrame
    launches: pd.DataFrame
    samples: pd.DataFrame
    calibration: Calibration
    device: dict
    clocks: pd.DataFrame = field(default_factory=pd.DataFrame)
    findings: list = field(default_factory=list)
    recording: object = None
    power_clock: pd.DataFrame = field(default_factory=pd.DataFrame)
    power_clock_relative: pd.DataFrame = field(default_factory=pd.DataFrame)
