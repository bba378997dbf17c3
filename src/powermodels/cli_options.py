"""argparse ``type=`` functions built on :mod:`powermodels.validation`: options checked when parsed.

A bad number is a usage error naming the option (argparse adds
``argument --seconds:``), before the command runs anything::

    powermodels characterize: error: argument --seconds: must be a finite number > 0 and <= 3600, got 'nan'
"""

from __future__ import annotations

import argparse

from .validation import InputError, check_integer, check_number, range_text

__all__ = ["option_integer", "option_number"]


def _option_error(message: str):
    return argparse.ArgumentTypeError(message)


def option_number(*, minimum=None, maximum=None, above=None):
    """An argparse ``type=``: a finite number within the bounds (argparse names the option).

    >>> option_number(above=0)("2.5")
    2.5
    """
    bounds = range_text(minimum, maximum, above)
    what = "a finite number" + (f" {bounds}" if bounds else "")

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise _option_error(f"must be {what}, got {text!r}") from None
        try:
            return check_number("", value, minimum=minimum, maximum=maximum, above=above)
        except InputError:
            raise _option_error(f"must be {what}, got {text!r}") from None

    parse.__name__ = "number"  # argparse says "invalid number value" if it ever uses the name
    return parse


def option_integer(*, minimum=None, maximum=None):
    """An argparse ``type=``: an integer (``"2.5"`` and ``"1e3"`` are not) within the bounds.

    >>> option_integer(minimum=0)("3")
    3
    """
    bounds = range_text(minimum, maximum, None)
    what = "an integer" + (f" {bounds}" if bounds else "")

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise _option_error(f"must be {what}, got {text!r}") from None
        try:
            return check_integer("", value, minimum=minimum, maximum=maximum)
        except InputError:
            raise _option_error(f"must be {what}, got {text!r}") from None

    parse.__name__ = "integer"
    return parse
