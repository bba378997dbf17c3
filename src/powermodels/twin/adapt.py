"""A preset's workloads adapted to a recording's own launches: time per launch and host gap.

A recording the preset never saw may run a workload of the same name with another size (more loop
iterations), another host loop (a clock probe between batches) or, under the power cap, another
algorithm. Those are what the host ran, not the board's physics, so :func:`adapt_workloads` takes them
from the recording before a replay (:func:`~powermodels.twin.compare.twin_compare` does this for every
recording it compares).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import schema
from ..recording import Recording
from .preset import TwinPreset, TwinWorkload, load_preset

__all__ = ["adapt_workloads", "probed_time_ratio", "time_scaled"]

#: a launch and the clock probe beside it are at most this far apart (s); the recorder probes before each batch
PROBE_PAIRING_S = 0.005
#: a workload whose probes read below this share of the top clock ran power-capped
CAPPED_SHARE = 0.97


def time_scaled(workload: TwinWorkload, ratio: float, **changes) -> TwinWorkload:
    """``workload`` with its time per launch × ``ratio`` at every clock, its activity (the board's share) kept.

    ``changes`` are further :class:`~powermodels.twin.preset.TwinWorkload` fields to set (e.g. ``gap_s``).
    """
    w = workload.workload
    w = replace(w, core_work=w.core_work * ratio, mem_work=w.mem_work * ratio, t0_s=w.t0_s * ratio)
    return replace(workload, workload=w, **changes)


def probed_time_ratio(workload: TwinWorkload, launches: pd.DataFrame, probes: pd.DataFrame,
                      mem_clock_mhz: float) -> float:
    """Median, over launches with a clock probe beside them, of the real time over the workload's time at that clock.

    Parameters
    ----------
    workload : TwinWorkload
        The preset's workload (its time vs clock).
    launches : pandas.DataFrame
        The recording's launches of that workload (``start_s``, ``time_s``).
    probes : pandas.DataFrame
        The recording's clock probes of that workload (``t_s``, ``clock_mhz``): each is paired with the
        launch row starting nearest to it, within :data:`PROBE_PAIRING_S`.
    mem_clock_mhz : float
        The memory clock the workload's time is read at.

    Returns
    -------
    float
        NaN when no launch has a probe beside it.
    """
    left = launches[[schema.START_S, schema.TIME_S]].sort_values(schema.START_S)
    right = probes[[schema.T_S, schema.PROBE_CLOCK_MHZ]].sort_values(schema.T_S)
    paired = pd.merge_asof(left, right, left_on=schema.START_S, right_on=schema.T_S, direction="nearest",
                           tolerance=PROBE_PAIRING_S).dropna(subset=[schema.PROBE_CLOCK_MHZ])
    if paired.empty:
        return float("nan")
    model = np.array([workload.workload.time_s(f, mem_clock_mhz) for f in paired[schema.PROBE_CLOCK_MHZ]])
    return float(np.median(paired[schema.TIME_S].to_numpy(float) / model))


def adapt_workloads(preset, rec: Recording, *, tolerance: float = 0.02,
                    capped_time: str = "keep") -> tuple[TwinPreset, dict]:
    """The preset with each workload's time and host gap taken from ``rec``'s own launches.

    A workload that ran at the top clock is compared there: its time at the top clock (5th percentile
    of its launch times) with the preset's. A workload that ran power-capped never reaches the top clock:
    its clock probes (median below 97 % of the top clock) or its spread of launch times (fewer than half
    within 2 % of the 5th percentile) say so, and its time is handled by ``capped_time``.

    Where the time differs by more than ``tolerance`` or the host gap by more than 5 µs, the
    workload's work is scaled (its activity, the board's share, is kept).

    Parameters
    ----------
    preset : TwinPreset or str
    rec : Recording
    tolerance : float, default=0.02
    capped_time : {"keep", "probes"}, default="keep"
        ``"keep"``: a capped workload keeps the preset's time. ``"probes"``: where the recording has clock
        probes, its time is compared launch by launch with the preset's at each probe's clock
        (:func:`probed_time_ratio`). That is the right time per launch, but use it only with a preset
        whose capped clock is right too: ``h100-sxm``'s capped bf16 GEMM was fitted without probes, with
        ~9 % too few cycles per launch *and* a capped clock ~5 % too low, which partly cancel; adapting
        the cycles alone moves five held-out H100s' capped warm-up from −7.1 … −3.0 % to +4.4 … +10.3 %
        (docs/twin.md, session 19). The ratio the probes read is reported either way.

    Returns
    -------
    (TwinPreset, dict)
        The adapted preset and ``{workload: {"time_ratio", "gap_s", "time_from"}}`` for each workload
        changed (``time_from``: ``"top clock"``, ``"clock probes"`` or ``"kept (capped)"``) and each
        capped workload with probes, changed or not (with ``"probed_ratio"``).

    Raises
    ------
    ValueError
        On an unknown ``capped_time``.
    """
    if capped_time not in ("keep", "probes"):
        raise ValueError(f"adapt_workloads: capped_time must be 'keep' or 'probes', got {capped_time!r}")
    twin = load_preset(preset)
    ph = twin.physics
    changed, workloads = {}, dict(twin.workloads)
    has_probes = rec.probes is not None and len(rec.probes) > 0
    for name, tw in twin.workloads.items():
        la = rec.launches.loc[rec.launches[schema.WORKLOAD] == name]
        if la.empty:
            continue
        times = la[schema.TIME_S].to_numpy(float)
        t_rec = float(np.percentile(times, 5))
        ratio = t_rec / float(tw.workload.time_s(ph.sm_clock_max_mhz, ph.mem_clocks_mhz[0]))
        source, extra = "top clock", {}
        probes = rec.probes.loc[rec.probes[schema.WORKLOAD] == name] if has_probes else None
        if probes is not None and len(probes) and float(probes[schema.PROBE_CLOCK_MHZ].median()) < (
                CAPPED_SHARE * ph.sm_clock_max_mhz):
            # capped: the 5th percentile is no top-clock time (H200 GPU-40717706 held its capped clock so
            # steadily that it read as one, ×1.29 wrongly); the probes say what clock each launch ran at
            probed = probed_time_ratio(tw, la, probes, ph.mem_clocks_mhz[0])
            extra = {"probed_ratio": probed} if np.isfinite(probed) else {}  # NaN: no launch had a probe beside it
            use = capped_time == "probes" and np.isfinite(probed)
            ratio, source = (probed, "clock probes") if use else (1.0, "kept (capped)")
        elif np.mean(times <= 1.02 * t_rec) < 0.5:
            # it ran power-capped (no steady top-clock time to compare): keep the preset's
            ratio, source = 1.0, "kept (capped)"
        s, e = la[schema.START_S].to_numpy(float), la[schema.END_S].to_numpy(float)
        gaps = s[1:] - e[:-1]
        same = (la[schema.REPEAT].to_numpy()[1:] == la[schema.REPEAT].to_numpy()[:-1]) & (gaps >= 0)
        gap = float(np.median(gaps[same])) if same.any() else tw.gap_s
        if abs(ratio - 1.0) > tolerance or abs(gap - tw.gap_s) > 5e-6:
            workloads[name] = time_scaled(tw, ratio, gap_s=gap)
            changed[name] = {"time_ratio": ratio, "gap_s": gap, "time_from": source, **extra}
        elif extra:  # unchanged, but what its probes read is worth a line in the comparison's notes
            changed[name] = {"time_ratio": 1.0, "gap_s": tw.gap_s, "time_from": source, **extra}
    return replace(twin, workloads=workloads), changed
