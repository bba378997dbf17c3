"""Campaigns: kernels × configurations × repeats (× clock settings) → run table + trace table.

A campaign is resumable and crash-safe. Every finished run is appended to
the campaign folder (:class:`~powermodels.harness.campaign_store.CampaignStore`)
as two files, each written to a temporary name and renamed into place
(``os.replace`` is atomic), trace first and run row last — the row is the
commit marker:

.. code-block:: text

    out/
      metadata.json           device name, driver, settings, protocol, the spec
      runs/<key>.json         one run-table row per finished run (commit marker)
      traces/<key>.parquet    its trace table (traces/ reads as one parquet dataset)
      runs.parquet            the whole run table, written once every run is finished

``key`` is a hash of (kernel, config, clock setting, repeat). On restart,
runs whose row exists are skipped — found from the file names alone, so a
resume costs the same however large the campaign; a run killed half-way
(trace without row) is measured again and its trace overwritten, so a
campaign killed at any instant — even by ``SIGKILL`` — resumes without losing
or duplicating rows. Nothing holds every trace: the loop keeps one run at a
time and the run table is built from the small row files. Folders written by
older versions (one-row ``runs/<key>.parquet`` parts, ``traces.parquet``)
still load and resume.

With ``cluster=`` the runs are tasks on a Dask cluster, one worker per GPU
(:mod:`powermodels.integrations.dask_cluster`); the rows are written by the
same store, so a campaign resumes the same way serially or on a cluster.

Clock settings are applied only through ``device.settings_guard(...,
allow_changes=True)`` when the spec opts in (``allow_clock_changes``); the
guard restores the previous state afterwards.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from .. import schema
from ..devices.base import Device
from . import workloads
from .campaign_store import CampaignStore, atomic_json
from .exclusive import gpu_lock, holds_campaign_lock, measured_alone
from .protocols import make_protocol
from .runner import Runner, make_runner

__all__ = [
    "CampaignSpec",
    "finished_keys",
    "load_campaign",
    "load_runs",
    "load_spec",
    "measure_planned",
    "plan",
    "run_campaign",
]


@dataclass
class CampaignSpec:
    """What to measure.

    Parameters
    ----------
    kernels : dict of str to (str or list or dict)
        Kernel name → configurations: ``"default"``, ``"all"`` (the whole
        restricted search space), a list of configs (dicts or ``"p=v,..."``
        strings), or ``{"sample": n, "seed": s}`` (a reproducible random
        subset of the search space).
    protocol : str, default="counter"
        Protocol name (:data:`powermodels.harness.protocols.PROTOCOLS`); the
        default falls back to ``good_practice`` on a GPU without an energy counter.
    protocol_params : dict
        Its parameters.
    repeats : int, default=3
        Repeats of every configuration.
    sm_clocks_mhz : list of float or None
        SM clocks to lock in turn (``None`` entries: the GPU's own choice).
        Needs ``allow_clock_changes``.
    allow_clock_changes : bool, default=False
        Explicit opt-in for clock changes (restored after every setting).
    device : str, default="auto"
        ``"auto" | "nvml" | "simulated"``.
    device_kwargs : dict
        Passed to :func:`~powermodels.devices.open_device` (e.g. ``{"seed": 0}``).
    workloads : list of dict
        User workloads: CUDA sources with tunables, ``module:function``
        callables, programs, each with its ``configs``
        (:mod:`powermodels.harness.workloads.spec`). A spec with ``workloads``
        and no ``kernels`` measures only those.
    base_dir : str, optional
        Folder the workloads' relative paths are resolved against
        (:func:`load_spec` sets the campaign file's folder).
    exclusive : bool, default=False
        Another compute process on the GPU before or after a run is an error
        (:class:`~powermodels.harness.exclusive.OtherProcessError`) instead of
        a warning and a count in the row's ``other_gpu_processes``.
    """

    kernels: dict = field(default_factory=lambda: {"fp32": "default"})
    protocol: str = "counter"
    protocol_params: dict = field(default_factory=dict)
    repeats: int = 3
    sm_clocks_mhz: list | None = None
    allow_clock_changes: bool = False
    device: str = "auto"
    device_kwargs: dict = field(default_factory=dict)
    workloads: list = field(default_factory=list)
    base_dir: str | None = None
    exclusive: bool = False

    @classmethod
    def from_dict(cls, data: Mapping) -> CampaignSpec:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"campaign spec: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        data = dict(data)
        if not data.get("kernels") and not data.get("workloads"):
            # an empty spec ({}) used to run a default fp32 campaign without a word
            raise ValueError("campaign spec: nothing to measure: give 'kernels' (registry kernel -> "
                             "configs, e.g. {\"fp32\": \"default\"}) or 'workloads'"
                             + (f"; it has only {given}" if (given := sorted(set(data) - {"base_dir"}))
                                else "; it is empty"))
        if data.get("workloads") and "kernels" not in data:
            data["kernels"] = {}  # only the user's workloads, not the default fp32
        spec = cls(**data)
        spec.validate()
        return spec

    def entries(self) -> list[tuple[workloads.Workload, object]]:
        """``(workload, configs)`` of every registry kernel and user workload, in spec order.

        Raises
        ------
        ValueError
            Naming a bad entry (unknown kernel, missing file, kernel not in its
            source, bad restriction) or two workloads with the same name.
        """
        if not isinstance(self.kernels, Mapping):
            raise ValueError("campaign spec: 'kernels' must be a mapping of kernel -> configs")
        if not isinstance(self.workloads, (list, tuple)):
            raise ValueError("campaign spec: 'workloads' must be a list of tables")
        out = [(workloads.registry_kernel(name), what) for name, what in self.kernels.items()]
        for entry in self.workloads:
            w = workloads.workload_from_entry(entry, self.base_dir)
            out.append((w, entry.get("configs", "default")))
        names = [w.name for w, _ in out]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"campaign spec: workload name(s) {twice} used twice; give each a 'name'")
        return out

    def workload(self, name: str) -> workloads.Workload:
        """The workload the run table calls ``name`` (a registry kernel or a user workload)."""
        for w, _ in self.entries():
            if w.name == name:
                return w
        raise ValueError(f"campaign spec: no workload named {name!r}")

    def validate(self) -> None:
        if not self.entries():
            raise ValueError("campaign spec: nothing to measure: give 'kernels' (registry kernel -> configs) "
                             "or 'workloads' (user sources, callables, programs)")
        if int(self.repeats) < 1:
            raise ValueError(f"campaign spec: 'repeats' must be >= 1, got {self.repeats}")
        make_protocol(self.protocol, **self.protocol_params)
        clocks = [c for c in (self.sm_clocks_mhz or []) if c is not None]
        if clocks and not self.allow_clock_changes:
            raise ValueError(
                "campaign spec: 'sm_clocks_mhz' needs 'allow_clock_changes': true "
                "(clock changes are opt-in and restored afterwards)"
            )


def load_spec(path: str | os.PathLike) -> CampaignSpec:
    """Read a campaign spec from JSON or TOML (``tomllib``, or ``tomli`` on Python 3.10)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"campaign config {str(path)!r} does not exist")
    if path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            try:
                import tomli as tomllib
            except ModuleNotFoundError:
                raise ValueError("campaign config: TOML needs Python >= 3.11 or 'tomli'; use JSON") from None
        data = tomllib.loads(path.read_text())
    else:
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"campaign config {str(path)!r}: invalid JSON: {err}") from None
    if isinstance(data, Mapping) and "base_dir" not in data:
        data = {**data, "base_dir": str(path.resolve().parent)}  # workloads' paths: next to the file
    return CampaignSpec.from_dict(data)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a campaign."""

    key: str
    kernel: str
    config: dict
    repeat: int
    sm_clock_mhz: float | None


def plan(spec: CampaignSpec) -> list[PlannedRun]:
    """Every run of the campaign, in the order they are measured (clock outermost)."""
    runs = []
    entries = spec.entries()
    for clock in spec.sm_clocks_mhz or [None]:
        for workload, what in entries:
            kernel = workload.name
            for config in workloads.select_configs(workload, what):
                cid = workload.config_id(config)
                for repeat in range(int(spec.repeats)):
                    text = f"{kernel}|{cid}|{clock}|{repeat}|{spec.protocol}"
                    key = hashlib.sha1(text.encode()).hexdigest()[:20]
                    runs.append(PlannedRun(key, kernel, config, repeat, clock))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError("campaign spec: duplicate runs (the same config listed twice)")
    return runs


def device_metadata(device: Device) -> dict:
    """What ``metadata.json`` records about one device: name, UUID, driver, settings, limits."""
    info = device.info
    try:
        settings = asdict(device.current_settings())
    except Exception as err:  # metadata must not stop a campaign
        settings = {"error": repr(err)}
    try:
        limits = device.power_limits_w()
    except Exception:
        limits = None
    return {
        "device": {"name": info.name, "kind": info.kind, "index": info.index, "uuid": info.uuid,
                   "driver": info.driver, "extra": info.extra},
        "settings_at_start": settings,
        "power_limits_w": limits,
        "host": socket.gethostname(),
    }


def campaign_metadata(spec: CampaignSpec, device_meta: dict, **more) -> dict:
    """``metadata.json``: package version, the device (:func:`device_metadata`), the spec, start time."""
    from .. import __version__

    return {
        "powermodels_version": __version__,
        **device_meta,
        **more,
        "spec": asdict(spec),
        "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def finished_keys(out_dir: str | os.PathLike) -> set[str]:
    """Keys of the finished runs (those whose row exists), from the file names alone."""
    return CampaignStore(out_dir).finished_keys()


@contextlib.contextmanager
def _clock(device: Device, mhz, allow: bool) -> Iterator[None]:
    if mhz is None:
        yield
        return
    with device.settings_guard(sm_clock_mhz=float(mhz), allow_changes=allow):
        yield


def measure_planned(runner: Runner, protocol, planned: PlannedRun,
                    spec: CampaignSpec, workloads_by_name: Mapping | None = None) -> tuple[dict, pd.DataFrame]:
    """Measure one planned run: its run-table row and its trace.

    The row records the requested clock, the device's UUID and the host, so
    rows measured on several GPUs or hosts stay apart. ``workloads_by_name``
    (name → workload, built once per campaign) keeps the same workload object
    for every run, so a runner's per-workload caches (compiled kernels) hold.
    """
    workload = (workloads_by_name[planned.kernel] if workloads_by_name is not None
                else spec.workload(planned.kernel))
    # one measurement at a time on a GPU, and nobody else's kernels in its energy
    with gpu_lock(runner.device, wait_s=GPU_LOCK_WAIT_S), \
            measured_alone(runner.device, exclusive=spec.exclusive, what=f"run {planned.key}") as alone, \
            _clock(runner.device, planned.sm_clock_mhz, spec.allow_clock_changes):
        m = protocol.measure(runner, workload, planned.config,
                             repeat=planned.repeat, run_id=planned.key)
    row = dict(m.row)
    row.update(alone)
    row[schema.SM_CLOCK_REQUESTED_MHZ] = (
        float(planned.sm_clock_mhz) if planned.sm_clock_mhz is not None else float("nan")
    )
    row[schema.DEVICE_UUID] = runner.device.info.uuid
    row[schema.HOST] = socket.gethostname()
    trace = m.trace
    trace[schema.RUN_ID] = planned.key
    return row, trace


def progress_bar(show: bool, **kwargs):
    """A tqdm bar of runs; hidden ones skip ``tqdm.auto`` (its notebook check imports asyncio)."""
    if show:
        from tqdm.auto import tqdm
    else:
        from tqdm.std import tqdm
    return tqdm(disable=not show, unit="run", **kwargs)


def finish_campaign(store: CampaignStore, planned_keys) -> pd.DataFrame:
    """The run table of every finished run; ``runs.parquet`` once all ``planned_keys`` are done."""
    runs = store.run_table(update_index=True)
    if store.finished_keys() >= set(planned_keys):
        store.write_run_table(runs)
    return runs


#: Seconds a run waits for another process's measurement on the same GPU.
GPU_LOCK_WAIT_S = 600.0


@holds_campaign_lock
def run_campaign(spec: CampaignSpec | Mapping, out_dir: str | os.PathLike, *,
                 runner: Runner | None = None, progress: bool = True,
                 max_runs: int | None = None, cluster=None, per_gpu: bool = False,
                 workers: int | None = None) -> pd.DataFrame:
    """Run (or resume) a campaign into ``out_dir``; return the run table of the finished runs.

    Parameters
    ----------
    spec : CampaignSpec or dict
        What to measure.
    out_dir : path
        Output folder (created; an existing one is resumed).
    runner : Runner, optional
        Use this runner (and its device) instead of opening ``spec.device``.
    progress : bool, default=True
        Show a tqdm progress bar.
    max_runs : int, optional
        Stop after this many new runs (the rest is left for a resume).
    cluster : str or dask Client or Cluster, optional
        Run on a Dask cluster, one worker per GPU: ``"local"``,
        ``"local-cuda"``, ``"tcp://host:port"``, a ``Client`` or a cluster
        object (:func:`powermodels.integrations.dask_cluster.run_on_cluster`).
        None (default): serially in this process.
    per_gpu : bool, default=False
        With ``cluster``: every run on every GPU of the cluster (to compare boards).
    workers : int, optional
        With ``cluster="local"``: number of workers (default: CPU cores).
    lock_wait_s : float, default=0
        How long to wait for another campaign holding ``out_dir``
        (:func:`~powermodels.harness.exclusive.campaign_lock`); then a
        ``LockBusy`` error names it.
    """
    if not isinstance(spec, CampaignSpec):
        spec = CampaignSpec.from_dict(spec)
    spec.validate()
    if cluster is not None:
        if runner is not None:
            raise ValueError("run_campaign: pass a runner or a cluster, not both "
                             "(on a cluster every worker opens its own device)")
        from ..integrations.dask_cluster import run_on_cluster

        return run_on_cluster(spec, out_dir, cluster, per_gpu=per_gpu, progress=progress,
                              max_runs=max_runs, workers=workers)
    if per_gpu:
        raise ValueError("run_campaign: per_gpu needs a cluster (cluster='local-cuda' or an address)")
    store = CampaignStore(out_dir, create=True)
    own_runner = runner is None
    if own_runner:
        runner = make_runner(spec.device, device_kwargs=dict(spec.device_kwargs))
    try:
        meta_path = store.out / "metadata.json"
        if not meta_path.exists():
            atomic_json(campaign_metadata(spec, device_metadata(runner.device)), meta_path, default=str)
        protocol = make_protocol(spec.protocol, **spec.protocol_params)
        todo_all = plan(spec)
        done = store.finished_keys()
        todo = [r for r in todo_all if r.key not in done]
        initial = len(todo_all) - len(todo)
        if max_runs is not None:
            todo = todo[: int(max_runs)]
        bar = progress_bar(progress, total=len(todo_all), initial=initial, desc=f"campaign {spec.protocol}")
        by_name = {w.name: w for w, _ in spec.entries()}
        try:
            for planned in todo:
                row, trace = measure_planned(runner, protocol, planned, spec, by_name)
                store.write_run(planned.key, row, trace)
                del trace  # hold one run at a time
                bar.update(1)
        finally:
            bar.close()
        return finish_campaign(store, [r.key for r in todo_all])
    finally:
        if own_runner:
            runner.close()


def load_runs(out_dir: str | os.PathLike) -> pd.DataFrame:
    """The run table of a campaign's finished runs (no trace is read); sorted by run key."""
    return CampaignStore(out_dir).run_table()


def load_campaign(out_dir: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every finished run of a campaign: (run table, trace table).

    Only traces whose row exists are returned (a half-finished run's trace is
    left out), so the two tables always match. The trace table holds every
    trace in memory; for large campaigns read the run table with
    :func:`load_runs` and the traces one at a time
    (:meth:`~powermodels.harness.campaign_store.CampaignStore.iter_traces`) or
    as a dataset (``pd.read_parquet(out_dir / "traces", filters=...)``).
    """
    store = CampaignStore(out_dir)
    return store.run_table(), store.trace_table()
