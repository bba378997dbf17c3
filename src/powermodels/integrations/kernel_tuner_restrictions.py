"""Restrictions in the forms Kernel Tuner 1.5 builds its search space from correctly.

Kernel Tuner 1.5 builds the search space with python-constraint2, and how it
treats a restriction depends on its form (``kernel_tuner/searchspace.py`` and
``kernel_tuner/util.py`` of 1.5.0; KernelTuner/kernel_tuner issues #333, #348):

* a **lambda** is not called: its *source text* is read back
  (``inspect.getsource``), ``p["name"]`` is rewritten to ``name`` and the body
  is compiled again as a string. Anything the lambda captured (``keys``, a
  helper such as ``w.config_id``) is lost: ``lambda p: cid(p) in keys`` inside
  a ``tune_kernel(...)`` call fails with ``TypeError: r() takes 0 positional
  arguments but 4 were given`` (the H100 run of 2026-11-24), other layouts
  with ``NameError`` or "An error occured when parsing restrictions";
* a plain function taking the configuration dict (the form Kernel Tuner's
  documentation shows) works only when it is the *only* restriction; next to
  strings it is called with the parameter *values* as positional arguments;
* strings are parsed by python-constraint2, which rejects or misreads valid
  Python: ``not (tx == ty)``, ``abs(tx - ty) <= 2``, ``ceil(...)``,
  ``a if c else b``, ``(bx > 16) == (tx > 2)``, ``max(tx, 32) - by == bx``
  and ``True`` fail; ``tx >= -by`` and ``(bx) / ty >= ty`` build wrong spaces
  (:func:`native_string` says which strings it gets right);
* a ``(function, [names])`` tuple next to strings is dropped with a
  ValueError.

:func:`kernel_tuner_restrictions` takes restrictions as powermodels accepts
them (:func:`powermodels.workloads.make_restrictions`: expression
strings, callables of the configuration dict, ``(description, predicate)``
pairs) and returns a list Kernel Tuner 1.5 evaluates exactly as powermodels
does: strings in the subset python-constraint2 parses correctly stay strings
(it turns them into fast constraints over the parameters they name); every
other restriction becomes a named function (a ``def``, so Kernel Tuner calls it
instead of re-reading its source) over all tunable parameters, which accepts
the values positionally (python-constraint2) or by name (Kernel Tuner's
``check_restriction``).

Nothing here imports Kernel Tuner.
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable, Mapping

from ..workloads import Expression, make_restrictions

__all__ = ["kernel_tuner_restrictions", "native_string"]

# the node types python-constraint2 (2.9) parses as Python; see native_string
_NATIVE_BINARY = (ast.Add, ast.Mult)
_NATIVE_COMPARE = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn)


def native_string(text: str, names) -> bool:
    """Whether python-constraint2 evaluates the restriction string ``text`` as Python does.

    The subset: parameter names and non-negative integers combined by ``+``
    and ``*``, compared (chains too) with each other, ``in``/``not in`` a
    literal tuple of such numbers, and ``and``/``or`` of such comparisons; at
    least one parameter. python-constraint2 2.9 rewrites strings into its own
    constraints and gets subtraction, division, ``//``, ``%``, unary minus,
    ``not`` and most calls wrong or refuses them (of ~600 random expressions
    with ``-`` it built 9 wrong spaces, e.g. ``(bx) / ty >= ty`` gave none of
    the 224 configurations); over ~1,800 random expressions of this subset
    its spaces equalled an enumeration's (the test
    ``tests/integrations/test_kernel_tuner_restrictions.py`` repeats a
    sample of them).

    Parameters
    ----------
    text : str
        The restriction, already valid as an :class:`~powermodels.workloads.Expression`.
    names : iterable of str
        The tunable parameter names.
    """
    names = set(names)
    tree = ast.parse(text.strip(), mode="eval").body

    def arithmetic(node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, int) and not isinstance(node.value, bool) and node.value >= 0
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.BinOp):
            return isinstance(node.op, _NATIVE_BINARY) and arithmetic(node.left) and arithmetic(node.right)
        return False

    def literal(node) -> bool:
        return isinstance(node, (ast.Tuple, ast.List)) and all(
            isinstance(e, ast.Constant) and arithmetic(e) for e in node.elts)

    def condition(node) -> bool:
        if isinstance(node, ast.BoolOp):
            return all(condition(v) for v in node.values)
        if isinstance(node, ast.Compare):
            if not all(isinstance(op, _NATIVE_COMPARE) for op in node.ops) or not arithmetic(node.left):
                return False
            for op, right in zip(node.ops, node.comparators, strict=True):
                if not (literal(right) if isinstance(op, (ast.In, ast.NotIn)) else arithmetic(right)):
                    return False
            return True
        return False

    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} & names
    return bool(used) and condition(tree)


def kernel_tuner_restrictions(restrictions, tune_params: Mapping) -> list:
    """``restrictions`` as a list Kernel Tuner 1.5's search-space builder evaluates correctly.

    Parameters
    ----------
    restrictions : str, callable, tuple, or a list of them, or None
        As :func:`~powermodels.workloads.make_restrictions` accepts
        them: expression strings over the tunable parameters, callables taking
        the configuration dict (lambdas with captured variables included) or
        named after tunables, Kernel Tuner's ``(callable, [names])`` tuples, or
        ``(description, predicate)`` pairs.
    tune_params : mapping of str to sequence
        The tunable parameters, in the order given to ``tune_kernel``.

    Returns
    -------
    list
        Pass it as ``tune_kernel(..., restrictions=...)``: strings that
        python-constraint2 parses correctly (:func:`native_string`), then one
        function per other restriction, over every parameter.

    Raises
    ------
    ValueError
        A restriction string that is not a valid expression over
        ``tune_params`` (naming it), or an entry that is no restriction.

    Examples
    --------
    >>> tune = {"bx": [16, 32], "tx": [1, 2, 4]}
    >>> keep = {(16, 4), (32, 1)}
    >>> r = kernel_tuner_restrictions(["bx * tx <= 64", "not tx == 2",
    ...                                lambda p: (p["bx"], p["tx"]) in keep], tune)
    >>> r[0], [f.__name__ for f in r[1:]]
    ('bx * tx <= 64', ['powermodels_restriction', 'powermodels_restriction'])
    >>> r[2](16, 4), r[2](bx=16, tx=2)
    (True, False)
    """
    names = [str(k) for k in tune_params]
    if not names:
        raise ValueError("kernel_tuner_restrictions: tune_params has no parameters")
    if restrictions is None:
        return []
    # one restriction, not a list: a string, a callable, a (description, predicate) pair or
    # Kernel Tuner's (callable, [names]) tuple
    single = isinstance(restrictions, str) or callable(restrictions) or (
        isinstance(restrictions, tuple) and len(restrictions) in (2, 3)
        and (isinstance(restrictions[0], str) or callable(restrictions[0])))
    items = [restrictions] if single else list(restrictions)
    strings: list[str] = []
    functions: list[Callable] = []
    for i, item in enumerate(items):
        if isinstance(item, str):
            text = Expression(item, names).text  # a clear error for a bad string, before Kernel Tuner
            if native_string(text, names):
                if text not in strings:  # Kernel Tuner refuses duplicates ("error occured when parsing")
                    strings.append(text)
                continue
        try:
            (description, predicate), = make_restrictions([item], names)
        except ValueError as err:
            raise ValueError(f"kernel_tuner_restrictions: restriction {i}: {err}") from None
        functions.append(_over_parameters(description, predicate, names))
    return [*strings, *functions]


def _over_parameters(description: str, predicate: Callable, names: list[str]) -> Callable:
    """A function of every tunable parameter, positional or by name, returning ``predicate(config)``."""

    # A def, never a lambda: Kernel Tuner 1.5 re-reads a lambda's source instead of calling it
    # (and also every lambda in the source of a def, so this body must contain none).
    def powermodels_restriction(*values, **named):
        config = dict(named) if named else dict(zip(names, values, strict=True))
        return bool(predicate(config))

    # python-constraint2 and Kernel Tuner read the signature: one parameter per tunable makes
    # them call it with each value (a single parameter would be taken for the old dict form)
    powermodels_restriction.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    powermodels_restriction.__doc__ = f"powermodels restriction: {description}"
    return powermodels_restriction
