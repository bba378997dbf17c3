"""Two checks of the per-instruction model on real data: operand values and the clock.

**Operand values**: our microbenchmarks feed an instruction the same values again and again
(``ffma`` sits at its fixed point), a GEMM on real data does not. Whether a toggling-operand row
(:data:`~powermodels.microbench.catalog.OPERAND_VARIANTS`) or the fixed one stands for an opcode
is a choice about the workloads' data that leave-one-microbenchmark-out CV cannot make (every
other microbenchmark runs on fixed operands): :func:`with_operand_variants` makes it explicit.
**The clock**: dynamic energy per instruction scales with V(f)², so predicting a power-capped
kernel at the lower clock it ran at can only lower its prediction (:func:`clock_check`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import schema
from ..microbench.catalog import OPERAND_VARIANTS, TOGGLING_ONLY
from .calibration import prediction_table

__all__ = ["clock_check", "with_operand_variants"]


def with_operand_variants(micro: pd.DataFrame, operands: str = "toggling") -> pd.DataFrame:
    """The microbenchmark table with one row per instruction's operand regime.

    Parameters
    ----------
    micro : DataFrame
        Microbenchmark instruction table (``workload`` names as in the catalog).
    operands : {"toggling", "fixed", "both"}
        "toggling": a base row (``ffma``) is dropped where its variant (``ffma_rand``) was
        measured; "fixed": the variants are dropped, and the rows measured on toggling operands
        only (:data:`~powermodels.microbench.catalog.TOGGLING_ONLY`); "both": the table as is.

    Returns
    -------
    DataFrame
        The kept rows, index reset.
    """
    if operands not in ("toggling", "fixed", "both"):
        raise ValueError(f"operands: must be 'toggling', 'fixed' or 'both', got {operands!r}")
    names = set(micro[schema.WORKLOAD])
    drop = {"toggling": {base for variant, base in OPERAND_VARIANTS.items() if variant in names},
            "fixed": set(OPERAND_VARIANTS) | TOGGLING_ONLY, "both": set()}[operands]
    return micro[~micro[schema.WORKLOAD].isin(drop)].reset_index(drop=True)


def clock_check(model, micro: pd.DataFrame, workloads: pd.DataFrame, tolerance_mhz: float = 15.0,
                ) -> pd.DataFrame:
    """Workloads that ran below the microbenchmarks' clock, with the model's implied power.

    Parameters
    ----------
    model : InstructionEnergyModel
        Fitted on ``micro``.
    micro, workloads : DataFrame
        Instruction tables with ``sm_clock_mhz`` and ``power_w`` (as measured).
    tolerance_mhz : float, default=15.0
        A workload counts as below the top clock when it is more than this below it (one
        Hopper clock step: probed clocks scatter by a few MHz around a steady clock).

    Returns
    -------
    DataFrame
        ``workload``, ``sm_clock_mhz``, ``top_clock_mhz`` (the clock most microbenchmarks ran
        at, their median: the table's energies belong to it; the highest one would be a single
        row's reading, and on the H100 the probe of the tensor-core rows reads 5 % above the
        board's maximum clock),
        ``measured_power_w``, ``predicted_power_w`` (E_pred / T), ``error_pct`` (energy),
        ``dynamic_factor`` (measured ÷ predicted energy above the static part). At the lower
        clock the dynamic part scales by (V(f)/V(f_top))² ≤ 1: ``error_pct`` can only fall.
    """
    for name, table in (("micro", micro), ("workloads", workloads)):
        missing = [c for c in (schema.SM_CLOCK_MHZ, schema.POWER_W) if c not in table.columns]
        if missing:
            raise ValueError(f"{name}: column(s) {missing} missing (measured clock and power)")
    top = float(np.nanmedian(micro[schema.SM_CLOCK_MHZ]))
    below = workloads[workloads[schema.SM_CLOCK_MHZ] < top - tolerance_mhz]
    rows = below[np.isfinite(below[schema.ENERGY_J])]
    table = prediction_table(rows)
    pred = model.predict(table) if len(table) else np.array([])
    t, y = rows[schema.TIME_S].to_numpy(float), rows[schema.ENERGY_J].to_numpy(float)
    static = rows[schema.STATIC_POWER_W].to_numpy(float) * t if schema.STATIC_POWER_W in rows \
        else np.full(len(rows), model.static_power_w_) * t
    return pd.DataFrame({
        schema.WORKLOAD: rows[schema.WORKLOAD].to_numpy(),
        schema.SM_CLOCK_MHZ: rows[schema.SM_CLOCK_MHZ].to_numpy(float),
        schema.TOP_CLOCK_MHZ: top, schema.MEASURED_POWER_W: rows[schema.POWER_W].to_numpy(float),
        schema.PREDICTED_POWER_W: pred / t, schema.ERROR_PCT: 100 * (pred / y - 1),
        schema.DYNAMIC_FACTOR: (y - static) / (pred - static)})
