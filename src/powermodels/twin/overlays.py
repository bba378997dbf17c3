"""Overlay plots of a twin against a real recording (matplotlib, an extra).

:func:`plot_overlays` writes the figures :func:`~powermodels.twin.compare.twin_compare`
puts beside its table: warm-up energy per launch, temperature and counter
power over the whole recording, clock recovery and the capped series' settling;
:func:`plot_cap_settling` draws one capped series on a given axis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import schema
from ..recording import Recording
from . import metrics
from .metrics import capped_series

__all__ = ["plot_cap_settling", "plot_overlays"]


def plot_cap_settling(real: Recording, twin: Recording, ax, workload: str, *, label: str = "twin",
                      seconds: float = 12.0) -> None:
    """The 1 s mean power (energy counter, every 0.1 s) from a capped series' start, real vs twin, on ``ax``.

    The same windows :func:`~powermodels.twin.metrics.cap_overshoot` measures
    the overshoot and settling time on; its settling time is marked.
    """
    for rec, style, name in ((real, "-", "real"), (twin, "--", label)):
        row = rec.phase_rows(kind="series", workload=workload).iloc[0]
        t0, t1 = float(row[schema.T0_S]), float(row[schema.T1_S])
        a = t0 + np.arange(0.0, min(seconds, t1 - t0 - 1.0), 0.1)
        c = metrics.cap_overshoot(rec, workload)
        line, = ax.plot(a - t0 + 1.0, metrics.energy_between(rec, a, a + 1.0), style, lw=1.0,
                        label=f"{name} (settled {c[schema.SETTLING_S]:.1f} s)")
        ax.axvline(c[schema.SETTLING_S], color=line.get_color(), ls=":", lw=0.8)
    ax.set_xlabel("s since the series started (1 s window end)", fontsize=8)
    ax.set_ylabel("1 s mean power, W")
    ax.set_title(workload, fontsize=8)
    ax.legend(fontsize=7)


def plot_overlays(real: Recording, twin: Recording, out_dir, *, workloads=None,
                  clock_workload: str | None = None, label: str = "twin") -> list[Path]:
    """Overlay plots real vs twin: warm-up energy per launch, temperature, clock recovery."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    names = list(workloads) if workloads is not None else list(real.phase_rows(kind="series")[schema.WORKLOAD])
    paths = []
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.0), squeeze=False)
    for ax, w in zip(axes[0], names):
        a, b = metrics.warmup_energy_per_launch(real, w), metrics.warmup_energy_per_launch(twin, w)
        ax.plot(a["second"] + 0.5, a[schema.ENERGY_J] * 1e3, "o-", ms=3, label="real")
        ax.plot(b["second"] + 0.5, b[schema.ENERGY_J] * 1e3, "s--", ms=3, label=label)
        ax.set_title(w, fontsize=8)
        ax.set_xlabel("s since the series started")
    axes[0][0].set_ylabel("energy per launch, mJ")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    paths.append(out / "warmup_energy.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(2, 1, figsize=(10, 5), sharex=True)
    for rec, style, name in ((real, "-", "real"), (twin, "--", label)):
        if rec.has_trace:
            ax[0].plot(rec.trace[schema.T_S], rec.trace[schema.TEMPERATURE_C], style, lw=0.8, label=name)
        t, e = metrics.counter_updates(rec)
        ax[1].plot(t[1:], np.diff(e) / np.diff(t), style, lw=0.5, label=name)
    ax[0].set_ylabel("temperature, °C")
    ax[1].set_ylabel("power (energy counter), W")
    ax[1].set_xlabel("s (recording clock)")
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    paths.append(out / "temperature_power.png")
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    capped = capped_series(real, names)
    if capped:
        fig, axes = plt.subplots(1, len(capped), figsize=(4.5 * len(capped), 3.2), squeeze=False)
        for ax, w in zip(axes[0], capped):
            plot_cap_settling(real, twin, ax, w, label=label)
        fig.tight_layout()
        paths.append(out / "cap_settling.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    clock_workload = clock_workload or next((w for w in real.workloads if "fma" in w), None)
    if clock_workload is not None and len(real.phase_rows(kind="pressure")):
        fig, ax = plt.subplots(figsize=(6, 3.2))
        for rec, color, name in ((real, "C0", "real"), (twin, "C1", label)):
            c = metrics.implied_clock(rec, clock_workload)
            rows = metrics.clock_recovery(rec, clock_workload)
            ph = rec.phases
            for rep in rows[schema.REPEAT]:
                t0 = float(ph.loc[(ph[schema.WORKLOAD] == clock_workload) & (ph[schema.REPEAT] == rep)
                                  & (ph[schema.PHASE_KIND] == "burst"), schema.T0_S].iloc[0])
                sel = (c[schema.START_S] >= t0) & (c[schema.START_S] < t0 + 0.4)
                ax.plot((c.loc[sel, schema.START_S] - t0) * 1e3, c.loc[sel, schema.SM_CLOCK_MHZ], ".", ms=2,
                        color=color, label=f"{name}: clock from launch time" if rep == rows[schema.REPEAT].iloc[0]
                        else None)
                tr = rec.trace
                if not rec.has_trace:
                    continue
                s2 = (tr[schema.T_S] >= t0 - 0.05) & (tr[schema.T_S] < t0 + 0.4)
                ax.step((tr.loc[s2, schema.T_S] - t0) * 1e3, tr.loc[s2, schema.SM_CLOCK_MHZ], where="post",
                        color=color, lw=0.5, alpha=0.5,
                        label=f"{name}: NVML reading" if rep == rows[schema.REPEAT].iloc[0] else None)
        ax.set_xlabel("ms since the cap load stopped")
        ax.set_ylabel("SM clock, MHz")
        ax.legend(fontsize=7)
        fig.tight_layout()
        paths.append(out / "clock_recovery.png")
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)
    return paths
