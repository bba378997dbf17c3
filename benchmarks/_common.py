"""Helpers shared by the model benchmarks (run as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["board_label", "mape", "read_twin_tables", "save_figure", "write_real_and_twin", "write_report"]


def board_label(uuid) -> str:
    """A board's short label in the twin benchmarks' tables: its UUID's first eight hex digits (``GPU-`` dropped)."""
    return str(uuid).removeprefix("GPU-")[:8]


def mape(pred, true) -> float:
    """Mean absolute percentage error of ``pred`` against ``true``, in percent."""
    pred = np.asarray(pred, dtype=float)
    true = np.asarray(true, dtype=float)
    return float(100 * np.mean(np.abs(pred - true) / np.abs(true)))


def write_report(text: str, path: Path) -> int:
    """Print a markdown report, write it to ``path`` (creating folders) and return 0 (exit status)."""
    print(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return 0


def save_figure(fig, path) -> None:
    """Lay ``fig`` out, write it to ``path`` as the benchmarks' figures are (110 dpi; folders made) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_twin_tables(folders, read_table):
    """``read_table(recording)`` of each twin recording, one table, each named ``PRESET/RECORDING``.

    A ``twin-compare`` output's ``twin/`` folder is named by its parents (``OUT/PRESET/RECORDING/twin``); ``None``
    when no folder is given.
    """
    import pandas as pd

    from powermodels import schema
    from powermodels.recording import read_recording

    if not folders:
        return None
    return pd.concat([read_table(read_recording(p)).assign(**{schema.RECORDING_NAME: f"{p.parent.parent.name}/"
                                                                                      f"{p.parent.name}"})
                      for p in map(Path, folders)], ignore_index=True)


def write_real_and_twin(path, real, twin, **to_csv) -> None:
    """Write the real rows and the twins' (or none) as one CSV whose ``source`` column says which, whole or not at all."""
    import pandas as pd

    from powermodels.files import atomic_open

    rows = pd.concat([real.assign(source="real")] + ([twin.assign(source="twin")] if twin is not None else []),
                     ignore_index=True)
    with atomic_open(path, "w") as fh:  # the folder made, the file replaced whole or not at all
        rows.to_csv(fh, index=False, **to_csv)
