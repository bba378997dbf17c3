"""The protocols by name: :data:`PROTOCOLS`, :func:`make_protocol` and the default protocol."""

from __future__ import annotations

import warnings

from ..runner_base import Runner
from .base import Protocol
from .continuous import Continuous
from .counter import Counter
from .good_practice import GoodPractice
from .launches import has_energy_counter
from .naive import Naive
from .steady_state import SteadyState

__all__ = ["DEFAULT_PROTOCOL", "PROTOCOLS", "default_protocol", "make_protocol"]

PROTOCOLS: dict[str, type[Protocol]] = {
    cls.name: cls for cls in (Naive, Continuous, GoodPractice, SteadyState, Counter)
}


def make_protocol(name: str, **params) -> Protocol:
    """Protocol ``name`` with ``params`` (e.g. ``make_protocol("continuous", duration_s=0.5)``)."""
    try:
        cls = PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"protocol: unknown protocol {name!r}; known: {sorted(PROTOCOLS)}") from None
    from ...validation import check_params

    params = check_params(f"protocol {name!r}", cls, params)
    for key in ("max_duration_s",):
        if key in params and not params[key] > 0:
            raise ValueError(f"protocol {name!r}[{key!r}] must be > 0, got {params[key]!r}")
    try:
        return cls(**params)
    except TypeError as err:
        raise ValueError(f"protocol {name!r}: bad parameters {params}: {err}") from None


#: The protocol ``measure``, campaigns and :func:`powermodels.measure` use unless told otherwise.
DEFAULT_PROTOCOL = "counter"


def default_protocol(runner: Runner, **params) -> Protocol:
    """The default protocol for ``runner``'s device: ``counter`` where it has an energy counter.

    A device without one gets ``good_practice`` (with a :class:`RuntimeWarning`);
    ``params`` go to whichever protocol is chosen, and those the fallback does
    not know are dropped with the warning naming them.
    """
    if has_energy_counter(runner):
        return make_protocol(DEFAULT_PROTOCOL, **params)
    known = {f for f in GoodPractice.__dataclass_fields__}
    dropped = sorted(set(params) - known)
    warnings.warn(f"{runner.device_name} reports no energy counter: measuring with good_practice "
                  f"instead of {DEFAULT_PROTOCOL}" + (f" (ignoring {dropped})" if dropped else ""),
                  RuntimeWarning, stacklevel=2)
    return make_protocol(GoodPractice.name, **{k: v for k, v in params.items() if k in known})
