"""Plain-text report helpers shared by the CLI, the benchmarks and the docs."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["markdown_table"]


def markdown_table(table: pd.DataFrame, float_format: str = ".4g") -> str:
    """A DataFrame as a GitHub-flavoured markdown table (no ``tabulate`` needed).

    Parameters
    ----------
    table : pandas.DataFrame
        Rows to print; the index is not printed.
    float_format : str, default=".4g"
        Format spec for float cells; other cells use ``str``.
    """
    cols = [str(c) for c in table.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in table.itertuples(index=False):
        cells = [format(v, float_format) if isinstance(v, float | np.floating) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
