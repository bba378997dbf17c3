"""The :class:`Workload` abstraction every runner, protocol and campaign takes.

A workload is something the harness can execute many times and time: one of
the registry kernels (:class:`~.registry.RegistryKernel`), a user's CUDA source
with tunable parameters (:class:`~.source.SourceKernel`), a Python callable
that enqueues GPU work (:class:`~.callables.CallableWorkload`) or an external
program (:class:`powermodels.measuring.program.ProgramWorkload`). Whatever its
kind it has

* a ``name`` — the run table's ``kernel`` column;
* tunable parameters (``tune_params``, possibly none) with restrictions, a
  default configuration and a stable configuration id (the ``config`` column);
* :meth:`Workload.prepare` — on a real GPU, an object whose ``launch(stream)``
  enqueues one execution and whose ``timing`` says how to time it:
  ``"events"`` (CUDA events on the current stream) or ``"synchronize"``
  (a device synchronize before and after, for work on other streams);
* :meth:`Workload.simulated` — its twin on the simulated GPU
  (:class:`~powermodels.devices.simulated.SimulatedWorkload`), so the same
  protocols run without a GPU.
"""

from __future__ import annotations

import itertools
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping

from .expressions import Restriction

__all__ = ["TIMINGS", "Prepared", "PreparedRaw", "Workload", "WorkloadError", "check_tunable_names", "format_value",
           "parse_value"]

#: How a prepared workload is timed: CUDA events on the current stream, or device synchronizes.
TIMINGS = ("events", "synchronize")


class WorkloadError(ValueError):
    """A user workload failed: a callable raised, a source did not compile, a result was wrong.

    A ``ValueError``, so the CLI prints it as one line.
    """


class Prepared(ABC):
    """A workload ready to run on a real GPU: ``launch(stream)`` enqueues one execution.

    Attributes
    ----------
    timing : {"events", "synchronize"}
        ``"events"``: the work runs on the current CuPy stream, so CUDA events
        recorded there before and after bracket it. ``"synchronize"``: the
        work may run on other streams, so the runner synchronizes the device
        before and after and reads the host clock.
    """

    timing: str = "events"

    @abstractmethod
    def launch(self, stream=None) -> None:
        """Enqueue one execution (on ``stream``, or the current stream when None)."""

    def check(self) -> float:
        """Run once and return the largest error against the reference (0 when there is none)."""
        return 0.0

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what :meth:`Workload.prepare` allocated."""


class PreparedRaw(Prepared):
    """A compiled CUDA function with its launch shape and arguments: ``function``,
    ``grid``, ``block`` and ``args`` attributes; ``launch`` calls it once."""

    def launch(self, stream=None) -> None:
        """Enqueue one launch on ``stream`` (the current stream when None)."""
        if stream is None:
            self.function(self.grid, self.block, self.args)
        else:
            self.function(self.grid, self.block, self.args, stream=stream)


def check_tunable_names(owner: str, names) -> None:
    """ValueError when a tunable parameter would overwrite a run-table column (one column per tunable)."""
    from .. import schema

    clash = sorted(set(names) & set(schema.RUN_TABLE.columns))
    if clash:
        raise ValueError(f"{owner}: tunable parameter(s) {clash} have the names of run-table columns; "
                         "rename them")


def parse_value(name: str, text: str, choices: tuple):
    """A parameter value from text, typed like the parameter's ``choices`` (ValueError naming it)."""
    text = text.strip()
    for c in choices:  # exact spelling of a listed value first (strings, floats)
        if text == str(c):
            return c
    kinds = {type(c) for c in choices if not isinstance(c, bool)}
    if kinds and kinds <= {int}:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"config: parameter {name!r} value {text!r} is not an integer") from None
    if kinds and kinds <= {int, float}:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"config: parameter {name!r} value {text!r} is not a number") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def format_value(value) -> str:
    """A parameter value as it appears in a configuration id."""
    if hasattr(value, "item"):  # numpy scalar
        value = value.item()
    return str(value)


class Workload(ABC):
    """Something the harness runs and times: a kernel, a source, a callable or a program.

    Subclasses set ``name``, ``kind``, ``tune_params`` (name → tuple of values,
    ``{}`` when nothing is tunable), ``default`` (a full configuration) and
    ``restrictions`` (``(description, predicate)`` pairs), and implement
    :meth:`prepare`; :meth:`simulated` raises unless the workload has a twin.
    """

    name: str
    kind: str
    tune_params: dict[str, tuple]
    restrictions: tuple[Restriction, ...] = ()

    # -- configurations -----------------------------------------------------

    @property
    def default(self) -> dict:
        """The configuration used when none is given: the first valid one of the search space."""
        if not self.tune_params:
            return {}
        cached = getattr(self, "_default_cache", None)
        if cached is None:
            cached = self.search_space()[0]
            self._default_cache = cached
        return dict(cached)

    def _coerce(self, key: str, value):
        """``value`` typed like parameter ``key`` (integers stay integers)."""
        choices = self.tune_params[key]
        if isinstance(value, str):
            return parse_value(key, value, choices)
        if hasattr(value, "item"):
            value = value.item()
        if all(isinstance(c, int) and not isinstance(c, bool) for c in choices):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"config: parameter {key!r} value {value!r} is not an integer")
        return value

    def _complete(self, config: Mapping) -> dict:
        unknown = set(config) - set(self.tune_params)
        if unknown:
            what = f"tunable: {list(self.tune_params)}" if self.tune_params else "it has no tunable parameters"
            raise ValueError(f"config: unknown parameter(s) {sorted(unknown)} for {self.kind} "
                             f"workload {self.name!r}; {what}")
        full = self.default
        full.update({k: self._coerce(k, v) for k, v in config.items()})
        return full

    def parse_config(self, text: str | Mapping | None = None) -> dict:
        """``"p1=v1,p2=v2"`` (or a dict, or None) as a full configuration (defaults filled in).

        Raises
        ------
        ValueError
            Naming the unknown parameter or the value of the wrong type.
        """
        if text is None or (isinstance(text, str) and not text.strip()):
            return self.default
        if isinstance(text, Mapping):
            return self._complete(text)
        out = {}
        for part in str(text).split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"config: expected 'name=value', got {part!r}")
            key = key.strip()
            if key not in self.tune_params:
                self._complete({key: value})  # raises naming the unknown parameter
            out[key] = parse_value(key, value, self.tune_params[key])
        return self._complete(out)

    def invalid_reasons(self, config: Mapping) -> list[str]:
        """The restrictions ``config`` breaks (empty when it is valid)."""
        return self._broken(self._complete(config))

    def _broken(self, full: dict) -> list[str]:
        reasons = []
        for text, ok in self.restrictions:
            try:
                good = ok(full)
            except Exception as err:  # a restriction that fails is a broken restriction, named
                raise ValueError(f"restriction {text!r} of {self.name!r} failed on "
                                 f"{self.config_id(full)!r}: {type(err).__name__}: {err}") from None
            if not good:
                reasons.append(text)
        return reasons

    def validate_config(self, config: Mapping | None = None) -> dict:
        """The full configuration, or ``ValueError`` naming the broken restriction."""
        full = self._complete(config or {})
        reasons = self.invalid_reasons(full)
        if reasons:
            raise ValueError(f"config {self.config_id(full)!r} of {self.name!r} is invalid: "
                             f"{'; '.join(reasons)}")
        return full

    def config_id(self, config: Mapping | None = None) -> str:
        """Stable id ``"p1=v1,p2=v2"`` in the order of ``tune_params`` (``""`` when none)."""
        full = self._complete(config or {})
        return ",".join(f"{k}={format_value(full[k])}" for k in self.tune_params)

    def search_space(self, restrict: bool = True) -> list[dict]:
        """Every configuration (only the valid ones when ``restrict``).

        Raises
        ------
        ValueError
            When the restrictions reject every configuration.
        """
        keys = list(self.tune_params)
        configs = [dict(zip(keys, values, strict=True))
                   for values in itertools.product(*self.tune_params.values())]
        if restrict and self.restrictions:
            every = len(configs)
            configs = [c for c in configs if not self._broken(c)]
            if not configs:
                raise ValueError(f"{self.kind} workload {self.name!r}: the restrictions "
                                 f"{[t for t, _ in self.restrictions]} reject all {every} configurations")
        return configs

    # -- running ------------------------------------------------------------

    @abstractmethod
    def prepare(self, config: Mapping | None = None) -> Prepared:
        """Ready ``config`` to run on the current CUDA device (compile, allocate, bind)."""

    def simulated(self, config: Mapping | None = None):
        """Its :class:`~powermodels.devices.simulated.SimulatedWorkload` twin for ``config``."""
        raise ValueError(f"{self.kind} workload {self.name!r} has no simulated twin: pass "
                         "simulated=SimulatedTwin(...) to run it on the simulated GPU")

    def describe(self) -> str:
        """One line naming the workload for messages and reports."""
        return f"{self.kind} workload {self.name!r}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"
