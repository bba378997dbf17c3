"""Campaigns: many workloads × configurations × repeats, resumable, into one run table.

This package owns what a campaign is and how it is kept: the spec and the plan
of its runs (:mod:`.plan`), the crash-safe folder every finished run is
appended to (:mod:`.store`), and running the plan (:mod:`.run`) through an
executor (:mod:`.executor`): serially in this process by default, or any
other :class:`~.executor.CampaignExecutor` — the Dask one lives in
:mod:`powermodels.integrations.dask_cluster`, so nothing here imports Dask.
"""

from __future__ import annotations

from .executor import CampaignExecutor
from .plan import CampaignSpec, PlannedRun, load_spec, plan
from .run import (
    SerialExecutor,
    finished_keys,
    load_campaign,
    load_runs,
    measure_planned,
    run_campaign,
)
from .store import CampaignStore

__all__ = [
    "CampaignExecutor",
    "CampaignSpec",
    "CampaignStore",
    "PlannedRun",
    "SerialExecutor",
    "finished_keys",
    "load_campaign",
    "load_runs",
    "load_spec",
    "measure_planned",
    "plan",
    "run_campaign",
]
