"""Every estimator declares sklearn's ``_parameter_constraints`` for all its parameters (issue 23).

With them, ``parametrize_with_checks`` (tests/test_common.py) runs sklearn's
``check_param_validation``: a bad value of any parameter fails in ``fit`` with an
``InvalidParameterError`` naming the parameter.
"""

from __future__ import annotations

import inspect

import pytest

from powermodels.utils import all_estimators


@pytest.mark.parametrize("name, estimator", all_estimators(), ids=[n for n, _ in all_estimators()])
def test_every_parameter_has_a_constraint(name, estimator):
    parameters = {p for p in inspect.signature(estimator.__init__).parameters if p != "self"}
    constraints = getattr(estimator, "_parameter_constraints", None)
    assert constraints is not None, f"{name} declares no _parameter_constraints"
    assert parameters <= set(constraints), f"{name}: no constraint for {sorted(parameters - set(constraints))}"
