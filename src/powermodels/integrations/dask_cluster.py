"""Campaigns on a Dask cluster: every run a task, every worker one GPU.

``run_campaign(spec, out, executor=DaskExecutor(cluster))`` and ``powermodels
campaign SPEC --out DIR --cluster local|local-cuda|tcp://ADDRESS`` come here
(:class:`DaskExecutor` is the campaigns' executor interface,
:class:`~powermodels.campaigns.executor.CampaignExecutor`, on Dask). Dask does the
scheduling, the rescheduling of a dead worker's tasks and the cluster set-up
(``dask.distributed``; ``dask-cuda``'s ``LocalCUDACluster`` for one worker per
GPU of a host; ``dask-jobqueue`` for Slurm/PBS — start the cluster there and
pass its address). powermodels adds three things:

* **one GPU per worker, opened once** — :class:`GPUWorkerPlugin` opens the
  worker's device and runner when the worker starts (again after a restart)
  and closes them when it stops. A simulated device gets a distinct seed per
  worker (``seed + worker number``), hence a distinct UUID. Every worker
  offers the resource ``powermodels-gpu: 1`` and each run asks for it, so a
  worker measures one run at a time even with several threads; two workers
  reporting the same GPU UUID are refused.
* **the same store** — the client writes every finished run with
  :class:`~powermodels.campaigns.store.CampaignStore` (trace, then row;
  atomic renames) as its task completes, so resume is identical serially or
  on a cluster and the workers need no shared file system. A task that a
  dead worker never returned is run again by Dask; a run is written once,
  under its key, whichever worker measured it.
* **per GPU** — ``per_gpu=True`` measures every run on every GPU of the
  cluster (the run's key includes the GPU UUID; each task is pinned through
  the resource ``gpu-<UUID>``, which the worker owning that board offers — also
  after a restart), to compare boards.

Every row records ``device_uuid``, ``device`` (the name) and ``host``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import uuid as _uuid
import zlib
from dataclasses import replace

try:
    from distributed import Client, as_completed, get_worker
    from distributed.core import Status
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as err:  # pragma: no cover - the extra is missing
    raise ImportError(
        "campaigns on a cluster need dask.distributed: pip install 'powermodels[distributed]'"
    ) from err

import pandas as pd

from ..campaigns.executor import CampaignExecutor
from ..campaigns.plan import CampaignSpec, PlannedRun
from ..campaigns.resume import folder_plan
from ..campaigns.run import campaign_metadata, device_metadata, finish_campaign, measure_planned, progress_bar
from ..campaigns.store import CampaignStore, atomic_json
from ..measuring.protocols import make_protocol

__all__ = ["DaskExecutor", "GPUWorkerPlugin", "connect", "run_on_cluster"]

PLUGIN_NAME = "powermodels-gpu"
GPU_RESOURCE = "powermodels-gpu"
#: Seconds to wait for the first worker of a cluster (batch jobs may queue a while).
WAIT_FOR_WORKERS_S = 600.0


def gpu_resource(uuid: str) -> str:
    """Name of the resource only the worker owning GPU ``uuid`` offers."""
    return f"gpu-{uuid}"


def _worker_number(name) -> int:
    """A worker's number: its name when it is one (LocalCluster: 0, 1, ...), else a hash of it."""
    try:
        return int(name)
    except (TypeError, ValueError):
        return zlib.crc32(str(name).encode()) % 1_000_003


def _device_kind(kind: str) -> str:
    if kind == "auto":
        from ..devices import nvml_available

        return "nvml" if nvml_available() else "simulated"
    return kind


def cuda_device_uuid(index: int = 0) -> str | None:
    """NVML-style UUID (``GPU-xxxxxxxx-...``) of CUDA device ``index`` as this process sees it; None without CuPy."""
    try:
        import cupy

        raw = cupy.cuda.runtime.getDeviceProperties(index).get("uuid")
    except Exception:  # no CuPy, no CUDA device: nothing to compare
        return None
    if not raw:
        return None
    h = bytes(raw).hex() if not isinstance(raw, str) else raw.encode("latin-1").hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def check_same_gpu(nvml_uuid: str, cuda_uuid: str | None) -> None:
    """Refuse a worker whose sensor (NVML) is another GPU than the one its kernels run on.

    Under ``dask-cuda`` or a batch scheduler ``CUDA_VISIBLE_DEVICES`` renumbers
    the CUDA devices but not NVML's, so an NVML handle opened by index can read
    another board than CUDA device 0.
    """
    if cuda_uuid is not None and str(nvml_uuid).lower() != cuda_uuid.lower():
        raise RuntimeError(f"this worker runs kernels on CUDA device 0 = {cuda_uuid} but its NVML sensor is "
                           f"{nvml_uuid} (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r}); "
                           "the sensor must be opened by the CUDA device's UUID")


class GPUWorkerPlugin(WorkerPlugin):
    """Opens one device and its runner per worker, once; offers the GPU as a Dask resource.

    Parameters
    ----------
    device : str
        ``"auto" | "nvml" | "simulated"`` (the spec's ``device``). On a
        ``dask-cuda`` worker the GPU it owns is CUDA device 0.
    device_kwargs : dict
        Passed to :func:`~powermodels.devices.open_device`; a simulated
        device's ``seed`` is offset by the worker's number.
    """

    idempotent = False

    def __init__(self, device: str = "auto", device_kwargs: dict | None = None):
        self.device = device
        self.device_kwargs = dict(device_kwargs or {})
        self.runner = None
        self.gpu: dict = {}
        self.campaign: tuple = (None, {}, None)  # (token, workloads by name, protocol) of the last campaign

    async def setup(self, worker) -> None:
        from ..measuring.runner import make_runner

        kind = _device_kind(self.device)
        kwargs = dict(self.device_kwargs)
        if kind == "simulated":
            kwargs["seed"] = int(kwargs.get("seed", 0)) + _worker_number(worker.name)
        self.runner = make_runner(kind, device_kwargs=kwargs)
        self.lock = threading.Lock()
        info = self.runner.device.info
        if kind == "nvml":
            try:
                check_same_gpu(info.uuid, cuda_device_uuid(0))
            except RuntimeError:
                self.runner.close()
                raise
        self.gpu = {"uuid": str(info.uuid), "name": info.name, "worker": str(worker.name),
                    "metadata": device_metadata(self.runner.device)}
        await worker.set_resources(**{GPU_RESOURCE: 1, gpu_resource(self.gpu["uuid"]): 1})
        # The scheduler looks again at tasks waiting for a resource ("no-worker") only when a
        # worker enters "running"; a worker restarted after a crash offers its GPU only now,
        # after it registered — so re-enter "running" (a pause of no duration) to wake the
        # runs pinned to this GPU (--per-gpu), which would otherwise wait forever.
        if worker.status == Status.running:
            worker.status = Status.paused
            worker.status = Status.running

    def teardown(self, worker) -> None:
        if self.runner is not None:
            self.runner.close()
            self.runner = None


def _worker_gpu(dask_worker) -> dict:
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return dict(plugin.gpu) if plugin is not None and plugin.runner is not None else {}


def _measure_task(spec: CampaignSpec, planned: PlannedRun, expected_uuid: str | None, token: str):
    """One run on this worker's GPU: (row, trace)."""
    plugin = get_worker().plugins.get(PLUGIN_NAME)
    if plugin is None or plugin.runner is None:
        raise RuntimeError("this Dask worker has no powermodels GPU (its plugin did not start)")
    if expected_uuid is not None and plugin.gpu["uuid"] != expected_uuid:
        raise RuntimeError(f"run {planned.key} is pinned to GPU {expected_uuid}, "
                           f"landed on {plugin.gpu['uuid']}")
    with plugin.lock:  # one measurement at a time on this GPU
        if plugin.campaign[0] != token:  # workloads built once per campaign and worker
            plugin.campaign = (token, {w.name: w for w, _ in spec.entries()},
                               make_protocol(spec.protocol, **spec.protocol_params))
        _, by_name, protocol = plugin.campaign
        return measure_planned(plugin.runner, protocol, planned, spec, by_name)


def connect(cluster, device: str = "auto", workers: int | None = None):
    """A Dask ``Client`` for ``cluster`` and a function that closes what was opened here.

    Parameters
    ----------
    cluster : str or Client or Cluster
        ``"local"``: a ``LocalCluster`` of ``workers`` single-threaded
        processes (the simulated GPU only — on a real GPU every worker would
        share board 0); ``"local-cuda"``: ``dask_cuda.LocalCUDACluster``, one
        worker per visible GPU; ``"tcp://host:port"`` (or any scheme
        ``distributed`` knows): an existing scheduler; a ``Client`` (left
        open) or a cluster object (``LocalCluster``, ``dask_jobqueue.SLURMCluster``, ...).
    device : str
        The spec's device, to refuse ``"local"`` on a real GPU.
    workers : int, optional
        Workers of ``"local"`` (default: CPU cores).
    """
    if isinstance(cluster, Client):
        if workers is not None:
            raise ValueError("workers: only for cluster='local'")
        return cluster, lambda: None
    if isinstance(cluster, str):
        if cluster == "local":
            if _device_kind(device) != "simulated":
                raise ValueError("--cluster local would run every worker on the same GPU; use "
                                 "--cluster local-cuda (one worker per GPU) or a cluster address")
            from distributed import LocalCluster

            n = int(workers) if workers is not None else (os.cpu_count() or 1)
            if n < 1:
                raise ValueError(f"workers must be >= 1, got {workers}")
            made = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                dashboard_address=":0", silence_logs=logging.ERROR)
        elif cluster == "local-cuda":
            try:
                from dask_cuda import LocalCUDACluster
            except ImportError:
                raise ValueError("--cluster local-cuda needs dask-cuda: pip install "
                                 "'powermodels[cuda-cluster]' (dask-cuda 26.10 and the dask it pins)") from None
            if workers is not None:
                raise ValueError("workers: local-cuda starts one worker per visible GPU "
                                 "(choose them with CUDA_VISIBLE_DEVICES)")
            made = LocalCUDACluster(threads_per_worker=1, dashboard_address=":0",
                                    silence_logs=logging.ERROR)
        elif "://" in cluster:
            if workers is not None:
                raise ValueError("workers: only for cluster='local'")
            client = Client(cluster, timeout="30s")
            return client, client.close
        else:
            raise ValueError(f"cluster: expected 'local', 'local-cuda' or a scheduler address "
                             f"like 'tcp://host:8786', got {cluster!r}")
        client = Client(made)

        def close() -> None:
            client.close()
            made.close()

        return client, close
    if hasattr(cluster, "scheduler_address"):  # a cluster object made by the caller
        client = Client(cluster)
        return client, client.close
    raise ValueError(f"cluster: expected a string, a dask Client or a cluster, got {type(cluster).__name__}")


def cluster_gpus(client) -> dict[str, dict]:
    """Worker address → its GPU (``uuid``, ``name``, ``worker``, ``metadata``); one GPU per worker."""
    gpus = {addr: g for addr, g in client.run(_worker_gpu).items() if g}
    if not gpus:
        raise RuntimeError("no Dask worker opened a GPU")
    owners: dict[str, str] = {}
    for addr, g in sorted(gpus.items()):
        if g["uuid"] in owners:
            raise ValueError(f"workers {owners[g['uuid']]} and {addr} share GPU {g['uuid']}: each worker "
                             "must own exactly one GPU (dask-cuda, or one worker per GPU)")
        owners[g["uuid"]] = addr
    return gpus


def _per_gpu_run(planned: PlannedRun, uuid: str) -> PlannedRun:
    key = hashlib.sha1(f"{planned.key}|{uuid}".encode()).hexdigest()[:20]
    return replace(planned, key=key)


def run_on_cluster(spec: CampaignSpec, out_dir, cluster, *, per_gpu: bool = False,
                   progress: bool = True, max_runs: int | None = None,
                   workers: int | None = None) -> pd.DataFrame:
    """Run (or resume) ``spec`` into ``out_dir`` on a Dask cluster; the run table of the finished runs.

    ``cluster``, ``per_gpu`` and ``workers`` are :class:`DaskExecutor`'s; ``progress`` and
    ``max_runs`` those of :func:`powermodels.campaigns.run_campaign`.
    Ctrl-C cancels the pending tasks (finished runs stay written) and raises
    ``KeyboardInterrupt``; running the same call again resumes.
    """
    store = CampaignStore(out_dir, create=True)
    client, close = connect(cluster, spec.device, workers)
    futures: dict = {}
    try:
        client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS_S)  # a scheduler whose workers still start
        client.register_plugin(GPUWorkerPlugin(spec.device, spec.device_kwargs), name=PLUGIN_NAME)
        gpus = cluster_gpus(client)
        meta_path = store.out / "metadata.json"
        if not meta_path.exists():
            first = gpus[sorted(gpus)[0]]["metadata"]
            devices = [g["metadata"]["device"] for _, g in sorted(gpus.items())]
            atomic_json(campaign_metadata(spec, first, devices=devices, cluster=str(client.scheduler.address),
                                          per_gpu=bool(per_gpu)), meta_path, default=str)
        base = folder_plan(spec, store.out)
        store.run_table()  # sets unreadable row files aside: those runs are measured again
        if per_gpu:
            uuids = sorted({g["uuid"] for g in gpus.values()})
            todo_all = [(_per_gpu_run(p, u), u) for u in uuids for p in base]
        else:
            todo_all = [(p, None) for p in base]
        done = store.finished_keys()
        todo = [(p, u) for p, u in todo_all if p.key not in done]
        initial = len(todo_all) - len(todo)
        if max_runs is not None:
            todo = todo[: int(max_runs)]
        token = _uuid.uuid4().hex[:8]  # fresh Dask keys: never a stale result of an earlier call
        for planned, u in todo:
            fut = client.submit(_measure_task, spec, planned, u, token, key=f"powermodels-{planned.key}-{token}",
                                resources={gpu_resource(u) if u else GPU_RESOURCE: 1}, pure=False)
            futures[fut] = planned
        bar = progress_bar(progress, total=len(todo_all), initial=initial,
                           desc=f"campaign {spec.protocol} on {len(gpus)} GPU{'s' if len(gpus) > 1 else ''}")
        try:
            for fut, (row, trace) in as_completed(list(futures), with_results=True):
                store.write_run(futures.pop(fut).key, row, trace)
                del row, trace
                fut.release()
                bar.update(1)
        finally:
            bar.close()
        return finish_campaign(store, [p.key for p, _ in todo_all])
    finally:
        if futures:  # interrupted or failed: stop the rest, keep what is written
            client.cancel(list(futures))
        close()


class DaskExecutor(CampaignExecutor):
    """Campaign runs as tasks on a Dask cluster, one worker per GPU (:func:`run_on_cluster`).

    Parameters
    ----------
    cluster : str or dask Client or Cluster
        ``"local"`` (simulated GPUs only), ``"local-cuda"``, ``"tcp://host:port"``,
        a ``Client`` or a cluster object (see :func:`connect`).
    per_gpu : bool, default=False
        Every run on every GPU of the cluster (to compare boards).
    workers : int, optional
        With ``cluster="local"``: number of workers (default: CPU cores).

    Examples
    --------
    >>> from powermodels.campaigns import run_campaign
    >>> runs = run_campaign(spec, "out", executor=DaskExecutor("local-cuda"))  # doctest: +SKIP
    """

    def __init__(self, cluster, *, per_gpu: bool = False, workers: int | None = None):
        self.cluster = cluster
        self.per_gpu = per_gpu
        self.workers = workers

    def run(self, spec: CampaignSpec, out_dir, *, progress: bool = True,
            max_runs: int | None = None) -> pd.DataFrame:
        return run_on_cluster(spec, out_dir, self.cluster, per_gpu=self.per_gpu, progress=progress,
                              max_runs=max_runs, workers=self.workers)

    def per_board(self) -> DaskExecutor:
        """The same cluster, every run on every GPU (``per_gpu=True``): a campaign's board probe."""
        return DaskExecutor(self.cluster, per_gpu=True, workers=self.workers)
