"""scikit-learn estimators. Imports numpy/scipy/pandas/sklearn only — never hardware code."""
