"""A recording's ladder part, real vs its twin replay: power, clock and the two loads' shares per step.

Usage: ``python benchmarks/twin_ladder_check.py REAL TWIN --out DIR`` (no GPU, a few seconds): ``REAL``
a raw recording with a ``--ladder`` part, ``TWIN`` the twin's recording of it (``twin-compare REAL
--preset P --out CMP`` writes it to ``CMP/twin``). Writes ``DIR/ladder_steps.csv`` (one row per step and
source, :func:`powermodels.twin.metrics.ladder_steps`) and ``DIR/ladder.png``: the counter's power
over each update interval and the clock (NVML reading; the real probes' median per 10 ms) through the
ladder part, real vs twin.

The ladder (``docs/recordings.md``, "The ladder part") alternates a workload with the pressure load
every ~10 ms, below the H100's 10–20 ms clock period, to hold the clock in a band no load holds by
itself. What the twin's cap controller does with such a mix is not fitted by any preset (no fitting
recording has a ladder): this is a held-out check of it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.twin import metrics


def ladder_figure(real, twin, path: Path) -> None:
    """Counter power and clock through the ladder part, real vs twin."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ph = real.phases
    lad = ph.loc[ph[schema.RECORDING_PHASE] == "ladder"]
    a, b = float(lad[schema.T0_S].min()) - 1.0, float(lad[schema.T1_S].max()) + 0.5
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    for rec, label, style in ((real, "real", "-"), (twin, "twin (simulated)", "--")):
        t, e = metrics.counter_updates(rec)
        inside = (t[1:] > a) & (t[:-1] < b)
        mid = 0.5 * (t[1:] + t[:-1])[inside]
        top.plot(mid, (np.diff(e) / np.diff(t))[inside], style, lw=1, label=label)
        tr = rec.trace
        m = (tr[schema.T_S] >= a) & (tr[schema.T_S] <= b)
        bottom.step(tr.loc[m, schema.T_S], tr.loc[m, schema.SM_CLOCK_MHZ], style, where="post", lw=1,
                    label=f"{label}: NVML clock reading")
    if real.probes is not None and len(real.probes):
        p = real.probes
        p = p.loc[(p[schema.T_S] >= a) & (p[schema.T_S] <= b)]
        binned = p.groupby((p[schema.T_S] / 0.01).astype(int))[schema.PROBE_CLOCK_MHZ].median()
        bottom.plot(binned.index * 0.01, binned.to_numpy(), ".", ms=1.5, color="k", label="real: probed clock")
    for e in lad.itertuples(index=False):
        if e.kind == "ladder":
            for ax in (top, bottom):
                ax.axvspan(e.t0_s, e.t1_s, color="0.9", zorder=0)
            top.text(e.t0_s, 740, f"{e.workload.split('_')[1]} {e.repeat}", fontsize=6)
    top.set_ylabel("counter power, W")
    bottom.set_ylabel("SM clock, MHz")
    bottom.set_xlabel("s (grey: ladder steps; white: the workload alone, then the next)")
    top.legend(fontsize=7, loc="lower right")
    bottom.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"ladder part: real {real.provenance.get('uuid', '')[:12]} vs twin "
                 f"{twin.provenance.get('preset', '?')} (simulated)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("real")
    ap.add_argument("twin")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    real, twin = read_recording(args.real), read_recording(args.twin)
    table = pd.concat([metrics.ladder_steps(real).assign(source="real"),
                       metrics.ladder_steps(twin).assign(source=f"twin {twin.provenance.get('preset', '?')}")],
                      ignore_index=True)
    table.to_csv(out / "ladder_steps.csv", index=False)
    ladder_figure(real, twin, out / "ladder.png")
    cols = [schema.WORKLOAD, schema.REPEAT, "source", schema.POWER_W, schema.SM_CLOCK_MHZ, schema.PROBE_CLOCK_MHZ,
            schema.LAUNCH_COVERAGE, schema.COMPANION_SHARE]
    print(table[cols].sort_values([schema.WORKLOAD, schema.REPEAT, "source"]).round(3).to_string(index=False))


if __name__ == "__main__":
    main()
