"""Is there a hidden fast thermal pole behind the leakage? An identification check on raw recordings.

Usage: ``python benchmarks/twin_hotspot_check.py RECORDING... [--taus 0.3,0.5,1,2,3,5]`` (no GPU,
~15 s per recording).

At an unchanged clock the real power keeps rising for ~1–3 s after a load starts, more than
the leakage slope times the die temperature explains (docs/twin.md). One physical reading: the
leakage follows a junction (hot-spot) temperature ``T_die + h`` where ``h`` is a first-order lag
``τ_h·dh/dt = R_h·P − h`` that the NVML temperature reading does not show. Then, at the top
clock (thesis eq. 4.6 with the hot spot added)::

    P = c_w + α·T_die + α·R_h·lag(u, τ_h)

with ``c_w`` one intercept per workload (and idle), ``T_die`` the two-pole Foster network's die
temperature driven by the counter's power (:func:`powermodels.thermal.foster.fit_foster`), and
``u`` each schedule entry at its workload's median power (exogenous: driving the lag with the
measured power itself would regress the power on a smoothed copy of itself, which "fits" at any
short ``τ_h``). The rows are the ones the twin's leakage fit uses (top clock, idle / burst /
series entries from 0.3 s in). For each ``τ_h``: α, ``R_h`` and the residual, against the fit
without the term. A hidden pole the data identify would show as a clear residual drop at some
``τ_h`` of 1–3 s with ``R_h > 0``.

Also printed: each series' counter power and the die model's temperature at 0.3–0.8 s and at
2.5–3 s into the series (the rise a hidden pole would have to explain).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from powermodels import schema
from powermodels.recording import read_recording
from powermodels.thermal.foster import fit_foster, foster_temperature, simulate_foster
from powermodels.twin.fit import power_intervals


def hotspot_table(rec, taus) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per ``τ_h``: α, ``R_h``, residual (W) of the pooled leakage fit; and each series' first seconds."""
    iv = power_intervals(rec)
    t, p = iv[schema.T_S].to_numpy(float), iv[schema.POWER_W].to_numpy(float)
    thermal = fit_foster(t, p, iv[schema.TEMPERATURE_C].to_numpy(float), n_poles=2)
    die = foster_temperature(t, p, thermal)
    f_max = float(rec.provenance["max_sm_clock_mhz"])
    ok = ((iv[schema.SM_CLOCK_MHZ] >= f_max) & (iv[schema.WORKLOAD] != "")
          & iv[schema.PHASE_KIND].isin(["idle", "burst", "series"]) & (iv[schema.SINCE_S] > 0.3)).to_numpy()
    groups = sorted(iv.loc[ok, schema.WORKLOAD].unique())
    onehot = np.column_stack([(iv.loc[ok, schema.WORKLOAD] == g).to_numpy(float) for g in groups])
    y = p[ok]
    # each schedule entry at its workload's median power; between entries the entry before goes on
    level = iv.groupby([iv[schema.WORKLOAD], iv[schema.PHASE_KIND]])[schema.POWER_W].transform("median")
    u = level.where(iv[schema.WORKLOAD] != "").ffill().bfill().to_numpy(float)

    def fit(extra=None):
        X = np.column_stack([die[ok], onehot] + ([] if extra is None else [extra[ok]]))
        coef, *_ = np.linalg.lstsq(X, y, rcond=None)
        return coef, float(np.sqrt(np.mean((X @ coef - y) ** 2)))

    coef0, rmse0 = fit()
    rows = [{"tau_h_s": 0.0, "alpha_w_per_c": coef0[0], "r_h_k_per_w": 0.0, "rmse_w": rmse0}]
    for tau in taus:
        coef, rmse = fit(simulate_foster(t, u, ((1.0, float(tau)),), 0.0))
        rows.append({"tau_h_s": tau, "alpha_w_per_c": coef[0], "r_h_k_per_w": coef[-1] / coef[0], "rmse_w": rmse})
    series = []
    for w in rec.phase_rows(kind="series")[schema.WORKLOAD]:
        s = (iv[schema.WORKLOAD] == w) & (iv[schema.PHASE_KIND] == "series")
        early = s & iv[schema.SINCE_S].between(0.3, 0.8)
        late = s & iv[schema.SINCE_S].between(2.5, 3.0)
        series.append({"workload": w, "power_0.3-0.8s_w": p[early].mean(), "power_2.5-3s_w": p[late].mean(),
                       "die_0.3-0.8s_c": die[early].mean(), "die_2.5-3s_c": die[late].mean(),
                       "clock_2.5-3s_mhz": iv.loc[late, schema.SM_CLOCK_MHZ].median()})
    out = pd.DataFrame(series)
    out["rise_w"] = out["power_2.5-3s_w"] - out["power_0.3-0.8s_w"]
    out["alpha_x_die_rise_w"] = coef0[0] * (out["die_2.5-3s_c"] - out["die_0.3-0.8s_c"])
    return pd.DataFrame(rows), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recordings", nargs="+")
    ap.add_argument("--taus", default="0.3,0.5,0.7,1,1.5,2,3,5", help="hidden pole time constants tried (s)")
    args = ap.parse_args()
    taus = [float(x) for x in args.taus.split(",")]
    for folder in args.recordings:
        rec = read_recording(folder, probes=False)
        fits, series = hotspot_table(rec, taus)
        print(f"== {rec.name} ({rec.provenance.get('uuid', '?')})")
        print(fits.round(4).to_string(index=False))
        print(series.round(2).to_string(index=False))


if __name__ == "__main__":
    main()
