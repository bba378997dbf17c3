"""Per-instruction energy (Wattchmen) workflows: calibrate instructions, choose, transfer and check the model.

Measure the microbenchmarks, build the instruction tables from ncu profiles, choose the model by
cross-validation, transfer a table to a new GPU, and check it on real data.

Moved here from ``powermodels.workflows.instruction_*`` (those paths still work for one release, with
a :class:`DeprecationWarning`): one package for one job, and ``workflows`` stays under 4,000 lines.

- :mod:`~powermodels.instruction_energy.calibration`: ``calibrate_instructions`` (measure, profile, fit);
- :mod:`~powermodels.instruction_energy.tables`: instruction tables from ``measure.json`` and ncu CSVs;
- :mod:`~powermodels.instruction_energy.selection`: model settings by leave-one-microbenchmark-out CV;
- :mod:`~powermodels.instruction_energy.transfer`: a reference GPU's table moved to a new GPU (Wattchmen §6);
- :mod:`~powermodels.instruction_energy.diagnostics`: operand-value and clock checks on real data.
"""
