"""The name a preset takes when it is brought to a board: each calibration step, then the board once."""

from __future__ import annotations


def board_preset_name(name: str, uuid: str, step: str = "") -> str:
    """``name`` with a calibration ``step`` added and the board it was calibrated to named once at the end.

    Calibrations chain (``twin-compare --calibrate-thermal network --calibrate-board domains
    --calibrate-cap probes`` runs three), and each used to append ``@<board>``, so the name read
    ``…+network@8a9ced5c@8a9ced5c``. Here a name already calibrated to the same board keeps one
    ``@<board>`` at its end, after every step: ``h200-raw-pooled-per-workload+network+cap-probes@8a9ced5c``.
    A name calibrated to another board keeps that board where it was.

    Parameters
    ----------
    name : str
        The preset's name so far.
    uuid : str
        The board's NVML UUID (``GPU-…``) or, without one, the recording's name; its first eight
        characters after ``GPU-`` name the board.
    step : str, default=""
        What this calibration moved (``"network"``, ``"thermal"``, ``"cap"``, ``"cap-probes"``);
        empty for the power calibration, which names only the board.

    Returns
    -------
    str

    Examples
    --------
    >>> board_preset_name("h200-raw-pooled+network@8a9ced5c", "GPU-8a9ced5c-fc29", "cap-probes")
    'h200-raw-pooled+network+cap-probes@8a9ced5c'
    >>> board_preset_name("h200-raw-pooled+network@8a9ced5c", "GPU-8a9ced5c-fc29")
    'h200-raw-pooled+network@8a9ced5c'
    """
    board = "@" + uuid.removeprefix("GPU-")[:8]
    base = name.removesuffix(board)
    return f"{base}{'+' + step if step else ''}{board}"
