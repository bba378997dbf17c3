"""A campaign over several boards: their spread, and a probe that maps every board onto one.

Two boards of one GPU model read different energies for the same work (2.5–3.9 %
on two H200s, ``datasets/h200x2/``), so a campaign spread over several GPUs
mixes their scales. After every campaign whose rows come from more than one
board, :func:`record_boards` reports the spread of the configurations measured
on several boards (:func:`powermodels.boards.board_spread`, with a
:class:`~powermodels.boards.BoardSpreadWarning` when it exceeds 2σ of the
measurement) and records it in ``metadata.json`` under ``"boards"``.

A spec may name a **board probe** — a short common workload every board
runs before the campaign (Wattchmen §6 fits the map between two systems on a
subset the same way)::

    {"kernels": {...}, "board_probe": {"kernels": {"sgemm": "default"}, "repeats": 3}}

:func:`run_board_probe` measures it on every board (the executor's
:meth:`~powermodels.campaigns.executor.CampaignExecutor.per_board`) into
``out/board_probe/`` (its own resumable campaign, with the campaign's
protocol), fits a per-board gain (``"model": "scale"``, default) or gain and
power offset (``"affine"``) with
:func:`powermodels.boards.fit_board_normalisation`, and the campaign's
``metadata.json`` records it under ``"board_normalisation"``;
:func:`load_normalised_runs` returns the run table with
``normalised_energy_j`` on the reference board's scale.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from .. import schema
from ..boards import BoardNormalisation, board_spread, fit_board_normalisation
from .plan import CampaignSpec, check_board_probe
from .store import PROBE_DIR, CampaignStore, atomic_json, existing_campaign_folder

__all__ = ["PROBE_DIR", "load_normalised_runs", "probe_spec", "record_boards", "run_board_probe"]


def probe_spec(spec: CampaignSpec) -> CampaignSpec:
    """The probe's own campaign: its workloads and repeats, the campaign's protocol and device."""
    probe = spec.board_probe
    check_board_probe(probe)
    return CampaignSpec(kernels=dict(probe.get("kernels") or {}), workloads=list(probe.get("workloads") or []),
                        protocol=spec.protocol, protocol_params=dict(spec.protocol_params),
                        repeats=int(probe.get("repeats", 3)), device=spec.device,
                        device_kwargs=dict(spec.device_kwargs), base_dir=spec.base_dir, exclusive=spec.exclusive)


def run_board_probe(spec: CampaignSpec, out_dir: str | os.PathLike, executor, *,
                    progress: bool = True) -> BoardNormalisation:
    """Measure the spec's ``board_probe`` on every board into ``out_dir/board_probe`` and fit the map.

    Parameters
    ----------
    spec : CampaignSpec
        A spec with ``board_probe``.
    out_dir : path
        The campaign's folder.
    executor : CampaignExecutor
        The campaign's executor; its :meth:`per_board` measures the probe.
    """
    runs = executor.per_board().run(probe_spec(spec), Path(out_dir) / PROBE_DIR, progress=progress)
    if runs.empty:
        raise RuntimeError(f"board probe: no run finished in {Path(out_dir) / PROBE_DIR}")
    return fit_board_normalisation(runs, model=spec.board_probe.get("model", "scale"))


def record_boards(out_dir: str | os.PathLike, runs: pd.DataFrame,
                  normalisation: BoardNormalisation | None = None, *, k: float = 2.0) -> dict:
    """Report the boards of a finished campaign and record them in its ``metadata.json``.

    Emits a :class:`~powermodels.boards.BoardSpreadWarning` when configurations
    measured on several boards differ by more than ``k``σ. Returns what was
    added to the metadata (``{}`` for one board without a probe).
    """
    added: dict = {}
    if len(runs) and schema.DEVICE_UUID in runs and runs[schema.DEVICE_UUID].nunique() > 1:
        spread = board_spread(runs, k=k)
        pct = spread[schema.BOARD_SPREAD_PCT]
        added["boards"] = {
            "devices": sorted(runs[schema.DEVICE_UUID].unique()),
            "configurations_on_several_boards": len(spread),
            "board_spread_pct_median": float(pct.median()) if len(pct) else math.nan,
            "board_spread_pct_max": float(pct.max()) if len(pct) else math.nan,
            "beyond_k_sigma": int(spread[schema.BOARD_SPREAD_SIGNIFICANT].sum()) if len(spread) else 0,
            "k": float(k),
        }
    if normalisation is not None:
        added["board_normalisation"] = normalisation.as_dict()
    meta_path = Path(out_dir) / "metadata.json"
    if added and meta_path.is_file():
        meta = json.loads(meta_path.read_text())
        meta.update(added)
        atomic_json(meta, meta_path)
    return added


def load_normalised_runs(out_dir: str | os.PathLike) -> pd.DataFrame:
    """The campaign's run table with ``normalised_energy_j`` from its recorded board normalisation.

    Raises
    ------
    ValueError
        The campaign has no normalisation (its spec had no ``board_probe``).
    FileNotFoundError
        ``out_dir`` does not exist.
    """
    meta_path = existing_campaign_folder(out_dir) / "metadata.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if "board_normalisation" not in meta:
        raise ValueError(f"campaign {str(out_dir)!r} has no board normalisation: add a 'board_probe' to its "
                         "spec (a short workload every board runs) and run it again")
    return BoardNormalisation.from_dict(meta["board_normalisation"]).apply(CampaignStore(out_dir).run_table())
