"""The natural-DVFS chain: record under the power-cap controller, clock each launch, fit P(f).

Under natural DVFS no clock is set: a pressure load at the power cap pulls the clock down, and
the workload's launches run through the clocks the controller chooses while it recovers. This
package owns that chain, from the raw recording to power at a held-out clock band. The
calibration that uses it (``calibrate(natural=...)``, ``calibrate --from``) stays in
:mod:`powermodels.workflows` (:mod:`~powermodels.workflows.recording_calibration`), which
imports this package, never the other way round.

Moved here from ``powermodels.workflows.*`` (those paths still work for one release, with a
:class:`DeprecationWarning`): one package for one job, and ``workflows`` stays under 4,000 lines.

- :mod:`~powermodels.natural_dvfs.natural_recording`: ``record_natural_dvfs`` and ``Ladder``;
- :mod:`~powermodels.natural_dvfs.launch_clocks`: the clock each timed batch ran at;
- :mod:`~powermodels.natural_dvfs.counter_windows`: energy-counter windows at one known clock;
- :mod:`~powermodels.natural_dvfs.clock_windows`: counter and instant windows, moving clock;
- :mod:`~powermodels.natural_dvfs.ladder_windows`: windows shared with the ladder's pressure;
- :mod:`~powermodels.natural_dvfs.power_fit`: thesis eq. 4.1 on those windows (§4.1.1), one
  setting (opt-in: ``P_static`` held between 0 and the idle power);
- :mod:`~powermodels.natural_dvfs.setting_cv`: the setting chosen by CV on the training clocks
  (opt-in: folds running towards the band where the band lies outside them);
- :mod:`~powermodels.natural_dvfs.clock_power`: the fit scored at a held-out clock band;
- :mod:`~powermodels.natural_dvfs.mixed_heldout`: the same with the ladder's mixed windows scored
  (each load's term over its own time), at the fixed band and at a band per workload;
- :mod:`~powermodels.natural_dvfs.power_target`: issue 26's power target read from that table (the
  report's line and ``checks.json``).
"""
