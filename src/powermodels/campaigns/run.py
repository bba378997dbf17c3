"""Running a campaign: workloads × configurations × repeats (× clock settings) → run table + traces.

A campaign is resumable and crash-safe. Every finished run is appended to
the campaign folder (:class:`~powermodels.campaigns.store.CampaignStore`)
as two files, each written to a temporary name and renamed into place
(``os.replace`` is atomic), trace first and run row last — the row is the
commit marker:

.. code-block:: text

    out/
      metadata.json           device name, driver, settings, protocol, the spec
      runs/<key>.json         one run-table row per finished run (commit marker)
      traces/<key>.parquet    its trace table (traces/ reads as one parquet dataset)
      runs.parquet            the whole run table, written once every run is finished

``key`` is a hash of (kernel, config, clock setting, repeat, protocol, device
and its settings, protocol parameters). A folder is resumed only with the
spec that measured it (:mod:`.resume`; ``restart=True`` sets its runs aside
and starts anew). An unreadable row file is moved to ``runs/_corrupt/`` with
a warning and its run measured again. On restart,
runs whose row exists are skipped — found from the file names alone, so a
resume costs the same however large the campaign; a run killed half-way
(trace without row) is measured again and its trace overwritten, so a
campaign killed at any instant — even by ``SIGKILL`` — resumes without losing
or duplicating rows. Nothing holds every trace: the loop keeps one run at a
time and the run table is built from the small row files. Folders written by
older versions (one-row ``runs/<key>.parquet`` parts, ``traces.parquet``)
still load and resume.

Where the runs are measured is the executor's job (:mod:`.executor`):
:class:`SerialExecutor` here, one run at a time; ``DaskExecutor``
(:mod:`powermodels.integrations.dask_cluster`) as tasks on a Dask cluster, one
worker per GPU. Both write through the same store, so a campaign resumes the
same way serially or on a cluster.

Clock settings are applied only through ``device.settings_guard(...,
allow_changes=True)`` when the spec opts in (``allow_clock_changes``); the
guard restores the previous state afterwards.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import asdict

import pandas as pd

from .. import schema
from ..devices.base import Device
from ..measuring.exclusive import gpu_lock, holds_campaign_lock, measured_alone
from ..measuring.protocols import make_protocol
from ..measuring.runner import Runner, make_runner
from .executor import CampaignExecutor
from .plan import RUN_KEY_VERSION, CampaignSpec, PlannedRun
from .resume import check_resume, folder_plan
from .store import CampaignStore, atomic_json, existing_campaign_folder

__all__ = [
    "GPU_LOCK_WAIT_S",
    "SerialExecutor",
    "campaign_metadata",
    "device_metadata",
    "finish_campaign",
    "finished_keys",
    "load_campaign",
    "load_runs",
    "measure_planned",
    "progress_bar",
    "run_campaign",
]


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
        "run_key_version": RUN_KEY_VERSION,
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


class SerialExecutor(CampaignExecutor):
    """Measure the runs one after another in this process, on one runner.

    Parameters
    ----------
    runner : Runner, optional
        Use this runner (and its device); by default one is opened for the
        spec's ``device`` and closed at the end.
    """

    def __init__(self, runner: Runner | None = None):
        self.runner = runner

    def run(self, spec: CampaignSpec, out_dir: str | os.PathLike, *, progress: bool = True,
            max_runs: int | None = None) -> pd.DataFrame:
        store = CampaignStore(out_dir, create=True)
        runner = self.runner
        own_runner = runner is None
        if own_runner:
            runner = make_runner(spec.device, device_kwargs=dict(spec.device_kwargs))
        try:
            meta_path = store.out / "metadata.json"
            if not meta_path.exists():
                atomic_json(campaign_metadata(spec, device_metadata(runner.device)), meta_path, default=str)
            protocol = make_protocol(spec.protocol, **spec.protocol_params)
            todo_all = folder_plan(spec, store.out)
            store.run_table()  # sets unreadable row files aside (warning): those runs are measured again
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


@holds_campaign_lock
def run_campaign(spec: CampaignSpec | Mapping, out_dir: str | os.PathLike, *,
                 runner: Runner | None = None, progress: bool = True,
                 max_runs: int | None = None, executor: CampaignExecutor | None = None,
                 restart: bool = False) -> pd.DataFrame:
    """Run (or resume) a campaign into ``out_dir``; return the run table of the finished runs.

    Parameters
    ----------
    spec : CampaignSpec or dict
        What to measure.
    out_dir : path
        Output folder (created; an existing one is resumed).
    runner : Runner, optional
        Use this runner (and its device) instead of opening ``spec.device``
        (the default :class:`SerialExecutor` only).
    progress : bool, default=True
        Show a tqdm progress bar.
    max_runs : int, optional
        Stop after this many new runs (the rest is left for a resume).
    executor : CampaignExecutor, optional
        Where the runs are measured: by default :class:`SerialExecutor`
        (this process); e.g.
        ``DaskExecutor("local-cuda")`` (:mod:`powermodels.integrations.dask_cluster`)
        for a Dask cluster, one worker per GPU.
    restart : bool, default=False
        The folder holds runs of another spec: move them into
        ``previous-<time>/`` and start anew, instead of refusing
        (:func:`~powermodels.campaigns.resume.check_resume`).

    Notes
    -----
    One more keyword, ``lock_wait_s`` (float, default 0), comes from the
    :func:`~powermodels.measuring.exclusive.holds_campaign_lock` decorator: how
    long to wait for another campaign holding ``out_dir``
    (:func:`~powermodels.measuring.exclusive.campaign_lock`); then a
    ``LockBusy`` error names it.

    Runs measured on several boards: the spread of the configurations seen on
    more than one is recorded in ``metadata.json`` (``"boards"``) and warned
    about when it exceeds 2σ of the measurement; a spec's ``board_probe`` is
    measured on every board first and the per-board normalisation recorded
    (``"board_normalisation"``; :mod:`powermodels.campaigns.boards`).
    """
    if not isinstance(spec, CampaignSpec):
        spec = CampaignSpec.from_dict(spec)
    spec.validate()
    if executor is None:
        executor = SerialExecutor(runner)
    elif runner is not None:
        raise ValueError(f"run_campaign: pass a runner or an executor ({type(executor).__name__}), not both "
                         "(an executor opens its own devices)")
    aside = check_resume(spec, out_dir, restart=restart)
    if aside is not None:
        import sys

        print(f"campaign: earlier runs of {out_dir} moved to {aside}", file=sys.stderr)
    from .boards import record_boards, run_board_probe

    normalisation = None
    if spec.board_probe is not None:  # measured on every board first: a folder of its own, resumable
        normalisation = run_board_probe(spec, out_dir, executor, progress=progress)
    runs = executor.run(spec, out_dir, progress=progress, max_runs=max_runs)
    record_boards(out_dir, runs, normalisation)  # several boards: their spread (warned) in metadata.json
    return runs


def load_runs(out_dir: str | os.PathLike) -> pd.DataFrame:
    """The run table of a campaign's finished runs (no trace is read); sorted by run key.

    An existing folder with no finished run gives an empty table; a folder
    that does not exist is a ``FileNotFoundError`` naming it.
    """
    return CampaignStore(existing_campaign_folder(out_dir)).run_table()


def load_campaign(out_dir: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every finished run of a campaign: (run table, trace table).

    Only traces whose row exists are returned (a half-finished run's trace is
    left out), so the two tables always match. The trace table holds every
    trace in memory; for large campaigns read the run table with
    :func:`load_runs` and the traces one at a time
    (:meth:`~powermodels.campaigns.store.CampaignStore.iter_traces`) or
    as a dataset (``pd.read_parquet(out_dir / "traces", filters=...)``).
    A folder that does not exist is a ``FileNotFoundError`` naming it.
    """
    store = CampaignStore(existing_campaign_folder(out_dir))
    return store.run_table(), store.trace_table()
