"""markdown_table: default layout, alignment and missing values."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from powermodels.reporting import markdown_table

TABLE = pd.DataFrame({"model": ["per config", "global"], "MAPE %": [1.234, np.nan], "folds": [5, 1]})


def test_default_layout_is_unaligned_and_formats_floats():
    assert markdown_table(TABLE).splitlines() == [
        "| model | MAPE % | folds |", "|---|---|---|", "| per config | 1.234 | 5 |", "| global | nan | 1 |",
    ]


def test_alignment_and_missing_values():
    auto = markdown_table(TABLE, ".1f", align="auto", na_rep="").splitlines()
    assert auto[1] == "|---|---:|---:|" and auto[3] == "| global |  | 1 |"
    assert markdown_table(TABLE, align="lrl").splitlines()[1] == "|---|---:|---|"
    with pytest.raises(ValueError, match="align"):
        markdown_table(TABLE, align="lr")
