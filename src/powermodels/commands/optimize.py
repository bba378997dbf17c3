"""``powermodels optimize``: recommend clocks for a kernel under a slowdown limit (DSO §IV-C).

Fits DSO's power and time models (eq. 1-2) to a clock sweep of each kernel
and picks the supported clock pair minimising eq. 4 with the largest η
whose predicted slowdown against the highest clocks stays within the limit.

Examples
--------
From a run table holding a sweep (kernel, sm_clock_mhz, mem_clock_mhz, time_s, power_w)::

    powermodels optimize --runs sweep.parquet --max-slowdown 0.05 --p-max-w 700

On the simulated GPU (clocks are locked there, which only the simulation allows here)::

    powermodels optimize --simulated --workload stream --max-slowdown 0.05

Without a sweep, from a kernel's features and a trained parameter predictor
(a calibration file holding a fitted ``DVFSParameterPredictor`` whose metadata
names the V(f) shape, e.g. from ``benchmarks/dso_rtx8000.py --save-predictor``);
the features file holds ``kernel``, the predictor's feature columns and the
profiling run's ``sm_clock_mhz, mem_clock_mhz, time_s, power_w``; supported
clocks and P_max are read (never changed) from the device::

    powermodels optimize --predictor rtx8000.pmcal --features feats.csv --device auto

Train the predictor from the sweep table of any GPU (kernel, clocks, time, power and
``feat:*`` columns of the training kernels, e.g. microbenchmarks), choosing the
regressor by cross-validation over the training applications, and apply it to
the profiled kernels of ``--features``; the clocks are the sweep's, P_max is
``--p-max-w`` (else the largest power measured in the sweep)::

    powermodels optimize --train-sweep micro.csv --features apps.csv --p-max-w 260 \
        --save-predictor gpu.pmcal

Real frequency sweeps need locked clocks: run them on your own machine with
the opt-in clock control (``settings_guard(..., allow_changes=True)``).
"""

from __future__ import annotations

from pathlib import Path

from . import COMMANDS

NAME = "optimize"
HELP = COMMANDS[NAME].help

_SIM_CORE_CLOCKS = 12
_SETTLE_S = 0.3


def add_arguments(parser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--runs", help="run table (parquet/csv) with a clock sweep per kernel")
    src.add_argument("--simulated", action="store_true",
                     help="sweep a simulated workload on the SimulatedGPU")
    src.add_argument("--features", help="features of profiled kernels (csv/parquet); needs --predictor")
    parser.add_argument("--predictor", help="with --features: calibration file of a fitted "
                                            "DVFSParameterPredictor")
    parser.add_argument("--train-sweep", help="with --features: train the predictor on this sweep "
                                              "table (any GPU) instead of loading --predictor")
    parser.add_argument("--feature-columns", nargs="+", default=None,
                        help="with --train-sweep: feature columns (default: every feat:* column "
                             "of both tables)")
    parser.add_argument("--candidates", nargs="+", default=None,
                        help="with --train-sweep: regressors compared by grouped CV "
                             "(mlp gradient_boosting extra_trees random_forest ridge ridge_log)")
    parser.add_argument("--targets", default="shares", choices=("shares", "curve"),
                        help="with --train-sweep: what the regressor learns — DSO's parameter shares "
                             "(default) or the measured curves that eq. 1-2 are fitted to")
    parser.add_argument("--save-predictor", help="with --train-sweep: write the trained predictor "
                                                 "as a calibration file")
    parser.add_argument("--device", default="auto", choices=("auto", "nvml", "simulated"),
                        help="with --features: where supported clocks and P_max are read from")
    parser.add_argument("--kernel", help="with --runs: only this kernel")
    parser.add_argument("--workload", default="stream",
                        help="with --simulated: fp32, stream, gemm or tiny (default: stream)")
    parser.add_argument("--max-slowdown", type=float, default=0.05,
                        help="allowed slowdown against the highest clocks (default 0.05 = 5 %%)")
    parser.add_argument("--eta", type=float, default=None,
                        help="use this η (0: fastest .. 1: least energy) instead of the slowdown limit")
    parser.add_argument("--p-max-w", type=float, default=None,
                        help="GPU power limit P_max in W (default: device limit, or the largest "
                             "measured power)")
    parser.add_argument("--voltage-knee-mhz", type=float, default=None)
    parser.add_argument("--voltage-slope-per-ghz", type=float, default=None)
    parser.add_argument("--output", help="write the recommendations to this CSV")


def _fmt(v: float) -> str:
    """4 significant digits; round-off (|v| < 1e-9, e.g. a slowdown of -1.6e-13) prints as 0."""
    return "0" if abs(v) < 1e-9 else f"{v:.4g}"


def _read_runs(path: str):
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"--runs: {p} does not exist")
    return pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)


def counter_power(trace, t_from: float) -> float:
    """Mean power (W) from the energy counter's slope between its first and last update after ``t_from``.

    The counter changes only at its update edges, so the slope is taken
    between edges, never from a stale first reading; the time before
    ``t_from`` (clock lock and heat settling) is left out.
    """
    import numpy as np

    from .. import schema

    e = trace.loc[trace[schema.T_S] >= t_from, [schema.T_S, schema.ENERGY_COUNTER_J]].dropna()
    t, j = e[schema.T_S].to_numpy(), e[schema.ENERGY_COUNTER_J].to_numpy()
    edge = np.flatnonzero(np.diff(j) != 0) + 1
    if len(edge) < 2:
        raise ValueError("trace: fewer than two energy-counter updates after the settling time")
    return float((j[edge[-1]] - j[edge[0]]) / (t[edge[-1]] - t[edge[0]]))


def simulated_sweep(workload_name: str, *, seed: int = 0, run_s: float = 1.0):
    """Sweep a simulated workload over 12 core clocks × every memory clock.

    Returns ``(runs, p_max_w)``: a run table (time per launch from the
    launch timestamps, power from the emulated energy counter) and the
    device's maximum power limit.
    """
    import numpy as np
    import pandas as pd

    from .. import schema
    from ..devices.simulated import EXAMPLE_WORKLOADS, SimulatedGPU

    if workload_name not in EXAMPLE_WORKLOADS:
        raise ValueError(f"--workload must be one of {sorted(EXAMPLE_WORKLOADS)}, got {workload_name!r}")
    w = EXAMPLE_WORKLOADS[workload_name]
    gpu = SimulatedGPU(preset="hopper", seed=seed)
    rows = []
    for fm, cores in gpu.supported_clocks().items():
        cores = np.sort(np.asarray(cores, dtype=float))
        # the upper 60 % of the range, where a slowdown limit of a few % can land
        pick = cores[np.linspace(int(0.4 * len(cores)), len(cores) - 1, _SIM_CORE_CLOCKS).astype(int)]
        for fc in pick:
            with gpu.settings_guard(sm_clock_mhz=fc, mem_clock_mhz=fm, allow_changes=True):
                gpu.idle(0.02)
                se = gpu.run(w, launches=max(int(run_s / w.time_s(fc, fm)), 10))
                tr = gpu.trace(se[0, 0], se[-1, 1], sample_period_s=1e-3, run_id=w.name)
            power = counter_power(tr, se[0, 0] + _SETTLE_S)
            t = float(np.mean(se[:, 1] - se[:, 0]))
            rows.append({schema.KERNEL: w.name, schema.SM_CLOCK_MHZ: float(fc),
                         schema.MEM_CLOCK_MHZ: float(fm), schema.TIME_S: t,
                         schema.POWER_W: power, schema.ENERGY_J: t * power})
    return pd.DataFrame(rows), gpu.power_limits_w()[1]


def check_run_columns(runs, where: str = "run table") -> None:
    """A swept run table has the columns a recommendation needs (checked before anything else)."""
    from .. import schema

    missing = [c for c in (schema.KERNEL, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ, schema.TIME_S,
                           schema.POWER_W) if c not in runs.columns]
    if missing:
        raise ValueError(f"{where}: column(s) {missing} missing (have {list(runs.columns)[:12]})")


def recommend(runs, *, max_slowdown: float, p_max_w: float, eta: float | None = None,
              voltage_knee_mhz: float | None = None, voltage_slope_per_ghz: float | None = None):
    """One recommendation per kernel of a swept run table (a DataFrame)."""
    import numpy as np
    import pandas as pd

    from .. import schema
    from ..models.dvfs import DVFSParams, fit_voltage_curve
    from ..models.dvfs_optimizer import eta_for_slowdown, optimize_clocks
    from ..models.dvfs_predictor import kernel_parameters

    check_run_columns(runs)
    if voltage_knee_mhz is None or voltage_slope_per_ghz is None:
        knee, slope = fit_voltage_curve(runs[schema.SM_CLOCK_MHZ], runs[schema.MEM_CLOCK_MHZ],
                                        runs[schema.POWER_W], runs[schema.KERNEL])
        voltage_knee_mhz = knee if voltage_knee_mhz is None else voltage_knee_mhz
        voltage_slope_per_ghz = slope if voltage_slope_per_ghz is None else voltage_slope_per_ghz
    vkw = {"voltage_knee_mhz": voltage_knee_mhz, "voltage_slope_per_ghz": voltage_slope_per_ghz}
    table = kernel_parameters(runs, **vkw)
    out = []
    for kernel, row in table.iterrows():
        g = runs[runs[schema.KERNEL] == kernel]
        clocks = np.unique(g[[schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]].to_numpy(dtype=float), axis=0)
        params = DVFSParams.from_values(row, **vkw)
        choice = (optimize_clocks(params, clocks, eta=eta, p_max_w=p_max_w) if eta is not None
                  else eta_for_slowdown(params, clocks, max_slowdown=max_slowdown, p_max_w=p_max_w))
        rec = {schema.KERNEL: kernel, schema.SM_CLOCK_MHZ: choice.sm_clock_mhz,
               schema.MEM_CLOCK_MHZ: choice.mem_clock_mhz, "eta": choice.eta,
               "predicted_energy_saving": choice.energy_saving,
               "predicted_slowdown": choice.slowdown}
        at = g[(g[schema.SM_CLOCK_MHZ] == choice.sm_clock_mhz)
               & (g[schema.MEM_CLOCK_MHZ] == choice.mem_clock_mhz)]
        ref = g[(g[schema.SM_CLOCK_MHZ] == choice.reference_sm_clock_mhz)
                & (g[schema.MEM_CLOCK_MHZ] == choice.reference_mem_clock_mhz)]
        e = (g[schema.TIME_S] * g[schema.POWER_W]).groupby(
            [g[schema.SM_CLOCK_MHZ], g[schema.MEM_CLOCK_MHZ]]).mean()
        if len(at) and len(ref):  # what the sweep itself measured at the chosen pair
            key = (choice.sm_clock_mhz, choice.mem_clock_mhz)
            rkey = (choice.reference_sm_clock_mhz, choice.reference_mem_clock_mhz)
            rec["measured_energy_saving"] = 1 - e[key] / e[rkey]
            rec["measured_slowdown"] = at[schema.TIME_S].mean() / ref[schema.TIME_S].mean() - 1
        out.append(rec)
    return pd.DataFrame(out), vkw


def recommend_from_features(features, predictor, metadata: dict, clocks, *, max_slowdown: float,
                            p_max_w: float, eta: float | None = None):
    """One recommendation per profiled kernel, from predicted DVFS parameters (no sweep)."""
    import pandas as pd

    from .. import schema
    from ..models.dvfs_optimizer import eta_for_slowdown, optimize_clocks

    for key in ("voltage_knee_mhz", "voltage_slope_per_ghz"):
        if key not in metadata:
            raise ValueError(f"--predictor: metadata lacks {key!r} (the V(f) shape it was trained with)")
    cols = list(getattr(predictor, "feature_names_in_", []))
    if schema.FEAT_POWER_OF_LIMIT in cols and schema.FEAT_POWER_OF_LIMIT not in features.columns \
            and schema.POWER_W in features.columns:
        from ..workflows.dvfs_predictor import with_power_feature

        features = with_power_feature(features, p_max_w)  # the profiling run's power / this GPU's limit
    needed = [schema.KERNEL, *cols, schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ, schema.TIME_S,
              schema.POWER_W]
    for col in needed:
        if col not in features.columns:
            raise ValueError(f"--features: column {col!r} is missing")
        if col != schema.KERNEL and features[col].isna().any():
            raise ValueError(f"--features: column {col!r} has missing values in "
                             f"{int(features[col].isna().sum())} rows (fill them, e.g. 0 for a pipe ncu "
                             "does not report)")
    kw = {"voltage_knee_mhz": float(metadata["voltage_knee_mhz"]),
          "voltage_slope_per_ghz": float(metadata["voltage_slope_per_ghz"]),
          "reference_sm_clock_mhz": features[schema.SM_CLOCK_MHZ].to_numpy(dtype=float),
          "reference_mem_clock_mhz": features[schema.MEM_CLOCK_MHZ].to_numpy(dtype=float),
          "reference_time_s": features[schema.TIME_S].to_numpy(dtype=float),
          "reference_power_w": features[schema.POWER_W].to_numpy(dtype=float)}
    if metadata.get("target_kind", "shares") == "curve":  # models.dvfs_curves: fit eq. 1-2 to the curves
        from ..models.dvfs_curves import params_from_curves

        if "curve_clocks" not in metadata:
            raise ValueError("--predictor: a curve-target predictor's metadata lacks 'curve_clocks'")
        models = params_from_curves(predictor.predict(features[cols]), metadata["curve_clocks"], **kw)
    else:
        models = predictor.predict_params(features[cols], **kw)
    out = []
    for kernel, params in zip(features[schema.KERNEL], models, strict=True):
        choice = (optimize_clocks(params, clocks, eta=eta, p_max_w=p_max_w) if eta is not None
                  else eta_for_slowdown(params, clocks, max_slowdown=max_slowdown, p_max_w=p_max_w))
        out.append({schema.KERNEL: kernel, schema.SM_CLOCK_MHZ: choice.sm_clock_mhz,
                    schema.MEM_CLOCK_MHZ: choice.mem_clock_mhz, "eta": choice.eta,
                    "predicted_energy_saving": choice.energy_saving,
                    "predicted_slowdown": choice.slowdown})
    return pd.DataFrame(out)


def _show(recs, args) -> int:
    """Print the recommendations and write them to ``--output`` when asked."""
    print(recs.to_string(index=False, float_format=_fmt))
    if args.output:
        recs.to_csv(args.output, index=False)
        print(f"wrote {args.output}")
    return 0


def _run_train(args) -> int:
    """--train-sweep + --features: train on any GPU's sweep (CV selection), recommend for the profiles."""
    import numpy as np

    from .. import schema
    from ..models.dvfs_selection import CANDIDATES
    from ..workflows.dvfs_predictor import train_dvfs_predictor

    sweep, features = _read_runs(args.train_sweep), _read_runs(args.features)
    cols = args.feature_columns or [c for c in sweep.columns
                                    if c.startswith(schema.FEATURE_PREFIX) and c in features.columns]
    if not cols:
        raise ValueError("--train-sweep and --features share no feat:* column; name them with "
                         "--feature-columns")
    trained = train_dvfs_predictor(sweep, cols, candidates=tuple(args.candidates or CANDIDATES),
                                   progress=print, targets=args.targets)
    print(trained.cv.to_string(index=False, float_format=_fmt))
    clocks = np.unique(sweep[[schema.SM_CLOCK_MHZ, schema.MEM_CLOCK_MHZ]].to_numpy(dtype=float), axis=0)
    p_max = args.p_max_w if args.p_max_w is not None else float(sweep[schema.POWER_W].max())
    if args.save_predictor:
        from ..io import save_calibration

        save_calibration(trained.predictor, args.save_predictor,
                         {**trained.metadata, "trained_on": args.train_sweep})
        print(f"wrote {args.save_predictor}")
    recs = recommend_from_features(features, trained.predictor, trained.metadata, clocks,
                                   max_slowdown=args.max_slowdown, p_max_w=p_max, eta=args.eta)
    print(f"{len(clocks)} clock pairs of the sweep; P_max {p_max:.0f} W"
          f"{'' if args.p_max_w is not None else ' (largest measured power; give --p-max-w)'}; "
          f"slowdown limit {args.max_slowdown:.1%} (predicted, not measured)")
    return _show(recs, args)


def _run_features(args) -> int:
    from ..devices import open_device
    from ..io import load_calibration

    if args.train_sweep:
        return _run_train(args)
    if not args.predictor:
        raise ValueError("--features needs --predictor (a fitted DVFSParameterPredictor calibration) "
                         "or --train-sweep (a sweep table to train one on)")
    predictor, meta = load_calibration(args.predictor, return_metadata=True)
    features = _read_runs(args.features)
    device = open_device(args.device)
    clocks = device.supported_clocks()
    p_max = args.p_max_w if args.p_max_w is not None else device.power_limits_w()[1]
    if not p_max > 0:
        raise ValueError("--p-max-w must be given: the device reports no power limit")
    recs = recommend_from_features(features, predictor, meta, clocks,
                                      max_slowdown=args.max_slowdown, p_max_w=p_max, eta=args.eta)
    print(f"device {device.info.name}: {sum(len(v) for v in clocks.values())} supported clock pairs; "
          f"P_max {p_max:.0f} W; slowdown limit {args.max_slowdown:.1%} (predicted, not measured)")
    return _show(recs, args)


def run(args) -> int:
    if args.max_slowdown < 0:
        raise ValueError(f"--max-slowdown must be >= 0, got {args.max_slowdown}")
    if args.eta is not None and not 0 <= args.eta <= 1:
        raise ValueError(f"--eta must be in [0, 1], got {args.eta}")
    if args.output:
        from ._common import check_writable

        check_writable(args.output, "--output")
    if args.features:
        return _run_features(args)
    if args.simulated:
        runs, p_max = simulated_sweep(args.workload)
        print(f"swept simulated workload {args.workload!r}: {len(runs)} clock pairs (SimulatedGPU, hopper)")
    else:
        from .. import schema

        runs = _read_runs(args.runs)
        check_run_columns(runs, f"--runs {args.runs}")  # before asking for --p-max-w
        if args.kernel is not None:
            runs = runs[runs[schema.KERNEL] == args.kernel]
            if runs.empty:
                raise ValueError(f"--kernel {args.kernel!r} is not in {args.runs}")
        p_max = float(runs[schema.POWER_W].max()) if schema.POWER_W in runs.columns else None
    p_max = args.p_max_w if args.p_max_w is not None else p_max
    if p_max is None or not p_max > 0:
        raise ValueError("--p-max-w must be given (a positive power limit in W)")
    recs, vkw = recommend(runs, max_slowdown=args.max_slowdown, p_max_w=p_max, eta=args.eta,
                          voltage_knee_mhz=args.voltage_knee_mhz,
                          voltage_slope_per_ghz=args.voltage_slope_per_ghz)
    print(f"V(f): knee {vkw['voltage_knee_mhz']:.0f} MHz, slope {vkw['voltage_slope_per_ghz']:g}/GHz; "
          f"P_max {p_max:.0f} W; slowdown limit {args.max_slowdown:.1%}")
    print(recs.to_string(index=False, float_format=_fmt))
    if args.output:
        recs.to_csv(args.output, index=False)
        print(f"wrote {args.output}")
    return 0
