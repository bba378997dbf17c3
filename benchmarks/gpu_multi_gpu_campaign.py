"""One campaign on 1 GPU vs 2 GPUs through Dask, and the same configurations on both boards.

For a lent ``nvidia-h200-x2`` (``pip install 'powermodels[cuda-cluster]'`` first;
the script says so if it is missing; ran on 2026-11-24, ``datasets/h200x2/``). Three parts, one call:

1. **1 GPU** — ``run_campaign(spec, executor=DaskExecutor(client))`` on a ``LocalCUDACluster``
   restricted to GPU 0 (one worker): the campaign's wall time.
2. **2 GPUs** — the same spec (≥ 40 runs) into a fresh folder on a
   ``LocalCUDACluster`` of GPUs 0 and 1: wall time and its ratio to part 1
   (target ≤ 0.55). Both parts go through the same cluster path, so both pay
   the workers' kernel compilation; cluster start-up is reported apart.
3. **per GPU** — ``per_gpu=True`` on the 2-GPU cluster: every configuration
   on every board, medians per (config, board UUID), the difference between
   the boards in %, and :mod:`powermodels.boards`' spread (warned when
   significant) and leave-one-configuration-out normalisation residual.

Nothing changes any GPU setting (no clock lock, no power limit): clocks are the
GPU's own choice and are recorded. Without GPUs, ``--device simulated
--cluster local`` exercises every part on simulated GPUs (timings then mean
nothing for GPUs).

Usage::

    python benchmarks/gpu_multi_gpu_campaign.py [--configs 10] [--repeats 4] [--duration 2.0]
        [--device nvml --cluster local-cuda | --device simulated --cluster local] [--tag h200x2]
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import shutil
import sys
import time
from pathlib import Path

from _readonly_nvml import forbid_nvml_setters

if __name__ == "__main__":  # before powermodels is imported: no NVML setter can run
    forbid_nvml_setters()

import pandas as pd  # noqa: E402
from _common import write_report  # noqa: E402

from powermodels import schema  # noqa: E402
from powermodels.boards import board_spread, fit_board_normalisation, leave_one_config_out  # noqa: E402
from powermodels.campaigns import run_campaign  # noqa: E402

HERE = Path(__file__).resolve().parent


def spec(args, configs: int, repeats: int) -> dict:
    return {"kernels": {args.kernel: {"sample": configs, "seed": 0}}, "protocol": "continuous",
            "protocol_params": {"duration_s": args.duration}, "repeats": repeats,
            "device": args.device, "device_kwargs": {"seed": 0} if args.device == "simulated" else {}}


def start_cluster(kind: str, gpus: int):
    """(client, close, seconds to start) for ``gpus`` workers, one GPU each."""
    from distributed import Client

    t0 = time.perf_counter()
    if kind == "local-cuda":
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            sys.exit("this benchmark needs dask-cuda on a GPU host: pip install 'powermodels[cuda-cluster]'")
        cluster = LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(str(i) for i in range(gpus)),
                                   threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR)
    else:
        from distributed import LocalCluster

        cluster = LocalCluster(n_workers=gpus, threads_per_worker=1, processes=True,
                               dashboard_address=":0", silence_logs=logging.ERROR)
    client = Client(cluster)
    client.wait_for_workers(gpus)
    forbid_on_workers(client)

    def close():
        client.close()
        cluster.close()

    return client, close, time.perf_counter() - t0


def forbid_on_workers(client) -> None:
    """Make NVML read-only in every worker too: they are other processes, and a restarted one runs setup again."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class ReadOnlyNVML(WorkerPlugin):
        name = "powermodels-readonly-nvml"

        def setup(self, worker):
            forbid_nvml_setters()

    client.register_plugin(ReadOnlyNVML())


def timed_campaign(args, gpus: int, the_spec: dict, out: Path, per_gpu: bool = False) -> dict:
    from powermodels.integrations.dask_cluster import DaskExecutor

    shutil.rmtree(out, ignore_errors=True)
    client, close, start_s = start_cluster(args.cluster, gpus)
    try:
        t0 = time.perf_counter()
        runs = run_campaign(the_spec, out, executor=DaskExecutor(client, per_gpu=per_gpu), progress=False)
        wall = time.perf_counter() - t0
    finally:
        close()
    return {"gpus": gpus, "runs": runs, "wall_s": wall, "start_s": start_s,
            "boards": sorted(runs[schema.DEVICE_UUID].unique())}


def board_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Medians per (config, board) side by side and the difference between the two boards."""
    med = runs.groupby([schema.CONFIG, schema.DEVICE_UUID])[
        [schema.TIME_S, schema.POWER_W, schema.ENERGY_J, schema.SM_CLOCK_MHZ, schema.TEMPERATURE_C]].median()
    boards = sorted(runs[schema.DEVICE_UUID].unique())
    a, b = (med.xs(u, level=schema.DEVICE_UUID) for u in boards[:2])
    out = pd.DataFrame(index=a.index)
    for col, unit in ((schema.TIME_S, 1e3), (schema.POWER_W, 1.0), (schema.ENERGY_J, 1e3)):
        name = {schema.TIME_S: "time_ms", schema.POWER_W: "power_w", schema.ENERGY_J: "energy_mj"}[col]
        out[f"{name} A"] = a[col] * unit
        out[f"{name} B"] = b[col] * unit
        out[f"{name} B-A %"] = 100 * (b[col] - a[col]) / a[col]
    out["sm_clock_mhz A"] = a[schema.SM_CLOCK_MHZ]
    out["sm_clock_mhz B"] = b[schema.SM_CLOCK_MHZ]
    return out.reset_index()


def markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernel", default="sgemm")
    p.add_argument("--configs", type=int, default=10)
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--duration", type=float, default=2.0, help="continuous protocol: seconds per run")
    p.add_argument("--board-configs", type=int, default=4, help="configurations of the per-GPU part")
    p.add_argument("--device", choices=("nvml", "simulated"), default="nvml")
    p.add_argument("--cluster", choices=("local-cuda", "local"), default="local-cuda")
    p.add_argument("--work", type=Path, default=HERE / "results" / "multi_gpu_campaign_work")
    p.add_argument("--tag", default=None, help="names the outputs; default h200x2 on NVML, simulated otherwise")
    args = p.parse_args(argv)
    if args.tag is None:  # a simulated run must never be filed under a real machine's name
        args.tag = "h200x2" if args.device == "nvml" else "simulated"
    if args.configs * args.repeats < 40:
        p.error("the comparison needs >= 40 runs (--configs x --repeats)")
    main_spec = spec(args, args.configs, args.repeats)
    one = timed_campaign(args, 1, main_spec, args.work / "one_gpu")
    two = timed_campaign(args, 2, main_spec, args.work / "two_gpus")
    boards = timed_campaign(args, 2, spec(args, args.board_configs, 3), args.work / "per_gpu", per_gpu=True)
    ratio = two["wall_s"] / one["wall_s"]
    runs_two = two["runs"]
    lines = [
        f"# One campaign on 1 vs 2 GPUs through Dask ({args.tag})",
        "",
        f"`python benchmarks/gpu_multi_gpu_campaign.py --device {args.device} --cluster {args.cluster} "
        f"--configs {args.configs} --repeats {args.repeats} --duration {args.duration}` — {len(runs_two)} runs "
        f"of `{args.kernel}` (continuous protocol, {args.duration} s per run), clocks the GPUs' own; "
        f"{platform.node()}, Python {platform.python_version()}.",
        "",
        "| GPUs | runs | campaign wall (s) | cluster start (s) | runs per board | vs 1 GPU |",
        "|---:|---:|---:|---:|---|---:|",
    ]
    for r in (one, two):
        per = r["runs"][schema.DEVICE_UUID].value_counts().sort_index()
        lines.append(f"| {r['gpus']} | {len(r['runs'])} | {r['wall_s']:.1f} | {r['start_s']:.1f} | "
                     f"{', '.join(f'{u}: {n}' for u, n in per.items())} | {r['wall_s'] / one['wall_s']:.2f}× |")
    same = sorted(zip(one["runs"][schema.CONFIG], one["runs"][schema.REPEAT], strict=True)) == \
        sorted(zip(runs_two[schema.CONFIG], runs_two[schema.REPEAT], strict=True))
    lines += ["", f"2 GPUs / 1 GPU wall time: **{ratio:.2f}×** (target ≤ 0.55×); the same (config, repeat) "
              f"rows on both: {same}.", "",
              f"## The same configurations on both boards (per_gpu=True, {len(boards['runs'])} runs)", "",
              f"A = {boards['boards'][0]}, B = {boards['boards'][-1]}; medians over 3 repeats.", "",
              markdown(board_table(boards["runs"]))]
    spread = board_spread(boards["runs"])   # warns when the boards differ beyond 2σ
    loo = leave_one_config_out(boards["runs"])
    lines += ["", f"Spread between boards (powermodels.boards): median {spread[schema.BOARD_SPREAD_PCT].median():.2f} % "
              f"({int(spread[schema.BOARD_SPREAD_SIGNIFICANT].sum())} of {len(spread)} beyond 2σ); after a per-board "
              f"scale fitted on the other configurations: median |residual| "
              f"{loo[schema.RESIDUAL_PCT].abs().median():.2f} % (max {loo[schema.RESIDUAL_PCT].abs().max():.2f} %).",
              "", f"Normalisation fitted on all: `{fit_board_normalisation(boards['runs']).as_dict()}`"]
    args.work.mkdir(parents=True, exist_ok=True)
    boards["runs"].to_parquet(args.work / f"per_gpu_runs_{args.tag}.parquet", index=False)
    (args.work / f"summary_{args.tag}.json").write_text(json.dumps(
        {"one_gpu_s": one["wall_s"], "two_gpus_s": two["wall_s"], "ratio": ratio, "same_rows": same,
         "boards": boards["boards"]}, indent=2))
    return write_report("\n".join(lines) + "\n", HERE / "results" / f"multi_gpu_campaign_{args.tag}.md")


if __name__ == "__main__":
    sys.exit(main())
