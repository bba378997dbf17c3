"""Helpers shared by the model benchmarks (run as ``python benchmarks/<name>.py``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["board_label", "mape", "save_figure", "write_report"]


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
