"""powermodels: trustworthy GPU energy from the built-in NVML sensor, as scikit-learn models."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("powermodels")
except PackageNotFoundError:  # running from a source tree (PYTHONPATH=src)
    __version__ = "0.1.0+src"

from .devices import open_device
from .utils import all_estimators

__all__ = ["__version__", "all_estimators", "open_device"]
