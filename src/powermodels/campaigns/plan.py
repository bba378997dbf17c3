"""What a campaign measures: its spec (JSON/TOML) and the plan of its runs.

:class:`CampaignSpec` lists registry kernels and user workloads with their
configurations, the protocol, repeats and clock settings; :func:`plan` turns
it into :class:`PlannedRun` s, each with a stable key (a hash of workload,
config, clock, repeat and protocol) that names its files in the store, so a
resumed campaign skips exactly the finished runs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .. import workloads
from ..boards import MODELS
from ..measuring.protocols import make_protocol

__all__ = ["RUN_KEY_VERSION", "CampaignSpec", "PlannedRun", "check_board_probe", "load_spec", "plan",
           "run_identity", "spec_changes"]

_PROBE_KEYS = ("kernels", "workloads", "repeats", "model")


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
        Protocol name (:data:`powermodels.measuring.protocols.PROTOCOLS`); the
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
        (:mod:`powermodels.workloads.spec`). A spec with ``workloads``
        and no ``kernels`` measures only those.
    base_dir : str, optional
        Folder the workloads' relative paths are resolved against
        (:func:`load_spec` sets the campaign file's folder).
    exclusive : bool, default=False
        Another compute process on the GPU before or after a run is an error
        (:class:`~powermodels.measuring.exclusive.OtherProcessError`) instead of
        a warning and a count in the row's ``other_gpu_processes``.
    board_probe : dict, optional
        A short workload every board runs before the campaign —
        ``{"kernels": {"sgemm": "default"}, "repeats": 3, "model": "scale"}``
        (``workloads`` too) — to map every board onto one
        (:mod:`powermodels.campaigns.boards`; recorded in ``metadata.json``).
    allow_code_outside : bool, default=False
        Not a key of the spec file (a spec cannot grant it to itself): the
        user's permission for ``callable`` entries to import ``.py`` files
        outside ``base_dir``. A spec is code — read one before running it.
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
    board_probe: dict | None = None
    allow_code_outside: bool = False

    @classmethod
    def from_dict(cls, data: Mapping, *, allow_code_outside: bool = False) -> CampaignSpec:
        """A spec from its table, every field checked strictly (:func:`powermodels.validation.check_campaign_spec`)."""
        from ..devices.sensor_emulation import PRESETS
        from ..measuring.protocols import PROTOCOLS
        from ..validation import check_campaign_spec

        data = check_campaign_spec(data, protocols=PROTOCOLS, presets=list(PRESETS))
        if not data.get("kernels") and not data.get("workloads"):
            # an empty spec ({}) used to run a default fp32 campaign without a word
            raise ValueError("campaign spec: nothing to measure: give 'kernels' (registry kernel -> "
                             "configs, e.g. {\"fp32\": \"default\"}) or 'workloads'"
                             + (f"; it has only {given}" if (given := sorted(set(data) - {"base_dir"}))
                                else "; it is empty"))
        if data.get("workloads") and "kernels" not in data:
            data["kernels"] = {}  # only the user's workloads, not the default fp32
        spec = cls(**data, allow_code_outside=bool(allow_code_outside))
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
            w = workloads.workload_from_entry(entry, self.base_dir,
                                              allow_code_outside=self.allow_code_outside)
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
        from ..validation import MAX_REPEATS, check_integer

        check_integer("campaign spec: 'repeats'", self.repeats, minimum=1, maximum=MAX_REPEATS)
        make_protocol(self.protocol, **self.protocol_params)
        if self.board_probe is not None:
            check_board_probe(self.board_probe)
        clocks = [c for c in (self.sm_clocks_mhz or []) if c is not None]
        if clocks and not self.allow_clock_changes:
            raise ValueError(
                "campaign spec: 'sm_clocks_mhz' needs 'allow_clock_changes': true "
                "(clock changes are opt-in and restored afterwards)"
            )


def check_board_probe(probe) -> None:
    """A one-line ValueError naming what is wrong with a spec's ``board_probe``."""
    if not isinstance(probe, Mapping):
        raise ValueError(f"campaign spec: 'board_probe' must be a table like "
                         f"{{\"kernels\": {{\"sgemm\": \"default\"}}, \"repeats\": 3}}, got {probe!r}")
    unknown = sorted(set(probe) - set(_PROBE_KEYS))
    if unknown:
        raise ValueError(f"campaign spec: board_probe: unknown key(s) {unknown}; known: {list(_PROBE_KEYS)}")
    if not probe.get("kernels") and not probe.get("workloads"):
        raise ValueError("campaign spec: board_probe: nothing to measure: give 'kernels' or 'workloads'")
    repeats = probe.get("repeats", 3)
    if not (isinstance(repeats, int) and not isinstance(repeats, bool) and repeats >= 1):
        raise ValueError(f"campaign spec: board_probe: 'repeats' must be an integer >= 1, got {repeats!r}")
    if probe.get("model", "scale") not in MODELS:
        raise ValueError(f"campaign spec: board_probe: 'model' must be one of {MODELS}, got {probe.get('model')!r}")


def load_spec(path: str | os.PathLike, *, allow_code_outside: bool = False) -> CampaignSpec:
    """Read a campaign spec from JSON or TOML (``tomllib``, or ``tomli`` on Python 3.10).

    A spec is code: its ``callable`` workloads are imported and run, its
    ``program`` workloads executed. Callables from ``.py`` files outside the
    spec's folder need ``allow_code_outside=True``.
    """
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
        from ..validation import check_all_finite

        data = tomllib.loads(path.read_text())
        check_all_finite(f"campaign config {str(path)!r}", data)  # TOML reads nan and inf
    else:
        from ..validation import parse_json

        data = parse_json(path.read_text(), f"campaign config {str(path)!r}")
    if isinstance(data, Mapping) and "base_dir" not in data:
        data = {**data, "base_dir": str(path.resolve().parent)}  # workloads' paths: next to the file
    return CampaignSpec.from_dict(data, allow_code_outside=allow_code_outside)


@dataclass(frozen=True)
class PlannedRun:
    """One run of a campaign."""

    key: str
    kernel: str
    config: dict
    repeat: int
    sm_clock_mhz: float | None


#: 2: the run key also covers the device, its settings (preset, seed) and the protocol's
#: parameters; 1: workload, config, clock, repeat and protocol only (folders before it).
RUN_KEY_VERSION = 2

#: Spec fields that do not change what a run measures (a resume may differ in them).
NOT_IDENTITY = ("base_dir", "exclusive", "allow_code_outside")


def run_identity(spec: CampaignSpec) -> str:
    """What besides workload, config, clock and repeat changes a run's result, as canonical JSON."""
    return json.dumps({"device": spec.device, "device_kwargs": spec.device_kwargs,
                       "protocol_params": spec.protocol_params}, sort_keys=True)


def spec_changes(old: Mapping, new: Mapping) -> list[str]:
    """The fields in which two specs (as dicts) differ, as ``"field: old -> new"`` lines."""
    out = []
    for name in sorted(set(old) | set(new)):
        if name in NOT_IDENTITY:
            continue
        a, b = old.get(name), new.get(name)
        if json.dumps(a, sort_keys=True, default=str) != json.dumps(b, sort_keys=True, default=str):
            if isinstance(a, Mapping) and isinstance(b, Mapping):
                out.extend(f"{name}.{line}" for line in spec_changes(a, b))
            else:
                out.append(f"{name}: {json.dumps(a, default=str)} -> {json.dumps(b, default=str)}")
    return out


def plan(spec: CampaignSpec, key_version: int = RUN_KEY_VERSION) -> list[PlannedRun]:
    """Every run of the campaign, in the order they are measured (clock outermost).

    Each run's key hashes the workload, its configuration, the clock, the
    repeat and the protocol and — from key version 2 on — the device, its
    settings (a simulated GPU's preset and seed) and the protocol's
    parameters: two runs whose results can differ never share a key.
    """
    runs = []
    entries = spec.entries()
    identity = run_identity(spec) if key_version >= 2 else ""
    for clock in spec.sm_clocks_mhz or [None]:
        for workload, what in entries:
            kernel = workload.name
            for config in workloads.select_configs(workload, what):
                cid = workload.config_id(config)
                for repeat in range(int(spec.repeats)):
                    text = f"{kernel}|{cid}|{clock}|{repeat}|{spec.protocol}"
                    if identity:
                        text += f"|{identity}"
                    key = hashlib.sha1(text.encode()).hexdigest()[:20]
                    runs.append(PlannedRun(key, kernel, config, repeat, clock))
    keys = [r.key for r in runs]
    if len(set(keys)) != len(keys):
        raise ValueError("campaign spec: duplicate runs (the same config listed twice)")
    return runs
