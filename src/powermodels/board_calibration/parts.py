"""Which part number a recorded board is: the label that splits H200 boards into two memory-power groups.

Nineteen H200 boards recorded on eight hosts (2026-11-27/28) fall in two groups of triad power, ~30 % apart
in memory dynamic power at the same memory clock, driver and VBIOS. The split is the board part number NVML
reports (``nvmlDeviceGetBoardPartNumber``, ``nvidia-smi -q``'s "Board Part Number"): every ``…-000`` board is
in the low group and every ``…-001`` board in the high one (docs/twin.md, session 17). A pool of boards of one
part number is then a better board-blind guess than a pool of both.

The recorder writes the part number into ``provenance.json`` (``board_part_number``); older recordings keep the
``nvidia-smi -q`` log beside their tables (``nvidia_smi.txt``), which has it for every GPU of the host.
"""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path

from .. import schema
from ..twin.preset import TwinPreset, load_preset

__all__ = ["board_part_number", "part_number_from_smi_log", "part_preset", "preset_part_numbers"]

_SECTION = re.compile(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]\s*$", re.MULTILINE)
_FIELD = re.compile(r"^\s*(GPU UUID|Board Part Number)\s*:\s*(\S+)\s*$", re.MULTILINE)


def part_number_from_smi_log(text: str, uuid: str) -> str:
    """The board part number of the GPU ``uuid`` in an ``nvidia-smi -q`` log ("" when it is not there).

    Parameters
    ----------
    text : str
        The log; it lists one section per GPU of the host, each opened by its PCI bus id.
    uuid : str
        The GPU's UUID (``GPU-…``), as the recording's provenance has it.

    Returns
    -------
    str
        The section's "Board Part Number", or "" when no section has that UUID or the field is absent
        (or reads ``N/A``).
    """
    starts = [m.start() for m in _SECTION.finditer(text)] + [len(text)]
    for a, b in pairwise(starts):
        fields = dict(m.groups() for m in _FIELD.finditer(text, a, b))
        if fields.get("GPU UUID") == uuid:
            part = fields.get("Board Part Number", "")
            return "" if part == "N/A" else part
    return ""


def board_part_number(rec) -> str:
    """The recorded board's part number: the provenance's, else its ``nvidia_smi.txt``'s ("" when unknown).

    Parameters
    ----------
    rec : Recording
        A raw recording (:func:`powermodels.recording.read_recording`); its ``path`` is where an older
        recording's ``nvidia_smi.txt`` is looked for.

    Returns
    -------
    str
    """
    part = str(rec.provenance.get(schema.BOARD_PART_NUMBER) or "")
    if part or rec.path is None:
        return part
    log = Path(rec.path) / "nvidia_smi.txt"
    if not log.is_file():
        return ""
    return part_number_from_smi_log(log.read_text(errors="replace"), str(rec.provenance.get("uuid", "")))


def preset_part_numbers(preset) -> list[str]:
    """The part numbers a pooled preset stands for: its memory pool's part, else every board's it pooled over."""
    report = load_preset(preset).provenance.get("pooled_boards", {})
    return [report["memory_part"]] if report.get("memory_part") else list(report.get("part_numbers", []))


def part_preset(rec, candidates) -> TwinPreset:
    """Of ``candidates``, the preset pooled over boards of ``rec``'s part number.

    Parameters
    ----------
    rec : Recording
        The board's recording (its part number: :func:`board_part_number`).
    candidates : iterable of TwinPreset, str or path
        Pooled presets, each standing for one part number: its memory factor pooled over that part's boards
        (``pooled_preset(..., memory_part=...)``, e.g. the shipped ``h200-raw-part-000`` and
        ``h200-raw-part-001``), or every board of its pool of that part.

    Returns
    -------
    TwinPreset
        The one candidate standing for that part number only (:func:`preset_part_numbers`).

    Raises
    ------
    ValueError
        When the board's part number is unknown, or no candidate (or more than one) was pooled over it
        alone; the message lists the candidates' part numbers.
    """
    part = board_part_number(rec)
    presets = [load_preset(c) for c in candidates]
    known = {p.name: preset_part_numbers(p) for p in presets}
    if not part:
        raise ValueError(f"{rec.name}: the board's part number is not recorded (provenance or nvidia_smi.txt); "
                         f"pick one of {', '.join(known)} by hand")
    matches = [p for p in presets if known[p.name] == [part]]
    if len(matches) != 1:
        listed = "; ".join(f"{name}: {', '.join(parts) or 'none'}" for name, parts in known.items())
        raise ValueError(f"{rec.name}: board part number {part} matches {len(matches)} of the presets "
                         f"({listed}); one preset pooled over that part number alone is needed")
    return matches[0]
