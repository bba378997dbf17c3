"""Safe arithmetic expressions over tunable parameters (Kernel Tuner's restriction strings).

Kernel Tuner users write restrictions such as ``"block_size_x*tile_x <= 1024"``
and problem sizes or grid divisors as parameter expressions. They are parsed
here with :mod:`ast` and interpreted node by node: only numbers, strings,
parameter names, arithmetic, comparisons, boolean operators, conditional
expressions, tuples/lists of constants and the functions ``min``, ``max``,
``abs``, ``round``, ``int``, ``float`` and ``ceil`` are allowed — never
attribute access, subscripts, other calls or ``eval``.
"""

from __future__ import annotations

import ast
import inspect
import math
import operator
from collections.abc import Callable, Iterable, Mapping

__all__ = ["Expression", "Restriction", "make_restrictions"]

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg, ast.Not: operator.not_,
          ast.Invert: operator.invert}
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_FUNCTIONS = {"min": min, "max": max, "abs": abs, "round": round, "int": int, "float": float,
              "ceil": math.ceil}
# a huge power or shift would hang the search-space enumeration
_MAX_EXPONENT = 256


class Expression:
    """An arithmetic/boolean expression over named parameters, checked when built.

    Parameters
    ----------
    text : str
        The expression, e.g. ``"block_size_x*tile_x <= 1024"``.
    names : iterable of str, optional
        The parameter names it may use; any other name is a ``ValueError``.

    Examples
    --------
    >>> Expression("bx * tx <= 1024", names=["bx", "tx"])({"bx": 256, "tx": 4})
    True
    """

    def __init__(self, text: str, names: Iterable[str] | None = None):
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"expression: expected a non-empty string, got {text!r}")
        self.text = text.strip()
        try:
            tree = ast.parse(self.text, mode="eval")
        except SyntaxError as err:
            raise ValueError(f"expression {self.text!r}: invalid syntax ({err.msg})") from None
        self._tree = tree.body
        self.names = sorted(self._check(self._tree))
        if names is not None:
            allowed = set(names)
            unknown = [n for n in self.names if n not in allowed]
            if unknown:
                raise ValueError(f"expression {self.text!r}: unknown name(s) {unknown}; "
                                 f"parameters: {sorted(allowed)}")

    def _check(self, node) -> set[str]:
        """The parameter names in ``node``; ValueError on anything not allowed."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float, str)):
                return set()
            raise ValueError(f"expression {self.text!r}: constant {node.value!r} is not allowed")
        if isinstance(node, ast.Name):
            return set() if node.id in ("True", "False") else {node.id}
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return self._check(node.left) | self._check(node.right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return self._check(node.operand)
        if isinstance(node, ast.BoolOp):
            return set().union(*(self._check(v) for v in node.values))
        if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
            return self._check(node.left).union(*(self._check(c) for c in node.comparators))
        if isinstance(node, ast.IfExp):
            return self._check(node.test) | self._check(node.body) | self._check(node.orelse)
        if isinstance(node, (ast.Tuple, ast.List)):
            return set().union(*(self._check(e) for e in node.elts))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _FUNCTIONS and not node.keywords):
            return set().union(*(self._check(a) for a in node.args))
        what = type(node).__name__
        if isinstance(node, ast.Call):
            what = f"call of {ast.unparse(node.func)!r} (allowed: {sorted(_FUNCTIONS)})"
        raise ValueError(f"expression {self.text!r}: {what} is not allowed "
                         "(only arithmetic, comparisons and and/or/not over parameter names)")

    def __call__(self, values: Mapping[str, object]):
        """Value of the expression with the parameters set to ``values``."""
        return self._eval(self._tree, values)

    def _eval(self, node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in ("True", "False"):
                return node.id == "True"
            try:
                return env[node.id]
            except KeyError:
                raise ValueError(f"expression {self.text!r}: parameter {node.id!r} has no value") from None
        if isinstance(node, ast.BinOp):
            left, right = self._eval(node.left, env), self._eval(node.right, env)
            if isinstance(node.op, (ast.Pow, ast.LShift)) and abs(right) > _MAX_EXPONENT:
                raise ValueError(f"expression {self.text!r}: exponent {right} is too large")
            return _BINARY[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, env))
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                result = True
                for v in node.values:
                    result = self._eval(v, env)
                    if not result:
                        return result
                return result
            result = False
            for v in node.values:
                result = self._eval(v, env)
                if result:
                    return result
            return result
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, env)
            for op, comp in zip(node.ops, node.comparators, strict=True):
                right = self._eval(comp, env)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.IfExp):
            return self._eval(node.body if self._eval(node.test, env) else node.orelse, env)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._eval(e, env) for e in node.elts)
        if isinstance(node, ast.Call):
            return _FUNCTIONS[node.func.id](*(self._eval(a, env) for a in node.args))
        raise AssertionError(f"unchecked node {type(node).__name__}")  # pragma: no cover

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


#: A restriction: its description and a predicate over a full configuration.
Restriction = tuple[str, Callable[[Mapping[str, object]], bool]]


def make_restrictions(restrictions, names: Iterable[str]) -> tuple[Restriction, ...]:
    """Restrictions from Kernel Tuner style input, in every form Kernel Tuner 1.5 users write.

    Parameters
    ----------
    restrictions : str, callable, tuple, or an iterable of them, or None
        * expression strings (:class:`Expression`) over the parameter ``names``;
        * a callable of the configuration dict (one parameter that is not a
          tunable's name), the form Kernel Tuner's documentation shows:
          ``lambda p: p["block_size_x"] * p["tile_x"] <= 1024``;
        * a callable whose parameters are tunable names, called with those
          values (Kernel Tuner 1.5 calls restrictions with the values:
          ``def fits(block_size_x, tile_x): ...``), or of ``*values``, called
          with every tunable's value in ``names`` order;
        * Kernel Tuner's ``(callable, ["name", ...])`` (a third element, its
          source text, is ignored): called with the listed tunables' values;
        * ``(description, predicate)`` pairs, the predicate taking the dict.
    names : iterable of str
        Tunable parameter names, in order.

    Returns
    -------
    tuple of (description, predicate)
        Every predicate takes the configuration dict.

    Raises
    ------
    ValueError
        An entry that is none of these, naming it (its position and name).
    """
    if restrictions is None:
        return ()
    if isinstance(restrictions, str) or callable(restrictions) or _is_pair(restrictions) \
            or _is_kernel_tuner_tuple(restrictions):
        restrictions = [restrictions]
    names = list(names)
    out: list[Restriction] = []
    for i, r in enumerate(restrictions):
        if isinstance(r, str):
            expr = Expression(r, names)
            out.append((expr.text, lambda c, e=expr: bool(e(c))))
        elif _is_pair(r):
            out.append((r[0], r[1]))
        elif _is_kernel_tuner_tuple(r):
            selected = [str(n) for n in r[1]]
            unknown = [n for n in selected if n not in names]
            if unknown:
                raise ValueError(f"restriction {i}: names {unknown} are not tunable parameters {names}")
            label = f"{getattr(r[0], '__name__', 'restriction')}({', '.join(selected)})"
            out.append((label, lambda c, f=r[0], s=tuple(selected): bool(f(*(c[n] for n in s)))))
        elif callable(r):
            out.append(_from_callable(r, i, names))
        else:
            raise ValueError(f"restriction {i}: expected an expression string, a callable or a "
                             f"(callable, [names]) tuple, got {r!r}")
    return tuple(out)


def _is_pair(r) -> bool:
    return isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], str) and callable(r[1])


def _is_kernel_tuner_tuple(r) -> bool:
    return (isinstance(r, tuple) and len(r) in (2, 3) and callable(r[0])
            and isinstance(r[1], (list, tuple)) and all(isinstance(n, str) for n in r[1]))


def _from_callable(f, i: int, names: list[str]) -> Restriction:
    """(label, predicate of the dict) for a callable restriction, by how its parameters are named."""
    label = getattr(f, "__name__", None) or f"restriction {i}"
    try:
        parameters = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):  # a builtin or C callable: the documented dict form
        return label, lambda c: bool(f(dict(c)))
    variadic = [p for p in parameters if p.kind is inspect.Parameter.VAR_POSITIONAL]
    named = [p for p in parameters if p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                     inspect.Parameter.VAR_KEYWORD)]
    required = [p for p in named if p.default is inspect.Parameter.empty]
    if variadic and not required:  # def r(*values): every value, in the tunables' order
        return label, lambda c: bool(f(*(c[n] for n in names)))
    if named and all(p.name in names for p in named):  # def r(block_size_x, tile_x)
        chosen = [p.name for p in named]
        return label, lambda c: bool(f(**{n: c[n] for n in chosen}))
    if len(required) == 1:  # lambda p: p["block_size_x"] < 64
        return label, lambda c: bool(f(dict(c)))
    raise ValueError(f"restriction {i} ({label!r}): its parameters {[p.name for p in parameters]} are "
                     f"neither one configuration dict nor tunable names {names}")
