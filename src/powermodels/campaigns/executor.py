"""The executor interface: where the planned runs of a campaign are measured.

:func:`~powermodels.campaigns.run.run_campaign` validates the spec and holds
the campaign folder's lock; an executor does the rest — opens its device(s),
measures every planned run that is not finished yet, writes each finished
run to the :class:`~powermodels.campaigns.store.CampaignStore` and returns the
run table. :class:`~powermodels.campaigns.run.SerialExecutor` (the default)
measures in this process;
:class:`~powermodels.integrations.dask_cluster.DaskExecutor` spreads the runs
over a Dask cluster, one worker per GPU. Campaign code only knows this
interface, so it never imports an optional integration; the caller (the CLI's
``--cluster``, or a user) picks the executor.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    import pandas as pd

    from .plan import CampaignSpec

__all__ = ["CampaignExecutor"]


class CampaignExecutor(ABC):
    """Measures a campaign's planned runs into its folder; the run table of the finished runs.

    Implementations must keep the store's contract: a run is written (trace,
    then row) only when it is finished, under its planned key, so a campaign
    resumes the same way whichever executor measured it.
    """

    @abstractmethod
    def run(self, spec: CampaignSpec, out_dir: str | os.PathLike, *, progress: bool = True,
            max_runs: int | None = None) -> pd.DataFrame:
        """Run (or resume) ``spec`` into ``out_dir``; stop after ``max_runs`` new runs when given."""

    def per_board(self) -> CampaignExecutor:
        """An executor that measures every run on every board this one has (a campaign's board probe).

        One device (the default): this executor itself.
        """
        return self
