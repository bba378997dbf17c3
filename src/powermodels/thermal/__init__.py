"""The thermal state of a measurement, and its energy at a reference temperature.

A kernel's energy on a real GPU moves with the die temperature (leakage rises
with it: thesis §4.2.2, eq. 4.6), with the power-cap controller's state and
with how the launches were issued. This package owns what a run-table row
needs to say under which conditions its energy holds, and the figure moved to
a stated reference temperature:

* :mod:`.normalise` — α (W/°C) with its uncertainty and source, and thesis
  eq. 4.7 applied to a row's power and energy with the uncertainty carried;
* :mod:`.spans` — a trace cut into energy-counter spans (energy per launch,
  power, temperature, clock, power-cap share of each), the thermal state of a
  window (temperature at its start and end), and whether the power-cap
  controller has settled;
* :mod:`.alpha` — α fitted from spans, by regime (fixed clock or power-capped),
  with a physics check, and pooled over a board's workloads;
* :mod:`.alpha_cache` — learned α kept per (GPU UUID, workload, configuration)
  in the state folder;
* :mod:`.series` — cold / warm / hot windows of a recorded warm-up, raw and
  normalised (issue 19's test, on any recording);
* :mod:`.row` — the thermal fields a protocol adds to a row;
* :mod:`.launch` — the launch mode of a row and whether host gaps dominate.

Everything here is a pure function of traces, launch intervals and files: the
bounded first-time warm-up that *runs* a workload to learn α is measuring's
(:mod:`powermodels.measuring.alpha_warmup`), and the counter's updates and
windows are :mod:`powermodels.energy_counter`'s, so the package sits below
:mod:`powermodels.measuring` (whose protocols use it).

Nothing here fits a scikit-learn model; the estimators live in
:mod:`powermodels.models` (:class:`~powermodels.models.temperature.TemperatureCorrection`
fits α from a run table of many runs; here α comes from one warm-up's trace).
"""
