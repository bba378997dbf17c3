"""Transfer a per-instruction energy table to another GPU from 10 % of its microbenchmarks.

Wattchmen §6: the energy tables of two systems are close to an affine function
of each other, so the second system's table can be built from a random subset
of its microbenchmarks — fit the subset, regress its energies on the reference
table's, and predict the rest with the line (Fig. 14: 13 % MAPE with 10 % of
the data against 14 % with all of it).

* :func:`transfer_subset` draws the microbenchmarks to measure (``nanosleep``,
  the static-power reference, always included);
* :func:`transfer_calibration` measures them on a backend and writes a
  calibration of the new GPU (the ``--transfer-from`` mode of
  ``powermodels calibrate-instructions``);
* :func:`compare_transfer` puts the transferred table next to a full fit on
  the new GPU and the reference table used as is, on the new GPU's held-out
  workloads (MAPE over several random subsets, with its standard error).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from .. import schema
from ..models.instruction_transfer import affine_transfer, subset_rows
from .calibration import (
    STATIC_MICROBENCHMARK,
    finish_calibration,
    fit_instruction_model,
    logged,
    measure_and_profile,
    prediction_table,
    write_json,
)

__all__ = ["compare_transfer", "transfer_calibration", "transfer_subset"]


def transfer_subset(names, fraction: float = 0.1, seed=0) -> list[str]:
    """A random ``fraction`` of ``names`` (at least 2), plus ``nanosleep``, in registry order.

    ``nanosleep`` gives the constant + static power (Wattchmen §3.3.1) and is
    not counted in the fraction.
    """
    names = list(names)
    pool = [n for n in names if n != STATIC_MICROBENCHMARK]
    if len(pool) < 2:
        raise ValueError(f"names: need at least 2 microbenchmarks besides "
                         f"{STATIC_MICROBENCHMARK!r}, got {len(pool)}")
    rows = subset_rows(len(pool), fraction, seed)
    if len(rows) < 2:  # an affine map needs two points
        rows = subset_rows(len(pool), 2 / len(pool), seed)
    chosen = {pool[i] for i in rows} | {STATIC_MICROBENCHMARK}
    return [n for n in names if n in chosen] + (
        [STATIC_MICROBENCHMARK] if STATIC_MICROBENCHMARK not in names else [])


def _reference(reference):
    from ..io import load_calibration
    from ..models import InstructionEnergyModel

    model = load_calibration(reference) if isinstance(reference, (str, Path)) else reference
    if not isinstance(model, InstructionEnergyModel):
        raise ValueError(f"reference: {reference} holds a {type(model).__name__}, "
                         "not an InstructionEnergyModel")
    return model


def transfer_calibration(reference, backend, out, *, fraction: float = 0.1, seed=0,
                         workloads=(), resume: bool = False, say=print):
    """Measure a ``fraction`` of the microbenchmarks on ``backend`` and transfer ``reference``.

    Parameters
    ----------
    reference : path or InstructionEnergyModel
        Calibration (or fitted model) of the reference GPU.
    backend : CupyNcuBackend or SimulatedInstructionBackend
        The new GPU.
    out : path
        Output folder, as :func:`~.instruction_calibration.calibrate_instructions`
        (``instructions.pmcal`` is the transferred table; ``transfer`` in its metadata).
    fraction : float, default=0.1
        Share of the microbenchmarks measured.
    seed : int
        Seed of the subset (recorded in ``summary.json``).
    workloads : sequence of str
        Validation workloads of the new GPU.

    Returns
    -------
    InstructionCalibration
        ``model.transfer_`` holds the line (slope, intercept, R², opcodes used).
    """
    ref = _reference(reference)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with logged(out, say) as tell:
        names = transfer_subset(backend.microbenchmarks(), fraction, seed)
        tell(f"transfer subset ({fraction:.0%}, seed {seed}): {', '.join(names)}")
        record, micro_t, wl_t = measure_and_profile(backend, out, names, workloads,
                                                    resume=resume, say=tell)
        model = affine_transfer(ref, prediction_table(micro_t))
        res = finish_calibration(out, record, micro_t, wl_t, None, tell, model=model)
        res.summary.update({"transfer": model.transfer_, "fraction": fraction, "seed": seed,
                            "subset": names})
        write_json(out / "summary.json", res.summary)
        return res


def _mape(model, wl: pd.DataFrame) -> float:
    y = wl[schema.ENERGY_J].to_numpy()
    return float(np.mean(np.abs(model.predict(wl) - y) / y) * 100)


def compare_transfer(reference, target_micro: pd.DataFrame, target_workloads: pd.DataFrame, *,
                     fraction: float = 0.1, seeds=range(10), subset: pd.DataFrame | None = None,
                     model_params: dict | None = None) -> pd.DataFrame:
    """MAPE on the new GPU's held-out workloads: transferred / full fit / reference as is.

    Parameters
    ----------
    reference : path or InstructionEnergyModel
        The reference GPU's table.
    target_micro : DataFrame
        All microbenchmarks measured on the new GPU (for the full fit, and the
        pool the random subsets are drawn from).
    target_workloads : DataFrame
        Held-out workloads measured on the new GPU (``static_power_w`` is the
        new GPU's NANOSLEEP power, used by every row).
    fraction : float, default=0.1
        Share of microbenchmarks of each transferred table.
    seeds : iterable of int
        One random subset per seed; the row reports mean ± standard error.
    subset : DataFrame, optional
        A subset measured separately (e.g. the one-call transfer run): one more
        row, ``transferred (measured subset)``.
    model_params : dict, optional
        :class:`~powermodels.models.InstructionEnergyModel` parameters of the
        full fit on the new GPU (default: the defaults). The transferred rows
        use the reference model's own parameters.

    Returns
    -------
    DataFrame
        ``table``, ``mape_pct``, ``se_pct``, ``n`` (subsets), ``microbenchmarks``.
    """
    ref = _reference(reference)
    micro, wl = prediction_table(target_micro), prediction_table(target_workloads)
    names = micro[schema.WORKLOAD].tolist()
    rows = []
    scores = []
    for seed in seeds:
        chosen = transfer_subset(names, fraction, seed)
        part = micro[micro[schema.WORKLOAD].isin(chosen)]
        scores.append(_mape(affine_transfer(ref, part), wl))
        n_sub = len(part)
    scores = np.asarray(scores)
    se = float(scores.std(ddof=1) / np.sqrt(len(scores))) if len(scores) > 1 else float("nan")
    rows.append({"table": f"transferred ({fraction:.0%} subsets)", "mape_pct": float(scores.mean()),
                 "se_pct": se, "n": len(scores), "microbenchmarks": n_sub})
    if subset is not None:
        part = prediction_table(subset)
        rows.append({"table": "transferred (measured subset)",
                     "mape_pct": _mape(affine_transfer(ref, part), wl), "se_pct": float("nan"),
                     "n": 1, "microbenchmarks": len(part)})
    rows.append({"table": "full fit on the new GPU", "mape_pct": _mape(fit_instruction_model(micro, **(model_params or {})), wl),
                 "se_pct": float("nan"), "n": 1, "microbenchmarks": len(micro)})
    rows.append({"table": "reference table as is", "mape_pct": _mape(ref, wl), "se_pct": float("nan"),
                 "n": 1, "microbenchmarks": 0})
    return pd.DataFrame(rows)
