"""Temperature slope α (thesis eq. 4.6) on the real H200 data in datasets/.

The GPU kept its SM clock at 1980 MHz for every SGEMM run (no locks were set;
see datasets/h200/README.md), so the runs are at constant clock, the setting
of thesis §4.2.2. α is fitted within each configuration (one common slope,
one intercept per config: the repeats ran at different temperatures) and
reported with its 95 % confidence interval.

Run: ``python benchmarks/thesis_real_temperature.py`` (writes
``benchmarks/results/thesis_real_temperature.md``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pandas as pd

from powermodels import schema
from powermodels.models.temperature import TemperatureCorrection
from powermodels.reporting import markdown_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "datasets" / "h200" / "harness_sgemm_runs.parquet"
OUT = ROOT / "benchmarks" / "results" / "thesis_real_temperature.md"


def fit(runs: pd.DataFrame, group: str | None) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = TemperatureCorrection(group_column=group).fit(
            runs[[schema.POWER_W, schema.TEMPERATURE_C, schema.CONFIG]]
        )
    lo, hi = model.alpha_ci_w_per_c_
    return {
        "grouping": "within config" if group else "pooled (no groups)",
        "alpha (W/°C)": f"{model.alpha_w_per_c_:.2f}",
        "95 % CI": f"[{lo:.2f}, {hi:.2f}]",
        "correlation": f"{model.correlation_:.2f}",
        "groups": model.n_groups_,
        "T_ref (°C)": f"{model.reference_temperature_c_:.1f}",
        "warning": "weak/negative" if caught else "",
    }


def main() -> None:
    runs = pd.read_parquet(DATA)
    clocks = runs[schema.SM_CLOCK_MHZ].unique()
    span = runs.groupby(schema.CONFIG)[schema.TEMPERATURE_C].agg(lambda s: s.max() - s.min())
    rows = [fit(runs, schema.CONFIG), fit(runs, None)]
    table = markdown_table(pd.DataFrame(rows))
    text = (
        f"# Temperature slope on real data ({DATA.relative_to(ROOT)})\n\n"
        f"{len(runs)} SGEMM runs, {runs[schema.CONFIG].nunique()} configurations, "
        f"SM clock(s) {sorted(clocks.tolist())} MHz, temperature "
        f"{runs[schema.TEMPERATURE_C].min():.1f}–{runs[schema.TEMPERATURE_C].max():.1f} °C, "
        f"median within-config temperature span {span.median():.1f} °C.\n\n{table}\n"
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
