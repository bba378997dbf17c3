"""Helpers shared by the model benchmarks (run as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["board_label", "mape", "read_real_and_twin", "save_figure", "write_real_and_twin", "write_report"]


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


def read_real_and_twin(recordings, twins, read_tables):
    """``read_tables`` (a function of an iterable of recordings) on the real recordings, and on each twin's.

    Returns ``(real, twin)``: the real recordings' table, and the twins' as one table whose rows are named
    ``PRESET/RECORDING`` after a ``twin-compare`` output's folders (``OUT/PRESET/RECORDING/twin``), or ``None``
    when no twin is given.
    """
    import pandas as pd

    from powermodels import schema
    from powermodels.recording import read_recording

    real = read_tables(read_recording(p) for p in recordings)
    if not twins:
        return real, None
    twin = pd.concat([read_tables([read_recording(t)]).assign(**{schema.RECORDING_NAME: f"{t.parent.parent.name}/"
                                                                                     f"{t.parent.name}"})
                      for t in map(Path, twins)], ignore_index=True)
    return real, twin


def write_real_and_twin(path, real, twin, **to_csv) -> None:
    """Write the real rows and the twins' (or none) as one CSV whose ``source`` column says which, whole or not at all."""
    import pandas as pd

    from powermodels.files import atomic_open

    rows = pd.concat([real.assign(source="real")] + ([twin.assign(source="twin")] if twin is not None else []),
                     ignore_index=True)
    with atomic_open(path, "w") as fh:  # the folder made, the file replaced whole or not at all
        rows.to_csv(fh, index=False, **to_csv)
