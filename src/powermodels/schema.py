"""The table contract: every column name, unit and dtype of every table.

Column names live here and only here (DESIGN.md ◆). Other modules import the
constants (``schema.POWER_W``) instead of writing the strings, and check their
inputs with the ``validate_*`` functions, which fail with a ``ValueError``
that names the column and the problem.

Tables
------
trace table
    One row per sensor reading, on one monotonic host clock (``t_s``).
run table
    One row per measured run of a kernel configuration.
trace matrix
    One row per run, one column per resampled time point (a 2-D array or a
    DataFrame whose columns are the time points); smoothing filters work along
    axis 1 so each row stays an independent sample.
instruction table
    One row per microbenchmark or workload, one column per SASS opcode (counts)
    plus ``time_s`` and ``energy_j``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only; the functions that need pandas import it
    import pandas as pd

__all__ = [
    "INSTRUCTION_TABLE",
    "RUN_TABLE",
    "TRACE_TABLE",
    "Column",
    "TableSpec",
    "opcode_columns",
    "validate_instruction_table",
    "validate_run_table",
    "validate_table",
    "validate_trace_matrix",
    "validate_trace_table",
]

# --------------------------------------------------------------------------
# Column names (units in the name).
# --------------------------------------------------------------------------

# identity and bookkeeping
RUN_ID = "run_id"
KERNEL = "kernel"
CONFIG = "config"
DEVICE = "device"
PROTOCOL = "protocol"
REPEAT = "repeat"
TRIAL = "trial"
LAUNCHES = "launches"
WORKLOAD = "workload"
DEVICE_UUID = "device_uuid"          # the GPU's UUID (NVML), or the simulated GPU's id
HOST = "host"                        # host name of the machine that measured the run

# time
T_S = "t_s"                          # monotonic host clock, seconds
TIME_S = "time_s"                    # kernel time per launch (CUDA events), seconds
WALL_S = "wall_s"                    # wall time a measurement took, seconds
START_S = "start_s"                  # event start on the host clock
END_S = "end_s"                      # event end on the host clock

# sensor readings (trace table)
POWER_INSTANT_W = "power_instant_w"  # NVML field 186 (instant)
POWER_AVERAGE_W = "power_average_w"  # NVML field 185 (1 s average on Hopper)
POWER_USAGE_W = "power_usage_w"      # nvmlDeviceGetPowerUsage
ENERGY_COUNTER_J = "energy_counter_j"  # nvmlDeviceGetTotalEnergyConsumption, joules
TEMPERATURE_C = "temperature_c"
MEMORY_TEMPERATURE_C = "memory_temperature_c"  # the HBM reading (NVML), where the board reports one
SM_CLOCK_MHZ = "sm_clock_mhz"
MEM_CLOCK_MHZ = "mem_clock_mhz"
THROTTLE_REASONS = "throttle_reasons"  # NVML bit mask
REFERENCE_POWER_W = "reference_power_w"  # external meter or simulated truth
LOAD_ACTIVITY = "load_activity"      # known load level (0..1) where the harness knows it

# run table (per launch unless named otherwise)
POWER_W = "power_w"
ENERGY_J = "energy_j"
SM_CLOCK_REQUESTED_MHZ = "sm_clock_requested_mhz"
MEM_CLOCK_REQUESTED_MHZ = "mem_clock_requested_mhz"
POWER_LIMIT_W = "power_limit_w"
REFERENCE_ENERGY_J = "reference_energy_j"
IDLE_POWER_W = "idle_power_w"
ENERGY_UNCERTAINTY_J = "energy_uncertainty_j"
COMMAND = "command"                  # an external program's command line (shell-quoted)
EXIT_CODE = "exit_code"              # an external program's exit code
TIMED_OUT = "timed_out"              # an external program stopped at its duration bound
ENERGY_ABOVE_IDLE_J = "energy_above_idle_j"  # energy minus idle power x time
TIME_SHARE = "time_share"            # a kernel's share of a program's GPU time (ncu), 0..1
CALIBRATION_PHASE = "phase"          # powermodels calibrate: sweep / ramp / natural (DVFS)
CLOCK_RANGE_MHZ = "clock_range_mhz"  # max - min SM clock seen during one launch or point
# the clock a launch ran at, and where it came from (powermodels.natural_dvfs.launch_clocks)
CLOCK_SOURCE = "clock_source"        # probe / kernel_time / nvml
CLOCK_UNCERTAINTY_MHZ = "clock_uncertainty_mhz"  # bound of the clock's error (probe tick, sensor lag)
# NVML's clock reading as a sensor, where no probe ran (powermodels.meter.window_clock)
CLOCK_READING_PERIOD_S = "clock_reading_period_s"  # its update period
CLOCK_READING_LAG_S = "clock_reading_lag_s"        # delay + window: how late a value describes the clock
#   (not ClockReadingSensor.horizon_s = delay + window + period: how long after a run values may describe it)
CLOCK_KEPT = "clock_kept"            # the clock is known well enough to fit on
CLOCK_DROP_REASON = "clock_drop_reason"  # why not ("" when kept)
PROBE_GPU_TIME_NS = "gpu_time_ns"    # %globaltimer at a clock probe's start (GPU clock, ns)
# energy-counter windows of one workload at one clock (powermodels.natural_dvfs.counter_windows)
WINDOW_START_S = "window_start_s"    # counter update that opens the window (host clock)
WINDOW_END_S = "window_end_s"        # counter update that closes it
SINCE_START_S = "since_start_s"      # seconds since the workload's stretch of launches began
STRETCH = "stretch"                  # index of a workload's stretch of back-to-back launches
WINDOWS = "windows"                  # counter windows joined into one block
# power vs clock over windows whose clock moves (powermodels.natural_dvfs.clock_power)
WINDOW_SOURCE = "window_source"      # counter (energy between two updates) / instant (field 186's window)
WINDOW_KEPT = "window_kept"          # the window is one workload's, at a known clock trajectory
WINDOW_DROP_REASON = "window_drop_reason"  # why not ("" when kept)
LAUNCH_COVERAGE = "launch_coverage"  # share of a window's time the workload's launches cover, 0..1
# the CV's setting of a clock_power fit (select_setting's table; the chosen one on a report row with _cv)
SETTING_FORM = "form"                # linear / v2f
SETTING_TEMPERATURE = "temperature"  # alpha / none
SETTING_SOURCES = "sources"          # counter / counter+instant
SETTING_P_STATIC = "p_static"        # free (fitted; within 0..idle power with the opt-in extrapolation rules) / idle
INSTANT_OFFSET_W = "instant_offset_w"  # the instant field's offset from the counter
CV_MAPE_PCT = "cv_mape_pct"          # the CV's MAPE (mean over folds), %
CV_FOLDS = "cv_folds"                # how the CV's folds were formed: leave-one-bin-out / towards the band (opt-in; natural_dvfs.setting_cv)
# power at a held-out clock band (natural_dvfs.clock_power), one row per workload; the held-out
# time band of a calibration (workflows.held_out_band), one row per group
BAND_LO_MHZ = "band_lo_mhz"
BAND_HI_MHZ = "band_hi_mhz"
POWER_MAPE_PCT = "power_mape_pct"    # held out: the band's windows / rows, %
POWER_BIAS_PCT = "power_bias_pct"    # mean signed error there, %
TEST_WINDOWS = "test_windows"        # counter windows in the band (scored)
TRAIN_WINDOWS = "train_windows"      # counter windows fitted on
TRAIN_INSTANT = "train_instant"      # instant readings fitted on
TRAIN_MIXED = "train_mixed"          # of the counter windows fitted on: mixed with a ladder's pressure
TRAIN_BELOW_BAND = "train_below_band"  # of the counter windows fitted on: mean clock below the band
TRAIN_ABOVE_BAND = "train_above_band"  # of the counter windows fitted on: mean clock above the band
TEST_MIXED = "test_mixed"            # of the test windows: mixed with a ladder's pressure (natural_dvfs.mixed_heldout)
BAND_RULE = "band_rule"              # how the held-out band was placed: fixed / relative (per workload)
POWER_FIT_CV = "power_fit_cv"        # which fit the CV chose for a load: "own" (per load) or "joint" (natural_dvfs.joint_power)
CV_MAPE_OWN_PCT = "cv_mape_own_pct"  # the CV MAPE of the load's own fit, %
CV_MAPE_JOINT_PCT = "cv_mape_joint_pct"  # the CV MAPE of the joint fit's best setting for the load, %
POWER_MAPE_OWN_PCT = "power_mape_own_pct"  # the held-out MAPE either fit would have read (reported, never chosen on)
POWER_MAPE_JOINT_PCT = "power_mape_joint_pct"
# the mix check (natural_dvfs.mixed_heldout.mix_check): each load fitted on all its pure windows, in sample
PURE_WINDOWS = "pure_windows"        # the workload's own kept counter windows (no companion)
PURE_ERR_MEDIAN_PCT = "pure_err_median_pct"  # their signed error, median, %
PURE_ERR_SD_PCT = "pure_err_sd_pct"  # and its standard deviation, % (the scatter a mixed window is held to)
MIXED_WINDOWS = "mixed_windows"      # kept counter windows shared with the companion
MIXED_ERR_MEDIAN_PCT = "mixed_err_median_pct"
MIXED_ERR_SD_PCT = "mixed_err_sd_pct"
MIXED_MAPE_PCT = "mixed_mape_pct"
WINDOW_ERR_PCT = "window_err_pct"    # one window's signed error, predicted − measured, % (mix_check's attrs["windows"])
MIXED_ERR_BY_SHARE = "mixed_err_by_share"  # median signed error per companion share (to 0.1), text
FORM_CV = "form_cv"                  # the settings the CV chose (SETTING_*)
TEMPERATURE_CV = "temperature_cv"
SOURCES_CV = "sources_cv"
P_STATIC_CV = "p_static_cv"
COUNTER_WINDOWS = "counter_windows"  # the workload's counter windows, kept or not
COUNTER_KEPT = "counter_kept"
INSTANT_KEPT = "instant_kept"
KEPT_CLOCK_LO_MHZ = "kept_clock_lo_mhz"  # lowest mean clock of a kept counter window
DROPPED_PRESSURE = "dropped_pressure"    # counter windows dropped for overlapping a pressure load
MAIN_DROP_REASON = "main_drop_reason"
NOTE = "note"                        # why a row has no figure, or what limits it ("" when nothing)
TRAIN_ROWS = "train_rows"
TEST_ROWS = "test_rows"
TIME_MAPE_RATIONAL_PCT = "time_mape_rational_pct"  # held out, eq. 4.5
TIME_MAPE_DSO_PCT = "time_mape_dso_pct"            # held out, DSO eq. 2
TIME_MAPE_SELECTED_PCT = "time_mape_selected_pct"  # held out, the CV's form (the figure to quote)
TIME_FORM_CV = "time_form_cv"
TIME_MIN_LAUNCHES = "time_min_launches"            # fewest launches a fitted clock point needs (CV)
TIME_CV_MAPE_PCT = "time_cv_mape_pct"
ENERGY_MEASURED_J = "energy_measured_j"
ENERGY_PREDICTED_J = "energy_predicted_j"
ENERGY_ERROR_PCT = "energy_error_pct"
POWER_TEST_ROWS = "power_test_rows"
COMPANION_SHARE = "companion_share"  # share of a window another load's launches cover (a ladder's pressure)
COMPANION_POWER_W = "companion_power_w"  # a mixed window's companion term s_c·a_c·mean_c(g), from the companion's own fit
COMPANION_WORKLOAD = "companion_workload"  # the load sharing a ladder's windows with the workload
# a run corrected with a `powermodels calibrate` file (thesis eq. 4.2-4.4, 4.7)
CORRECTED_POWER_W = "corrected_power_w"            # at the reference clock and temperature
CORRECTED_ENERGY_J = "corrected_energy_j"          # per launch, at the reference clock and temperature
REFERENCE_CLOCK_MHZ = "reference_clock_mhz"
REFERENCE_TEMPERATURE_C = "reference_temperature_c"
CORRECTION_POWER_CURVE = "power_curve"             # per-config / global / at reference clock
CORRECTION_ALPHA_W_PER_C = "alpha_w_per_c"
CORRECTION_TIME_SOURCE = "time_source"             # time model at f_ref (eq. 4.4) / measured (eq. 4.3)
# exclusive measurement (harness/exclusive.py): was the GPU ours, was it throttled
OTHER_GPU_PROCESSES = "other_gpu_processes"  # other compute processes seen before/after a run
THROTTLED_FRACTION = "throttled_fraction"    # share of samples with any slowdown reason
THROTTLE_POWER_CAP_FRACTION = "throttle_power_cap_fraction"  # SW power cap / HW power brake
THROTTLE_THERMAL_FRACTION = "throttle_thermal_fraction"      # SW / HW thermal slowdown
THROTTLE_OTHER_FRACTION = "throttle_other_fraction"          # HW slowdown, sync boost
# thermal state of a measurement and its figure at a reference temperature (thesis eq. 4.6-4.7;
# powermodels.thermal): every energy row says under which conditions its energy holds
TEMPERATURE_START_C = "temperature_start_c"  # die temperature at the window's start (first reading)
TEMPERATURE_END_C = "temperature_end_c"      # ... and at its end (last reading)
ENERGY_AT_REF_J = "energy_at_ref_j"          # energy per launch moved to reference_temperature_c (eq. 4.7)
POWER_AT_REF_W = "power_at_ref_w"            # mean power moved to reference_temperature_c (eq. 4.7)
ENERGY_AT_REF_UNCERTAINTY_J = "energy_at_ref_uncertainty_j"  # 1 σ: the window's and α's, combined
ALPHA_UNCERTAINTY_W_PER_C = "alpha_uncertainty_w_per_c"     # 1 σ of alpha_w_per_c
ALPHA_SOURCE = "alpha_source"                # where α came from: ALPHA_SOURCES
ALPHA_REGIME = "alpha_regime"                # fixed_clock / power_capped: which model α belongs to
TRANSIENT = "transient"                      # the power-cap controller had not settled in the window
SETTLE_S = "settle_s"                        # load the protocol added waiting for the cap to settle
LAUNCH_MODE = "launch_mode"                  # graph / back_to_back / as_called: LAUNCH_MODES
LAUNCH_BOUND = "launch_bound"                # host gaps dominate: the GPU waited for the host
THERMAL_STATE = "thermal_state"              # cold / warm / hot / reference: where in a warm-up a row was taken
LOAD_S = "load_s"                            # seconds of the workload's own load before the window started
# thermal states of one run held against issue 19's targets (powermodels.thermal.heldout)
SPREAD_PCT = "spread_pct"                    # (max - min) / mean over the cold/warm/hot rows, %
WORST_VS_REF_PCT = "worst_vs_ref_pct"        # the state row farthest from the reference row, %
SLOPE_PCT_PER_C = "slope_pct_per_c"          # least-squares relative slope of energy on temperature
MEETS_PCT_PER_C = "meets_pct_per_c"          # (low, high) relative α meeting both targets
HELDOUT_REGIME = "regime"                    # the recorded ALPHA_REGIME of a workload's rows
ALPHA_RECORDED_PCT_PER_C = "alpha_recorded_pct_per_c"
ALPHA_NOW_PCT_PER_C = "alpha_now_pct_per_c"
ALPHA_IMPLIED_PCT_PER_C = "alpha_implied_pct_per_c"
ALPHA_MEETING_PCT_PER_C = "alpha_meeting_pct_per_c"
RAW_SPREAD_PCT = "raw_spread_pct"
RECORDED_SPREAD_PCT = "recorded_spread_pct"
RECORDED_VS_REF_PCT = "recorded_vs_ref_pct"
RECORDED_MEETS = "recorded_meets"
NOW_SPREAD_PCT = "now_spread_pct"
NOW_VS_REF_PCT = "now_vs_ref_pct"
NOW_MEETS = "now_meets"
CAPPED_ROWS_AT_LIMIT = "capped_rows_at_limit"  # "k/n" state rows at the power limit (capped work)
# a capped start from idle (powermodels.twin.metrics.cap_starts)
REST_S = "rest_s"                            # the idle right before the start, s
START_TEMPERATURE_C = "start_temperature_c"  # the die reading at the start, °C
SETTLED_W = "settled_w"                      # the counter's mean over the start's last seconds (powermodels.twin.metrics.cap_overshoot), W
FIRST_SECOND_W = "first_second_w"            # the counter's mean over the start's first second, W
OVERSHOOT_W = "overshoot_w"                  # first_second_w − settled_w, W
PEAK_W = "peak_w"                            # the highest 1 s mean of the start, W
SETTLING_S = "settling_s"                    # when the 1 s mean last left ±1 % of settled_w, s from the start
# how well a board's capped starts pin its median (powermodels.cap_start_spread)
START_COUNT = "starts"                       # capped starts recorded on the board (or drawn per simulated recording)
BOARD_MEDIAN = "median"                      # the median of the board's starts, in the scored column's unit
START_Q25 = "q25"                            # the 25th percentile of the board's starts
START_Q75 = "q75"                            # the 75th percentile of the board's starts
PERFECT_TWIN_CHANCE = "ceiling"              # share of resamples in which a twin at the board's median meets the row
OTHER_BOARDS_MEDIAN = "others_median"        # the median of every other board's starts (leave one board out)
BOARDS_POOLED = "boards_pooled"              # boards whose starts were pooled
STARTS_POOLED = "starts_pooled"              # starts pooled over those boards
# two boards' recordings of one schedule side by side (powermodels.board_pair)
SECOND = "second"                            # whole seconds from the start of a series (0 = the first)
ENERGY_A_J = "energy_a_j"                    # energy per launch on board A in that second, J
ENERGY_B_J = "energy_b_j"
TEMPERATURE_A_C = "temperature_a_c"          # die temperature reading at the second's end, °C
TEMPERATURE_B_C = "temperature_b_c"
POWER_A_W = "power_a_w"                      # board A's counter mean over the second, W
BOARD_DIFF_PCT = "board_diff_pct"            # B's energy per launch over A's − 1, %
BOARD_DIFF_MATCHED_PCT = "board_diff_matched_pct"  # the same with B's power brought to A's temperature, %
DRIFT_A_PCT = "drift_a_pct"                  # A's energy per launch late in the warm-up over early − 1, %
DRIFT_B_PCT = "drift_b_pct"
EARLY_DIFF_PCT = "early_diff_pct"            # board_diff_pct's mean over the early seconds, %
LATE_DIFF_PCT = "late_diff_pct"              # and over the late seconds, %
DIE_RISE_A_C = "die_rise_a_c"                # A's die, late seconds' mean − early seconds' mean, °C
DIE_RISE_B_C = "die_rise_b_c"
WARMUP_SLOPE_A_PCT_PER_C = "warmup_slope_a_pct_per_c"  # A's energy per launch against its die over the warm-up, %/°C
WARMUP_SLOPE_B_PCT_PER_C = "warmup_slope_b_pct_per_c"
DIE_SPAN_A_C = "die_span_a_c"                # A's die, warmest second − coolest second read, °C
DIE_SPAN_B_C = "die_span_b_c"
PART_DIFF_PCT = "part_diff_pct"  # a board's energy per launch at one die temperature over its part's median − 1, %
MEAN_DIFF_PCT = "mean_diff_pct"              # per workload: board_diff_pct's mean over the seconds
WORST_DIFF_PCT = "worst_diff_pct"            # and its value at the second farthest from 0
WORST_SCORED_DIFF_PCT = "worst_scored_diff_pct"  # B over A − 1 at the worst second from the first scored one, %
WORST_SCORED_DIFF_LEVELLED_PCT = "worst_scored_diff_levelled_pct"  # the same with B scaled to A at the second before
MEAN_DIFF_MATCHED_PCT = "mean_diff_matched_pct"
WORST_DIFF_MATCHED_PCT = "worst_diff_matched_pct"
MEAN_TEMPERATURE_DIFF_C = "mean_temperature_diff_c"  # B − A under load, °C
WORST_COOLING_DIFF_C = "worst_cooling_diff_c"        # B − A in the idle after the series, the farthest second
# each board's level against a twin preset's board, and the median board (powermodels.board_calibration.pooled)
RECORDING_NAME = "recording"                 # the recording's name (its folder)
IDLE_AT_REF_W = "idle_at_ref_w"              # the calibrated preset's idle power at the preset's reference temperature, W
DYNAMIC_SCALE = "dynamic_scale"              # the board's dynamic power over the preset's board (one factor)
ACTIVITY_SCALE = "activity_scale"            # one workload's dynamic power on the board over the preset's (its series' ratio)
THERMAL_SCALE = "thermal_scale"              # the board's thermal resistance over the preset's board (NaN: not read)
CAP_CORE_SCALE = "cap_core_scale"            # core coefficient × this gives the board's settled capped clock (NaN: not read)
PROBED_TIME_RATIO = "probed_time_ratio"      # a capped workload's time over the preset's at each launch's probed clock (median)
CORE_SCALE = "core_scale"                    # the board's core dynamic power over the preset's board (domains; NaN: not read)
MEMORY_SCALE = "memory_scale"                # the board's memory dynamic power over the preset's board (domains; NaN: not read)
WORKLOAD_RESIDUAL = "workload_residual"      # a workload's dynamic power over what the board's core and memory factors give it
WARMUP_FLOOR_PCT = "warmup_floor_pct"        # the least worst second a twin on a parabola can reach on a real warm-up series, %
WARMUP_WORST_PCT = "worst_pct"               # a twin's warm-up error at its worst second (as the warm-up row reads it), %
ENERGY_PER_LAUNCH_ERROR_PCT = "energy_per_launch_pct"  # a twin's mean error in energy per launch over a series' seconds, %
POWER_ERROR_PCT = "power_pct"                # the same for its power (energy per second), %
LAUNCH_RATE_ERROR_PCT = "launch_rate_pct"    # the same for its launches per second, %
DIE_DIFFERENCE_C = "die_difference_c"        # twin's die temperature minus the real one's, mean over the seconds, °C
SERIES_POWER_W = "series_power_w"            # a workload's mean counter power over its series' warm seconds (3-10 s), W
BURST_POWER_W = "burst_power_w"              # the same workload's mean power in its bursts at the series' clock and die, W
BURSTS_MATCHED = "bursts_matched"            # how many bursts ran at the series' clock and die temperature
SERIES_BURST_GAP_PCT = "series_burst_gap_pct"  # series power over the matched bursts', minus 1, %
BURST_LEVEL_PCT = "burst_level_pct"          # a top-clock burst's power at its workload's median burst die, over the median burst's, minus 1, %
LEVEL_LAG1_CORR = "level_lag1_corr"          # correlation of consecutive bursts' levels (same recording and workload)
LEVEL_SD_PCT = "level_sd_pct"                # standard deviation of a recording's burst levels of one workload, %
BURST_COUNT = "bursts"                       # top-clock bursts of one workload read in a recording
BOARD_PART_NUMBER = "board_part_number"      # NVML's board part number (e.g. 692-2G520-0282-001); "" where not known
#: Where a row's α came from: a calibration file, learned on this GPU from the workload's own warm-up
#: (cached per board, workload and configuration), pooled over the board's other learned α at the
#: same clock (the workload's own warm-up did not identify one, or ``pool_after`` was reached), given
#: by the caller, or the package's assumption (no α known: wide uncertainty).
ALPHA_SOURCES = ("file", "learned", "pooled", "given", "assumed")
#: How the measured launches were issued (docs/thermal.md says which to report when).
LAUNCH_MODES = ("graph", "back_to_back", "as_called")

# sensor characterisation (powermodels.sensor; Yang Fig. 14 columns) and FinGraV
SENSOR_FIELD = "field"               # which reading: power_instant_w, ..., energy_counter_j
COUNTER_POWER_W = "counter_power_w"  # ΔE/Δt between energy-counter updates
UPDATE_PERIOD_S = "update_period_s"
WINDOW_S = "window_s"                # boxcar averaging window
WINDOW_LO_S = "window_lo_s"          # identifiability interval of the window (BoxcarWindow)
WINDOW_HI_S = "window_hi_s"
DELAY_S = "delay_s"                  # window end to update time
RISE_TIME_S = "rise_time_s"          # 10 → 90 % on a step
SAMPLED_FRACTION = "sampled_fraction"  # window / update period, at most 1
RESPONSE_KIND = "response_kind"      # Yang Fig. 7 kind of transient response
GAIN = "gain"                        # reading = gain · reference + offset
OFFSET_W = "offset_w"
EXECUTION = "execution"              # index of a kernel execution within a run
PROFILE_TAG = "profile_tag"          # FinGraV: warmup / sse / ssp / other
TOI_S = "toi_s"                      # FinGraV time of interest: time since kernel start
POWER_SE_W = "power_se_w"            # 1-sigma standard error of an estimated power (a profile bin)

# instruction table (besides one column per opcode)
STATIC_POWER_W = "static_power_w"
OPCODE_PREFIX = "op:"                # opcode count columns are "op:FFMA", "op:LDG.E.128", ...
L1_HIT_RATE = "l1_hit_rate"          # L1 hit fraction of global-memory sectors (ncu), 0..1
L2_HIT_RATE = "l2_hit_rate"          # L2 hit fraction of sectors (ncu), 0..1
L1_SECTORS = "l1_sectors"            # 32-byte global-memory sectors through L1 per run (ncu)
L2_SECTORS = "l2_sectors"            # sectors the SMs moved through L2 per run (ncu)
DRAM_SECTORS = "dram_sectors"        # sectors read + written in DRAM per run (ncu)

# energy attribution (InstructionEnergyModel energy table and breakdown, Wattchmen §3.5)
RUN_INDEX = "run"                    # position of the run in the table that was attributed
OPCODE = "opcode"                    # opcode name (an instruction-table column without OPCODE_PREFIX)
COMPONENT = "component"              # bucket of the opcode (Wattchmen §3.4), or STATIC
INSTRUCTION_COUNT = "count"          # instructions per run (seconds for the STATIC row)
ENERGY_PER_INSTRUCTION_J = "energy_per_instruction_j"  # J per instruction (W for STATIC)
ENERGY_SOURCE = "source"             # fitted / scaled / grouped / bucket / none / time
# clock check of an instruction-energy model on workloads below the microbenchmarks' clock
# (instruction_energy.diagnostics.clock_check)
TOP_CLOCK_MHZ = "top_clock_mhz"      # clock the microbenchmarks ran at (their median)
MEASURED_POWER_W = "measured_power_w"
PREDICTED_POWER_W = "predicted_power_w"  # predicted energy / time
ERROR_PCT = "error_pct"              # predicted / measured energy - 1, %
DYNAMIC_FACTOR = "dynamic_factor"    # measured / predicted energy above the static part

# DVFS features (DSO Table I runtime utilisation, DCGM-style)
FEATURE_PREFIX = "feat:"             # feature columns are "feat:sm_active", "feat:ptx_fp32", ...
# runtime utilisation, ratios 0..1 (DCGM SMACT, SMOCC, TENSO, DRAMA, FP64A, FP32A, FP16A, INTAC)
FEAT_SM_ACTIVE = FEATURE_PREFIX + "sm_active"
FEAT_SM_OCCUPANCY = FEATURE_PREFIX + "sm_occupancy"
FEAT_TENSOR_ACTIVE = FEATURE_PREFIX + "tensor_active"
FEAT_DRAM_ACTIVE = FEATURE_PREFIX + "dram_active"
FEAT_FP64_ACTIVE = FEATURE_PREFIX + "fp64_active"
FEAT_FP32_ACTIVE = FEATURE_PREFIX + "fp32_active"
FEAT_FP16_ACTIVE = FEATURE_PREFIX + "fp16_active"
FEAT_INT_ACTIVE = FEATURE_PREFIX + "int_active"
RUNTIME_FEATURES = (FEAT_SM_ACTIVE, FEAT_SM_OCCUPANCY, FEAT_TENSOR_ACTIVE, FEAT_DRAM_ACTIVE,
                    FEAT_FP64_ACTIVE, FEAT_FP32_ACTIVE, FEAT_FP16_ACTIVE, FEAT_INT_ACTIVE)
# the profiling run's power as a fraction of the board's power limit, 0..~1 (how much of the
# power is dynamic: the static share of eq. 2 is larger for a low-power kernel)
FEAT_POWER_OF_LIMIT = FEATURE_PREFIX + "power_of_limit"
# static PTX features (DSO Table II), fraction of their category: "feat:ptx_inst:fma", ...
PTX_INSTRUCTION_PREFIX = FEATURE_PREFIX + "ptx_inst:"
PTX_TYPE_PREFIX = FEATURE_PREFIX + "ptx_type:"
PTX_SPACE_PREFIX = FEATURE_PREFIX + "ptx_space:"

# DVFS model parameters (DSO eq. 1-2), one row per kernel
DVFS_P0_W = "dvfs_p0_w"
DVFS_KAPPA_W = "dvfs_kappa_w"                      # per unit relative voltage
DVFS_GAMMA_W_PER_MHZ = "dvfs_gamma_w_per_mhz"
DVFS_C_W_PER_MHZ = "dvfs_c_w_per_mhz"              # per MHz of core clock, per V²
DVFS_T0_S = "dvfs_t0_s"
DVFS_ALPHA_S_MHZ = "dvfs_alpha_s_mhz"
DVFS_BETA_S_MHZ = "dvfs_beta_s_mhz"
DVFS_PARAMETERS = (DVFS_P0_W, DVFS_KAPPA_W, DVFS_GAMMA_W_PER_MHZ, DVFS_C_W_PER_MHZ,
                   DVFS_T0_S, DVFS_ALPHA_S_MHZ, DVFS_BETA_S_MHZ)
# the same parameters as shares of T and P at the reference clocks (dimensionless, the
# predictor's targets): t0/T_ref, α/(f_m,ref·T_ref), β/(f_c,ref·T_ref), P0/P_ref, κV_ref/P_ref, ...
DVFS_SHARES = ("dvfs_share_p0", "dvfs_share_kappa", "dvfs_share_gamma", "dvfs_share_c",
               "dvfs_share_t0", "dvfs_share_alpha", "dvfs_share_beta")
DVFS_REFERENCE_TIME_S = "dvfs_reference_time_s"    # measured at the reference (highest) clock pair
DVFS_REFERENCE_POWER_W = "dvfs_reference_power_w"
# per-kernel fit quality of DSO eq. 1-2 (models/dvfs_targets.kernel_parameters)
DVFS_FIT_TIME_MAPE = "dvfs_fit_time_mape"          # fraction, over the kept sweep points
DVFS_FIT_POWER_MAPE = "dvfs_fit_power_mape"        # fraction, over the kept sweep points
DVFS_N_POINTS = "dvfs_n_points"                    # sweep points of the kernel
DVFS_EXCLUDED_CLOCKS = "dvfs_excluded_clocks"      # "705:pstate;1410:throttled" (MHz:kind), "" if none
DVFS_TRUSTED = "dvfs_trusted"                      # fit good enough to train a predictor on
# truth columns of a simulated sweep with injected regime changes (workflows/dvfs_simulated)
DVFS_INJECTED = "dvfs_injected"                    # "pstate" / "memory_clock" / "throttled" / ""
DVFS_TIME_S_REGULAR = "dvfs_time_s_regular"        # time the GPU would take in its regular regime

# per-group curve fits (fit_frequency_power_batch: thesis eq. 4.1; fit_rational_time_batch: eq. 4.5)
GROUP = "group"                      # index name: the configuration / kernel of the fit
N_SAMPLES = "n_samples"              # rows the group's fit used
FIT_P_STATIC_W = "p_static_w"
FIT_A_W_PER_MHZ = "a_w_per_mhz"
FIT_KNEE_MHZ = "knee_mhz"
FIT_SLOPE_PER_GHZ = "slope_per_ghz"
FIT_COMPANION_A_W_PER_MHZ = "companion_a_w_per_mhz"  # a ladder's pressure load: its own a of eq. 4.1
FIT_KNEE_GAP_LOW_MHZ = "knee_gap_low_mhz"    # gap of the clocks the free knee fell into (NaN: none)
FIT_KNEE_GAP_HIGH_MHZ = "knee_gap_high_mhz"
FIT_RMSE_W = "rmse_w"
FIT_TIME_A = "a"                     # eq. 4.5 amplitudes (unit of the time) and rates (1/MHz)
FIT_TIME_B_PER_MHZ = "b_per_mhz"
FIT_TIME_C = "c"
FIT_TIME_D_PER_MHZ = "d_per_mhz"
FIT_RMSE = "rmse"                    # unit of the time

# per-group vs global comparison (compare_per_group_vs_global, thesis §5.7)
MODEL = "model"                      # "per-group" or "global"
HELD_OUT = "held_out"                # "clocks" or "groups"
MAPE_PCT = "mape_pct"                # mean over folds of the held-out MAPE, %
MAPE_STD_PCT = "mape_std_pct"
N_FOLDS = "n_folds"

# boards (powermodels.boards): one configuration measured on several GPUs of one model
N_BOARDS = "n_boards"                # boards that measured the configuration
BOARD_SPREAD_PCT = "board_spread_pct"  # (max - min) / mean of the boards' median energies, %
BOARD_SPREAD_UNCERTAINTY_PCT = "board_spread_uncertainty_pct"  # 1-sigma of that difference, %
BOARD_SPREAD_SIGNIFICANT = "board_spread_significant"  # spread > k x its uncertainty
BOARD_TEMPERATURE_SPREAD_C = "board_temperature_spread_c"  # T of the highest-energy board - T of the lowest
REFERENCE_BOARD = "reference_board"  # UUID of the board a normalisation maps the others onto
NORMALISED_ENERGY_J = "normalised_energy_j"  # energy per launch on the reference board's scale
RESIDUAL_PCT = "residual_pct"        # normalised board median / reference board median - 1, %
HELD_OUT_CONFIG = "held_out_config"  # the configuration left out of a normalisation's fit

# raw recording (powermodels.recording): a folder of trace/energy/launches/phases/probes
# parquet files on one host clock (t_s), with provenance.json beside them
READ_S = "read_s"                    # how long the NVML call that made the row took, seconds
RECORDING_PHASE = "phase"            # protocol part the row belongs to (natural / thermal ...)
BATCH = "batch"                      # index of a batch of timed launches
PHASE_KIND = "kind"                  # what ran: idle / pressure / burst / series
T0_S = "t0_s"                        # start of a schedule entry on the host clock
T1_S = "t1_s"                        # end of a schedule entry on the host clock
DT_S = "dt_s"                        # length of an interval between two counter updates (s)
SINCE_S = "since_s"                  # time since the schedule entry running began (s)
AMBIENT_C = "ambient_c"              # ambient (inlet) temperature a replay follows, °C
PROBE_CLOCK_MHZ = "clock_mhz"        # SM clock an on-GPU clock probe measured (cycles / elapsed)
PROBE_CYCLES = "cycles"              # SM cycles the probe counted (clock64)
PROBE_ELAPSED_NS = "elapsed_ns"      # global-timer nanoseconds over the same span (globaltimer)

# twin against real (powermodels.twin.compare and the checks beside it): one row per check of issue 27
CHECK_METRIC = "metric"              # what is compared ("warm-up energy per launch, worst second", ...)
CHECK_REAL = "real"                  # the real recording's value
CHECK_TWIN = "twin"                  # the twin replay's value
CHECK_ERROR = "error"                # twin against real, in the row's unit (relative, %, °C, ms ...)
CHECK_TARGET = "target"              # the largest |error| the issue accepts
CHECK_UNIT = "unit"                  # the error's unit, and how each side was read
CHECK_WITHIN = "within"              # whether |error| <= target
CHECK_REAL_RANGE = "real_range"      # the spread of the real runs behind the real value (sensor checks)


# --------------------------------------------------------------------------
# Column and table specifications.
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of a table: its name, unit, dtype kind and valid range.

    Parameters
    ----------
    name : str
        Column name; the unit is part of the name (``_w``, ``_s``, ``_j``...).
    kind : {"float", "int", "str", "bool"}
        Expected dtype kind.
    unit : str
        Unit, for documentation.
    minimum, maximum : float or None
        Inclusive valid range for numeric columns.
    nullable : bool
        Whether NaN is allowed (e.g. a reading the GPU does not support, or
        the energy counter, which is read on a slower cadence).
    description : str
        What the column holds.
    """

    name: str
    kind: str = "float"
    unit: str = ""
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False
    description: str = ""


@dataclass(frozen=True)
class TableSpec:
    """A table: required and optional columns, sort key and minimum rows."""

    name: str
    required: tuple[Column, ...]
    optional: tuple[Column, ...] = ()
    time_column: str | None = None   # strictly increasing within each group
    group_column: str | None = None  # groups within which time must increase
    min_rows: int = 1

    @property
    def columns(self) -> dict[str, Column]:
        return {c.name: c for c in (*self.required, *self.optional)}


def _power(name: str, desc: str, nullable: bool = False) -> Column:
    return Column(name, "float", "W", 0.0, 1e5, nullable, desc)


TRACE_TABLE = TableSpec(
    name="trace table",
    required=(
        Column(RUN_ID, "str", "", description="identifier of the run the reading belongs to"),
        Column(T_S, "float", "s", description="monotonic host clock"),
        _power(POWER_INSTANT_W, "NVML instant power (field 186)", nullable=True),
    ),
    optional=(
        _power(POWER_AVERAGE_W, "NVML average power (field 185)", nullable=True),
        _power(POWER_USAGE_W, "nvmlDeviceGetPowerUsage", nullable=True),
        Column(ENERGY_COUNTER_J, "float", "J", 0.0, None, True,
               "total energy counter; NaN between its slower reads"),
        Column(TEMPERATURE_C, "float", "°C", -50.0, 150.0, True, "GPU temperature"),
        Column(SM_CLOCK_MHZ, "float", "MHz", 0.0, 1e4, True, "SM clock"),
        Column(MEM_CLOCK_MHZ, "float", "MHz", 0.0, 1e5, True, "memory clock"),
        Column(THROTTLE_REASONS, "int", "bitmask", 0, None, False, "NVML throttle reasons"),
        _power(REFERENCE_POWER_W, "external meter or simulated truth", nullable=True),
        Column(LOAD_ACTIVITY, "float", "", 0.0, 1.0, True, "known load level"),
    ),
    time_column=T_S,
    group_column=RUN_ID,
    min_rows=2,
)

RUN_TABLE = TableSpec(
    name="run table",
    required=(
        Column(KERNEL, "str", description="kernel name"),
        Column(CONFIG, "str", description="stable id of the tunable-parameter configuration"),
        Column(TIME_S, "float", "s", 0.0, None, description="kernel time per launch"),
        _power(POWER_W, "mean power during the kernel"),
        Column(ENERGY_J, "float", "J", 0.0, None, description="energy per launch"),
    ),
    optional=(
        Column(DEVICE, "str", description="device name"),
        Column(DEVICE_UUID, "str", description="device UUID (calibrations are keyed by it)"),
        Column(HOST, "str", description="host that measured the run"),
        Column(PROTOCOL, "str", description="measurement protocol"),
        Column(REPEAT, "int", "", 0, None, description="repeat index"),
        Column(LAUNCHES, "int", "", 1, None, description="launches in the run"),
        Column(RUN_ID, "str", description="run id linking to the trace table"),
        Column(TEMPERATURE_C, "float", "°C", -50.0, 150.0, True, "mean temperature"),
        Column(SM_CLOCK_MHZ, "float", "MHz", 0.0, 1e4, True, "observed mean SM clock"),
        Column(SM_CLOCK_REQUESTED_MHZ, "float", "MHz", 0.0, 1e4, True, "requested SM clock"),
        Column(MEM_CLOCK_MHZ, "float", "MHz", 0.0, 1e5, True, "observed memory clock"),
        Column(MEM_CLOCK_REQUESTED_MHZ, "float", "MHz", 0.0, 1e5, True, "requested memory clock"),
        Column(POWER_LIMIT_W, "float", "W", 0.0, 1e5, True, "power limit in force"),
        _power(REFERENCE_POWER_W, "reference mean power", nullable=True),
        Column(REFERENCE_ENERGY_J, "float", "J", 0.0, None, True, "reference energy per launch"),
        _power(IDLE_POWER_W, "idle power measured before the run", nullable=True),
        Column(ENERGY_UNCERTAINTY_J, "float", "J", 0.0, None, True, "1-sigma energy uncertainty"),
        Column(WALL_S, "float", "s", 0.0, None, True, "wall time the measurement took"),
        Column(COMMAND, "str", description="command line of an external program"),
        Column(EXIT_CODE, "int", "", None, None, False, "exit code of an external program"),
        Column(TIMED_OUT, "bool", description="external program stopped at its duration bound (timeout_s)"),
        Column(ENERGY_ABOVE_IDLE_J, "float", "J", None, None, True, "energy minus idle power x time"),
        Column(OTHER_GPU_PROCESSES, "float", "", 0.0, None, True,
               "other compute processes on the GPU before/after the run (NaN: unknown)"),
        Column(THROTTLED_FRACTION, "float", "", 0.0, 1.0, True, "share of samples throttled"),
        Column(THROTTLE_POWER_CAP_FRACTION, "float", "", 0.0, 1.0, True,
               "share of samples at the power cap"),
        Column(THROTTLE_THERMAL_FRACTION, "float", "", 0.0, 1.0, True,
               "share of samples in thermal slowdown"),
        Column(THROTTLE_OTHER_FRACTION, "float", "", 0.0, 1.0, True,
               "share of samples in another slowdown"),
        Column(TEMPERATURE_START_C, "float", "°C", -50.0, 150.0, True, "temperature at the window's start"),
        Column(TEMPERATURE_END_C, "float", "°C", -50.0, 150.0, True, "temperature at the window's end"),
        Column(REFERENCE_TEMPERATURE_C, "float", "°C", -50.0, 150.0, True,
               "temperature energy_at_ref_j and power_at_ref_w refer to"),
        Column(ENERGY_AT_REF_J, "float", "J", None, None, True,
               "energy per launch at reference_temperature_c (thesis eq. 4.7)"),
        _power(POWER_AT_REF_W, "mean power at reference_temperature_c (thesis eq. 4.7)", nullable=True),
        Column(ENERGY_AT_REF_UNCERTAINTY_J, "float", "J", 0.0, None, True,
               "1-sigma uncertainty of energy_at_ref_j (window and alpha)"),
        Column(CORRECTION_ALPHA_W_PER_C, "float", "W/°C", None, None, True,
               "leakage slope alpha used for the reference-temperature figures (eq. 4.6)"),
        Column(ALPHA_UNCERTAINTY_W_PER_C, "float", "W/°C", 0.0, None, True, "1-sigma uncertainty of alpha"),
        Column(ALPHA_SOURCE, "str", description="where alpha came from: file / learned / pooled / given / assumed"),
        Column(ALPHA_REGIME, "str", description="fixed_clock or power_capped"),
        Column(TRANSIENT, "bool", description="power-cap controller not settled during the window"),
        Column(SETTLE_S, "float", "s", 0.0, None, True, "load added waiting for the power cap to settle"),
        Column(LAUNCH_MODE, "str", description="graph / back_to_back / as_called"),
        Column(LAUNCH_BOUND, "bool", description="host gaps dominate the time per launch"),
    ),
    min_rows=1,
)

INSTRUCTION_TABLE = TableSpec(
    name="instruction table",
    required=(
        Column(WORKLOAD, "str", description="microbenchmark or workload name"),
        Column(TIME_S, "float", "s", 0.0, None, description="run time"),
        Column(ENERGY_J, "float", "J", 0.0, None, description="measured energy of the run"),
    ),
    optional=(
        _power(STATIC_POWER_W, "static + constant power", nullable=True),
        _power(IDLE_POWER_W, "idle power", nullable=True),
        Column(L1_HIT_RATE, "float", "", 0.0, 1.0, True, "L1 hit fraction of global accesses"),
        Column(L2_HIT_RATE, "float", "", 0.0, 1.0, True, "L2 hit fraction"),
        Column(L1_SECTORS, "float", "sectors", 0.0, None, True, "global sectors through L1"),
        Column(L2_SECTORS, "float", "sectors", 0.0, None, True, "sectors through L2 from the SMs"),
        Column(DRAM_SECTORS, "float", "sectors", 0.0, None, True, "DRAM sectors read + written"),
    ),
    min_rows=1,
)


# --------------------------------------------------------------------------
# Validation.
# --------------------------------------------------------------------------

def _kind_ok(kind: str, s: pd.Series) -> bool:
    """Whether column ``s`` holds values of ``kind`` (``float``, ``int``, ``str`` or ``bool``)."""
    import pandas as pd  # here: importing the column names must not import pandas (start-up)

    types = pd.api.types
    if kind == "float":
        return types.is_numeric_dtype(s) and not types.is_bool_dtype(s) and not types.is_complex_dtype(s)
    if kind == "int":
        return (types.is_integer_dtype(s) and not types.is_bool_dtype(s)) \
            or (types.is_float_dtype(s) and bool(np.all(np.mod(s.dropna(), 1) == 0)))
    if kind == "str":
        return types.is_string_dtype(s) or types.is_object_dtype(s) or isinstance(s.dtype, pd.CategoricalDtype)
    return types.is_bool_dtype(s)


def _fail(table: str, column: str, problem: str) -> None:
    raise ValueError(f"{table}: column {column!r} {problem}")


def _check_column(table: str, col: Column, s: pd.Series) -> None:
    if not _kind_ok(col.kind, s):
        _fail(table, col.name, f"has dtype {s.dtype}, expected {col.kind}")
    if col.kind not in ("float", "int"):
        if s.isna().any() and not col.nullable:
            _fail(table, col.name, f"has {int(s.isna().sum())} missing value(s)")
        return
    values = s.to_numpy(dtype=float, na_value=np.nan)
    nan = np.isnan(values)
    if nan.any() and not col.nullable:
        _fail(table, col.name, f"has {int(nan.sum())} NaN value(s) (first at row {int(np.argmax(nan))})")
    inf = np.isinf(values)
    if inf.any():
        _fail(table, col.name, f"has {int(inf.sum())} infinite value(s)")
    finite = values[~nan]
    unit = f" {col.unit}" if col.unit else ""
    if col.minimum is not None and finite.size and finite.min() < col.minimum:
        what = "negative" if col.minimum == 0 else "out-of-range"
        _fail(table, col.name, f"has {what} value {finite.min():g}{unit} (minimum {col.minimum:g}{unit})")
    if col.maximum is not None and finite.size and finite.max() > col.maximum:
        _fail(table, col.name, f"has value {finite.max():g}{unit} above the plausible maximum {col.maximum:g}{unit}")


def validate_table(df: pd.DataFrame, spec: TableSpec, required: Iterable[str] = ()) -> pd.DataFrame:
    """Check ``df`` against ``spec`` and return it unchanged.

    Parameters
    ----------
    df : pandas.DataFrame
        The table.
    spec : TableSpec
        Its specification.
    required : iterable of str, optional
        Optional columns of ``spec`` that the caller needs as well.

    Raises
    ------
    ValueError
        Naming the column and the problem: missing, wrong dtype, NaN/inf,
        negative or out-of-range, unsorted or duplicate time, too few rows.
    """
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{spec.name}: expected a pandas DataFrame, got {type(df).__name__}")
    known = spec.columns
    twice = sorted({str(c) for c in df.columns[df.columns.duplicated()]})
    if twice:  # df[name] would be a table, not a column: refuse before anything reads it
        raise ValueError(f"{spec.name}: duplicate column name(s) {twice}")
    for name in (*[c.name for c in spec.required], *required):
        if name not in df.columns:
            raise ValueError(f"{spec.name}: column {name!r} is missing (have {list(df.columns)})")
    if len(df) < spec.min_rows:
        raise ValueError(f"{spec.name}: has {len(df)} row(s), needs at least {spec.min_rows}")
    for name in df.columns:
        if name in known:
            _check_column(spec.name, known[name], df[name])
    if spec.time_column is not None:
        _check_time(df, spec)
    return df


def _check_time(df: pd.DataFrame, spec: TableSpec) -> None:
    t = df[spec.time_column].to_numpy(dtype=float)
    if spec.group_column is not None and spec.group_column in df.columns:
        groups = df[spec.group_column].to_numpy()
        same = groups[1:] == groups[:-1]
    else:
        same = np.ones(max(len(t) - 1, 0), dtype=bool)
    dt = np.diff(t)[same]
    if (dt < 0).any():
        _fail(spec.name, spec.time_column, "is not sorted (time goes backwards within a run)")
    if (dt == 0).any():
        _fail(spec.name, spec.time_column, "has duplicate time stamps within a run")


def validate_trace_table(df: pd.DataFrame, required: Iterable[str] = ()) -> pd.DataFrame:
    """Validate a trace table (one row per sensor reading); see :data:`TRACE_TABLE`."""
    return validate_table(df, TRACE_TABLE, required)


def validate_run_table(df: pd.DataFrame, required: Iterable[str] = ()) -> pd.DataFrame:
    """Validate a run table (one row per measured run); see :data:`RUN_TABLE`."""
    return validate_table(df, RUN_TABLE, required)


def opcode_columns(df: pd.DataFrame) -> list[str]:
    """The opcode-count columns (``op:*``) of an instruction table, in order."""
    return [c for c in df.columns if isinstance(c, str) and c.startswith(OPCODE_PREFIX)]


def validate_instruction_table(df: pd.DataFrame, required: Iterable[str] = ()) -> pd.DataFrame:
    """Validate an instruction table: opcode counts (``op:*``) must be finite and ≥ 0."""
    validate_table(df, INSTRUCTION_TABLE, required)
    ops = opcode_columns(df)
    if not ops:
        raise ValueError(f"instruction table: no opcode columns (names starting with {OPCODE_PREFIX!r})")
    for name in ops:
        _check_column(INSTRUCTION_TABLE.name, Column(name, "float", "count", 0.0), df[name])
    return df


def validate_trace_matrix(X, *, min_columns: int = 2) -> np.ndarray:
    """Validate a trace matrix (runs × time points) and return it as float array.

    Parameters
    ----------
    X : array-like of shape (n_runs, n_times)
        One row per run, one column per resampled time point.
    min_columns : int, default=2
        Fewest time points a row may have.

    Raises
    ------
    ValueError
        If ``X`` is not 2-D, has too few time points, or holds NaN/inf or
        negative power; for a DataFrame the offending column is named.
    """
    import pandas as pd

    columns: Sequence = X.columns if isinstance(X, pd.DataFrame) else None
    arr = _matrix_as_float(X)
    if arr.ndim != 2:
        raise ValueError(f"trace matrix: expected 2-D (runs × time points), got {arr.ndim}-D")
    if arr.shape[1] < min_columns:
        raise ValueError(f"trace matrix: has {arr.shape[1]} time point(s), needs at least {min_columns}")
    if arr.shape[0] == 0:
        raise ValueError("trace matrix: has 0 rows (runs), needs at least 1")
    # fast path, two reductions and no temporaries: NaN makes the min NaN, +inf the max
    if arr.size and arr.min() >= 0 and arr.max() <= _MAX_POWER_W:
        return arr
    bad = ~np.isfinite(arr)
    if bad.any():
        j = int(np.argmax(bad.any(axis=0)))
        name = columns[j] if columns is not None else j
        raise ValueError(f"trace matrix: column {name!r} has NaN or infinite values")
    neg = arr < 0
    if neg.any():
        j = int(np.argmax(neg.any(axis=0)))
        name = columns[j] if columns is not None else j
        # sklearn's wording for negative input (the positive_only tag of the filters using this)
        raise ValueError(f"trace matrix: Negative values in data: column {name!r} has negative power")
    high = arr > _MAX_POWER_W
    if high.any():
        j = int(np.argmax(high.any(axis=0)))
        name = columns[j] if columns is not None else j
        raise ValueError(f"trace matrix: column {name!r} has power {arr.max():g} W above the plausible "
                         f"maximum {_MAX_POWER_W:g} W")
    return arr


_MAX_POWER_W = 1e5  # the plausible maximum of every power column (_power)


def _matrix_as_float(X) -> np.ndarray:
    """``X`` as a float array; ValueError naming a column that does not hold numbers."""
    import pandas as pd

    def refuse(what, detail):
        raise ValueError(f"trace matrix: {what} holds {detail}, expected numbers (power in W)")

    def check(values, what):
        kind = values.dtype.kind
        if kind in "biuf":
            return
        if kind in "USmMc" or kind == "V":
            refuse(what, f"dtype {values.dtype}")
        # object: numbers only (no strings: "12.5" is text that should have been parsed)
        for v in values.ravel():
            if v is None or v is pd.NA:
                continue
            if isinstance(v, (str, bytes)) or not isinstance(v, (int, float, np.number)) \
                    or isinstance(v, (bool, np.bool_, complex, np.complexfloating)):
                refuse(what, f"{type(v).__name__} values such as {v!r}")

    if isinstance(X, pd.DataFrame):
        twice = sorted({str(c) for c in X.columns[X.columns.duplicated()]})
        if twice:
            raise ValueError(f"trace matrix: duplicate column name(s) {twice}")
        for name in X.columns:
            check(np.asarray(X[name]), f"column {name!r}")
        return X.to_numpy(dtype=float, na_value=np.nan)
    try:
        raw = np.asarray(X)
    except ValueError as err:  # ragged nested lists
        raise ValueError(f"trace matrix: rows of different lengths or nested values ({err})") from None
    check(raw, "the array")
    try:
        return raw.astype(float) if raw.dtype != object else np.array(
            [np.nan if v is None or v is pd.NA else v for v in raw.ravel()], dtype=float).reshape(raw.shape)
    except (TypeError, ValueError) as err:
        raise ValueError(f"trace matrix: expected numbers: {err}") from None
