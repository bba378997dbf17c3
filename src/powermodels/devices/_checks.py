"""Argument checks shared by the simulated GPU's dataclasses and methods."""

from __future__ import annotations

import math
from dataclasses import fields

import numpy as np


def finite(name: str, value, *, minimum: float | None = None, strict: bool = False,
           maximum: float | None = None) -> float:
    """``value`` as float, or a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if minimum is not None and (v <= minimum if strict else v < minimum):
        raise ValueError(f"{name} must be {'>' if strict else '>='} {minimum:g}, got {value!r}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum:g}, got {value!r}")
    return v


def positive_fields(obj, owner: str, *, skip=(), nonneg=(), any_sign=()) -> None:
    """Check every dataclass field of ``obj`` not in ``skip`` with :func:`finite`.

    A field must be > 0, or >= 0 when in ``nonneg``, or any finite number
    when in ``any_sign``; the error names ``owner: field``.
    """
    for f in fields(obj):
        if f.name in skip:
            continue
        value = getattr(obj, f.name)
        if f.name in any_sign:
            finite(f"{owner}: {f.name}", value)
        else:
            finite(f"{owner}: {f.name}", value, minimum=0.0, strict=f.name not in nonneg)
