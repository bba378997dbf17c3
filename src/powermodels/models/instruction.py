"""Per-instruction energy model (Wattchmen): non-negative joint solve over microbenchmarks.

Energy of a run (Wattchmen eq. 1-3)::

    E_total = (P_const + P_static) · T_exec + Σ_i count_i · e_i

The per-opcode dynamic energies ``e_i`` are fitted jointly over all
microbenchmarks with a non-negative least-squares solve (§3.1), so the
ancillary instructions of one benchmark are attributed with the energies that
other benchmarks pin down. Coverage of opcodes never fitted is extended
(§3.4-3.5) by

* **grouping** — modifiers that do not change the energy are dropped
  (``STG.E.EF.64`` → ``STG.E.64``; every ``ISETP.*`` → ``ISETP``), optionally
  truncated to ``modifier_depth`` modifiers; at prediction an unknown variant
  takes the energy of the fitted variant of the same base opcode sharing the
  most leading modifiers (``IMAD.MOV.U32`` → ``IMAD``);
* **scaling** — global-memory opcodes are split by the profiled L1/L2 hit
  rates into ``OP@L1``, ``OP@L2``, ``OP@DRAM``; a level never measured for an
  opcode is scaled from another level with the median level ratio of opcodes
  measured at both; tensor instructions (``HGMMA.64x128x16``) are scaled from
  the per-multiply-accumulate energy of measured MMA instructions;
* **bucketing** — any other unknown opcode gets the mean energy of the known
  opcodes in its bucket (FP32, FP64, FP16, SFU, INT, CONV, CONTROL, WARP,
  MEM-shared, MEM-global, MEM-local, TENSOR, MISC).

:meth:`InstructionEnergyModel.transfer` implements the affine transfer of §6:
fit a new system from a fraction of its benchmarks and map the reference
system's energy table onto it with a least-squares line.

This module holds the estimator (parameters, fit, predict); its jobs live in
sibling modules: the opcode vocabulary and grouping rules in
:mod:`.instruction_opcodes`, reading an instruction table into features in
:mod:`.instruction_features`, the non-negative solve in :mod:`.instruction_solve`,
the extension tables, energy lookup, breakdown and coverage in
:mod:`.instruction_attribution`, and the transfer in :mod:`.instruction_transfer`.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import (
    _check_sample_weight,
    check_is_fitted,
    check_non_negative,
    validate_data,
)

from .. import schema
from ._plain_state import PlainStateMixin
from .instruction_attribution import (
    ExtensionTables,
    covered_share,
    energy_breakdown,
    energy_table,
    extension_tables,
)
from .instruction_features import table_features
from .instruction_opcodes import (
    BUCKETS,
    TRAFFIC_FEATURES,
    alu_base,
    group_opcode,
    mma_macs,
    opcode_bucket,
)
from .instruction_solve import identifiability, solve_energies
from .instruction_transfer import affine_transfer

# BUCKETS, group_opcode, mma_macs and opcode_bucket live in instruction_opcodes; re-exported
# because tests and callers import them from here
__all__ = ["BUCKETS", "InstructionEnergyModel", "group_opcode", "mma_macs", "opcode_bucket"]


class InstructionEnergyModel(PlainStateMixin, RegressorMixin, BaseEstimator):
    """Wattchmen per-instruction energy model as a scikit-learn regressor.

    ``X`` is an instruction table (one row per benchmark: ``op:<OPCODE>``
    count columns, ``time_s``, optionally ``static_power_w``, ``l1_hit_rate``,
    ``l2_hit_rate``; see :func:`powermodels.schema.validate_instruction_table`)
    or a plain non-negative array, whose columns are then taken as opcodes
    (named ``x0, x1, ...``) with zero run time. ``y`` is the measured energy
    per run (J); for a table it defaults to its ``energy_j`` column.

    Parameters
    ----------
    modifier_depth : int or None, default=None
        Group opcodes to at most this many modifiers (None: keep all).
    group_rules : bool or callable, default=True
        True applies :func:`group_opcode`'s rules; a callable ``str → str``
        replaces them; False keeps opcode names as profiled.
    extension : {"bucket", "none"}, default="bucket"
        "none" predicts only from directly fitted energies (Wattchmen-Direct);
        "bucket" adds scaling and bucketing for unknown opcodes
        (Wattchmen-Pred).
    memory_levels : bool, default=True
        Split global-memory opcodes by the L1/L2 hit-rate columns (when present).
    memory_traffic : bool, default=True
        When the table has the ``l1_sectors``, ``l2_sectors`` and
        ``dram_sectors`` columns, fit an energy per 32-byte sector at each
        level besides the per-instruction energies (an extension of
        Wattchmen: an uncoalesced load moves up to 8× the bytes of a
        coalesced one for the same instruction count).
    uncoalesced : bool, default=False
        With ``memory_traffic`` and an ``l1_sectors`` column, also fit an energy per L1
        sector beyond what the global loads/stores would move fully coalesced
        (:func:`~powermodels.models.instruction_opcodes.uncoalesced_sectors`; our
        extension, issue 26): a gathered or strided sector is a separate request, which
        the coalesced microbenchmarks' per-sector energies do not price.
    alu_base_only : bool, default=False
        After the other grouping, keep only the base opcode of ALU and control opcodes
        (``SHF.R.U32.HI`` → ``SHF``) and every modifier of memory and tensor ones
        (:func:`~powermodels.models.instruction_opcodes.alu_base`).
    static_power_w : float or None, default=None
        Constant + static power. None: per-row ``static_power_w`` column of the
        table when present, otherwise fitted as a non-negative coefficient of
        ``time_s``.
    min_share : float, default=0.05
        An opcode is fitted only if it is at least this fraction of the
        instructions of some training row; rarer ones (prologue/epilogue
        instructions) are left to the extension — a column that is never
        more than noise would otherwise absorb residual energy.
    alpha : float, default=1e-6
        Weight of a small ridge term ``alpha · Σ_j (s̄/s_j)·(s_j e_j)²``
        (``s_j`` the column norm, ``s̄`` its median) added to the
        non-negative solve. Where rows cannot separate opcodes (they always
        occur together) it splits their energy equally per instruction
        instead of giving it all to one; elsewhere its bias is of order
        ``alpha``. 0 gives plain NNLS.
    solver : {"nnls", "bvls"}, default="nnls"
        ``scipy.optimize.nnls`` (falls back to ``lsq_linear(method="bvls")``
        if it does not converge) or ``lsq_linear(method="bvls")`` directly.
    power_limit_w : float or None, default=None
        The board's power limit. When set, a prediction is at most
        ``power_limit_w · time_s``: a kernel whose table energy would draw more is
        held at the limit by the GPU (clock and voltage lowered), and its measured
        time is the time at that lower clock. ``breakdown`` shows the table's
        (unlimited) attribution. None: no limit.

    Attributes
    ----------
    energies_ : pandas.Series
        Fitted dynamic energy per instruction (J) of each fitted feature.
    identifiable_ : pandas.Series of bool
        False for features the training rows cannot separate: the norm of
        their component in the null space of the column-scaled design matrix
        exceeds 0.1 (1 means fully free).
    static_power_w_ : float
        Constant + static power used for prediction when ``X`` has no column.
    rank_ : int
        Numerical rank of the (column-scaled) design matrix.
    residual_ : float
        ``‖A e − d‖₂`` recomputed in joules (d = energy − static energy).
    relative_residual_ : float
        ``residual_ / ‖d‖₂``.
    bucket_energies_ : dict
        ``(bucket, level)`` → mean fitted energy (level "" for non-memory).
    level_ratios_ : dict
        ``(from_level, to_level)`` → median energy ratio of memory opcodes.
    mac_energies_ : dict
        MMA family ("H", "I", "D", "") → energy per multiply-accumulate (J).
    solver_used_ : str
        "nnls" or "bvls".
    """

    _expected_failed_checks: ClassVar[dict[str, str]] = {
        "check_sample_weight_equivalence_on_dense_data":
            ("column scaling and the ridge term use unweighted column norms, so weighted and "
             "repeated rows give solutions that differ by about alpha"),
    }

    _parameter_constraints: ClassVar[dict] = {
        "modifier_depth": [Interval(Integral, 0, None, closed="left"), None],
        "group_rules": ["boolean", callable],
        "extension": [StrOptions({"bucket", "none"})],
        "memory_levels": ["boolean"],
        "memory_traffic": ["boolean"],
        "uncoalesced": ["boolean"],
        "alu_base_only": ["boolean"],
        "static_power_w": [Interval(Real, 0, None, closed="left"), None],
        "min_share": [Interval(Real, 0, 1, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "solver": [StrOptions({"nnls", "bvls"})],
        "power_limit_w": [Interval(Real, 0, None, closed="neither"), None],
    }

    def __init__(self, modifier_depth=None, group_rules=True, extension="bucket",
                 memory_levels=True, memory_traffic=True, static_power_w=None,
                 min_share=0.05, alpha=1e-6, solver="nnls", power_limit_w=None,
                 uncoalesced=False, alu_base_only=False):
        self.modifier_depth = modifier_depth
        self.group_rules = group_rules
        self.extension = extension
        self.memory_levels = memory_levels
        self.memory_traffic = memory_traffic
        self.uncoalesced = uncoalesced
        self.alu_base_only = alu_base_only
        self.static_power_w = static_power_w
        self.min_share = min_share
        self.alpha = alpha
        self.solver = solver
        self.power_limit_w = power_limit_w

    # ------------------------------------------------------------------ input

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.regressor_tags.poor_score = True
        return tags

    def _check_params(self):
        self._validate_params()

    def _group(self, op: str) -> str:
        if callable(self.group_rules):
            op = group_opcode(self.group_rules(op), self.modifier_depth, rules=False)
        else:
            op = group_opcode(op, self.modifier_depth, rules=bool(self.group_rules))
        return alu_base(op) if self.alu_base_only else op

    @staticmethod
    def _is_table(X) -> bool:
        return isinstance(X, pd.DataFrame) and bool(schema.opcode_columns(X))

    def _parse(self, X, *, fit: bool, y=None):
        """Counts (DataFrame of grouped/split features), time, static power, y."""
        if self._is_table(X):
            if fit and y is None:
                schema.validate_instruction_table(X)
                y = X[schema.ENERGY_J].to_numpy(dtype=float)
            counts, time, static = table_features(
                X, self._group, memory_levels=self.memory_levels, memory_traffic=self.memory_traffic,
                uncoalesced=self.uncoalesced, require_instructions=fit)
            if fit:
                ops = schema.opcode_columns(X)
                self.n_features_in_ = len(ops)
                self.feature_names_in_ = np.asarray(ops, dtype=object)
                self._table_mode = True
            return counts, time, static, y
        # plain arrays (and DataFrames without opcode columns): every column is an opcode
        if fit:
            X, y = validate_data(self, X, y, y_numeric=True)
            self._table_mode = False
        else:
            X = validate_data(self, X, reset=False)
        check_non_negative(X, f"{type(self).__name__}.{'fit' if fit else 'predict'}")
        names = (list(map(str, self.feature_names_in_)) if hasattr(self, "feature_names_in_")
                 else [f"x{i}" for i in range(X.shape[1])])
        counts = pd.DataFrame(np.asarray(X, dtype=float), columns=names)
        return counts, np.zeros(X.shape[0]), None, y

    # ------------------------------------------------------------------ fit

    def fit(self, X, y=None, sample_weight=None):
        """Fit the per-opcode energies jointly over all rows (Wattchmen §3.1).

        Parameters
        ----------
        X : instruction table (DataFrame) or array-like of shape (n_runs, n_opcodes)
            Opcode counts per run (``schema.OPCODE_PREFIX`` columns of a table,
            with its time and static-power columns), or a plain count matrix.
        y : array-like of shape (n_runs,), optional
            Measured energy per run (J); defaults to the table's ``energy_j``.
        sample_weight : array-like of shape (n_runs,), optional
            Row weights of the least-squares solve.

        Returns
        -------
        self : object
            The fitted model.
        """
        self._check_params()
        for attr in ("feature_names_in_", "n_features_in_"):
            if hasattr(self, attr):
                delattr(self, attr)
        counts, time, static, y = self._parse(X, fit=True, y=y)
        y = np.asarray(y, dtype=float)
        if y.shape != (len(counts),):
            raise ValueError(f"y: expected shape ({len(counts)},), got {y.shape}")
        if not np.all(np.isfinite(y)):
            raise ValueError("y: has NaN or infinite energies")
        w = _check_sample_weight(sample_weight, np.empty((len(counts), 1)))

        # constant + static energy: known per row, fixed, or fitted on time_s
        if self.static_power_w is not None:
            static = np.full(len(counts), float(self.static_power_w))
        fit_static = static is None and np.any(time > 0)
        d = y - (time * static if static is not None else 0.0)

        traffic = np.array([c in TRAFFIC_FEATURES for c in counts.columns], dtype=bool)
        instr = counts.to_numpy()[:, ~traffic]
        totals = instr.sum(axis=1)
        shares = counts.to_numpy() / np.where(totals > 0, totals, 1.0)[:, None]
        keep = (shares.max(axis=0, initial=0.0) >= self.min_share) | traffic
        keep &= counts.to_numpy().sum(axis=0) > 0
        features = list(counts.columns[keep])
        A = counts[features].to_numpy(dtype=float)
        if fit_static:
            A = np.column_stack([A, time])
        coef, As, solver = solve_energies(A, d, w, alpha=self.alpha, free_last=fit_static,
                                          solver=self.solver)
        e = coef[: len(features)]
        self.static_power_w_ = (float(coef[-1]) if fit_static else
                                float(np.mean(static)) if static is not None else 0.0)
        self.residual_ = float(np.linalg.norm(A @ coef - d))
        self.relative_residual_ = self.residual_ / max(float(np.linalg.norm(d)), 1e-300)
        self.solver_used_ = solver
        # rank and identifiability from the scaled matrix's row space
        self.rank_, free = identifiability(As)
        self.energies_ = pd.Series(e, index=pd.Index(features, name=schema.OPCODE), name=schema.ENERGY_J)
        self.identifiable_ = pd.Series(~free[: len(features)], index=self.energies_.index,
                                       name="identifiable")
        self._derive_extension_tables()
        return self

    def _derive_extension_tables(self):
        """Set the extension's tables from ``energies_`` (the transfer calls it after editing them)."""
        tables = extension_tables(self.energies_, self.identifiable_)
        self.bucket_energies_ = tables.bucket_energies
        self.level_ratios_ = tables.level_ratios
        self._by_op_levels = tables.levels_by_opcode
        self.mac_energies_ = tables.mac_energies

    # ------------------------------------------------------------------ predict

    def _energy_table(self, counts: pd.DataFrame, extension: str | None = None) -> pd.DataFrame:
        """Energy per instruction and its source for each column of ``counts``."""
        ext = self.extension if extension is None else extension
        tables = ExtensionTables(self.bucket_energies_, self.level_ratios_, self._by_op_levels,
                                 self.mac_energies_)
        return energy_table(counts.columns, self.energies_, tables, ext)

    def predict(self, X):
        """Total energy per run: ``time·(P_const + P_static) + Σ count·e`` (Wattchmen §3.5).

        With ``power_limit_w`` set, ``min(that, power_limit_w · time)``: the GPU's power
        controller holds a kernel at its limit (not in Wattchmen, whose tables are taken
        below the limit).

        Parameters
        ----------
        X : instruction table or array-like of shape (n_runs, n_opcodes)
            Opcode counts per run, as in ``fit``.

        Returns
        -------
        ndarray of shape (n_runs,)
            Predicted energy (J).
        """
        check_is_fitted(self, "energies_")
        counts, time, static = self._predict_inputs(X)
        table = self._energy_table(counts)
        energy = (time * static
                  + counts.to_numpy() @ table[schema.ENERGY_PER_INSTRUCTION_J].to_numpy())
        if self.power_limit_w is None:
            return energy
        return np.where(time > 0, np.minimum(energy, self.power_limit_w * time), energy)

    def _predict_inputs(self, X):
        if self._table_mode and not self._is_table(X):
            raise ValueError("X: the model was fitted on an instruction table; pass one "
                             f"(columns named {schema.OPCODE_PREFIX}<OPCODE>)")
        counts, time, static, _ = self._parse(X, fit=False)
        if self.static_power_w is not None or static is None:
            static = np.full(len(counts), self.static_power_w_)
        return counts, time, static

    def breakdown(self, X, by: str = "opcode") -> pd.DataFrame:
        """Energy attribution per opcode (long table) or per component (wide table).

        Parameters
        ----------
        X : instruction table or array-like
            Opcode counts per run, as in ``fit``.
        by : {"opcode", "component"}, default="opcode"
            "opcode": one row per (run, opcode) with columns ``run``,
            ``workload`` (if the table has one), ``opcode``, ``component``,
            ``count``, ``energy_per_instruction_j``, ``energy_j``, ``source``;
            plus one ``STATIC`` row per run for ``time·(P_const+P_static)``.
            "component": one row per run, one column per component (J).

        Returns
        -------
        DataFrame
            The long (``by="opcode"``) or wide (``by="component"``) attribution.
        """
        if by not in ("opcode", "component"):
            raise ValueError(f"by: must be 'opcode' or 'component', got {by!r}")
        check_is_fitted(self, "energies_")
        counts, time, static = self._predict_inputs(X)
        table = self._energy_table(counts).set_index(schema.OPCODE)
        names = (X[schema.WORKLOAD].to_numpy() if isinstance(X, pd.DataFrame)
                 and schema.WORKLOAD in X.columns else None)
        return energy_breakdown(counts, time, static, table, workloads=names, by=by)

    def coverage(self, X, extension: str | None = None) -> np.ndarray:
        """Fraction of each run's instructions that have an energy (Wattchmen §5.2 "coverage").

        With ``extension="none"`` only directly fitted opcodes count
        (Wattchmen-Direct coverage); with "bucket", scaled and bucketed ones too.
        Defaults to the model's ``extension``.
        """
        check_is_fitted(self, "energies_")
        counts, _, _ = self._predict_inputs(X)
        instr = [c for c in counts.columns if c not in TRAFFIC_FEATURES]  # sectors are not instructions
        counts = counts[instr]
        return covered_share(counts, self._energy_table(counts, extension))

    # ------------------------------------------------------------------ transfer (§6)

    def transfer(self, X, y=None, *, fraction: float | None = None, random_state=None):
        """Fit a new system from some of its benchmarks via an affine map (Wattchmen §6).

        See :func:`powermodels.models.instruction_transfer.affine_transfer`
        (this model is the reference system).

        Returns
        -------
        InstructionEnergyModel
            A fitted model for the new system, with ``transfer_`` =
            ``{"slope", "intercept", "r2", "n_common", "n_rows", "n_transferred"}``.
        """
        return affine_transfer(self, X, y, fraction=fraction, random_state=random_state)
