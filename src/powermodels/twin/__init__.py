"""The digital twin: a simulated GPU fitted to real recordings, replayed and held against them.

* :mod:`~powermodels.twin.preset` — a preset (physics, sensor, workloads,
  provenance) as a JSON data file, loadable by name (``h100-sxm``, ``h200``);
* :mod:`~powermodels.twin.fit` — :func:`fit_twin` identifies a preset from
  raw recordings (:mod:`powermodels.recording`);
* :mod:`~powermodels.twin.replay` — :func:`replay` runs a recording's
  schedule (``phases.parquet``) on a preset and returns the recording the
  twin makes (the same files as the real one);
* :mod:`powermodels.board_calibration` (its own package) brings a preset to
  another board, or to the median of several;
* :mod:`~powermodels.twin.metrics` / :mod:`~powermodels.twin.compare` —
  the same measurements on the real and the twin recording, as a table and
  overlay plots.

A twin result tests code; it is not evidence about GPUs (DESIGN.md): every
figure says whether it is real (which file) or simulated.
"""

from .preset import TwinPreset, load_preset, preset_names, save_preset

__all__ = ["TwinPreset", "load_preset", "preset_names", "save_preset"]
