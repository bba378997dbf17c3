"""One model per configuration, and the per-config-vs-global comparison (thesis §5.7).

The thesis found that one frequency–power and one frequency–time curve do not
generalise across the 216 GEMM configurations of an auto-tuning search space
(§5.7.3): every configuration has its own curve. :class:`GroupedEstimator`
fits one clone of any estimator per group (config, kernel, clock...), and
:func:`compare_per_group_vs_global` measures the difference with held-out
clocks and held-out groups.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.metrics import mean_absolute_percentage_error, r2_score
from sklearn.model_selection import GroupKFold
from sklearn.utils import get_tags
from sklearn.utils._param_validation import HasMethods, StrOptions
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from .. import schema
from ._columns import COLUMN, column_index, column_label

__all__ = ["GroupedEstimator", "compare_per_group_vs_global"]

_UNSEEN = ("error", "global", "nan")


def _inner_has(attr):
    return lambda self: hasattr(self.estimator, attr)


class GroupedEstimator(MetaEstimatorMixin, BaseEstimator):
    """Fit one clone of ``estimator`` per group; route rows to their group's clone.

    Groups come from a column of ``X`` (``group_column``, removed before the
    inner estimator sees ``X``) or from the ``groups`` argument of ``fit``,
    ``predict`` and ``transform``. Use ``group_column`` inside
    ``GridSearchCV``/``cross_validate``, which call ``predict`` without extra
    arguments; their own ``groups=`` then drives the splitter (e.g.
    ``GroupKFold`` for held-out configurations, where ``unseen="global"``
    is needed).

    :class:`~powermodels.models.FrequencyPowerModel` and
    :class:`~powermodels.models.RationalTimeModel` are fitted for all groups
    at once (one vectorised Levenberg–Marquardt); other estimators in a loop.

    Parameters
    ----------
    estimator : estimator
        Cloned once per group. It sees ``X`` without the group column, so its
        column positions count from there (names are unaffected).
    group_column : str, int or None, default=None
        Column of ``X`` holding the group; None: pass ``groups=``, and without
        it every row is one group.
    unseen : {"error", "global", "nan"}, default="error"
        Rows of a group not seen in ``fit``: raise a ValueError naming the
        groups; use a ``global_estimator_`` fitted on all rows in ``fit``; or
        predict NaN (transform leaves them unchanged).

    Attributes
    ----------
    estimators_ : dict
        Fitted clone per group label.
    global_estimator_ : estimator or None
        Clone fitted on all rows (``unseen="global"`` only).
    groups_ : ndarray
        Group labels seen in ``fit``.
    """

    _parameter_constraints: ClassVar[dict] = {
        "estimator": [HasMethods(["fit"])],
        "group_column": [*COLUMN, None],
        "unseen": [StrOptions(set(_UNSEEN))],
    }

    def __init__(self, estimator, group_column=None, unseen="error"):
        self.estimator = estimator
        self.group_column = group_column
        self.unseen = unseen

    @classmethod
    def _check_instance(cls):
        from sklearn.linear_model import LinearRegression

        return cls(LinearRegression(), group_column=0, unseen="global")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.regressor_tags = inner.regressor_tags
        tags.classifier_tags = inner.classifier_tags
        tags.transformer_tags = inner.transformer_tags
        tags.target_tags.required = inner.target_tags.required
        tags.target_tags.positive_only = inner.target_tags.positive_only
        tags.input_tags.positive_only = inner.input_tags.positive_only
        tags.input_tags.string = True
        return tags

    # ------------------------------------------------------------------ helpers
    def _split(self, X, groups, fitting: bool):
        """Return ``(X_without_group_column, group_keys)``."""
        if isinstance(X, pd.DataFrame):
            if X.shape[0] == 0:
                raise ValueError(f"Found array with 0 sample(s) (shape={X.shape}) while a minimum of 1 is required.")
        else:
            X = check_array(X, dtype=None, ensure_all_finite=False, ensure_2d=True)
        if self.group_column is not None:
            if groups is not None:
                raise ValueError("pass either group_column or groups, not both")
            j = column_index(X, self.group_column, "group_column")
            if X.shape[1] < 2:
                raise ValueError(f"X has {X.shape[1]} feature(s); group_column leaves none for the estimator")
            keys = np.asarray(X.iloc[:, j] if isinstance(X, pd.DataFrame) else X[:, j])
            bad = np.array(pd.isna(pd.Series(keys, dtype=object)), dtype=bool)
            if keys.dtype.kind in "fc":
                bad = bad | ~np.isfinite(keys)
            if bad.any():
                raise ValueError(f"Input contains NaN or infinity: column {column_label(X, j)!r} (group_column)")
            rest = X.drop(columns=X.columns[j]) if isinstance(X, pd.DataFrame) else np.delete(X, j, axis=1)
            if not isinstance(rest, pd.DataFrame) and rest.dtype == object:
                rest = check_array(rest, dtype="numeric", ensure_all_finite=False)
            return rest, keys
        if groups is None:
            if not fitting and not getattr(self, "_single_", False):
                raise ValueError("groups is required: fit used groups but none were passed here")
            keys = np.zeros(X.shape[0], dtype=int)
        else:
            keys = np.asarray(groups)
            if keys.ndim != 1 or keys.shape[0] != X.shape[0]:
                raise ValueError(f"groups must be 1-D with one label per row ({X.shape[0]}), got shape {keys.shape}")
            if pd.isna(pd.Series(keys, dtype=object)).any():
                raise ValueError("groups has missing labels")
        return X, keys

    @staticmethod
    def _rows(X, idx):
        return X.iloc[idx] if isinstance(X, pd.DataFrame) else X[idx]

    # ---------------------------------------------------------------------- API
    def fit(self, X, y=None, groups=None, **fit_params):
        """Fit one clone of ``estimator`` per group (and a global one with ``unseen="global"``).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features (the group column too, with ``group_column``).
        y : array-like of shape (n_samples,) or None
            Target.
        groups : array-like of shape (n_samples,), default=None
            Group of every row, unless ``group_column`` is set.
        **fit_params : dict
            Passed to every clone's ``fit``.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._validate_params()
        if not isinstance(X, pd.DataFrame):
            X = check_array(X, dtype=None, ensure_all_finite=False, ensure_2d=True)
        validate_data(self, X, reset=True, skip_check_array=True)
        self._single_ = self.group_column is None and groups is None
        X, keys = self._split(X, groups, fitting=True)
        if y is not None:
            y = np.asarray(y)
            if y.ndim == 0:
                raise ValueError(f"y must hold one target per row of X, got a scalar {y.item()!r}")
            if y.ndim == 2 and y.shape[1] == 1:
                y = column_or_1d(y, warn=True)
            if y.shape[0] != X.shape[0]:
                raise ValueError(f"y has {y.shape[0]} rows, X has {X.shape[0]}")
        codes, labels = pd.factorize(pd.Series(keys, dtype=object), sort=True)
        labels = np.asarray(labels, dtype=object)
        batch = getattr(type(self.estimator), "_batch_fit_groups", None)
        if batch is not None and not fit_params and y is not None:
            fitted = batch(clone(self.estimator), X, y, codes, labels.size)
        else:
            fitted = []
            for g in range(labels.size):
                idx = np.flatnonzero(codes == g)
                yy = None if y is None else y[idx]
                fitted.append(clone(self.estimator).fit(self._rows(X, idx), yy, **fit_params))
        self.estimators_ = dict(zip(labels.tolist(), fitted, strict=True))
        self.groups_ = labels
        self.global_estimator_ = (
            clone(self.estimator).fit(X, y, **fit_params) if self.unseen == "global" else None
        )
        return self

    def _route(self, X, groups, method):
        check_is_fitted(self, "estimators_")
        if not isinstance(X, pd.DataFrame):
            X = check_array(X, dtype=None, ensure_all_finite=False, ensure_2d=True)
        validate_data(self, X, reset=False, skip_check_array=True)
        X, keys = self._split(X, groups, fitting=False)
        codes, labels = pd.factorize(pd.Series(keys, dtype=object), sort=True)
        unseen = [lab for lab in labels if lab not in self.estimators_]
        if unseen and self.unseen == "error":
            shown = ", ".join(map(repr, unseen[:5])) + (" ..." if len(unseen) > 5 else "")
            raise ValueError(
                f"{len(unseen)} group(s) not seen in fit: {shown}; set unseen='global' to fall back"
            )
        pieces = []
        for g, lab in enumerate(labels):
            idx = np.flatnonzero(codes == g)
            est = self.estimators_.get(lab, self.global_estimator_)
            pieces.append((idx, None if est is None else getattr(est, method)(self._rows(X, idx))))
        return X, pieces

    @available_if(_inner_has("predict"))
    def predict(self, X, groups=None):
        """Predict each row with its group's estimator.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features, as in ``fit``.
        groups : array-like of shape (n_samples,), default=None
            Group of every row, unless ``group_column`` is set.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_outputs)
            NaN for rows of unseen groups with ``unseen="nan"``.
        """
        X, pieces = self._route(X, groups, "predict")
        out = None
        for idx, pred in pieces:
            if pred is None:
                continue
            pred = np.asarray(pred)
            if out is None:
                out = np.full((X.shape[0], *pred.shape[1:]), np.nan,
                              dtype=float if pred.dtype.kind in "fiub" else object)
            out[idx] = pred
        if out is None:
            out = np.full(X.shape[0], np.nan)
        return out

    @available_if(_inner_has("transform"))
    def transform(self, X, groups=None):
        """Transform each row with its group's estimator; the group column is kept.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features, as in ``fit``.
        groups : array-like of shape (n_samples,), default=None
            Group of every row, unless ``group_column`` is set.

        Returns
        -------
        X_out : DataFrame or ndarray
            The transformed rows, in the input order.
        """
        X_full = X
        X, pieces = self._route(X, groups, "transform")
        rest = X.copy() if isinstance(X, pd.DataFrame) else np.array(X, dtype=float, copy=True)
        for idx, tr in pieces:
            if tr is None:
                continue
            values = tr.to_numpy() if isinstance(tr, pd.DataFrame) else np.asarray(tr)
            if isinstance(rest, pd.DataFrame):
                rest.iloc[idx] = values
            else:
                rest[idx] = values
        if self.group_column is None:
            return rest
        j = column_index(X_full, self.group_column, "group_column")
        if isinstance(X_full, pd.DataFrame):
            out = X_full.copy()
            for c in rest.columns:
                out[c] = rest[c].to_numpy()
            return out
        full = check_array(X_full, dtype=None, ensure_all_finite=False)
        return np.insert(rest, j, full[:, j].astype(float), axis=1) if full.dtype != object else (
            np.insert(rest.astype(object), j, full[:, j], axis=1)
        )

    @available_if(_inner_has("predict"))
    def score(self, X, y, groups=None, sample_weight=None):
        """R² of the grouped predictions (NaN rows of unseen groups are skipped).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features, as in ``fit``.
        y : array-like of shape (n_samples,)
            True target.
        groups : array-like of shape (n_samples,), default=None
            Group of every row, unless ``group_column`` is set.
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        score : float
            Coefficient of determination.
        """
        pred = self.predict(X, groups=groups)
        ok = ~np.isnan(pred.astype(float)) if pred.ndim == 1 else np.ones(len(pred), bool)
        sw = None if sample_weight is None else np.asarray(sample_weight)[ok]
        return r2_score(np.asarray(y)[ok], pred[ok], sample_weight=sw)


def _mape(y, pred) -> float:
    return 100.0 * float(mean_absolute_percentage_error(y, pred))


def compare_per_group_vs_global(estimator, X, y, groups, clocks, *, n_clock_splits=5,
                                n_group_splits=5) -> pd.DataFrame:
    """Per-group vs global models on held-out clocks and held-out groups (thesis §5.7).

    Three schemes, each a cross-validation with MAPE (%) on the held-out rows:

    - ``per-group / held-out clocks``: one model per group, trained on the
      other clocks of the same group (``GroupKFold`` over clocks);
    - ``global / held-out clocks``: one model for all groups, same folds;
    - ``global / held-out groups``: one model trained on the other groups
      (``GroupKFold`` over groups) — a configuration never measured.

    Parameters
    ----------
    estimator : regressor
        E.g. ``FrequencyPowerModel()`` or ``RationalTimeModel()``.
    X : array-like or DataFrame
        Features (the clock column for the curve models).
    y : array-like
        Target (power or time).
    groups : array-like
        Configuration / kernel of every row.
    clocks : array-like
        Clock of every row (the held-out unit for the first two schemes).
    n_clock_splits, n_group_splits : int
        Folds (capped at the number of distinct clocks / groups).

    Returns
    -------
    DataFrame
        One row per scheme: ``model``, ``held_out``, ``mape_pct`` (mean over
        folds), ``mape_std_pct``, ``n_folds``.
    """
    y = np.asarray(y, dtype=float)
    groups = np.asarray(groups)
    clocks = np.asarray(clocks)
    n = y.shape[0]
    if not groups.shape[0] == clocks.shape[0] == n or len(X) != n:
        raise ValueError(f"X, y, groups and clocks must have {n} rows each")
    rows = []
    take = GroupedEstimator._rows
    k_clk = min(n_clock_splits, np.unique(clocks).size)
    k_grp = min(n_group_splits, np.unique(groups).size)
    if k_clk < 2 or k_grp < 2:
        raise ValueError("need at least 2 distinct clocks and 2 distinct groups")
    per_group, global_clk, global_grp = [], [], []
    for train, test in GroupKFold(k_clk).split(X, y, clocks):
        grouped = GroupedEstimator(estimator, unseen="error").fit(take(X, train), y[train], groups=groups[train])
        per_group.append(_mape(y[test], grouped.predict(take(X, test), groups=groups[test])))
        glob = clone(estimator).fit(take(X, train), y[train])
        global_clk.append(_mape(y[test], glob.predict(take(X, test))))
    for train, test in GroupKFold(k_grp).split(X, y, groups):
        glob = clone(estimator).fit(take(X, train), y[train])
        global_grp.append(_mape(y[test], glob.predict(take(X, test))))
    for model, held, scores in (("per-group", "clocks", per_group), ("global", "clocks", global_clk),
                                ("global", "groups", global_grp)):
        rows.append({schema.MODEL: model, schema.HELD_OUT: held, schema.MAPE_PCT: float(np.mean(scores)),
                     schema.MAPE_STD_PCT: float(np.std(scores)), schema.N_FOLDS: len(scores)})
    return pd.DataFrame(rows)
