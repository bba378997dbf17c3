"""Strict checks of user input: campaign specs, protocol parameters, command options.

Everything a user writes — a campaign file, ``--protocol-param`` values, a
command's options — is checked here before anything is measured, by pure
functions (no device, no file system):

* a boolean is ``true``/``false``, never a string (``"no"`` is not false);
* an integer is an integer (``2.9`` is not 2, ``true`` is not 1);
* a number is a finite number (no NaN, no infinity, no string);
* a list is a list (``"1000"`` is not ``[1, 0, 0, 0]``);
* a table has only the keys it may have.

Each failure is a :class:`InputError` (a ``ValueError``) whose message is
**one line** naming the field and the value, e.g.
``campaign spec: 'repeats' must be an integer >= 1, got 2.9``. Nothing is
coerced silently: what is accepted is returned as it was given (integers as
``int``, numbers as ``float``).

>>> check_integer("campaign spec: 'repeats'", 3, minimum=1)
3
>>> check_boolean("campaign spec: 'exclusive'", "false")
Traceback (most recent call last):
...
powermodels.validation.InputError: campaign spec: 'exclusive' must be true or false, got 'false'
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import typing
from collections.abc import Mapping

__all__ = [
    "DEVICE_KINDS",
    "MAX_NESTING",
    "MAX_REPEATS",
    "InputError",
    "check_all_finite",
    "check_boolean",
    "check_campaign_spec",
    "check_clocks",
    "check_configs",
    "check_device_kwargs",
    "check_integer",
    "check_list",
    "check_mapping",
    "check_number",
    "check_params",
    "check_string",
    "parse_json",
    "range_text",
]

#: Device kinds a spec or an option may name.
DEVICE_KINDS = ("auto", "nvml", "simulated")
#: Deepest nesting of lists/tables accepted in a spec file (far beyond any real spec).
MAX_NESTING = 32
#: Most repeats of one configuration a campaign may ask for.
MAX_REPEATS = 10_000

# device_kwargs each device kind takes, with their checks (the simulated GPU's JSON-able ones)
_SIMULATED_KWARGS = ("preset", "seed", "reference_meter", "ambient_c", "history_s")
_NVML_KWARGS = ("index",)


class InputError(ValueError):
    """A user-given value is wrong; the message is one line naming the field and the value."""


def _show(value) -> str:
    """The value as a short one-line repr (long ones are cut, newlines escaped by repr)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(where: str, what: str, value) -> InputError:
    return InputError(f"{where} must be {what}, got {_show(value)}")


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_boolean(where: str, value) -> bool:
    """``value`` if it is ``True`` or ``False`` (not a string, not 0/1)."""
    if type(value) is bool or type(value).__name__ == "bool_":
        return bool(value)
    raise _fail(where, "true or false", value)


def range_text(minimum=None, maximum=None, above=None) -> str:
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if minimum is not None:
        parts.append(f">= {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return " and ".join(parts)


def check_integer(where: str, value, *, minimum=None, maximum=None) -> int:
    """``value`` as ``int`` if it is an integer (not a bool, not a float) within the bounds."""
    bounds = range_text(minimum, maximum, None)
    what = "an integer" + (f" {bounds}" if bounds else "")
    if not _is_integer(value):
        raise _fail(where, what, value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise _fail(where, what, value)
    return int(value)


def check_number(where: str, value, *, minimum=None, maximum=None, above=None) -> float:
    """``value`` as ``float`` if it is a finite number (not a bool, not a string) within the bounds."""
    bounds = range_text(minimum, maximum, above)
    what = "a finite number" + (f" {bounds}" if bounds else "")
    if not _is_number(value) or not math.isfinite(value):
        raise _fail(where, what, value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum) \
            or (above is not None and value <= above):
        raise _fail(where, what, value)
    return float(value)


def check_string(where: str, value, *, choices=None, nonempty: bool = True) -> str:
    """``value`` if it is a string (one of ``choices`` when given)."""
    if choices is not None:
        if not isinstance(value, str) or value not in choices:
            raise _fail(where, f"one of {sorted(choices)}", value)
        return value
    if not isinstance(value, str) or (nonempty and not value):
        raise _fail(where, "a non-empty string" if nonempty else "a string", value)
    return value


def check_list(where: str, value) -> list:
    """``value`` as a list if it is a list or tuple (a string is not a list)."""
    if not isinstance(value, (list, tuple)):
        raise _fail(where, "a list", value)
    return list(value)


def check_mapping(where: str, value, *, allowed=None, required=()) -> dict:
    """``value`` as a dict if it is a table with string keys, only ``allowed`` ones, all ``required``."""
    if not isinstance(value, Mapping):
        raise _fail(where, "a table (JSON object)", value)
    bad = [k for k in value if not isinstance(k, str)]
    if bad:
        raise InputError(f"{where}: keys must be strings, got {_show(bad[0])}")
    if allowed is not None:
        unknown = sorted(set(value) - set(allowed))
        if unknown:
            raise InputError(f"{where}: unknown key(s) {unknown}; allowed: {sorted(allowed)}")
    missing = [k for k in required if k not in value]
    if missing:
        raise InputError(f"{where}: missing key(s) {missing}")
    return dict(value)


def _nesting(value, limit: int) -> int:
    """Depth of nested lists/tables, stopping once past ``limit`` (iterative: no recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, tuple, Mapping)):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, Mapping) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def _field_path(keys) -> str:
    return "".join(f"[{k!r}]" if i or isinstance(k, int) else repr(k) for i, k in enumerate(keys))


def check_all_finite(where: str, data) -> None:
    """Refuse the first NaN or infinity anywhere in ``data``, naming where it sits.

    ``json`` (``NaN``, ``Infinity``) and TOML (``nan``, ``inf``) both read such
    values; no field of a spec takes one.
    """
    stack = [((), data)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise InputError(f"{where}: {_field_path(path)} must be a finite number, got {item!r}")
        if isinstance(item, Mapping):
            stack.extend(((*path, k), v) for k, v in reversed(list(item.items())))
        elif isinstance(item, (list, tuple)):
            stack.extend(((*path, i), v) for i, v in reversed(list(enumerate(item))))


def parse_json(text: str, where: str):
    """JSON text as Python values; NaN/Infinity (named by field), broken or too deeply nested JSON are errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{where}: invalid JSON: {err}") from None
    except RecursionError:
        raise InputError(f"{where}: nested deeper than {MAX_NESTING} levels") from None
    if _nesting(data, MAX_NESTING) > MAX_NESTING:
        raise InputError(f"{where}: nested deeper than {MAX_NESTING} levels")
    check_all_finite(where, data)
    return data


def check_clocks(where: str, value) -> list | None:
    """A list of clocks in MHz (finite numbers > 0, or ``None`` for the GPU's own), each once."""
    if value is None:
        return None
    items = check_list(where, value)
    out, seen = [], set()
    for i, clock in enumerate(items):
        if clock is not None:
            clock = check_number(f"{where}[{i}]", clock, above=0)
        if clock in seen:  # 1500 and 1500.0 are one clock
            raise InputError(f"{where}[{i}]: clock {_show(items[i])} is listed twice")
        seen.add(clock)
        out.append(items[i])
    return out


def check_configs(where: str, value):
    """``"default"``, ``"all"``, a list of configs (tables or ``"p=v,..."``), or ``{"sample": n, "seed": s}``."""
    if value in ("default", "all") and isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        table = check_mapping(where, value, allowed=("sample", "seed"), required=("sample",))
        check_integer(f"{where}['sample']", table["sample"], minimum=1)
        if "seed" in table:
            check_integer(f"{where}['seed']", table["seed"], minimum=0)
        return table
    if isinstance(value, (list, tuple)):
        for i, config in enumerate(value):
            if isinstance(config, Mapping):
                table = check_mapping(f"{where}[{i}]", config)
                for name, v in table.items():
                    if not (isinstance(v, (str, bool)) or _is_number(v)) or \
                            (_is_number(v) and not math.isfinite(v)):
                        raise _fail(f"{where}[{i}][{name!r}]", "a finite number, a string or a boolean", v)
            elif not isinstance(config, str):
                raise _fail(f"{where}[{i}]", "a table of parameter values or a 'p=v,...' string", config)
        return list(value)
    raise _fail(where, "'default', 'all', a list of configs or {'sample': n, 'seed': s}", value)


def _annotation_check(where: str, annotation: str, value):
    """Check ``value`` against a dataclass field annotation written as text (``"float | None"``)."""
    kinds = [k.strip() for k in str(annotation).split("|")]
    if value is None:
        if "None" in kinds:
            return None
        raise _fail(where, " or ".join(kinds), value)
    if "bool" in kinds and type(value) is bool:
        return value
    if "int" in kinds and _is_integer(value):
        return int(value)
    if "float" in kinds:
        return check_number(where, value)
    if "str" in kinds:
        return check_string(where, value)
    if "int" in kinds:
        return check_integer(where, value)
    if "bool" in kinds:
        return check_boolean(where, value)
    return value  # a type this check does not know: the class checks it itself


def check_params(where: str, cls, params) -> dict:
    """Parameters for dataclass ``cls`` (a protocol): known names only, each of its annotated type.

    ``int`` fields take integers only; ``float`` fields finite numbers
    (integers included); ``bool`` fields booleans; ``X | None`` also null.
    The class's own checks (ranges) still run when it is built.
    """
    table = check_mapping(where, params)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(table) - set(fields))
    if unknown:
        raise InputError(f"{where}: unknown parameter(s) {unknown} for {getattr(cls, 'name', cls.__name__)!r};"
                         f" known: {sorted(fields)}")
    return {name: _annotation_check(f"{where}[{name!r}]", _annotation(fields[name].type), value)
            for name, value in table.items()}


def _annotation(annotation) -> str:
    """A field's annotation as text (``from __future__ import annotations`` keeps it a string)."""
    if isinstance(annotation, str):
        return annotation
    args = typing.get_args(annotation)
    if args:
        return " | ".join("None" if a is type(None) else getattr(a, "__name__", str(a)) for a in args)
    return getattr(annotation, "__name__", str(annotation))


def check_device_kwargs(where: str, device: str, kwargs, presets=None) -> dict:
    """``device_kwargs`` for ``device``: the simulated GPU's ``preset``/``seed``/... or NVML's ``index``."""
    allowed = {"simulated": _SIMULATED_KWARGS, "nvml": _NVML_KWARGS}.get(device)
    if allowed is None:  # "auto": whichever opens must take them; only the simulated GPU takes any
        allowed = _SIMULATED_KWARGS + _NVML_KWARGS
    table = check_mapping(where, kwargs, allowed=allowed)
    for name, value in table.items():
        at = f"{where}[{name!r}]"
        if name == "preset":
            check_string(at, value, choices=presets) if presets is not None else check_string(at, value)
        elif name in ("seed", "index"):
            check_integer(at, value, minimum=0)
        elif name == "reference_meter":
            check_boolean(at, value)
        elif name == "ambient_c":
            check_number(at, value, minimum=-40, maximum=80)
        elif name == "history_s" and value is not None:
            check_number(at, value, minimum=10)
    return table


_SPEC_KEYS = ("kernels", "protocol", "protocol_params", "repeats", "sm_clocks_mhz",
              "allow_clock_changes", "device", "device_kwargs", "workloads", "base_dir", "exclusive",
              "board_probe")  # board_probe: checked by campaigns.plan.check_board_probe
_ENTRY_KINDS = ("source", "callable", "program", "registry")


def _check_workload_entry(where: str, entry) -> None:
    table = check_mapping(where, entry)
    kinds = [k for k in _ENTRY_KINDS if k in table]
    if len(kinds) != 1:
        raise InputError(f"{where}: give exactly one of {list(_ENTRY_KINDS)}; got keys {sorted(table)}")
    kind = kinds[0]
    if kind == "program":
        argv = check_list(f"{where}['program']", table["program"])
        if not argv or not all(isinstance(a, str) for a in argv):
            raise _fail(f"{where}['program']", "a non-empty list of strings (argv)", table["program"])
    else:
        check_string(f"{where}[{kind!r}]", table[kind])
    if "name" in table:
        check_string(f"{where}['name']", table["name"])
    if "configs" in table:
        check_configs(f"{where}['configs']", table["configs"])
    if table.get("simulated") is not None:
        check_mapping(f"{where}['simulated']", table["simulated"])


def check_campaign_spec(data, *, protocols: Mapping | None = None, presets=None) -> dict:
    """The top level of a campaign spec, strictly (each error: one line naming the field).

    Parameters
    ----------
    data : object
        What the spec file held.
    protocols : mapping of name to protocol class, optional
        Known protocols; their parameters are checked with :func:`check_params`.
    presets : collection of str, optional
        Known simulated-GPU presets.

    Returns
    -------
    dict
        ``data`` as a dict, values unchanged.
    """
    table = check_mapping("campaign spec", data, allowed=_SPEC_KEYS)
    if _nesting(table, MAX_NESTING) > MAX_NESTING:
        raise InputError(f"campaign spec: nested deeper than {MAX_NESTING} levels")
    where = "campaign spec: "
    if "kernels" in table:
        kernels = check_mapping(f"{where}'kernels'", table["kernels"])
        for name, what in kernels.items():
            check_configs(f"{where}'kernels'[{name!r}]", what)
    if "workloads" in table:
        for i, entry in enumerate(check_list(f"{where}'workloads'", table["workloads"])):
            _check_workload_entry(f"{where}'workloads'[{i}]", entry)
    protocol = table.get("protocol", "counter")
    if protocols is not None:
        check_string(f"{where}'protocol'", protocol, choices=list(protocols))
    else:
        check_string(f"{where}'protocol'", protocol)
    params = check_mapping(f"{where}'protocol_params'", table.get("protocol_params", {}))
    if protocols is not None:
        check_params(f"{where}'protocol_params'", protocols[protocol], params)
    if "repeats" in table:
        check_integer(f"{where}'repeats'", table["repeats"], minimum=1, maximum=MAX_REPEATS)
    clocks = check_clocks(f"{where}'sm_clocks_mhz'", table.get("sm_clocks_mhz"))
    allow = check_boolean(f"{where}'allow_clock_changes'", table.get("allow_clock_changes", False))
    if any(c is not None for c in clocks or ()) and not allow:
        raise InputError(f"{where}'sm_clocks_mhz' needs 'allow_clock_changes': true (clock changes "
                         "are opt-in and restored afterwards)")
    check_boolean(f"{where}'exclusive'", table.get("exclusive", False))
    device = check_string(f"{where}'device'", table.get("device", "auto"), choices=DEVICE_KINDS)
    check_device_kwargs(f"{where}'device_kwargs'", device, table.get("device_kwargs", {}), presets)
    if table.get("base_dir") is not None:
        check_string(f"{where}'base_dir'", table["base_dir"])
    return table

