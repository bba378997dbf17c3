"""``powermodels dvfs-features``: PTX and ncu runtime features of workloads for the DVFS predictor (DSO).

Examples
--------
The H200 dataset's set (registry kernels, microbenchmarks, held-out workloads)::

    powermodels dvfs-features --out feats

Your own code (a CuPy function, a CUDA source for the PTX features)::

    powermodels dvfs-features --out feats --workloads my_app.py:step --source my_kernel.cu

PTX features only (no GPU; nvcc or CuPy's NVRTC)::

    powermodels dvfs-features --out feats --ptx-only --source kernels/fp32.cu
"""

from __future__ import annotations

from . import COMMANDS

NAME = "dvfs-features"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--workloads", default="registry,microbench,heldout",
                        help="comma-separated specs: registry, microbench, heldout, fresh, registry "
                             "kernel names, module:function, file.py:name")
    parser.add_argument("--source", action="append", default=None,
                        help="CUDA source for the PTX features (repeatable; default: kernels/**/*.cu)")
    parser.add_argument("--ptx-only", action="store_true", help="skip the ncu runtime pass")
    parser.add_argument("--ncu", default="ncu", help="ncu executable")
    parser.add_argument("--timeout", type=float, default=480, help="seconds for the ncu pass")


def run(args) -> int:
    from pathlib import Path

    from ..workflows.dvfs_features import collect_dvfs_features
    from ._common import out_folder

    out_folder(args.out)

    if args.source:
        missing = [s for s in args.source if not Path(s).is_file()]
        if missing:
            raise FileNotFoundError(f"--source: {', '.join(missing)} does not exist")
    specs = [s.strip() for s in args.workloads.split(",") if s.strip()]
    meta = collect_dvfs_features(args.out, specs, sources=args.source, ncu=args.ncu,
                                 timeout=args.timeout, runtime=not args.ptx_only)
    for p in meta["problems"]:
        print(f"  problem: {p[:300]}")
    nothing = [what for what, failed in (
        ("no PTX features", bool(args.source) and not meta["ptx_kernels"]),
        ("no runtime features", not args.ptx_only and not (Path(args.out) / "runtime_features.csv").is_file()))
        if failed]
    if nothing:  # what was asked for was not collected at all: say so in the exit status too
        import sys

        print(f"powermodels dvfs-features: error: {' and '.join(nothing)} collected "
              f"({len(meta['problems'])} problem(s) above; all in {Path(args.out) / 'meta.json'})",
              file=sys.stderr)
        return 1
    return 0
