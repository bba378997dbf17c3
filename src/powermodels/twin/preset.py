"""Twin presets: a simulated GPU's physics, sensor and workloads as a JSON data file with provenance.

A preset is what :func:`~powermodels.twin.fit.fit_twin` identifies from
real recordings and what :func:`~powermodels.twin.replay.replay` runs. The
shipped presets live in ``powermodels/twin/presets/<name>.json`` and load by
name (:func:`load_preset`); any other preset loads from its path.

File format (``format: powermodels-twin-preset``, ``version: 1``)::

    {"name": ..., "physics": {GPUPhysics fields}, "sensor": {SensorPreset fields},
     "ambient_c": ..., "workloads": {name: {SimulatedWorkload fields, "gap_s", "launches_per_batch"}},
     "provenance": {what it was fitted from and how}, "fit": {diagnostics of the fit}}
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from ..devices.physics import GPUPhysics
from ..devices.sensor_emulation import SensorPreset
from ..devices.simulated import SimulatedGPU
from ..devices.simulated_workload import SimulatedWorkload

__all__ = ["CAP_CONTROLLERS", "FORMAT", "PRESET_DIR", "TwinPreset", "TwinWorkload", "load_preset",
           "preset_names", "save_preset", "with_cap_controller"]

FORMAT = "powermodels-twin-preset"
VERSION = 1
#: how the power-cap controller predicts the power (:func:`with_cap_controller`)
CAP_CONTROLLERS = ("preset", "step", "period")
#: where the shipped presets are
PRESET_DIR = Path(__file__).with_name("presets")


@dataclass(frozen=True)
class TwinWorkload:
    """A recorded workload on the twin: what one launch does, and how the host launched it.

    Parameters
    ----------
    workload : SimulatedWorkload
        Time vs clock and activity of one launch.
    gap_s : float
        Host gap between two batches (launch overhead, event sync).
    launches_per_batch : int
        Launches timed together as one batch (one ``launches.parquet`` row).
    """

    workload: SimulatedWorkload
    gap_s: float = 0.0
    launches_per_batch: int = 1

    def to_dict(self) -> dict:
        return {**asdict(self.workload), "gap_s": self.gap_s, "launches_per_batch": self.launches_per_batch}

    @classmethod
    def from_dict(cls, name: str, data: dict) -> "TwinWorkload":
        known = {f.name for f in fields(SimulatedWorkload)}
        extra = set(data) - known - {"gap_s", "launches_per_batch"}
        if extra:
            raise ValueError(f"twin preset: workload {name!r} has unknown field(s) {sorted(extra)}")
        kwargs = {k: v for k, v in data.items() if k in known}
        kwargs["name"] = name
        if kwargs.get("rational") is not None:
            kwargs["rational"] = tuple(kwargs["rational"])
        return cls(SimulatedWorkload(**kwargs), float(data.get("gap_s", 0.0)),
                   int(data.get("launches_per_batch", 1)))


@dataclass(frozen=True)
class TwinPreset:
    """A fitted simulated GPU: physics, sensor, ambient temperature, workloads, provenance.

    Attributes
    ----------
    name : str
    physics : GPUPhysics
    sensor : SensorPreset
    ambient_c : float
        Inlet temperature of the fit (a replay starts from the recording's own
        idle temperature instead; see :func:`~powermodels.twin.replay.replay`).
    workloads : dict of str to TwinWorkload
    provenance : dict
        What the preset was fitted from (files, time windows, commit) or why
        it holds the values it holds.
    fit : dict
        Diagnostics of the fit (residuals, ranges), for the report.
    """

    name: str
    physics: GPUPhysics
    sensor: SensorPreset
    ambient_c: float = 30.0
    workloads: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    fit: dict = field(default_factory=dict)

    def gpu(self, *, seed: int = 0, ambient_c: float | None = None, history_s: float | None = 120.0,
            reference_meter: bool = False, energy_timing: tuple[float, float] | None = None) -> SimulatedGPU:
        """A :class:`SimulatedGPU` with this preset's physics and sensor (``energy_timing``: its counter's
        period and phase, default the sensor's period at a phase drawn from ``seed``)."""
        return SimulatedGPU(preset=self.sensor, physics=self.physics, seed=seed,
                            ambient_c=self.ambient_c if ambient_c is None else ambient_c,
                            history_s=history_s, reference_meter=reference_meter, energy_timing=energy_timing)

    def at_power(self, workload: SimulatedWorkload, power_w: float, *, clock_mhz: float | None = None,
                 temperature_c: float = 50.0) -> SimulatedWorkload:
        """``workload`` with the core activity that draws ``power_w`` on this preset.

        A workload's activity is a number on its GPU's scale: ``h100-sxm``'s
        activity 1 is the bf16 GEMM that holds the 700 W cap (it sets the core
        coefficient), the default simulated GPU's is about a third of that
        power. A twin written for the default GPU (activity 0.95 for a fp32
        GEMM) therefore runs into the cap on a fitted preset while the real
        H100 runs it uncapped (session 5: 609–666 W at 1980 MHz). Given the
        power a real board drew for the workload, its activity on this preset
        solves ``P = A + Bc·a + Bm·m`` at that clock and temperature (DSO eq. 1
        with activity factors and the leakage of thesis §4.2.2, eq. 4.6:
        :meth:`~powermodels.devices.physics.GPUPhysics.power_terms`), clipped to
        ``[0.01, 1]``; its time and memory activity are kept.

        Parameters
        ----------
        workload : SimulatedWorkload
        power_w : float
            Power drawn while it runs (a real measurement, uncapped).
        clock_mhz : float, optional
            SM clock it ran at (default the top clock).
        temperature_c : float, default=50
            Temperature it ran at (leakage).
        """
        if not (math.isfinite(power_w) and power_w > 0):
            raise ValueError(f"at_power: power_w must be a positive number of watts, got {power_w!r}")
        ph = self.physics
        # a real clock reading may stand above the nominal top (1996 MHz): taken as read
        f = ph.sm_clock_max_mhz if clock_mhz is None or not math.isfinite(clock_mhz) or clock_mhz <= 0 \
            else float(clock_mhz)
        a0, bc, bm = (float(x) for x in ph.power_terms(f, ph.mem_clocks_mhz[0], temperature_c))
        activity = min(max((power_w - a0 - bm * workload.mem_activity) / bc, 0.01), 1.0)
        return replace(workload, activity=activity)

    def workload(self, name: str) -> TwinWorkload:
        """The named workload; a ValueError lists the preset's workloads."""
        try:
            return self.workloads[name]
        except KeyError:
            raise ValueError(f"twin preset {self.name!r} has no workload {name!r} "
                             f"(has: {', '.join(sorted(self.workloads)) or 'none'})") from None

    def to_dict(self) -> dict:
        return {
            "format": FORMAT, "version": VERSION, "name": self.name,
            "physics": _plain(asdict(self.physics)), "sensor": _plain(asdict(self.sensor)),
            "ambient_c": self.ambient_c,
            "workloads": {k: _plain(w.to_dict()) for k, w in self.workloads.items()},
            "provenance": _plain(self.provenance), "fit": _plain(self.fit),
        }

    @classmethod
    def from_dict(cls, data: dict, where: str = "twin preset") -> "TwinPreset":
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{where}: not a twin preset (format is not {FORMAT!r})")
        if data.get("version") != VERSION:
            raise ValueError(f"{where}: version {data.get('version')!r}, this powermodels reads {VERSION}")
        missing = [k for k in ("name", "physics", "sensor") if k not in data]
        if missing:
            raise ValueError(f"{where}: lacks key(s) {', '.join(missing)}")
        try:
            phys = dict(data["physics"])
            phys["mem_clocks_mhz"] = tuple(phys.get("mem_clocks_mhz", GPUPhysics.mem_clocks_mhz))
            phys["thermal_poles"] = tuple(tuple(p) for p in phys.get("thermal_poles", ()))
            physics = GPUPhysics(**phys)
            sensor = SensorPreset(**data["sensor"])
            workloads = {k: TwinWorkload.from_dict(k, v) for k, v in data.get("workloads", {}).items()}
        except TypeError as err:  # an unknown or missing field of a dataclass
            raise ValueError(f"{where}: {err}") from None
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        return cls(str(data["name"]), physics, sensor, float(data.get("ambient_c", 30.0)), workloads,
                   dict(data.get("provenance", {})), dict(data.get("fit", {})))


def _plain(value):
    """JSON-ready: tuples as lists, numpy scalars as numbers, NaN as None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def preset_names() -> list[str]:
    """Names of the shipped presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.json"))


def load_preset(name_or_path) -> TwinPreset:
    """A shipped preset by name (``"h100-sxm"``), or a preset file by path.

    Raises
    ------
    ValueError
        Unknown name (the shipped names listed), unreadable file, or a file
        that is not a valid preset (the bad field named).
    """
    if isinstance(name_or_path, TwinPreset):
        return name_or_path
    text = str(name_or_path)
    path = Path(text)
    if not path.suffix and not path.exists():
        path = PRESET_DIR / f"{text}.json"
        if not path.is_file():
            raise ValueError(f"unknown twin preset {text!r} (shipped: {', '.join(preset_names())}; "
                             "or give a preset file's path)")
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"twin preset {path}: cannot be read ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"twin preset {path}: not JSON ({err.msg} at line {err.lineno})") from None
    return TwinPreset.from_dict(data, where=f"twin preset {path}")


def save_preset(preset: TwinPreset, path) -> Path:
    """Write ``preset`` as JSON (to a temporary name, flushed to disk, then renamed); returns the path.

    The flush before the rename means a crash leaves the old file or the whole new one, never a
    renamed file whose contents had not reached the disk.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(preset.to_dict(), indent=1) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    return path


def with_cap_controller(preset: TwinPreset, controller: str) -> TwinPreset:
    """``preset`` with its power-cap controller acting per control step or per clock period.

    Parameters
    ----------
    preset : TwinPreset
        The preset.
    controller : {"preset", "step", "period"}
        ``"preset"``: as the preset says; ``"step"``: the clock is set on each
        1 ms step's power (``GPUPhysics.cap_on_period=False``, the fitted
        presets' controller); ``"period"``: once per the preset's own clock
        period, on the mean power over it (``cap_on_period=True``: a mix of
        loads faster than the period settles at the cap, as the real boards'
        ladder does; docs/twin.md).

    Returns
    -------
    TwinPreset
        The preset, changed only in ``physics.cap_on_period``.
    """
    if controller not in CAP_CONTROLLERS:
        raise ValueError(f"cap controller must be one of {', '.join(CAP_CONTROLLERS)}, got {controller!r}")
    if controller == "preset":
        return preset
    return replace(preset, physics=replace(preset.physics, cap_on_period=controller == "period"))
