"""Discovery of the package's estimators, for the common sklearn checks."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

__all__ = ["all_estimators", "expected_failed_checks"]

# Sub-packages whose public classes are estimators.
_ESTIMATOR_PACKAGES = ("powermodels.models", "powermodels.sensor")


def all_estimators() -> list[tuple[str, type]]:
    """Every public scikit-learn estimator of powermodels, as ``(name, class)`` pairs.

    Walks :mod:`powermodels.models` and :mod:`powermodels.sensor` like
    :func:`sklearn.utils.discovery.all_estimators` walks sklearn: public,
    non-abstract classes deriving from ``BaseEstimator`` and defined in the
    package. Sorted by name.
    """
    from sklearn.base import BaseEstimator

    found: dict[str, type] = {}
    for package_name in _ESTIMATOR_PACKAGES:
        package = importlib.import_module(package_name)
        modules = [package]
        for info in pkgutil.walk_packages(package.__path__, prefix=package_name + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            modules.append(importlib.import_module(info.name))
        for module in modules:
            for name, cls in inspect.getmembers(module, inspect.isclass):
                if (
                    not name.startswith("_")
                    and issubclass(cls, BaseEstimator)
                    and cls.__module__.startswith("powermodels.")
                    and not inspect.isabstract(cls)
                ):
                    found[name] = cls
    return sorted(found.items())


def expected_failed_checks(estimator) -> dict[str, str]:
    """Checks an estimator is expected to fail, with the reason for each.

    Each estimator class declares them in a class attribute
    ``_expected_failed_checks = {"check_name": "reason", ...}``; this is the
    callable passed to ``parametrize_with_checks(expected_failed_checks=...)``.
    """
    declared = getattr(type(estimator), "_expected_failed_checks", {}) or {}
    return dict(declared)
