"""Resuming a campaign folder: only with the spec that measured it, or anew when asked.

A campaign folder holds the runs of one spec (``metadata.json`` keeps it). A
run's key covers what changes its result (:func:`~.plan.plan`), but a resume
with another spec would still mix two campaigns in one run table. So before
anything is measured into an existing folder, :func:`check_resume` compares
the spec with the one in ``metadata.json`` and refuses any difference that
matters (everything but ``base_dir`` and ``exclusive``), naming each changed
field with its old and new value. ``restart=True`` (``powermodels campaign
--restart``) moves the earlier runs aside into ``previous-<UTC time>/`` in the
folder and starts anew — the board probe's folder with them, so no probe run of
the old campaign counts as finished in the new one; nothing is deleted.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import asdict
from pathlib import Path

from .plan import RUN_KEY_VERSION, CampaignSpec, PlannedRun, plan, spec_changes
from .store import PROBE_DIR, RUN_TABLE_FILE, RUNS, TRACES, CampaignStore

__all__ = ["METADATA", "check_resume", "folder_plan", "set_aside_previous"]

METADATA = "metadata.json"


def _metadata(out: Path) -> dict | None:
    path = out / METADATA
    if not path.exists():
        return None
    try:
        meta = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as err:
        raise ValueError(f"campaign folder {out}: {METADATA} is unreadable ({type(err).__name__}: {err}); "
                         "give another --out, or --restart to set the folder's runs aside") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("spec"), dict):
        raise ValueError(f"campaign folder {out}: {METADATA} holds no spec; give another --out, or "
                         "--restart to set the folder's runs aside")
    return meta


def set_aside_previous(out_dir) -> Path | None:
    """Move a folder's runs, traces, run table, metadata and board probe into ``previous-<UTC time>/``; its path.

    The board probe (``board_probe/``, its own campaign) goes too: left in
    place, its finished runs would count as done for the new campaign's probe
    and the old boards' normalisation would be fitted into the new run.
    """
    out = Path(out_dir)
    names = [n for n in (METADATA, RUNS, TRACES, RUN_TABLE_FILE, PROBE_DIR) if (out / n).exists()]
    if not names:
        return None
    aside = out / f"previous-{_dt.datetime.now(_dt.timezone.utc):%Y%m%dT%H%M%S%fZ}"
    aside.mkdir()
    for name in names:
        os.replace(out / name, aside / name)
    return aside


def check_resume(spec: CampaignSpec, out_dir, *, restart: bool = False) -> Path | None:
    """Refuse to resume ``out_dir`` with a spec other than the one that measured it.

    Parameters
    ----------
    spec : CampaignSpec
        The spec about to run.
    out_dir : path
        The campaign folder (may not exist yet).
    restart : bool, default=False
        Set the folder's earlier runs aside (:func:`set_aside_previous`)
        instead of refusing.

    Returns
    -------
    Path or None
        Where earlier runs were moved (``restart``), else None.

    Raises
    ------
    ValueError
        One line naming every changed field (``repeats: 2 -> 3``), or an
        unreadable ``metadata.json``, or runs without one.
    """
    out = Path(out_dir)
    if not out.exists():
        return None
    if restart:
        return set_aside_previous(out)
    meta = _metadata(out)
    if meta is None:
        if CampaignStore(out).finished_keys():
            raise ValueError(f"campaign folder {out} holds runs but no {METADATA}: not a campaign of this "
                             "spec; give another --out, or --restart to set them aside")
        return None
    changes = spec_changes(meta["spec"], json.loads(json.dumps(asdict(spec), default=str)))
    if changes:
        raise ValueError(f"campaign folder {out} was measured with another spec ({'; '.join(changes)}); "
                         "give another --out, or --restart to set its runs aside and measure anew")
    return None


def folder_plan(spec: CampaignSpec, out_dir) -> list[PlannedRun]:
    """The plan with the run keys of the folder's version (folders before version 2 keep theirs)."""
    meta = _metadata(Path(out_dir))
    version = RUN_KEY_VERSION if meta is None else int(meta.get("run_key_version", 1))
    return plan(spec, key_version=version)
