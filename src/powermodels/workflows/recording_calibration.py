"""The thesis calibration fitted on a recording: only launches whose clock is known.

``powermodels calibrate --from DIR`` and the natural-DVFS path of ``powermodels calibrate``
both end here, so a recording re-analysed without a GPU gives the same report and file:

1. every timed batch gets its clock, spread and source (probe / kernel_time / nvml) and is
   kept or dropped with a reason (:func:`~powermodels.natural_dvfs.launch_clocks.attribute_clocks`);
2. time vs clock (thesis eq. 4.5, DSO eq. 2) is fitted per workload on the kept launches;
3. power comes from the energy counter over windows that one workload's launches cover at
   one known clock (:mod:`~powermodels.natural_dvfs.counter_windows`), not from the instant
   field; power vs clock (eq. 4.1) is fitted on them;
4. α (eq. 4.6) is fitted at constant clock (thesis §4.2.1) on ~1 s blocks of those windows,
   one group per workload, clock and stretch of back-to-back launches (each stretch has its
   own thermal history) — except the ``thermal`` part's series, which share one group per
   workload and clock (:func:`pool_thermal_series`: the cool and the hot series are the
   design's two temperatures) —, pooled over workloads, without the first ``settle_s`` of each
   stretch (the die temperature reading does not yet describe the die: on the H100
   recording the first second from idle reads 1.8 % high for the FMA loop), and without
   blocks at the power cap (:func:`at_power_cap`: there the controller holds the power, so
   power vs temperature is the controller's, not the leakage slope; on the H200 recording
   ``datasets/h200-2026-11-27/natural_dvfs_168e6658`` the capped bf16 GEMM alone gave
   α = 4.18 W/°C, three times the uncapped kernels' slope on the H100s).
5. power vs clock is also fitted on windows whose clock *moved* (the recovery after each
   pressure load), over each window's probed clock trajectory, and scored at a held-out clock
   band (:mod:`~powermodels.natural_dvfs.mixed_heldout`): ``CalibrationRun.power_clock`` (and the
   per-workload band's ``power_clock_relative``).

Two inputs: a raw recording (:func:`powermodels.recording.read_recording`), and the older
``calibrate`` output folder (``launches.parquet`` + ``samples.parquet``, e.g.
``h100-2026-11-24/natural_dvfs``), which has no trace, counter or probes — what each can
and cannot identify is written into the result's ``findings``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from ..natural_dvfs.mixed_heldout import heldout_power_from_recording
from ..natural_dvfs.counter_windows import counter_blocks, counter_updates, counter_windows
from ..natural_dvfs.launch_clocks import (
    DEFAULT_CLOCK_STEP_MHZ,
    attribute_clocks,
    find_clock_reference,
    launch_clock_summary,
)
from ..sensor.clock_reading import held_mean
from .calibration_fit import fit_calibration, stable_clock_rows
from .calibration_run import CalibrationRun

__all__ = ["at_power_cap", "calibrate_from", "calibrate_legacy_folder", "calibrate_recording", "pool_thermal_series"]

_SOURCE_WORDS = {"probe": "probed on the GPU (clock64 / %globaltimer) before and after each batch",
                 "kernel_time": "implied by the reference kernel's own time (t ∝ 1/clock)",
                 "nvml": "NVML's reading, kept only where it held around the launch"}


def _device(provenance: dict) -> dict:
    return {"device": provenance.get("gpu") or provenance.get("device"),
            "uuid": provenance.get("uuid"), "driver": provenance.get("driver"),
            "device_kind": provenance.get("device_kind", "nvml")}


def calibrate_recording(recording, *, clock_reference: str | None = "auto", settle_s: float = 2.0,
                        block_s: float = 1.0, step_mhz: float = DEFAULT_CLOCK_STEP_MHZ,
                        min_span_mhz: float = 150.0, reference_clock_mhz: float | None = None,
                        reference_temperature_c: float | None = None,
                        power_extrapolation_rules: bool = False, power_joint_fit: bool = False) -> CalibrationRun:
    """Fit the calibration on the launches of ``recording`` whose clock is known.

    Parameters
    ----------
    recording : Recording
        A raw recording.
    clock_reference : str, "auto" or None
        Workload whose time gives its own launches' clock where they were not probed;
        "auto": :func:`~powermodels.natural_dvfs.launch_clocks.find_clock_reference` (only
        when some workload lacks probes); None: none.
    settle_s : float
        α: seconds at the start of each stretch of launches left out.
    block_s : float
        α and power: counter windows joined into blocks of about this length.
    step_mhz, min_span_mhz : float
        Clock step; least clock span a curve is fitted over.
    reference_clock_mhz, reference_temperature_c : float, optional
        Where corrections report.
    power_extrapolation_rules : bool, default=False
        Step 5 with the three opt-in rules for a band outside the training clocks
        (:func:`~powermodels.natural_dvfs.clock_power.power_at_heldout_clocks`: ``P_static``
        within 0 … the idle power, CV folds towards the band, the ``v2f`` knee down to the band).
        Off by default: on the seven real ladder recordings of 2026-11-27 they made 15 of 21
        held-out cells worse (docs/calibration.md, "Extrapolating to the band").
    power_joint_fit : bool, default=False
        Step 5 also with the fit over every load with the board's voltage curve shared, taken per
        load where its CV wins (:mod:`~powermodels.natural_dvfs.joint_power`). Off by default: on
        seven real ladder recordings it made 12 of 28 held-out cells worse (docs/calibration.md,
        "One fit over every load").

    Returns
    -------
    CalibrationRun
        ``launches``: the kept launches; ``samples``: the counter blocks; ``clocks``: the
        per-workload kept/dropped summary; ``findings``: what the recording identifies.
    """
    if not len(recording.launches):
        from ..recording import RecordingError

        raise RecordingError(f"recording {recording.name}: launches.parquet has no timed batches (nothing to fit)")
    probes = recording.probes
    probed = set(probes[schema.WORKLOAD]) if probes is not None and len(probes) else set()
    unprobed = [w for w in recording.workloads if w not in probed]
    if isinstance(clock_reference, str) and clock_reference == "auto":
        clock_reference = find_clock_reference(recording, step_mhz=step_mhz) if unprobed else None
    elif clock_reference is not None and clock_reference not in recording.workloads:
        raise ValueError(f"clock reference {clock_reference!r} is not a workload of the recording "
                         f"(has {', '.join(recording.workloads)})")
    clocks = attribute_clocks(recording, clock_reference=clock_reference, step_mhz=step_mhz)
    windows = counter_windows(recording, clocks, step_mhz=step_mhz)
    blocks = counter_blocks(windows, block_s=block_s, step_mhz=step_mhz)
    kept = clocks.loc[clocks[schema.CLOCK_KEPT]].reset_index(drop=True)
    launches = kept.assign(**{schema.KERNEL: kept[schema.WORKLOAD], schema.CONFIG: ""})
    samples = blocks.assign(**{schema.KERNEL: blocks[schema.WORKLOAD], schema.CONFIG: ""}) if len(blocks) \
        else None
    alpha_rows = None
    if samples is not None:
        capped = at_power_cap(samples, recording)
        alpha_rows = pool_thermal_series(
            samples.loc[(samples[schema.SINCE_START_S].to_numpy(float) >= settle_s) & ~capped])
    if reference_clock_mhz is None:  # the board's highest clock, not the fastest launch's noise
        reference_clock_mhz = recording.provenance.get("max_sm_clock_mhz")
    calibration = fit_calibration(None, launches if len(launches) else None, samples,
                                  reference_clock_mhz=reference_clock_mhz,
                                  reference_temperature_c=reference_temperature_c,
                                  min_span_mhz=min_span_mhz, clock_step_mhz=step_mhz,
                                  temperature_samples=alpha_rows)
    summary = launch_clock_summary(clocks)
    findings = _findings(recording, summary, clock_reference, windows, blocks, settle_s)
    t = calibration.temperature
    if t is not None and alpha_rows is not None and len(alpha_rows):
        p_mean = float(alpha_rows[schema.POWER_W].mean())
        findings.append(
            f"α at constant clock = {t.alpha_w_per_c_:.3f} W/°C, 95 % CI [{t.alpha_ci_w_per_c_[0]:.3f}, "
            f"{t.alpha_ci_w_per_c_[1]:.3f}] ({100 * t.alpha_w_per_c_ / p_mean:.3f} %/°C of the mean "
            f"{p_mean:.0f} W), pooled over {t.n_groups_} group(s) (workload × clock × stretch) that held one "
            f"clock over ≥ 3 °C: {_alpha_groups(alpha_rows, step_mhz)}; candidates: the blocks of "
            f"{', '.join(sorted(set(alpha_rows[schema.WORKLOAD])))} from "
            f"{alpha_rows[schema.TEMPERATURE_C].min():.0f} to {alpha_rows[schema.TEMPERATURE_C].max():.0f} °C.")
    power_clock, power_clock_relative, lines = heldout_power_from_recording(
        recording, clocks, alpha_w_per_c=t.alpha_w_per_c_ if t is not None else None,
        reference_temperature_c=calibration.reference_temperature_c, extrapolation_rules=power_extrapolation_rules,
        joint_fit=power_joint_fit)
    return CalibrationRun(points=pd.DataFrame(), launches=launches, samples=samples if samples is not None
                          else pd.DataFrame(), calibration=calibration, device=_device(recording.provenance),
                          clocks=summary, findings=findings + lines, power_clock=power_clock,
                          power_clock_relative=power_clock_relative)


def _alpha_groups(alpha_rows: pd.DataFrame, step_mhz: float) -> str:
    """The groups α was pooled over, each with its clock, temperature span and blocks (the report names
    them: the candidates' workloads and span alone read as if every workload had passed the rule)."""
    rows = stable_clock_rows(alpha_rows, step_mhz)
    parts = []
    for _, g in rows.groupby(schema.GROUP, sort=False):
        t = g[schema.TEMPERATURE_C].to_numpy(float)
        parts.append(f"{g[schema.WORKLOAD].iloc[0]} at {float(np.median(g[schema.SM_CLOCK_MHZ])):.0f} MHz, "
                     f"{t.min():.1f}–{t.max():.1f} °C ({len(g)} blocks)")
    return "; ".join(parts) if parts else "none"


def pool_thermal_series(blocks: pd.DataFrame) -> pd.DataFrame:
    """One α group for every series a workload ran in the ``thermal`` part (thesis §4.2.1).

    α is fitted within groups of one workload at one clock; a group per stretch of launches
    keeps apart what has its own thermal history (a natural-DVFS burst, a ladder tail). The
    thermal part's series are made to be compared: one from cool, and with ``hot_s`` one right
    after a capped load, at the same clock. Each alone can span too little: on the H200s
    recorded (GPU-25027b10, GPU-1c74094b) a 25 s series moves 1–2 °C after its first 2 s.
    Their first ``settle_s`` is already left out, so the die reading describes the die in
    every row kept. A series split by a host pause rejoins its other part here too.

    Parameters
    ----------
    blocks : DataFrame
        Counter blocks with ``recording_phase`` and ``stretch`` (:func:`~powermodels.
        natural_dvfs.counter_windows.counter_blocks`); without either column, returned as is.

    Returns
    -------
    DataFrame
        ``blocks`` with ``stretch`` set to −1 in the ``thermal`` rows (workload and clock
        still separate the groups).
    """
    if schema.RECORDING_PHASE not in blocks or schema.STRETCH not in blocks or not len(blocks):
        return blocks
    thermal = (blocks[schema.RECORDING_PHASE] == "thermal").to_numpy()
    out = blocks.copy()
    out.loc[thermal, schema.STRETCH] = -1
    return out


def at_power_cap(blocks: pd.DataFrame, recording, *, limit_share: float = 0.97) -> np.ndarray:
    """Which counter blocks ran at the power cap.

    A block is capped when NVML's clock-event reasons show the power cap (``POWER_CAP_BITS``)
    for at least half of its time (each reading held until the next row, so a trace that kept only
    the rows where a reading changes — what ``gpu_natural_dvfs.py`` commits — gives the same
    answer as the full-rate one; counting rows did not, and moved α on the H100 GPU-a8fc3d71
    recording from 2.26 to 1.62 W/°C); without that column in the trace, when its
    counter power is at least ``limit_share`` of the recording's ``power_limit_w``.

    Parameters
    ----------
    blocks : DataFrame
        Counter blocks (``window_start_s``, ``window_end_s``, ``power_w``).
    recording : Recording
        The recording they come from (its trace and provenance).
    limit_share : float, default=0.97
        Share of the power limit above which a block counts as capped without clock-event reasons.

    Returns
    -------
    ndarray of bool
        One per block: ran at the power cap.
    """
    from ..thermal.spans import POWER_CAP_BITS

    capped = np.zeros(len(blocks), dtype=bool)
    if not len(blocks):
        return capped
    trace = recording.trace
    t0 = blocks[schema.WINDOW_START_S].to_numpy(float)
    t1 = blocks[schema.WINDOW_END_S].to_numpy(float)
    if schema.THROTTLE_REASONS in trace and len(trace):
        t = trace[schema.T_S].to_numpy(float)
        cap = ((trace[schema.THROTTLE_REASONS].to_numpy(np.int64) & POWER_CAP_BITS) != 0).astype(float)
        return held_mean(t, cap, t0, t1) >= 0.5
    try:
        limit = float(recording.provenance.get("power_limit_w"))
    except (TypeError, ValueError):
        return capped
    return blocks[schema.POWER_W].to_numpy(float) >= limit_share * limit if np.isfinite(limit) else capped


def _findings(recording, summary, reference, windows, blocks, settle_s) -> list[str]:
    lines = []
    prov = recording.provenance
    if prov.get("complete") is False:  # a run stopped early (natural_recording: save_to)
        why = prov.get("stopped") or "killed without a flush (SIGKILL or power loss)"
        lines.append(f"this recording is partial: the run stopped early ({why}); it holds "
                     f"{prov.get('parts_recorded', '?')} schedule part(s), the last "
                     f"{prov.get('last_part') or 'not recorded'} — what follows covers only those.")
    n_probes = 0 if recording.probes is None else len(recording.probes)
    if not len(recording.trace):
        lines.append("no NVML trace: no temperature (α is not identified), no NVML power or clock "
                     "readings; clocks come from the probes only, power from the energy counter.")
    lines.append(f"{len(recording.launches)} timed batches of {len(recording.workloads)} workload(s), "
                 f"{len(recording.trace)} trace rows, {len(recording.energy)} energy-counter reads, "
                 f"{n_probes} clock probes.")
    stray = sorted(set(recording.probes[schema.WORKLOAD]) - set(recording.workloads)) if n_probes else []
    if stray:
        lines.append(f"{int(recording.probes[schema.WORKLOAD].isin(stray).sum())} of the {n_probes} probes name "
                     f"workload(s) with no timed batch ({', '.join(map(str, stray))}): not used.")
    for src in summary[schema.CLOCK_SOURCE].unique():
        ws = ", ".join(summary.loc[summary[schema.CLOCK_SOURCE] == src, schema.WORKLOAD])
        lines.append(f"clock {_SOURCE_WORDS[src]}: {ws}.")
    if reference is not None:
        lines.append(f"no probes for {reference}: its launches' clock is implied by its own time "
                     "(the recording's clock reference), so its time-vs-clock fit is circular — it "
                     "checks the pipeline, not the model; other unprobed workloads get only NVML's "
                     "reading where it held.")
    if n_probes == 0:
        lines.append("without probes, launches during a clock transition cannot be given a clock: "
                     "time vs clock of the unprobed workloads is identified only over the clocks the "
                     "reading held steady at.")
    _, _, how = counter_updates(recording.energy)
    lines.append(f"energy counter: updates placed on {'a fitted regular grid' if how == 'grid' else 'bracket midpoints'}; "
                 f"{len(windows)} windows of one workload at one known clock, joined into {len(blocks)} "
                 f"blocks; α leaves out the first {settle_s:g} s of each stretch of launches"
                 + (f" and the {int(at_power_cap(blocks, recording).sum())} block(s) at the power cap "
                    "(the controller holds the power there)." if len(blocks) else "."))
    return lines


# --------------------------------------------------------------------------
# The older calibrate folder (launches.parquet + samples.parquet, no trace).
# --------------------------------------------------------------------------


def _legacy_kept(launches: pd.DataFrame, margin_s: float, step_mhz: float) -> tuple[np.ndarray, np.ndarray]:
    """Kept launches of an old table: every launch of the burst within ``margin_s`` read one clock.

    The old table keeps each launch's mean NVML reading and its range; back-to-back
    launches of a burst tile its time line, so the reading held around a launch when all
    launches of the burst within the margin read the same clock with no range, and the
    margin lies inside the burst (outside it the reading is unknown).
    """
    kept = np.zeros(len(launches), dtype=bool)
    reason = np.full(len(launches), "", dtype=object)
    keys = [schema.KERNEL, schema.CONFIG, schema.CALIBRATION_PHASE, schema.REPEAT]
    for _, idx in launches.groupby(keys, sort=False).groups.items():
        idx = np.asarray(idx)
        g = launches.loc[idx].sort_values(schema.START_S)
        idx = g.index.to_numpy()
        s, e = g[schema.START_S].to_numpy(float), g[schema.END_S].to_numpy(float)
        f = g[schema.SM_CLOCK_MHZ].to_numpy(float)
        r = g[schema.CLOCK_RANGE_MHZ].fillna(0).to_numpy(float)
        lo = np.searchsorted(e, s - margin_s, side="left")
        hi = np.searchsorted(s, e + margin_s, side="right")
        inside = (s - margin_s >= s[0]) & (e + margin_s <= e[-1])
        for k in range(len(g)):
            seg_f, seg_r = f[lo[k]:hi[k]], r[lo[k]:hi[k]]
            ok = inside[k] and np.ptp(seg_f) < step_mhz / 2 and not seg_r.any()
            kept[idx[k]] = ok
        reason[idx[~kept[idx]]] = ("NVML clock reading changed within "
                                                        f"{margin_s * 1e3:.0f} ms of the launch, or the "
                                                        "margin reached outside its burst")
    return kept, reason


def calibrate_legacy_folder(folder, *, margin_s: float = 0.15, step_mhz: float = DEFAULT_CLOCK_STEP_MHZ,
                            min_span_mhz: float = 150.0) -> CalibrationRun:
    """Refit an older ``calibrate`` folder (``launches.parquet``, ``samples.parquet``).

    Such a folder has per-launch NVML means and per-update instant-power readings only: no
    full-rate trace, no energy counter, no probes. Launches are kept where the reading held
    ``margin_s`` around them (:func:`_legacy_kept`); power and α are not fitted (the
    instant field at a lagging clock identifies neither; the counter was not recorded).
    """
    from ..recording import RecordingError

    folder = Path(folder)
    missing = [n for n in ("launches.parquet", "samples.parquet") if not (folder / n).is_file()]
    if missing:
        raise RecordingError(f"recording {folder}: missing file(s) {', '.join(missing)}")
    launches = pd.read_parquet(folder / "launches.parquet")
    samples = pd.read_parquet(folder / "samples.parquet")
    need = {"launches.parquet": (launches, (schema.KERNEL, schema.CONFIG, schema.CALIBRATION_PHASE, schema.REPEAT,
                                            schema.START_S, schema.END_S, schema.TIME_S, schema.SM_CLOCK_MHZ,
                                            schema.MEM_CLOCK_MHZ, schema.TEMPERATURE_C, schema.CLOCK_RANGE_MHZ)),
            "samples.parquet": (samples, (schema.KERNEL, schema.CONFIG, schema.POWER_W, schema.SM_CLOCK_MHZ,
                                          schema.TEMPERATURE_C))}
    for name, (df, cols) in need.items():
        absent = [c for c in cols if c not in df.columns]
        if absent:
            raise RecordingError(f"recording {folder}: {name} lacks column(s) {', '.join(absent)}")
    kept, reason = _legacy_kept(launches.reset_index(drop=True), margin_s, step_mhz)
    launches = launches.reset_index(drop=True).assign(**{schema.CLOCK_KEPT: kept, schema.CLOCK_DROP_REASON: reason,
                                                         schema.CLOCK_SOURCE: "nvml",
                                                         schema.WORKLOAD: launches[schema.KERNEL]})
    # power and α are not fitted: the instant field's readings carry the lagging reading's clock
    # (fitting them gave α = -1.94 W/°C, CI [-6.0, 2.1], and power rmse 15-71 W on this H100 folder)
    calibration = fit_calibration(None, launches.loc[kept].reset_index(drop=True), None,
                                  min_span_mhz=min_span_mhz, clock_step_mhz=step_mhz)
    summary = launch_clock_summary(launches)
    provenance = {}
    if (folder / "provenance.json").is_file():
        import json

        provenance = json.loads((folder / "provenance.json").read_text())
    findings = [
        f"an older calibrate folder: {len(launches)} launches with their mean NVML clock, "
        f"{len(samples)} instant-power readings; no full-rate trace, no energy counter, no probes.",
        f"clock {_SOURCE_WORDS['nvml']} (all launches of the burst within {margin_s * 1e3:.0f} ms read "
        "one clock): launches during a clock transition cannot be given a clock.",
        "power and α are not fitted: the folder has only the instant field (25 ms of every 100 ms "
        "update) at the lagging reading's clock, no energy counter — it cannot identify power at a "
        "known clock, and α from it mixes clocks the reading did not show.",
    ]
    return CalibrationRun(points=pd.DataFrame(), launches=launches.loc[kept].reset_index(drop=True),
                          samples=pd.DataFrame(), calibration=calibration,
                          device=_device({**provenance, "gpu": provenance.get("device")}),
                          clocks=summary, findings=findings)


def calibrate_from(path, **kwargs) -> CalibrationRun:
    """A raw recording folder, or an older ``calibrate`` folder, fitted (see the module)."""
    from ..recording import read_recording

    folder = Path(path)
    if (folder / "samples.parquet").is_file() and not (folder / "trace.parquet").is_file():
        legacy = {k: v for k, v in kwargs.items() if k in ("step_mhz", "min_span_mhz")}
        return calibrate_legacy_folder(folder, **legacy)
    # a folder with probes but no NVML trace still gives every probed launch its clock
    trace_optional = (folder / "probes.parquet").is_file()
    return calibrate_recording(read_recording(folder, trace_optional=trace_optional), **kwargs)
