"""Campaigns: kernels × configurations × repeats (× clock settings) → run table + trace table.

A campaign is resumable and crash-safe. Every finished run is written as its
own pair of parquet parts, each written to a temporary name and renamed into
place (``os.replace`` is atomic), trace first and run row last — the run part
is the commit marker:

.. code-block:: text

    out/
      metadata.json           device name, driver, settings, protocol, the spec
      runs/<key>.parquet      one run-table row per finished run
      traces/<key>.parquet    its trace table
      runs.parquet            consolidated run table (rewritten at the end)
      traces.parquet          consolidated trace table (rewritten at the end)

``key`` is a hash of (kernel, config, clock setting, repeat). On restart,
runs whose run part exists are skipped; a run killed half-way (trace part
without run part) is measured again and its trace part overwritten, so a
campaign killed at any instant — even by ``SIGKILL`` — resumes without losing
or duplicating rows.

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
import random
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from .. import schema
from ..devices.base import Device
from . import workloads
from .protocols import make_protocol
from .runner import Runner, make_runner

__all__ = [
    "CampaignSpec",
    "load_campaign",
    "load_spec",
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
    protocol : str, default="continuous"
        Protocol name (:data:`powermodels.harness.protocols.PROTOCOLS`).
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
    """

    kernels: dict = field(default_factory=lambda: {"fp32": "default"})
    protocol: str = "continuous"
    protocol_params: dict = field(default_factory=dict)
    repeats: int = 3
    sm_clocks_mhz: list | None = None
    allow_clock_changes: bool = False
    device: str = "auto"
    device_kwargs: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping) -> CampaignSpec:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"campaign spec: unknown key(s) {sorted(unknown)}; known: {sorted(known)}")
        spec = cls(**dict(data))
        spec.validate()
        return spec

    def validate(self) -> None:
        if not isinstance(self.kernels, Mapping) or not self.kernels:
            raise ValueError("campaign spec: 'kernels' must be a non-empty mapping of kernel -> configs")
        for name in self.kernels:
            workloads.get_kernel(name)
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
    return CampaignSpec.from_dict(data)


def _configs(kernel: str, what) -> list[dict]:
    if what is None or what == "default":
        return [workloads.validate_config(kernel, {})]
    if what == "all":
        return workloads.search_space(kernel)
    if isinstance(what, Mapping) and "sample" in what:
        space = workloads.search_space(kernel)
        k = min(int(what["sample"]), len(space))
        return random.Random(int(what.get("seed", 0))).sample(space, k)
    if isinstance(what, (list, tuple)):
        return [workloads.validate_config(kernel, workloads.parse_config(kernel, c)) for c in what]
    raise ValueError(f"campaign spec: configs of {kernel!r} must be 'default', 'all', a list or {{'sample': n}}")


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
    for clock in spec.sm_clocks_mhz or [None]:
        for kernel, what in spec.kernels.items():
            for config in _configs(kernel, what):
                cid = workloads.config_id(kernel, config)
                for repeat in range(int(spec.repeats)):
                    text = f"{kernel}|{cid}|{clock}|{repeat}|{spec.protocol}"
                    key = hashlib.sha1(text.encode()).hexdigest()[:20]
                    runs.append(PlannedRun(key, kernel, config, repeat, clock))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError("campaign spec: duplicate runs (the same config listed twice)")
    return runs


def _atomic_parquet(df: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.to_parquet(tmp, index=False)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _atomic_json(data: dict, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    os.replace(tmp, path)


def _metadata(spec: CampaignSpec, device: Device) -> dict:
    info = device.info
    try:
        settings = asdict(device.current_settings())
    except Exception as err:  # metadata must not stop a campaign
        settings = {"error": repr(err)}
    try:
        limits = device.power_limits_w()
    except Exception:
        limits = None
    from .. import __version__

    return {
        "powermodels_version": __version__,
        "device": {"name": info.name, "kind": info.kind, "index": info.index, "uuid": info.uuid,
                   "driver": info.driver, "extra": info.extra},
        "settings_at_start": settings,
        "power_limits_w": limits,
        "spec": asdict(spec),
        "started_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def finished_keys(out_dir: str | os.PathLike) -> set[str]:
    """Keys of the runs whose run part exists."""
    runs = Path(out_dir) / "runs"
    return {p.stem for p in runs.glob("*.parquet")} if runs.is_dir() else set()


@contextlib.contextmanager
def _clock(device: Device, mhz, allow: bool) -> Iterator[None]:
    if mhz is None:
        yield
        return
    with device.settings_guard(sm_clock_mhz=float(mhz), allow_changes=allow):
        yield


def run_campaign(spec: CampaignSpec | Mapping, out_dir: str | os.PathLike, *,
                 runner: Runner | None = None, progress: bool = True,
                 max_runs: int | None = None) -> pd.DataFrame:
    """Run (or resume) a campaign into ``out_dir``; return the consolidated run table.

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
    """
    if not isinstance(spec, CampaignSpec):
        spec = CampaignSpec.from_dict(spec)
    spec.validate()
    out = Path(out_dir)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    (out / "traces").mkdir(parents=True, exist_ok=True)
    for stale in out.rglob(".*.tmp"):  # a write cut short by a kill: never renamed, never counted
        stale.unlink(missing_ok=True)
    own_runner = runner is None
    if own_runner:
        runner = make_runner(spec.device, device_kwargs=dict(spec.device_kwargs))
    try:
        meta_path = out / "metadata.json"
        if not meta_path.exists():
            _atomic_json(_metadata(spec, runner.device), meta_path)
        protocol = make_protocol(spec.protocol, **spec.protocol_params)
        todo_all = plan(spec)
        done = finished_keys(out)
        todo = [r for r in todo_all if r.key not in done]
        if max_runs is not None:
            todo = todo[: int(max_runs)]
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo_all), initial=len(todo_all) - len([r for r in todo_all if r.key not in done]),
                   disable=not progress, desc=f"campaign {spec.protocol}", unit="run")
        try:
            for planned in todo:
                with _clock(runner.device, planned.sm_clock_mhz, spec.allow_clock_changes):
                    m = protocol.measure(runner, planned.kernel, planned.config,
                                         repeat=planned.repeat, run_id=planned.key)
                row = dict(m.row)
                row[schema.SM_CLOCK_REQUESTED_MHZ] = (
                    float(planned.sm_clock_mhz) if planned.sm_clock_mhz is not None else float("nan")
                )
                trace = m.trace.copy()
                trace[schema.RUN_ID] = planned.key
                _atomic_parquet(trace, out / "traces" / f"{planned.key}.parquet")
                _atomic_parquet(pd.DataFrame([row]), out / "runs" / f"{planned.key}.parquet")
                bar.update(1)
        finally:
            bar.close()
        runs, traces = load_campaign(out)
        if finished_keys(out) >= {r.key for r in todo_all}:
            _atomic_parquet(runs, out / "runs.parquet")
            _atomic_parquet(traces, out / "traces.parquet")
        return runs
    finally:
        if own_runner:
            runner.close()


def load_campaign(out_dir: str | os.PathLike) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read every finished part of a campaign: (run table, trace table).

    Only traces whose run part exists are returned (a half-finished run's
    trace is left out), so the two tables always match.
    """
    out = Path(out_dir)
    keys = sorted(finished_keys(out))
    if not keys:
        return pd.DataFrame(), pd.DataFrame()
    runs = pd.concat([pd.read_parquet(out / "runs" / f"{k}.parquet") for k in keys], ignore_index=True)
    parts = [out / "traces" / f"{k}.parquet" for k in keys]
    traces = pd.concat([pd.read_parquet(p) for p in parts if p.exists()], ignore_index=True)
    return runs, traces
