"""Command-line options that name a workload, shared by commands that measure one.

Which workload (one of):

``--kernel NAME``                     a registry kernel (fp32, sgemm, stream_copy, stream_triad)
``--source FILE --kernel NAME``       a user's CUDA kernel; ``--arg``, ``--problem-size``,
                                      ``--grid-div-x/y/z`` describe its launch (Kernel Tuner conventions)
``--callable module:function``        a Python callable, or a ``Workload`` object (``file.py:name`` too)
``-- CMD ARG ...``                    an external program

Parameters: ``--tune NAME=VALUE`` sets a tunable parameter of the workload,
``--protocol-param NAME=VALUE`` a parameter of the protocol, and ``--param
NAME=VALUE`` either — the protocol's when the protocol has a parameter of that
name, else the workload's tunable. ``--config 'p=v,...'`` sets several tunables.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

__all__ = ["add_workload_arguments", "check_table_path", "protocol_fields", "split_params", "workload_from_args"]


def _pair(text: str, option: str) -> tuple[str, object]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{option}: expected 'name=value', got {text!r}")
    try:
        return key.strip(), json.loads(value)
    except json.JSONDecodeError:
        return key.strip(), value


def add_workload_arguments(parser, default_kernel: str | None = "fp32") -> None:
    """``--kernel/--source/--callable``, tunables, the source's launch options and ``-- CMD``."""
    g = parser.add_argument_group("workload", "what to measure (registry kernel, CUDA source, callable "
                                  "or `-- CMD ...`)")
    g.add_argument("--kernel", default=None,
                   help=f"registry kernel (fp32, sgemm, stream_copy, stream_triad; default {default_kernel}), "
                        "or with --source the __global__ function")
    g.add_argument("--source", metavar="FILE", help="a CUDA source file with the kernel named by --kernel")
    g.add_argument("--callable", metavar="MODULE:FUNCTION",
                   help="a Python callable that enqueues GPU work (module:function or file.py:name)")
    g.add_argument("--config", default="", help="tunable configuration 'p1=v1,p2=v2' (defaults for the rest)")
    g.add_argument("--tune", action="append", default=[], metavar="NAME=VALUE",
                   help="a tunable parameter of the workload (repeatable; -D macro of a source kernel)")
    g.add_argument("--protocol-param", action="append", default=[], metavar="NAME=VALUE",
                   help="a protocol parameter (repeatable)")
    g.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="a protocol parameter when the protocol has one of that name, else a tunable "
                        "(repeatable), e.g. --param duration_s=0.5 --param block_size_x=128")
    s = parser.add_argument_group("CUDA source launch (with --source)")
    s.add_argument("--arg", action="append", default=[], metavar="JSON",
                   help='a kernel argument, in order: {"random": "float32", "size": N}, {"zeros": ...}, '
                        '{"scalar": 5, "dtype": "int32"}, {"file": "a.npy"} (repeatable)')
    s.add_argument("--problem-size", default=None, metavar="N[,N[,N]]",
                   help="threads to cover per dimension (ints or parameter expressions)")
    for axis in "xyz":
        s.add_argument(f"--grid-div-{axis}", metavar="P[,P]",
                       help=f"divisors of the {axis} problem size (default block_size_{axis}; '' for none)")
    s.add_argument("--compiler-option", action="append", default=[], metavar="OPT",
                   help="extra NVRTC option, e.g. --compiler-option=-DWIDTH=2048 (repeatable)")
    parser.add_argument("--simulated", metavar="JSON",
                        help='twin on the simulated GPU for --source/--callable, e.g. '
                             '\'{"time_s": 0.002, "activity": 0.8}\' (fields may be parameter expressions)')


def split_params(args, protocol_fields, tunables) -> tuple[dict, dict]:
    """``(protocol params, tunables)`` from ``--protocol-param``, ``--tune`` and ``--param``.

    ``tunables`` is the workload's parameter names, or None when any name is
    allowed (a source kernel given on the command line).
    """
    protocol = dict(_pair(p, "--protocol-param") for p in args.protocol_param)
    tune = dict(_pair(p, "--tune") for p in args.tune)
    for text in args.param:
        key, value = _pair(text, "--param")
        if key in protocol_fields:
            protocol[key] = value
        elif tunables is None or key in tunables:
            tune[key] = value
        else:
            what = f"tunables: {sorted(tunables)}" if tunables else "it has no tunable parameters"
            raise ValueError(f"--param {key}: the protocol has no such parameter (known: "
                             f"{sorted(protocol_fields)}) and the workload has no such tunable ({what})")
    return protocol, tune


def _list(text: str | None):
    if text is None:
        return None
    return [p.strip() for p in text.split(",") if p.strip()]


def _problem(text: str):
    dims = []
    for part in _list(text) or ["1"]:
        try:
            dims.append(int(part))
        except ValueError:
            dims.append(part)  # a parameter expression
    return tuple(dims) if len(dims) > 1 else dims[0]


def _twin(text: str | None):
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"--simulated: invalid JSON ({err.msg})") from None
    from ..workloads import SimulatedTwin

    if not isinstance(data, dict):
        raise ValueError(f"--simulated: expected a JSON object such as {{\"time_s\": 0.002}}, got {text!r}")
    return SimulatedTwin.from_dict(data)


def _check_kind(args) -> str:
    from ._common import program_argv

    program = program_argv(args)
    kinds = [k for k, given in (("source", args.source), ("callable", args.callable), ("program", program))
             if given]
    if len(kinds) > 1:
        raise ValueError(f"give one workload: {' and '.join('--' + k if k != 'program' else '-- CMD' for k in kinds)} "
                         "were both given")
    if kinds == ["callable"] and args.kernel:
        raise ValueError("--kernel names a registry kernel or, with --source, the source's kernel; "
                         "not with --callable")
    if kinds == ["program"] and args.kernel:
        raise ValueError("--kernel cannot be combined with a program (-- CMD)")
    given = [o for o, v in (("--arg", args.arg), ("--compiler-option", args.compiler_option),
                            ("--problem-size", args.problem_size), ("--grid-div-x", args.grid_div_x),
                            ("--grid-div-y", args.grid_div_y), ("--grid-div-z", args.grid_div_z)) if v]
    if kinds != ["source"] and given:  # silently ignored before: they describe a --source launch
        raise ValueError(f"{given[0]} describes a --source kernel's launch; give --source FILE or drop it")
    return kinds[0] if kinds else "registry"


def workload_from_args(args, protocol_fields, default_kernel: str = "fp32"):
    """``(workload, config, protocol params)`` from the parsed options; ValueError naming the problem."""
    from ..workloads import SourceKernel, as_workload, make_argument

    kind = _check_kind(args)
    if kind == "source":
        if not args.kernel:
            raise ValueError("--source needs --kernel NAME (the __global__ function to launch)")
        protocol, tune = split_params(args, protocol_fields, None)
        config = {}
        if args.config:
            for part in args.config.split(","):
                if part.strip():
                    config.update([_pair(part, "--config")])
        config.update(tune)
        arguments = [make_argument(_json(a, "--arg"), Path.cwd(), f"--arg {i}") for i, a in enumerate(args.arg)]
        w = SourceKernel(args.source, args.kernel, {k: (v,) for k, v in config.items()},
                         arguments=arguments, problem_size=_problem(args.problem_size or "1"),
                         grid_div_x=_list(args.grid_div_x), grid_div_y=_list(args.grid_div_y),
                         grid_div_z=_list(args.grid_div_z), compiler_options=args.compiler_option,
                         simulated=_twin(args.simulated))
        return w, w.default, protocol
    if kind == "callable":
        w = as_workload(args.callable)
        if args.simulated is not None:
            from ..workloads import CallableWorkload

            if not isinstance(w, CallableWorkload) or w.twin is not None:
                raise ValueError(f"--simulated: {args.callable!r} carries its own twin (or is not a callable)")
            w.twin = _twin(args.simulated)
    elif kind == "program":
        from ._common import program_argv

        w = as_workload(program_argv(args))
    else:
        name = args.kernel or default_kernel
        if name == "square_wave":  # registered for the runner's square_wave/step, not a workload
            raise ValueError("--kernel square_wave is the sensor-characterisation load, not a workload to "
                             "measure; see `powermodels characterize` and `powermodels demo`")
        if args.simulated is not None:
            raise ValueError("--simulated: registry kernels have their own twins")
        from ..workloads import registry_kernel

        w = registry_kernel(name)
    protocol, tune = split_params(args, protocol_fields, list(w.tune_params))
    config = w.parse_config(args.config)
    config = w.validate_config({**config, **tune})
    return w, config, protocol


def _json(text: str, option: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{option}: invalid JSON {text!r} ({err.msg})") from None


def check_table_path(path: str | None, option: str) -> None:
    """ValueError unless ``path`` ends in .parquet, .csv or .json (what ``write_table`` writes)."""
    if path is not None and Path(path).suffix.lower() not in (".parquet", ".csv", ".json"):
        raise ValueError(f"{option}: {path!r} must end in .parquet, .csv or .json")


def protocol_fields(name: str) -> set[str]:
    """Parameter names of protocol ``name`` (ValueError for an unknown protocol)."""
    from ..measuring.protocols import PROTOCOLS

    if name not in PROTOCOLS:
        raise ValueError(f"protocol: unknown protocol {name!r}; known: {sorted(PROTOCOLS)}")
    return {f.name for f in dataclasses.fields(PROTOCOLS[name])}
