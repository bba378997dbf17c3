"""Plain-text report helpers shared by the CLI, the benchmarks and the docs."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["markdown_table"]


def markdown_table(table: pd.DataFrame, float_format: str = ".4g", *, align=None,
                   na_rep: str | None = None) -> str:
    """A DataFrame as a GitHub-flavoured markdown table (no ``tabulate`` needed).

    Parameters
    ----------
    table : pandas.DataFrame
        Rows to print; the index is not printed.
    float_format : str, default=".4g"
        Format spec for float cells; other cells use ``str``.
    align : None, "auto" or str, default=None
        Column alignment. None leaves every column unaligned (``---``);
        ``"auto"`` right-aligns numeric columns (``---:``) and leaves the
        others; a string of ``"l"``/``"r"``, one letter per column, sets each.
    na_rep : str or None, default=None
        Text of a NaN float cell; None formats it with ``float_format``
        (``nan``).

    Returns
    -------
    str
        The table, one line per row, without a trailing newline.

    Examples
    --------
    >>> import pandas as pd
    >>> print(markdown_table(pd.DataFrame({"kernel": ["fma"], "mape %": [1.234]}), ".1f", align="auto"))
    | kernel | mape % |
    |---|---:|
    | fma | 1.2 |
    """
    cols = [str(c) for c in table.columns]
    if align is None:
        rules = ["---"] * len(cols)
    elif align == "auto":
        rules = ["---:" if pd.api.types.is_numeric_dtype(table[c]) else "---" for c in table.columns]
    else:
        if len(align) != len(cols) or set(align) - {"l", "r"}:
            raise ValueError(f"align must be None, 'auto' or one 'l'/'r' per column ({len(cols)}), got {align!r}")
        rules = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(cols) + " |", "|" + "".join(r + "|" for r in rules)]
    for row in table.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v, float_format, na_rep) for v in row) + " |")
    return "\n".join(lines)


def _cell(value, float_format: str, na_rep: str | None) -> str:
    if isinstance(value, float | np.floating):
        if na_rep is not None and np.isnan(value):
            return na_rep
        return format(value, float_format)
    return str(value)
