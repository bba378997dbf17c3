"""``powermodels calibrate-instructions``: the per-instruction energy table of this GPU (Wattchmen).

Measures the 63 microbenchmarks' steady-state energy, profiles their SASS
opcode counts with ``ncu --clock-control none`` (clocks are never locked),
fits :class:`~powermodels.models.InstructionEnergyModel` and writes a
calibration file that ``powermodels attribute --calibration`` uses. Optional
validation workloads report how well the table predicts whole programs.

Examples
--------
On the GPU (one call; ~6 min for all microbenchmarks and the held-out set)::

    powermodels calibrate-instructions --out cal_h100 --workloads heldout

Transfer a table fitted on another GPU from 10 % of the microbenchmarks (Wattchmen §6)::

    powermodels calibrate-instructions --out cal_h100_10pct \\
        --transfer-from h200.pmcal --fraction 0.1

Rebuild and refit from the raw files of an earlier calibration (no GPU)::

    powermodels calibrate-instructions --out cal_h100 --from-raw cal_h100

On the simulated GPU (no hardware)::

    powermodels calibrate-instructions --device simulated --out /tmp/cal --workloads sim
"""

from __future__ import annotations

from . import COMMANDS
from ..cli_options import option_integer, option_number

NAME = "calibrate-instructions"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("--out", required=True, help="output folder (raw files, tables, calibration)")
    parser.add_argument("--device", choices=("nvml", "simulated"), default="nvml",
                        help="nvml: CuPy + NVML + ncu on CUDA device 0; simulated: known table")
    parser.add_argument("--preset", default="sim-hopper-a", help="simulated GPU preset")
    parser.add_argument("--noise", type=option_number(minimum=0), default=0.0, help="simulated power noise (relative)")
    parser.add_argument("--seed", type=option_integer(minimum=0), default=0, help="simulated noise / subset seed")
    parser.add_argument("--only", default="", help="comma-separated microbenchmarks (default: all)")
    parser.add_argument("--workloads", default="",
                        help="comma-separated validation workloads: heldout, fresh, registry "
                             "kernel names, module:function (simulated: sim)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the items of an existing measure.json in --out")
    parser.add_argument("--from-raw", metavar="DIR",
                        help="no measurement: rebuild the tables from DIR's measure.json and ncu "
                             "CSVs and fit")
    parser.add_argument("--transfer-from", metavar="CALIBRATION",
                        help="reference calibration of another GPU: measure a --fraction of the "
                             "microbenchmarks and transfer its table (Wattchmen §6)")
    parser.add_argument("--fraction", type=option_number(above=0, maximum=1), default=0.1,
                        help="with --transfer-from: share of microbenchmarks measured (default 0.1)")
    parser.add_argument("--ncu", help="path of ncu (default: PATH or the CUDA toolkit)")
    parser.add_argument("--hopper-extras", action="store_true",
                        help="also measure the opt-in extras: warp-group MMA (HGMMA, sm_90a), "
                             "operand-toggling FFMA/DMMA/HGMMA variants, HGMMA with 2-4 per "
                             "arrive group and irregular (gather, strided, scatter) DRAM accesses")


def _backend(args):
    if args.device == "simulated":
        from ..microbench.simulated import SimulatedInstructionBackend

        return SimulatedInstructionBackend(args.preset, noise=args.noise, seed=args.seed,
                                           hopper_extras=args.hopper_extras)
    from ..microbench.gpu import CupyNcuBackend

    return CupyNcuBackend(ncu=args.ncu, hopper_extras=args.hopper_extras)


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def run(args) -> int:
    from pathlib import Path

    from ..instruction_energy import calibration as ic
    from ._common import out_folder

    out_folder(args.out)

    if args.transfer_from:
        from ..instruction_energy.transfer import transfer_calibration

        res = transfer_calibration(args.transfer_from, _backend(args), args.out,
                                   fraction=args.fraction, seed=args.seed,
                                   workloads=_split(args.workloads), say=print)
        t = res.model.transfer_
        print(f"transferred: slope {t['slope']:.3f}, intercept {t['intercept'] * 1e12:.1f} pJ, "
              f"R² {t['r2']:.3f} over {t['n_common']} opcodes; {t['n_transferred']} energies "
              f"from the line -> {res.out / ic.CALIBRATION}")
        return 0
    if args.from_raw:
        res = ic.refit_from_raw(args.from_raw, args.out, say=print)
    else:
        res = ic.calibrate_instructions(_backend(args), Path(args.out), micro=_split(args.only),
                                        workloads=_split(args.workloads), resume=args.resume,
                                        say=print)
    if res.per_workload is not None:
        from ..reporting import markdown_table

        cols = ["workload", "energy_j", "direct_j", "direct_ape_pct", "extended_j",
                "extended_ape_pct"]
        print()
        print(markdown_table(res.per_workload[cols]))
    return 0
