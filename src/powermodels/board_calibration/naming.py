"""The name a preset takes when it is brought to a board: each calibration step, then the board once."""

from __future__ import annotations


def board_preset_name(name: str, uuid: str, step: str) -> str:
    """``name`` with a calibration ``step`` added and the board it was calibrated to named once at the end.

    Calibrations chain (``twin-compare --calibrate-thermal network --calibrate-board domains
    --calibrate-cap probes`` runs three), and each used to append ``@<board>``, so the name read
    ``…+network@8a9ced5c@8a9ced5c``. Here every step is named and a name already calibrated to the
    same board keeps one ``@<board>`` at its end, after the steps:
    ``h200-raw-pooled-per-workload+network+domains+cap-probes@8a9ced5c``. A name calibrated to
    another board keeps that board where it was.

    Parameters
    ----------
    name : str
        The preset's name so far.
    uuid : str
        The board's NVML UUID (``GPU-…``: its first eight hex digits name the board) or, for a
        recording without one, whatever stands in for it (a twin's ``SIM-twin-…``, the recording's
        name), used whole so that two such recordings are not taken for one board.
    step : str
        What this calibration moved: ``"network"``, ``"thermal"``, the power calibration's scale
        (``"board"``, ``"workload"``, ``"domains"``), ``"cap"`` or ``"cap-probes"``.

    Returns
    -------
    str

    Examples
    --------
    >>> board_preset_name("h200-raw-pooled+network@8a9ced5c", "GPU-8a9ced5c-fc29", "domains")
    'h200-raw-pooled+network+domains@8a9ced5c'
    >>> board_preset_name("b", "raw_recording_x", "network")
    'b+network@raw_recording_x'
    """
    board = "@" + (uuid.removeprefix("GPU-")[:8] if uuid.startswith("GPU-") else uuid)
    return f"{name.removesuffix(board)}+{step}{board}"
