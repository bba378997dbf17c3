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
