"""Board-to-board spread and normalisation on the real 2 × H200 data (``datasets/h200x2``).

Prints the markdown of ``docs/scale-out.md``'s board section and draws
``docs/img/boards_h200x2.png``: per-board medians of the per-GPU campaign
(4 SGEMM configurations × 3 repeats on each board), the spread between the
boards, the leave-one-configuration-out residual of the scale and affine
normalisations (also on the 10 configurations of the two-GPU campaign, whose
repeats alternated between the boards, and on the host's three campaigns
pooled), and how much of the spread the
boards' temperature difference explains.

Usage::

    PYTHONPATH=src python benchmarks/boards_h200x2.py [--data datasets/h200x2] [--plot docs/img/boards_h200x2.png]
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import pandas as pd

from powermodels import boards, schema

REPO = Path(__file__).resolve().parents[1]


def short(uuid: str) -> str:
    return uuid[:8]


def config_names(runs: pd.DataFrame) -> dict:
    """Short names (S1, S2, …) for the SGEMM configurations, in sort order."""
    return {c: f"S{i + 1}" for i, c in enumerate(sorted(runs[schema.CONFIG].unique()))}


def per_board_markdown(runs: pd.DataFrame, names: dict) -> str:
    table = boards.per_board(runs)
    lines = ["| config | board | runs | energy mJ (median ± 1σ) | power W | time ms | temperature °C |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for _, r in table.iterrows():
        lines.append(f"| {names[r[schema.CONFIG]]} | {short(r[schema.DEVICE_UUID])} | {r[schema.N_SAMPLES]} | "
                     f"{1e3 * r[schema.ENERGY_J]:.1f} ± {1e3 * r[schema.ENERGY_UNCERTAINTY_J]:.1f} | "
                     f"{r[schema.POWER_W]:.0f} | {1e3 * r[schema.TIME_S]:.3f} | {r[schema.TEMPERATURE_C]:.1f} |")
    return "\n".join(lines)


def spread_markdown(runs: pd.DataFrame, names: dict) -> tuple[str, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spread = boards.board_spread(runs)
    lines = ["| config | spread % | 1σ % | > 2σ | ΔT °C (hotter board higher) |", "|---|---:|---:|---|---:|"]
    for _, r in spread.iterrows():
        lines.append(f"| {names[r[schema.CONFIG]]} | {r[schema.BOARD_SPREAD_PCT]:.2f} | "
                     f"{r[schema.BOARD_SPREAD_UNCERTAINTY_PCT]:.2f} | {'yes' if r[schema.BOARD_SPREAD_SIGNIFICANT] else 'no'} | "
                     f"{r[schema.BOARD_TEMPERATURE_SPREAD_C]:+.2f} |")
    warning = "; ".join(str(w.message) for w in caught if issubclass(w.category, boards.BoardSpreadWarning))
    return "\n".join(lines), warning


def loo_markdown(runs: pd.DataFrame, names: dict, label: str) -> tuple[str, dict]:
    lines = [f"| {label}: held-out config | before % | scale: after % | affine: after % | 1σ % |",
             "|---|---:|---:|---:|---:|"]
    scale = boards.leave_one_config_out(runs, model="scale")
    affine = boards.leave_one_config_out(runs, model="affine")
    for (_, s), (_, a) in zip(scale.iterrows(), affine.iterrows(), strict=True):
        lines.append(f"| {names[s[schema.HELD_OUT_CONFIG]]} | {s[schema.BOARD_SPREAD_PCT]:+.2f} | "
                     f"{s[schema.RESIDUAL_PCT]:+.2f} | {a[schema.RESIDUAL_PCT]:+.2f} | "
                     f"{s[schema.BOARD_SPREAD_UNCERTAINTY_PCT]:.2f} |")
    summary = {}
    for model, result in (("scale", scale), ("affine", affine)):
        res = result[schema.RESIDUAL_PCT].abs()
        summary[model] = (res.median(), res.max())
    lines.append(f"| median \\|·\\| (max) | {scale[schema.BOARD_SPREAD_PCT].abs().median():.2f} | "
                 f"{summary['scale'][0]:.2f} ({summary['scale'][1]:.2f}) | "
                 f"{summary['affine'][0]:.2f} ({summary['affine'][1]:.2f}) | "
                 f"{scale[schema.BOARD_SPREAD_UNCERTAINTY_PCT].median():.2f} |")
    return "\n".join(lines), {"scale": scale, "affine": affine}


def signed_difference(runs: pd.DataFrame, energy: str) -> pd.Series:
    """Per configuration: hotter board's median / cooler board's median − 1, % (two boards)."""
    table = boards.per_board(runs, energy)
    uuids = sorted(table[schema.DEVICE_UUID].unique())
    if len(uuids) != 2:
        raise ValueError(f"expected two boards, found {len(uuids)}")
    wide = table.pivot(index=schema.CONFIG, columns=schema.DEVICE_UUID, values=[schema.ENERGY_J, schema.TEMPERATURE_C])
    hot = wide[schema.TEMPERATURE_C].idxmax(axis=1)
    cold = wide[schema.TEMPERATURE_C].idxmin(axis=1)
    e = wide[schema.ENERGY_J]
    return pd.Series({c: 100 * (e.loc[c, hot[c]] / e.loc[c, cold[c]] - 1) for c in e.index})


def temperature_markdown(runs: pd.DataFrame) -> str:
    slope = boards.within_board_temperature_slope(runs)
    base = signed_difference(runs, schema.ENERGY_J)
    lines = ["| α used | hotter board − cooler, median % | range % |", "|---|---:|---|",
             f"| none | {base.median():+.2f} | {base.min():+.2f} to {base.max():+.2f} |"]
    for label, alpha in (("0.13 %/°C (assumed − 1σ)", 0.0013), ("0.25 %/°C (assumed)", None),
                         ("0.37 %/°C (assumed + 1σ)", 0.0037),
                         (f"{100 * slope:.2f} %/°C (within-board repeats)", slope)):
        left = signed_difference(boards.temperature_adjusted(runs, alpha), schema.ENERGY_AT_REF_J)
        lines.append(f"| {label} | {left.median():+.2f} | {left.min():+.2f} to {left.max():+.2f} |")
    return "\n".join(lines)


def plot(per_gpu: pd.DataFrame, names: dict, loo: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = loo["scale"]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    x = range(len(scale))
    labels = [names[c] for c in scale[schema.HELD_OUT_CONFIG]]
    err = scale[schema.BOARD_SPREAD_UNCERTAINTY_PCT]
    ax.errorbar([i - 0.1 for i in x], scale[schema.BOARD_SPREAD_PCT], yerr=err, fmt="o", color="tab:red",
                capsize=3, label="before: board median / reference board median − 1")
    ax.errorbar([i + 0.1 for i in x], scale[schema.RESIDUAL_PCT], yerr=err, fmt="s", color="tab:blue",
                capsize=3, label="after scale normalisation fitted on the other configurations")
    ax.axhline(0, color="0.5", lw=0.8)
    ax.axhspan(-0.5, 0.5, color="tab:green", alpha=0.15, label="±0.5 %")
    ax.set_xticks(list(x), labels)
    ax.set_ylabel("energy difference, %")
    ref, other = short(scale[schema.REFERENCE_BOARD].iloc[0]), short(scale[schema.DEVICE_UUID].iloc[0])
    ax.set_title(f"2 × H200, SGEMM at 1,980 MHz: board {other} vs {ref} (1σ bars)", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=REPO / "datasets" / "h200x2")
    p.add_argument("--plot", type=Path, default=None, help="write the figure here (PNG)")
    args = p.parse_args(argv)
    per_gpu = pd.read_parquet(args.data / "per_gpu_runs_h200x2.parquet")
    two = pd.read_parquet(args.data / "two_gpus_runs.parquet")
    names = config_names(two)
    print("## Per board (per-GPU campaign)\n\n" + per_board_markdown(per_gpu, names))
    table, warning = spread_markdown(per_gpu, names)
    print("\n## Spread\n\n" + table + f"\n\nBoardSpreadWarning: {warning}")
    text, loo = loo_markdown(per_gpu, names, "per-GPU")
    print("\n## Leave one configuration out (per-GPU campaign, 4 configurations)\n\n" + text)
    text2, loo2 = loo_markdown(two, names, "two-GPU")
    print("\n## Leave one configuration out (two-GPU campaign, 10 configurations, 2 runs per board)\n\n" + text2)
    pooled = pd.concat([pd.read_parquet(args.data / "one_gpu_runs.parquet"), two, per_gpu], ignore_index=True)
    runs_per_board = pooled.groupby([schema.CONFIG, schema.DEVICE_UUID]).size().groupby(schema.DEVICE_UUID).max()
    text3, _ = loo_markdown(pooled, names, "pooled")
    print("\n## Leave one configuration out (the host's three campaigns pooled, up to "
          + ", ".join(f"{n} runs on {short(u)}" for u, n in runs_per_board.items()) + ")\n\n" + text3)
    print("\n## Temperature (per-GPU campaign)\n\n" + temperature_markdown(per_gpu))
    fit = boards.fit_board_normalisation(per_gpu)
    print("\n## Normalisation fitted on all 4 (campaign metadata)\n\n" + str(fit.as_dict()))
    if args.plot:
        plot(per_gpu, names, loo, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
