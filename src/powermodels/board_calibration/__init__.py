"""A twin preset brought to a board it was not fitted to, or to the median of several boards.

Boards of one model differ in constant power, dynamic power and how hot they
run (docs/twin.md, sessions 10–15). A preset fitted to one board carries that
board's levels; these modules move them, and nothing else of the preset:

* :mod:`~powermodels.board_calibration.calibrate` — :func:`calibrate_board`:
  idle power and dynamic power from a recording's first idle and each
  series' first second (:func:`calibrated_preset`: that and the thermal one, as
  ``twin-compare --calibrate-board`` applies them); :func:`capped_clock_before_series`:
  the clock under the power cap, read before the first series (session 22), and with ``cycles="probes"``
  the capped workload's cycles from its probed launches there (session 23);
* :mod:`~powermodels.board_calibration.thermal` — :func:`calibrate_board_thermal`:
  the thermal resistances from the readings before the first thermal series;
  :func:`calibrate_board_network`: the whole network, time constants too (session 18);
  :func:`pole_factors`: one factor per pole, a diagnostic;
* :mod:`~powermodels.board_calibration.pooled` — :func:`board_levels` and
  :func:`pooled_preset`: each board's levels, and the preset moved to their
  median board (the board-blind guess for a board nobody has seen);
* :mod:`~powermodels.board_calibration.parts` — :func:`board_part_number` and
  :func:`part_preset`: the board part number NVML reports (it splits H200s into
  two memory-power groups, session 17), and the preset pooled over a board's part;
* :mod:`~powermodels.board_calibration.capped_workload` — :func:`capped_workload_levels` and
  :func:`capped_workload_preset`: a capped workload's cycles read through the boards' clock probes, with the
  capped clock and recovery rate that go with them (session 19); :func:`probed_cycles_before`: one board's, read
  before its first series (session 23);
* :mod:`~powermodels.board_calibration.capped_rate` — :func:`capped_rate_before_series`: the board's settled cap
  power and capped launch rate, read before the first series and matched by replay at the recording's ambient
  (session 27, ``--calibrate-cap rate``; recommended for capped workloads since session 31);
* :mod:`~powermodels.board_calibration.naming` — :func:`board_preset_name`: each calibration step in the
  preset's name, then the board once (``h200-raw-pooled-per-workload+network+domains+cap-probes@8a9ced5c``).

The twin itself (physics, fit, replay, comparison) is :mod:`powermodels.twin`.
"""

from .calibrate import (
    calibrate_board,
    calibrated_preset,
    capped_clock_before_series,
)
from .capped_rate import capped_rate_before_series
from .capped_workload import capped_workload_levels, capped_workload_preset, probed_cycles_before
from .naming import board_preset_name
from .parts import board_part_number, part_preset
from .pooled import board_levels, pooled_preset
from .thermal import (
    NetworkAtBandEdgeWarning,
    calibrate_board_network,
    calibrate_board_thermal,
    pole_factors,
)

__all__ = ["NetworkAtBandEdgeWarning", "board_levels", "board_part_number", "board_preset_name", "calibrate_board", "calibrate_board_network",
           "calibrate_board_thermal", "calibrated_preset", "capped_clock_before_series", "capped_rate_before_series", "capped_workload_levels",
           "capped_workload_preset", "part_preset", "pole_factors", "pooled_preset", "probed_cycles_before"]
