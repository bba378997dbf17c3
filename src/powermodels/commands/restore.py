"""``powermodels restore``: put back GPU settings a killed powermodels process left changed.

Before changing a clock or the power limit, powermodels writes the previous
settings to a journal per GPU (:mod:`powermodels.devices.journal`). A process
killed with ``SIGKILL`` cannot restore them itself; this command (like the next
settings guard on that GPU) finds the journal entries whose process is gone
and restores the settings they recorded. Entries of running processes are
listed and left alone. ``--list`` only shows what is pending and changes
nothing. A damaged journal is reported on stderr (exit status 1) entry by
entry: its good entries are still restored, and the damaged file is copied
aside as ``<name>.corrupt-<time>`` for a person to check.
"""

from __future__ import annotations

from . import COMMANDS

NAME = "restore"
HELP = COMMANDS[NAME].help


def add_arguments(parser) -> None:
    parser.add_argument("--list", action="store_true",
                        help="only list the journal entries (nothing is changed)")


def _devices_by_uuid() -> dict:
    import os
    import warnings

    from ..devices.cuda_visible import ENV
    from ..devices.nvml import NVMLDevice, nvml_gpu_count

    # Journals are keyed by UUID, so every GPU NVML knows is wanted, by NVML index:
    # NVMLDevice(i) takes i as a CUDA ordinal under CUDA_VISIBLE_DEVICES (a job that
    # sees one GPU would fail on ordinal 1 and never reach the others).
    hidden = os.environ.pop(ENV, None)
    out = {}
    try:
        with warnings.catch_warnings():  # CUDA-vs-NVML order does not matter here
            warnings.simplefilter("ignore")
            for index in range(nvml_gpu_count()):
                device = NVMLDevice(index)
                out[device.info.uuid or f"nvml-{index}"] = device
    except BaseException:
        for device in out.values():
            device.close()
        raise
    finally:
        if hidden is not None:
            os.environ[ENV] = hidden
    return out


def _report(journals) -> int:
    """Print every entry and every problem of ``journals`` and kept-aside files; 1 if any problem."""
    import sys

    from ..devices.journal import set_aside_journals

    status = 0
    for journal in journals:
        entries, problems = journal.read()
        for line in problems:
            print(f"ERROR: settings journal {line}", file=sys.stderr)
            status = 1
        for entry in entries:
            state = "running" if entry.alive() else "gone"
            print(f"{journal.key}: {entry.device or '?'} {entry.keys} changed by {entry.describe()} "
                  f"[{state}]; before: {entry.previous}")
    for path in set_aside_journals():
        print(f"ERROR: {path}: a damaged settings journal kept aside (its entries were not acted "
              "on); check it by hand, then delete it", file=sys.stderr)
        status = 1
    return status


def run(args) -> int:
    from ..devices.base import recover_left_settings
    from ..devices.journal import journal_dir, pending_journals, set_aside_journals

    journals = pending_journals()
    if not journals and not set_aside_journals():
        print(f"nothing to restore (no journal in {journal_dir()})")
        return 0
    status = _report(journals)
    if args.list:
        return status
    devices = _devices_by_uuid()
    try:
        for journal in journals:
            if not journal.read()[0]:
                continue  # nothing good to act on; its problems are reported above
            device = devices.get(journal.key)
            if device is None:
                print(f"{journal.key}: no such GPU on this host; left as is")
                status = 1
                continue
            try:
                done = recover_left_settings(device)
            except Exception as err:  # RestoreError, NVML errors: one line, keep going
                print(f"{journal.key}: {err}")
                status = 1
                continue
            for line in done:
                print(line)
            still = journal.read()[0]
            if still:
                print(f"{journal.key}: left alone, still held by "
                      f"{', '.join(e.describe() for e in still)}")
    finally:
        for device in devices.values():
            device.close()
    return status
