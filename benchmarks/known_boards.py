"""Which of this machine's GPUs were never recorded before: a lent machine's first check, before any load.

The clean tests of docs/twin.md count boards no preset and no design set ever saw, so a session that is lent a
machine it had before should hand it back at once instead of spending its device time (GPU_NEXT_SESSION.md). Two
steps, because the recordings are moved out of the tree before a device call:

1. here, before the stash: ``python benchmarks/known_boards.py --write known_uuids.txt`` (every GPU UUID named in a
   text file under ``datasets/`` and ``../shared/data``; the file is untracked, so the device call carries it);
2. on the lent machine, first: ``python3 benchmarks/known_boards.py --check known_uuids.txt``, which prints one line
   per GPU (``NEW`` or ``known``), then the new boards' ``nvidia-smi`` indices on a last line ``new: 0 1``, and exits
   3 when no board is new, so a driver can stop before any load (``... --check known_uuids.txt || exit``).

Reads ``nvidia-smi --query-gpu=index,uuid --format=csv,noheader``, or ``--listing FILE`` with the same lines. Changes
no GPU setting.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

#: a GPU's UUID as NVML and nvidia-smi print it
UUID = re.compile(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
#: the text files a recording's provenance and notes live in (parquet traces name no board)
TEXT_SUFFIXES = (".json", ".md", ".txt", ".csv")
#: where the project keeps recordings
DEFAULT_ROOTS = ("datasets", "../shared/data")
#: the exit status of --check when no board is new
NO_NEW_BOARD = 3


def known_uuids(roots) -> set[str]:
    """Every GPU UUID named in a text file under ``roots`` (missing roots are skipped)."""
    found: set[str] = set()
    for root in map(Path, roots):
        if not root.exists():
            continue
        for path in root.rglob("*"):
            if path.suffix in TEXT_SUFFIXES and path.is_file():
                found.update(UUID.findall(path.read_text(errors="replace")))
    return found


def parse_listing(text: str) -> list[tuple[int, str]]:
    """``(index, uuid)`` per line of ``nvidia-smi --query-gpu=index,uuid --format=csv,noheader``.

    Raises
    ------
    ValueError
        A line that is not ``INDEX, GPU-…``.
    """
    boards = []
    for line in filter(str.strip, text.splitlines()):
        index, _, uuid = (part.strip() for part in line.partition(","))
        if not index.isdigit() or not UUID.fullmatch(uuid):
            raise ValueError(f"known_boards: not an 'index, uuid' line of nvidia-smi: {line!r}")
        boards.append((int(index), uuid))
    return boards


def check(boards: list[tuple[int, str]], known: set[str]) -> tuple[list[str], list[int]]:
    """One printable line per board and the indices of the new ones."""
    lines = [f"{'known' if uuid in known else 'NEW'} {index} {uuid}" for index, uuid in boards]
    return lines, [index for index, uuid in boards if uuid not in known]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = ap.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path, help="write the known UUIDs here, one per line")
    action.add_argument("--check", type=Path, help="a --write file: say which of this machine's GPUs are new")
    ap.add_argument("--root", action="append", help=f"where to look for UUIDs (default: {', '.join(DEFAULT_ROOTS)})")
    ap.add_argument("--listing", type=Path, help="nvidia-smi's index,uuid lines from a file instead of nvidia-smi")
    args = ap.parse_args(argv)
    if args.write:
        # here, not on the lent machine (--check needs nothing but this file): the list replaced whole or not at all
        from powermodels.files import atomic_open

        known = sorted(known_uuids(args.root or DEFAULT_ROOTS))
        with atomic_open(args.write, "w") as fh:
            fh.write("".join(f"{uuid}\n" for uuid in known))
        print(f"{len(known)} known GPU UUIDs written to {args.write}")
        return 0
    try:
        known = set(UUID.findall(args.check.read_text()))
        if args.listing:
            listing = args.listing.read_text()
        else:
            listing = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
                                     capture_output=True, text=True, check=True, timeout=60).stdout
        boards = parse_listing(listing)
    except (OSError, ValueError, subprocess.SubprocessError) as err:
        print(f"known_boards: {err}", file=sys.stderr)
        return 2
    if not boards:
        print("known_boards: nvidia-smi listed no GPU", file=sys.stderr)
        return 2
    lines, new = check(boards, known)
    print("\n".join(lines))
    print(f"new: {' '.join(map(str, new))}".rstrip())
    return 0 if new else NO_NEW_BOARD


if __name__ == "__main__":
    raise SystemExit(main())
