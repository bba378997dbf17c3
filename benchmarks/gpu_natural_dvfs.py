"""Natural-DVFS calibration data on a real GPU (issue 13), changing no setting — one device call.

The bf16 tensor-core pressure GEMM holds a Hopper GPU at its software power cap, so the SM
clock moves (1110–1980 MHz on the lent H100) without any clock lock. This script runs
``powermodels.workflows.calibrate.calibrate`` in its natural-DVFS mode on the registry kernels
and on the pressure GEMM itself (which caps the GPU by itself), writes the per-launch and
per-update tables, the report and a provenance file, and prints the identifiability and the
held-out clock-band validation (RationalTimeModel and DVFSTimeModel time MAPE, energy at the
band). Every NVML setter is replaced by a function that raises before the device is opened
(``benchmarks/_readonly_nvml.py``).

Usage (device machine; results under $OUT, then copy to datasets/<gpu>/ with the README)::

    PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py --out "$OUT/natural_dvfs"
    PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py --device simulated --simulated-power-limit 400 --out /tmp/nd
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"))
    parser.add_argument("--simulated-power-limit", type=float, default=None)
    parser.add_argument("--cycles", type=int, default=8)
    parser.add_argument("--burst-s", type=float, default=0.5)
    parser.add_argument("--pressure-s", type=float, default=1.0)
    args = parser.parse_args(argv)

    from powermodels.devices import nvml_available, open_device
    from powermodels.harness.workloads.pressure import pressure_gemm
    from powermodels.reporting import markdown_table
    from powermodels.workflows.calibrate import calibrate, save
    from powermodels.workflows.calibration_report import write_report

    kind = args.device
    if kind == "auto":
        kind = "nvml" if nvml_available(0) else "simulated"
    if kind == "nvml":
        from _readonly_nvml import forbid_nvml_setters

        forbid_nvml_setters()  # every NVML setter raises from here on
        device = open_device("nvml")
    else:
        from powermodels.devices.physics import GPUPhysics

        physics = GPUPhysics(power_limit_w=args.simulated_power_limit) if args.simulated_power_limit else None
        device = open_device("simulated", physics=physics)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    workloads = ["fp32", "sgemm", "stream_triad", pressure_gemm()]
    try:
        run = calibrate(workloads, device, cycles=args.cycles, burst_s=args.burst_s, pressure_s=args.pressure_s,
                        progress=lambda line: print(line, flush=True))
    finally:
        device.close()
    save(run, out / "calibration.pmcal")
    write_report(run, out)
    smi = ""
    if kind == "nvml":
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,power.limit,clocks.max.sm",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    (out / "provenance.json").write_text(json.dumps({
        **run.device, "date": started, "nvidia_smi": smi,
        "command": "PYTHONPATH=src python benchmarks/gpu_natural_dvfs.py " + " ".join(argv or sys.argv[1:]),
        "settings_changed": False}, indent=2))
    cal = run.calibration
    print(markdown_table(cal.identifiability.drop(columns=["reason"]), float_format=".0f"))
    if len(cal.validation):
        print(markdown_table(cal.validation, float_format=".3g"))
    if cal.temperature is not None:
        print(f"alpha = {cal.temperature.alpha_w_per_c_:.3f} W/°C, r = {cal.temperature.correlation_:.3f}")
    print(f"launch clocks: {run.launches['sm_clock_mhz'].min():.0f}–{run.launches['sm_clock_mhz'].max():.0f} MHz "
          f"over {len(run.launches)} launches; results in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
