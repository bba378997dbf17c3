"""Every public estimator passes scikit-learn's common checks (DESIGN.md ◆)."""

from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from powermodels.utils import all_estimators, expected_failed_checks


def _instances():
    out = []
    for _, cls in all_estimators():
        make = getattr(cls, "_check_instance", None)  # classmethod for required params
        out.append(make() if make is not None else cls())
    return out


def test_all_estimators_lists_pairs():
    pairs = all_estimators()
    assert all(isinstance(n, str) and isinstance(c, type) for n, c in pairs)
    assert [n for n, _ in pairs] == sorted(n for n, _ in pairs)


@parametrize_with_checks(_instances(), expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)


def test_every_models_estimator_is_exported():
    import powermodels.models as models

    in_models = {n for n, c in all_estimators() if c.__module__.startswith("powermodels.models.")}
    assert in_models <= set(models.__all__)
    assert all(getattr(models, n) is c for n, c in all_estimators() if n in in_models)
