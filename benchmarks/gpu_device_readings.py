"""Read every quantity of the NVML device once and time each read path.

Opens ``open_device("auto")`` (the real GPU through NVML when there is one),
prints what it reads — power (instant field 186, average field 185, power
usage), energy counter, temperature, clocks, throttle reasons, supported
clocks, power limits, name/uuid/driver — then times, call by call, ``read()``,
``read_energy_j()`` and each underlying NVML call (median / p90 / max over
``--calls`` calls; ``--energy-calls`` for the slow energy counter), and how
often the power fields and the energy counter change at idle.

It only reads. Every NVML setter (``nvmlDeviceSet*``, ``nvmlDeviceReset*``,
``nvmlDeviceClear*``) is replaced by a function that raises before the device
is opened, so this script cannot change the GPU's settings.

Usage::

    PYTHONPATH=src python benchmarks/gpu_device_readings.py [--out PATH.md]

Writes a markdown table to ``--out`` (default ``$OUT/gpu_device_readings.md``
when ``$OUT`` is set, else ``benchmarks/results/gpu_device_readings.md``) and
the raw numbers beside it as JSON.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from _readonly_nvml import forbid_nvml_setters

REPO = Path(__file__).resolve().parents[1]


def _import_devices():
    """``powermodels.devices``, even where the package's other dependencies are missing."""
    try:
        from powermodels import devices

        return devices
    except ImportError as err:  # e.g. a GPU image without sklearn/pandas
        import types

        print(f"note: importing powermodels failed ({err}); loading powermodels.devices alone")
        for name in [m for m in sys.modules if m == "powermodels" or m.startswith("powermodels.")]:
            del sys.modules[name]
        package = types.ModuleType("powermodels")
        package.__path__ = [str(REPO / "src" / "powermodels")]
        sys.modules["powermodels"] = package
        import powermodels.devices as devices

        return devices


def time_calls(function, n: int) -> dict:
    """Per-call latency of ``function()`` over ``n`` calls, in microseconds."""
    function()  # warm-up
    times = []
    clock = time.perf_counter_ns
    for _ in range(n):
        t0 = clock()
        function()
        times.append(clock() - t0)
    times.sort()
    us = [t / 1000.0 for t in times]
    return {
        "n": n,
        "median_us": statistics.median(us),
        "p90_us": us[min(n - 1, math.ceil(0.9 * n) - 1)],
        "max_us": us[-1],
    }


def changes(read, duration_s: float) -> dict:
    """Poll ``read()`` for ``duration_s``; count value changes and their spacing."""
    t_end = time.perf_counter() + duration_s
    last, last_change, gaps, polls = read(), None, [], 0
    while time.perf_counter() < t_end:
        value = read()
        polls += 1
        if value != last and not (isinstance(value, float) and math.isnan(value)):
            now = time.perf_counter()
            if last_change is not None:
                gaps.append(now - last_change)
            last_change, last = now, value
    return {
        "polls": polls,
        "changes": len(gaps) + (last_change is not None),
        "median_gap_ms": 1000 * statistics.median(gaps) if gaps else math.nan,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default_dir = (
        Path(os.environ["OUT"]) if os.environ.get("OUT") else REPO / "benchmarks" / "results"
    )
    parser.add_argument("--out", type=Path, default=default_dir / "gpu_device_readings.md")
    parser.add_argument("--calls", type=int, default=1000, help="calls per fast read path")
    parser.add_argument("--energy-calls", type=int, default=100, help="calls of the energy counter")
    parser.add_argument(
        "--poll-s", type=float, default=1.5, help="seconds of polling per update check"
    )
    args = parser.parse_args(argv)
    for name in ("calls", "energy_calls"):
        if getattr(args, name) < 2:
            parser.error(f"--{name.replace('_', '-')} must be at least 2")

    blocked = forbid_nvml_setters()
    devices = _import_devices()
    device = devices.open_device("auto")
    info = device.info
    result: dict = {
        "date_utc": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S"),
        "host": platform.node(),
        "python": platform.python_version(),
        "device": {
            "name": info.name,
            "kind": info.kind,
            "index": info.index,
            "uuid": info.uuid,
            "driver": info.driver,
        },
        "setters_blocked": len(blocked),
        "poll_s": args.poll_s,
    }
    try:
        from importlib.metadata import version

        result["nvidia_ml_py"] = version("nvidia-ml-py")
    except Exception:
        result["nvidia_ml_py"] = "not installed as nvidia-ml-py"

    # ---- what it reads
    reading = device.read()
    limits = device.power_limits_w()
    clocks = device.supported_clocks()
    result["reading"] = reading.as_dict()
    result["energy_counter_j"] = device.read_energy_j()
    result["power_limits_w"] = {"min": limits[0], "max": limits[1], "current": limits[2]}
    if hasattr(device, "default_power_limit_w"):
        result["power_limits_w"]["default"] = device.default_power_limit_w()
        result["power_limits_w"]["enforced"] = device.enforced_power_limit_w()
    result["current_settings"] = vars(device.current_settings())
    result["supported_clocks"] = {
        f"{mem:g}": {
            "count": len(sm),
            "max_mhz": max(sm) if sm else math.nan,
            "min_mhz": min(sm) if sm else math.nan,
            "steps_mhz": sorted({round(a - b, 3) for a, b in itertools.pairwise(sm)}),
        }
        for mem, sm in clocks.items()
    }

    # ---- latency
    n, ne = args.calls, args.energy_calls
    latency = {
        "perf_counter_ns() alone": time_calls(lambda: None, n),
        "device.read()": time_calls(device.read, n),
        "device.read_energy_j()": time_calls(device.read_energy_j, ne),
    }
    if info.kind == "nvml":
        import pynvml as nvml

        h = device._handle
        fields = [nvml.NVML_FI_DEV_POWER_INSTANT, nvml.NVML_FI_DEV_POWER_AVERAGE]
        raw = nvml.nvmlDeviceGetFieldValues(h, fields)
        result["power_fields_raw"] = [
            {
                "field": v.fieldId,
                "nvmlReturn": v.nvmlReturn,
                "valueType": v.valueType,
                "uiVal": v.value.uiVal,
                "timestamp_us": v.timestamp,
                "latencyUsec": v.latencyUsec,
            }
            for v in raw
        ]
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or (
            nvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        latency.update(
            {
                "nvmlDeviceGetFieldValues([186, 185])": time_calls(
                    lambda: nvml.nvmlDeviceGetFieldValues(h, fields), n
                ),
                "nvmlDeviceGetPowerUsage": time_calls(lambda: nvml.nvmlDeviceGetPowerUsage(h), n),
                "nvmlDeviceGetTemperature(GPU)": time_calls(
                    lambda: nvml.nvmlDeviceGetTemperature(h, nvml.NVML_TEMPERATURE_GPU), n
                ),
                "nvmlDeviceGetClockInfo(SM)": time_calls(
                    lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_SM), n
                ),
                "nvmlDeviceGetClockInfo(MEM)": time_calls(
                    lambda: nvml.nvmlDeviceGetClockInfo(h, nvml.NVML_CLOCK_MEM), n
                ),
                f"{reasons.__name__}": time_calls(lambda: reasons(h), n),
                "nvmlDeviceGetTotalEnergyConsumption": time_calls(
                    lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(h), ne
                ),
                "nvmlDeviceGetPowerManagementLimit": time_calls(
                    lambda: nvml.nvmlDeviceGetPowerManagementLimit(h), n
                ),
                "device.supported_clocks()": time_calls(device.supported_clocks, 5),
            }
        )

        def field(field_id):
            return lambda: nvml.nvmlDeviceGetFieldValues(h, [field_id])[0].value.uiVal

        # NVML's field timestamps are the query time (a new one every call), so
        # updates are counted as changes of the value itself.
        result["updates_at_idle"] = {
            "field 186 (instant)": changes(field(fields[0]), args.poll_s),
            "field 185 (average)": changes(field(fields[1]), args.poll_s),
            "nvmlDeviceGetPowerUsage": changes(
                lambda: nvml.nvmlDeviceGetPowerUsage(h), args.poll_s
            ),
            "energy counter": changes(device.read_energy_j, args.poll_s),
        }
    result["latency"] = latency
    result["unavailable"] = dict(getattr(device, "unavailable", {}))
    device.close()

    text = to_markdown(result)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    return 0


def _fmt(value) -> str:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else f"{value:.6g}"
    return str(value)


def to_markdown(r: dict) -> str:
    d = r["device"]
    lines = [
        f"# Device readings: {d['name']} ({d['kind']})",
        "",
        f"Driver {d['driver'] or 'n/a'}, uuid `{d['uuid'] or 'n/a'}`, nvidia-ml-py {r['nvidia_ml_py']}, "
        f"Python {r['python']}, {r['date_utc']} UTC. Read-only: {r['setters_blocked']} NVML setters "
        "blocked before opening the device.",
        "",
        "## One reading",
        "",
        "| quantity | value |",
        "| --- | --- |",
    ]
    for key, value in r["reading"].items():
        lines.append(f"| {key} | {_fmt(value) if key != 'throttle_reasons' else hex(value)} |")
    lines.append(f"| energy_counter_j | {_fmt(r['energy_counter_j'])} |")
    for key, value in r["power_limits_w"].items():
        lines.append(f"| power limit {key} (W) | {_fmt(value)} |")
    lines.append(f"| current_settings() | {r['current_settings']} |")
    for mem, s in r["supported_clocks"].items():
        lines.append(
            f"| supported SM clocks at memory {mem} MHz | {s['count']} clocks, "
            f"{_fmt(s['min_mhz'])}–{_fmt(s['max_mhz'])} MHz, steps {s['steps_mhz']} MHz |"
        )
    if not r["supported_clocks"]:
        lines.append("| supported clocks | none reported |")
    lines.append(f"| unavailable reads | {r['unavailable'] or 'none'} |")
    if "power_fields_raw" in r:
        for f in r["power_fields_raw"]:
            lines.append(
                f"| raw field {f['field']} | return {f['nvmlReturn']}, valueType {f['valueType']}, "
                f"value {f['uiVal']} (mW), latencyUsec {f['latencyUsec']} |"
            )
    lines += [
        "",
        "## Latency per call (host, `time.perf_counter_ns` around each call)",
        "",
        "| call | n | median (µs) | p90 (µs) | max (µs) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, t in r["latency"].items():
        lines.append(
            f"| {name} | {t['n']} | {t['median_us']:.2f} | {t['p90_us']:.2f} | {t['max_us']:.2f} |"
        )
    if "updates_at_idle" in r:
        lines += [
            "",
            f"## How often the readings change (idle GPU, {r['poll_s']} s of polling each)",
            "",
            "| reading | polls | value changes | median time between changes (ms) |",
            "| --- | ---: | ---: | ---: |",
        ]
        for name, u in r["updates_at_idle"].items():
            lines.append(f"| {name} | {u['polls']} | {u['changes']} | {_fmt(u['median_gap_ms'])} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
