"""Choosing the per-instruction model's settings by cross-validation on the microbenchmarks only.

Wattchmen (§3-§5) fits one energy per opcode on the microbenchmarks and is
judged on workloads it never saw. Which settings of
:class:`~powermodels.models.InstructionEnergyModel` generalise (how far
opcodes are grouped, the ridge weight, the memory-level split, …) is a
model-selection question answered here without the held-out workloads:
leave one microbenchmark out, fit the rest, predict it. A left-out
benchmark's main opcode is then unknown to the fit and must come from the
model's extension (grouping, level scaling, MMA scaling, buckets), which is
exactly what a workload's rarer opcodes need. ``nanosleep`` (the static-power
reference, Wattchmen §3.3.1) is never left out.

Whether predictions are held at the board's power limit (a kernel whose table
energy would draw more runs at a lower clock, at the limit) is chosen the same
way: each candidate is scored with and without the limit. So is whether groups of
microbenchmarks added for one question (``row_groups``, e.g. HGMMA with several
instructions per arrive group) enter the fit: each candidate is also scored with
them held back, that is never trained on but still predicted and scored, so that
every variant is judged on the same left-out microbenchmarks.
"""

from __future__ import annotations

import warnings
from itertools import combinations

import numpy as np
import pandas as pd

from .. import schema
from .calibration import prediction_table
from .tables import STATIC_MICROBENCHMARK

__all__ = ["INSTRUCTION_CANDIDATES", "cross_validate_instruction_models"]

#: Candidate settings compared by :func:`cross_validate_instruction_models`: name → parameters
#: of :class:`~powermodels.models.InstructionEnergyModel`. ``modifier_depth=0`` keeps only the
#: base opcode (``LDG.E.128`` → ``LDG``; the memory level split and MMA shapes still apply).
INSTRUCTION_CANDIDATES = {
    "default": {},
    "no sector traffic": {"memory_traffic": False},
    "no memory-level split": {"memory_levels": False},
    "modifiers: depth 1": {"modifier_depth": 1},
    "modifiers: base opcode only": {"modifier_depth": 0},
    "base opcode only, alpha=1e-3": {"modifier_depth": 0, "alpha": 1e-3},
    "base opcode only, alpha=1e-2": {"modifier_depth": 0, "alpha": 1e-2},
    "base opcode only, no level split": {"modifier_depth": 0, "memory_levels": False},
    "min_share=0.01": {"min_share": 0.01},
    "min_share=0.2": {"min_share": 0.2},
    "alpha=1e-3": {"alpha": 1e-3},
    "alpha=1e-2": {"alpha": 1e-2},
    "alpha=1e-1": {"alpha": 1e-1},
    # Session 10 (issue 26, item 4), declared before any of them was scored on a held-out
    # workload: two model families, each at the ridge weights CV chose on earlier boards.
    # Uncoalesced traffic: an energy per L1 sector beyond what the loads/stores need coalesced,
    # alone, at base-opcode depth, and with loads/stores priced per sector at each level and
    # one issue energy per instruction instead of split per level.
    "uncoalesced sectors, alpha=1e-3": {"uncoalesced": True, "alpha": 1e-3},
    "uncoalesced sectors, alpha=1e-2": {"uncoalesced": True, "alpha": 1e-2},
    "uncoalesced sectors, base opcode only, alpha=1e-2": {"uncoalesced": True, "modifier_depth": 0,
                                                          "alpha": 1e-2},
    "uncoalesced sectors, base opcode only, no level split": {"uncoalesced": True, "modifier_depth": 0,
                                                              "memory_levels": False},
    # ALU grouping: ALU/control opcodes at their base opcode, memory and tensor opcodes with
    # their width/shape modifiers (a one-row ALU variant no longer takes that row's residual).
    "ALU base opcode only, alpha=1e-3": {"alu_base_only": True, "alpha": 1e-3},
    "ALU base opcode only, alpha=1e-2": {"alu_base_only": True, "alpha": 1e-2},
    "ALU base opcode only, uncoalesced sectors, alpha=1e-2": {"alu_base_only": True, "uncoalesced": True,
                                                              "alpha": 1e-2},
}


def cross_validate_instruction_models(micro: pd.DataFrame, candidates=None, *,
                                      power_limit_w: float | None = None,
                                      progress=None, row_groups: dict | None = None,
                                      ) -> pd.DataFrame:
    """Leave-one-microbenchmark-out error of each candidate setting.

    Parameters
    ----------
    micro : DataFrame
        Microbenchmark instruction table (``workload``, ``energy_j``, ``time_s``,
        ``op:<OPCODE>`` counts, …) of one GPU.
    candidates : dict or None
        Name → :class:`~powermodels.models.InstructionEnergyModel` parameters;
        default :data:`INSTRUCTION_CANDIDATES`.
    power_limit_w : float or None
        The board's power limit. Given, every candidate is also scored with its
        predictions held at ``power_limit_w · time_s`` (name + ``", power limit"``,
        ``params["power_limit_w"]`` set): the same fits, since the limit only enters
        prediction.
    progress : callable or None
        Called with a one-line message per candidate.
    row_groups : dict or None
        Group name → microbenchmark names whose use is itself a choice. For every
        non-empty combination of the groups present in ``micro``, each candidate is
        also scored with those rows held back (name + ``", without <groups>"``): a
        held-back row is never trained on, and is scored as predicted by the fit on
        all the other rows that are not held back; every other row is left out one
        at a time as usual. All variants are thus scored on the same rows.

    Returns
    -------
    DataFrame
        One row per candidate, best first: ``candidate``, ``params``,
        ``cv_mape_pct`` (mean over left-out microbenchmarks of the absolute
        relative energy error), ``cv_median_pct``, ``n`` (benchmarks left out) and
        ``held_back`` (tuple of the microbenchmarks not trained on; empty when all are).
    """
    from ..models import InstructionEnergyModel

    table = prediction_table(micro)
    if schema.WORKLOAD not in table.columns:
        raise ValueError(f"micro: column {schema.WORKLOAD!r} is missing")
    names = table[schema.WORKLOAD].astype(str).to_numpy()
    left_out = np.flatnonzero(names != STATIC_MICROBENCHMARK)
    if left_out.size < 3:
        raise ValueError(f"micro: needs 3 or more microbenchmarks besides "
                         f"{STATIC_MICROBENCHMARK!r}, got {left_out.size}")
    y = table[schema.ENERGY_J].to_numpy(dtype=float)
    say = progress or (lambda msg: None)
    limit = (None if power_limit_w is None else
             float(power_limit_w) * table[schema.TIME_S].to_numpy(dtype=float))
    present = {g: tuple(n for n in members if n in set(names))
               for g, members in (row_groups or {}).items()}
    present = {g: members for g, members in present.items() if members}
    variants = [((), "")] + [
        (tuple(n for g in combo for n in present[g]), ", without " + " and ".join(combo))
        for k in range(1, len(present) + 1) for combo in combinations(present, k)]
    rows = []
    for name, params in (INSTRUCTION_CANDIDATES if candidates is None else candidates).items():
        params = {k: v for k, v in params.items() if k != "power_limit_w"}
        for held_back, suffix in variants:
            pred = _left_out_predictions(InstructionEnergyModel, params, table, names, left_out,
                                         set(held_back))
            scored = [(name + suffix, params, pred)]
            if limit is not None:
                held = np.where(limit[left_out] > 0, np.minimum(pred, limit[left_out]), pred)
                scored.append((f"{name}, power limit{suffix}",
                               {**params, "power_limit_w": float(power_limit_w)}, held))
            for label, kept, p in scored:
                err = np.abs(p / y[left_out] - 1)
                rows.append({"candidate": label, "params": dict(kept),
                             "cv_mape_pct": 100 * err.mean(),
                             "cv_median_pct": 100 * float(np.median(err)),
                             "n": int(left_out.size), "held_back": held_back})
                say(f"{label}: leave-one-out MAPE {rows[-1]['cv_mape_pct']:.2f} %")
    return pd.DataFrame(rows).sort_values("cv_mape_pct", kind="stable", ignore_index=True)


def _left_out_predictions(model_class, params: dict, table: pd.DataFrame, names: np.ndarray,
                          left_out: np.ndarray, held_back: set) -> np.ndarray:
    """Prediction of each left-out row by the fit on every row but it and the held-back ones."""
    train = ~np.isin(names, list(held_back))
    pred = np.empty(left_out.size)
    without_held = None
    with warnings.catch_warnings():
        # a fold may leave an opcode unidentifiable; the error shows what that costs
        warnings.simplefilter("ignore", RuntimeWarning)
        for j, i in enumerate(left_out):
            if not train[i]:  # one fit serves every held-back row
                if without_held is None:
                    without_held = model_class(**params).fit(table[train].reset_index(drop=True))
                model = without_held
            else:
                keep = train.copy()
                keep[i] = False
                model = model_class(**params).fit(table[keep].reset_index(drop=True))
            pred[j] = model.predict(table.iloc[[i]])[0]
    return pred
