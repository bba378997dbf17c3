"""A short board calibration: a preset brought to one board from its first idle and first second.

Boards of one model differ: at the same die temperature the held-out H100
GPU-620707cb drew 4.1 % more than the fitted board on the fp32 GEMM and 3.7 %
less at idle (docs/twin.md). That is the board's own static and dynamic power,
which no preset fitted to another board can know. :func:`calibrate_board`
reads two short pieces of a recording of the new board and changes two
or three numbers of the preset, nothing else (the thermal network, leakage slope,
controller, sensors and each workload's activity stay the preset's):

* **idle** — the counter's mean power over the recording's first idle entry
  (from ``settle_s`` in) against the preset's idle power at the temperature
  read there: the difference goes into the constant power ``P0``;
* **dynamic power** — the counter's mean power over the first ``first_s``
  of each uncapped series (from ``skip_s`` in: the die pole has jumped)
  against the preset's power of that workload at the top clock and the
  temperature read there; the ratio of the dynamic parts (power less the
  calibrated zero-activity power). ``scale="board"``: their median scales
  the core and memory coefficients, one factor for the board (DSO eq. 1:
  dynamic power is ``c·f·V²·a``; a board with more capacitance or a higher
  V(f) draws more at every activity), and ``P0`` is set again so that the
  idle power stays calibrated. ``scale="workload"``: each series' workload
  gets its own ratio on its core and memory activity (a workload of the
  same name may be another kernel on another machine; the board's share
  and the workload's cannot be told apart from one second). ``scale="domains"``:
  one factor for the core and one for the memory (DSO eq. 1 has the two as
  separate terms, ``P = A + Bc·a + Bm·m``): the least-squares pair through
  the series' dynamic power, which needs a compute-bound and a memory-bound
  workload. Boards of one model differ in their memory power apart from
  their core power: the triad drew ×1.10–1.13 of ``h200-raw``'s board on
  three H200s and ×1.01–1.02 on three others, the compute kernels within
  5 % on all six (docs/twin.md, session 15).

A capped series (NVML's clock reading below the top clock or the power-cap
reason set in most of its first second; without those readings, a power
above ``cap_share`` of the limit) says nothing about dynamic power and is
skipped; so is, for the board's factor, a workload
whose time per launch at the top clock differs from the preset's by more
than ``same_kernel`` (another kernel under the same name: its power is the
kernel's, not the board's; :func:`~powermodels.twin.adapt.adapt_workloads`
adapts its time). Whatever is compared afterwards on those first
seconds is in-sample: report the rest of each series as the validation.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .. import clock_events, schema
from ..energy_counter import mean_power_between_updates
from ..recording import Recording
from ..twin import metrics
from ..twin.fit_controller import capped_workload, fit_capped_clock
from ..twin.preset import TwinPreset, TwinWorkload, load_preset
from .capped_workload import capped_clock_target, capped_series_ambient, probed_cycles_before
from .naming import board_preset_name
from .thermal import calibrate_board_network, calibrate_board_thermal

__all__ = ["SCALES", "calibrate_board", "calibrated_preset", "capped_clock_before_series", "probed_cycles_before",
           "scaled_activity", "with_idle_power"]

#: what :func:`calibrate_board` can scale: the board's dynamic power, each workload's, or core and memory apart
SCALES = ("board", "workload", "domains")
#: where :func:`calibrate_board` reads each workload's power: its series' first second, or its natural-part bursts
READS = ("series", "bursts")
#: least ratio of the smaller to the larger singular value of the core / memory columns (each scaled to unit
#: length) for ``scale="domains"``: below it the series cannot tell the core's factor from the memory's
DOMAIN_CONDITION = 0.1


def with_idle_power(physics, idle_w: float, temperature_c: float):
    """``physics`` with its constant power set so that its idle power at ``temperature_c`` is ``idle_w``.

    The idle power has core and memory idle-activity terms: set it after any scaling of their coefficients.
    """
    return replace(physics, p0_w=physics.p0_w + idle_w
                   - float(physics.power_w(physics.sm_clock_max_mhz, physics.mem_clocks_mhz[0], temperature_c)))


def scaled_activity(workload: TwinWorkload, ratio: float) -> TwinWorkload:
    """``workload`` with its core and memory activity times ``ratio`` (each kept within 0..1)."""
    wl = workload.workload
    return replace(workload, workload=replace(wl, activity=float(np.clip(wl.activity * ratio, 0.0, 1.0)),
                                              mem_activity=float(np.clip(wl.mem_activity * ratio, 0.0, 1.0))))


def _domain_factors(parts: np.ndarray, dynamic: np.ndarray, name: str) -> tuple[float, float]:
    """The core and memory factors ``(kc, km)`` with ``dynamic ≈ kc·parts[:, 0] + km·parts[:, 1]``."""
    if len(parts) >= 2:
        norms = np.linalg.norm(parts, axis=0)
        if (norms > 0).all():
            sv = np.linalg.svd(parts / norms, compute_uv=False)
            if sv[-1] >= DOMAIN_CONDITION * sv[0]:
                kc, km = np.linalg.lstsq(parts, dynamic, rcond=None)[0]
                return float(kc), float(km)
    raise ValueError(f"calibrate_board: {name}'s uncapped series cannot tell the core's power from the memory's "
                     "(scale='domains' needs a compute-bound and a memory-bound workload of the preset); use "
                     "scale='board'")


def _temperature(rec: Recording, a: float, b: float) -> float:
    tr = rec.trace
    sel = (tr[schema.T_S] >= a) & (tr[schema.T_S] <= b)
    return float(tr.loc[sel, schema.TEMPERATURE_C].mean())


def _capped(rec: Recording, a: float, b: float, f_max: float) -> bool | None:
    """Whether NVML's readings say the board ran power-capped over ``[a, b]`` (None: no such readings)."""
    tr = rec.trace
    tr = tr.loc[(tr[schema.T_S] >= a) & (tr[schema.T_S] <= b)]
    reasons = tr[schema.THROTTLE_REASONS].dropna() if schema.THROTTLE_REASONS in tr else tr.iloc[:0, :0]
    clocks = tr[schema.SM_CLOCK_MHZ].dropna() if schema.SM_CLOCK_MHZ in tr else tr.iloc[:0, :0]
    if not (len(reasons) or len(clocks)):
        return None
    capped = bool(len(reasons)) and float(np.mean((reasons.to_numpy().astype(np.int64) & clock_events.SW_POWER_CAP) > 0)) > 0.5
    return capped or (bool(len(clocks)) and float(np.median(clocks)) < f_max - 1.0)


def calibrate_board(preset, rec: Recording, *, settle_s: float = 2.0, first_s: float = 1.0,
                    skip_s: float = 0.2, cap_share: float = 0.97, scale: str = "board",
                    same_kernel: float = 0.02, read: str = "series") -> TwinPreset:
    """``preset`` brought to the board of ``rec`` from its first idle and each series' first second (or its bursts).

    Parameters
    ----------
    preset : TwinPreset or str
        The preset (fitted to another board).
    rec : Recording
        A raw recording of the board, with a trace (temperature readings).
    settle_s : float, default=2
        Where in the first idle entry the idle power is read from (its end is
        the entry's end).
    first_s : float, default=1
        How much of each series' start is read (the calibration data; the
        rest of the series is not used).
    skip_s : float, default=0.2
        Start of the read within each series (the die's fast pole has risen).
    cap_share : float, default=0.97
        Without clock and clock-event readings, a series whose first second
        draws more than this share of the power limit counts as capped.
    scale : {"board", "workload", "domains"}, default="board"
        One dynamic-power factor for the board (the median of the series'),
        each series' workload its own activity factor, or one factor for the
        core and one for the memory (least squares over the same-kernel
        series; refused when they cannot tell the two apart).
    same_kernel : float, default=0.02
        Relative difference of the time per launch at the top clock (5th
        percentile of the recording's launches) beyond which a workload is
        another kernel: left out of the board's factors (``scale="board"`` or
        ``"domains"``).
    read : {"series", "bursts"}, default="series"
        Where each uncapped workload's power is read: the first ``first_s``
        of each of its series (from ``skip_s``), or each of its ``burst``
        entries in a raw recording's natural part from 0.4 s in to its end,
        at the top clock (``_capped`` leaves out a burst still recovering
        from the pressure before it). With ``"bursts"`` no second of any
        series is read, so every warm-up second stays held out
        (``series_read_s`` is ``[0, 0]``). Session 28's candidate (b)
        failed its rule: on 23 H200s, with the thermal network, 1.07 %,
        39 of 92 rows within 1 % from second 2 against 0.99 %, 47 of 92
        from the series (1.58 %, 19 of 92 from second 0); kept for
        re-scoring.

    Returns
    -------
    TwinPreset
        The calibrated preset, named ``<preset>+<scale>@<board>`` (:func:`~powermodels.board_calibration.naming.board_preset_name`); its
        ``fit["board_calibration"]`` and provenance say what was read and
        changed: ``series`` per workload, with one entry per series read in
        its lists (a workload measured in several series gets the median of
        their ratios), ``series_read_s`` the seconds read from each series' start.
    """
    twin = load_preset(preset)
    if scale not in SCALES:
        raise ValueError(f"calibrate_board: scale must be one of {', '.join(SCALES)}, got {scale!r}")
    if read not in READS:
        raise ValueError(f"calibrate_board: read must be one of {', '.join(READS)}, got {read!r}")
    if not rec.has_trace:
        raise ValueError(f"calibrate_board: {rec.name} has no trace (the temperature readings are needed)")
    ph = twin.physics
    f, fm = ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0]
    idles = rec.phases.loc[rec.phases[schema.PHASE_KIND] == "idle"]
    if not len(idles):
        raise ValueError(f"calibrate_board: {rec.name} has no idle entry in phases.parquet (the idle power is read there)")
    idle = idles.iloc[0]
    a, b = float(idle[schema.T0_S]) + settle_s, float(idle[schema.T1_S])
    updates = metrics.counter_updates(rec)  # once: the idle entry and every series read the same updates
    p_idle, t_idle = mean_power_between_updates(*updates, a, b), _temperature(rec, a, b)
    if not (np.isfinite(p_idle) and np.isfinite(t_idle)):
        raise ValueError(f"calibrate_board: {rec.name}'s first idle entry is too short to read ({b - a:.2f} s)")
    idle_offset = p_idle - float(ph.power_w(f, fm, t_idle))
    cal = replace(ph, p0_w=ph.p0_w + idle_offset)
    rows = {}
    entries = rec.phase_rows(kind="series" if read == "series" else "burst")
    if read == "bursts" and not len(entries):
        raise ValueError(f"calibrate_board: {rec.name} has no burst entry (read='bursts' reads a raw recording's "
                         "natural part)")
    for s in entries.itertuples(index=False):
        w = getattr(s, schema.WORKLOAD)
        if w not in twin.workloads:
            continue
        t0 = float(getattr(s, schema.T0_S))
        a1, b1 = ((t0 + skip_s, t0 + skip_s + first_s) if read == "series"
                  else (t0 + metrics.BURST_SETTLE_S, float(getattr(s, schema.T1_S))))
        p, t = mean_power_between_updates(*updates, a1, b1), _temperature(rec, a1, b1)
        capped = _capped(rec, a1, b1, f)
        if capped is None:
            capped = p > cap_share * ph.power_limit_w
        if not (np.isfinite(p) and np.isfinite(t)) or capped:
            continue
        wl = twin.workloads[w].workload
        base, core_w, mem_w = (float(x) for x in cal.power_terms(f, fm, t))
        preset_w = base + core_w * wl.activity + mem_w * wl.mem_activity
        if w not in rows:
            times = rec.launches.loc[rec.launches[schema.WORKLOAD] == w, schema.TIME_S].to_numpy(float)
            time_ratio = float(np.percentile(times, 5)) / float(wl.time_s(f, fm)) if times.size else float("nan")
            rows[w] = {"real_w": [], "preset_w": [], "temperature_c": [], "series_t0_s": [], "ratios": [],
                       "core_w": [], "memory_w": [], "zero_activity_w": [],
                       "time_ratio": time_ratio, "same_kernel": bool(abs(time_ratio - 1.0) <= same_kernel)}
        # every series of a workload is read (a recording may repeat one): one ratio, their median
        for key, value in (("real_w", p), ("preset_w", preset_w), ("temperature_c", t), ("series_t0_s", t0),
                           ("ratios", (p - base) / (preset_w - base)), ("core_w", core_w * wl.activity),
                           ("memory_w", mem_w * wl.mem_activity), ("zero_activity_w", base)):
            rows[w][key].append(value)
        rows[w]["ratio"] = float(np.median(rows[w]["ratios"]))
    workloads = dict(twin.workloads)
    factor, domains = float("nan"), None
    if scale in ("board", "domains"):
        if scale == "board":
            same = [r["ratio"] for r in rows.values() if r["same_kernel"]]
            factor = float(np.median(same)) if same else 1.0
            core, memory = factor, factor
        else:
            same = [r for r in rows.values() if r["same_kernel"]]
            parts = np.array([[c, m] for r in same for c, m in zip(r["core_w"], r["memory_w"], strict=True)])
            dynamic = np.array([p - z for r in same for p, z in zip(r["real_w"], r["zero_activity_w"], strict=True)])
            core, memory = _domain_factors(parts, dynamic, rec.name)
            domains = {"core_scale": core, "memory_scale": memory}
        cal = replace(cal, core_w_per_ghz=ph.core_w_per_ghz * core, mem_w_per_ghz=ph.mem_w_per_ghz * memory)
        cal = with_idle_power(cal, p_idle, t_idle)  # the idle power stays the calibrated one
    else:
        for w, r in rows.items():
            workloads[w] = scaled_activity(workloads[w], r["ratio"])
    if cal.p0_w < 0:
        raise ValueError(f"calibrate_board: the idle power of {rec.name} ({p_idle:.1f} W at {t_idle:.1f} °C) "
                         f"needs a negative constant power on {twin.name}")
    uuid = rec.board
    report = {"recording": rec.name, "uuid": uuid, "idle_w": p_idle, "idle_temperature_c": t_idle,
              "idle_read_s": [a, b], "idle_offset_w": idle_offset, "scale": scale, "dynamic_scale": factor,
              **(domains or {}), "series": rows,
              "series_read_s": [skip_s, skip_s + first_s] if read == "series" else [0.0, 0.0],
              "read": f"first idle entry from {settle_s:g} s; "
                      + (f"each uncapped series from {skip_s:g} s for {first_s:g} s" if read == "series" else
                         f"each uncapped workload's top-clock bursts from {metrics.BURST_SETTLE_S:g} s in (no series)")}
    prov = {**twin.provenance, "board_calibration": report}
    return replace(twin, name=board_preset_name(twin.name, uuid, scale), physics=cal, workloads=workloads,
                   provenance=prov, fit={**twin.fit, "board_calibration": report})


def calibrated_preset(preset, rec: Recording, *, scale: str | None = None, thermal: bool | str = False,
                      network_at_edge: str = "widen", cap: bool | str = False,
                      cap_ambient: str = "preset", read: str = "series") -> TwinPreset:
    """``preset`` brought to the board of ``rec`` as ``twin-compare --calibrate-board/-thermal/-cap`` does.

    Parameters
    ----------
    preset : TwinPreset or str
        The preset (fitted to another board).
    rec : Recording
        The board's raw recording; :func:`~powermodels.twin.compare.twin_compare`
        on this recording then scores its warm-up rows after the seconds read.
    scale : {"board", "workload", "domains"}, optional
        :func:`calibrate_board`'s ``scale``; None leaves the power as the preset's.
    thermal : bool or {"scale", "network"}, default=False
        ``True`` or ``"scale"``: then scale the thermal resistances
        (:func:`~powermodels.board_calibration.thermal.calibrate_board_thermal`).
        ``"network"``: *first* fit the board's own thermal network, resistances
        and time constants
        (:func:`~powermodels.board_calibration.thermal.calibrate_board_network`),
        so that the power calibration reads its seconds at the board's die
        temperature.
    network_at_edge : {"widen", "keep", "preset"}, default="widen"
        With ``thermal="network"``: :func:`calibrate_board_network`'s
        ``at_edge``, what to do when a time constant lands on its band's edge.
    cap : {False, True, "probes", "clock", "rate"}, default=False
        Last, bring the capped workload to the board's, read before the first
        series (:func:`capped_clock_before_series`): ``"probes"`` (or
        ``True``) its cycles from its probed launches there, then the clock
        under the power cap (session 23's clean test passed on two H200s);
        ``"clock"`` the clock alone, with the preset's cycles (for a recording
        whose pressure was not probed; validated only with pooled cycles,
        session 22); ``"rate"`` the probed cycles and clock, then the board's
        settled cap power and capped launch rate there, matched by replays at
        the recording's ambient (:func:`~powermodels.board_calibration.capped_rate.capped_rate_before_series`;
        passed its design stage on four H200s in session 27, opt-in until its
        clean test). Boards of one model settle at different capped clocks
        (NVML 1 440–1 532 MHz on 21 H200s, docs/twin.md), which the uncapped
        seconds do not tell.
    cap_ambient : {"preset", "recorded"}, default="preset"
        With ``cap`` ``"probes"`` or ``"clock"``: the ambient of the capped
        clock fit's replays (:func:`capped_clock_before_series`'s
        ``ambient``); ``"rate"`` always replays at the recording's.
    read : {"series", "bursts"}, default="series"
        :func:`calibrate_board`'s ``read``: where each workload's power is
        read for ``scale``.

    Returns
    -------
    TwinPreset

    Raises
    ------
    ValueError
        On an unknown ``thermal`` or ``cap``, or what the calibrations raise.
    """
    if thermal not in (False, True, "scale", "network"):
        raise ValueError(f"calibrated_preset: thermal must be False, True, 'scale' or 'network', got {thermal!r}")
    if cap not in (False, True, "clock", "probes", "rate"):
        raise ValueError(f"calibrated_preset: cap must be False, True, 'clock', 'probes' or 'rate', got {cap!r}")
    twin = load_preset(preset)
    if thermal == "network":
        twin = calibrate_board_network(twin, rec, at_edge=network_at_edge)
    if scale is not None:
        twin = calibrate_board(twin, rec, scale=scale, read=read)
    if thermal in (True, "scale"):
        twin = calibrate_board_thermal(twin, rec)
    if not cap:
        return twin
    if cap == "rate":
        # imported here: capped_rate calibrates on top of this module's steps
        from .capped_rate import capped_rate_before_series

        return capped_rate_before_series(twin, rec)
    return capped_clock_before_series(twin, rec, cycles="preset" if cap == "clock" else "probes", ambient=cap_ambient)


def capped_clock_before_series(preset, rec: Recording, *, cycles: str = "preset",
                               ambient: str = "preset") -> TwinPreset:
    """``preset`` with the clock under the power cap read from ``rec`` before its first series.

    The core coefficient with which the twin's *settled* clock over the
    recording's capped series (its own replay of their schedule,
    :func:`~powermodels.twin.fit_controller.fit_capped_clock`,
    ``window="settled"``) equals the clock NVML read over the capped
    ``pressure`` entries before the first series (a raw recording's natural
    part), from 1 s into each. Of the series only their times, NVML's
    throttle reasons (which part of each ran capped) and the die temperature
    just before each capped one (where the twin's own replay of it starts)
    are read: no power, energy or clock of a series, so the warm-up rows
    scored on them stay held out. On nine real H200 boards
    the two real readings agree within −0.5 … +0.6 %, while the twin's own
    clock rises ~1 % from the short entries to the long series; so the twin
    is matched where the rows are scored (docs/twin.md, session 22). At the
    cap the clock is where the load's power meets the limit (DSO eq. 1,
    ``c·f·V²·a``); the uncapped workloads' activities are divided by the
    same factor, so their power at the top clock stays calibrated.

    Parameters
    ----------
    preset : TwinPreset or str
    rec : Recording
    cycles : {"preset", "probes"}, default="preset"
        The capped workload's time per launch at a given clock: the
        preset's, or first the board's own, read from its launches and clock
        probes before the first series
        (:func:`~powermodels.twin.adapt.probed_time_ratio`; a raw recording
        has them with ``gpu_raw_recording.py --probe-pressure``, session 23).
        A capped workload's energy per launch is its power at the cap times
        its time, so a board whose GEMM takes 1 % more cycles reads 1 % more
        energy at the same clock.
    ambient : {"preset", "recorded"}, default="preset"
        The ambient of the twin's own replays of the capped series: the
        preset's constant (as every session up to 27 fitted it), or the
        recording's own at the first capped series' start, as ``twin-compare``
        replays it (:func:`~powermodels.board_calibration.capped_workload.capped_series_ambient`;
        the preset's constant is restored afterwards). The preset's
        constant ran 6–9 °C above the H200 recordings of session 27, so the
        clock fitted there is the clock of a hotter die. Yet on 17 probed
        H200s ``"recorded"`` moved the capped rows the wrong way (median
        absolute worst second 1.00 → 1.18 %, 8 → 4 within 1 %; session 28): the
        preset-ambient fit's error partly cancels another, which
        ``calibrated_preset(cap="rate")`` matches instead. So the default
        stays; the keyword is for re-scoring.

    Returns
    -------
    TwinPreset
        With ``fit["board_capped_clock"]`` (and the same in its provenance):
        the recording and board, NVML's reading, the twin's at each step,
        the factor, the replays' ambient and, with ``cycles="probes"``, the
        probed time ratio and the launches and probes it was read from.

    Raises
    ------
    ValueError
        On an unknown ``cycles`` or ``ambient``; when the recording has no capped
        ``pressure`` entry before its first series, no capped series to
        match, or no finite clock reading there; when the preset's cap
        controller has no averaging window (``cap_window_s`` 0: no settled
        clock to fit); with ``cycles="probes"``, what
        :func:`probed_cycles_before` raises; with ``ambient="recorded"``, what
        :func:`~powermodels.board_calibration.capped_workload.capped_series_ambient` raises.
    """
    if cycles not in ("preset", "probes"):
        raise ValueError(f"capped_clock_before_series: cycles must be 'preset' or 'probes', got {cycles!r}")
    if ambient not in ("preset", "recorded"):
        raise ValueError(f"capped_clock_before_series: ambient must be 'preset' or 'recorded', got {ambient!r}")
    original = load_preset(preset)
    twin = original
    series = rec.phase_rows(kind="series")
    spans, target = capped_clock_target(twin, rec, "capped_clock_before_series")
    replay_ambient_c = twin.ambient_c
    if ambient == "recorded":
        replay_ambient_c = capped_series_ambient(twin, rec, "capped_clock_before_series")
        twin = replace(twin, ambient_c=replay_ambient_c)
    probed = {}
    if cycles == "probes":
        twin, probed = probed_cycles_before(twin, rec, capped_workload(rec, spans), float(series[schema.T0_S].min()))
    read = {}
    fitted = fit_capped_clock(twin, rec, window="settled", target_mhz=target, report=read)
    report = {**read["capped_clock"], "read_from": f"{len(spans)} capped pressure entries before the first series",
              "recording": rec.name, "uuid": rec.board, "replay_ambient": ambient,
              "replay_ambient_c": replay_ambient_c, "held_out_series": len(series), **probed}
    # the full replay reads its own ambient profile; the preset keeps the constant it had
    return replace(fitted, ambient_c=original.ambient_c, name=board_preset_name(twin.name, report["uuid"], "cap-probes" if cycles == "probes" else "cap"),
                   provenance={**fitted.provenance, "board_capped_clock": report},
                   fit={**fitted.fit, "board_capped_clock": report})
