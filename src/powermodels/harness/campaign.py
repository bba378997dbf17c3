"""Deprecated: moved to :mod:`powermodels.campaigns` (this path warns and goes away in the next release).

Besides the names of :mod:`powermodels.campaigns`, :func:`run_campaign` here
still takes ``cluster=``/``per_gpu=``/``workers=`` (each a
:class:`DeprecationWarning`): they build the Dask executor that
``run_campaign(..., executor=DaskExecutor(cluster, per_gpu=..., workers=...))``
takes now.
"""

from __future__ import annotations

import warnings

from powermodels import campaigns as _new
from powermodels.campaigns import *  # noqa: F403 - the old module's names, from their new home
from powermodels.campaigns import __all__ as _new_names
from powermodels.campaigns.run import (  # noqa: F401 - public names of the old module
    GPU_LOCK_WAIT_S,
    campaign_metadata,
    device_metadata,
    finish_campaign,
    progress_bar,
)
from powermodels.harness import warn_moved

warn_moved(__name__)

__all__ = list(_new_names)


def run_campaign(spec, out_dir, *, cluster=None, per_gpu: bool = False, workers: int | None = None, **kwargs):
    """:func:`powermodels.campaigns.run_campaign`, also taking the old ``cluster``/``per_gpu``/``workers``."""
    if cluster is not None:
        warnings.warn("run_campaign(cluster=...) is deprecated: pass executor=DaskExecutor(cluster, "
                      "per_gpu=..., workers=...) from powermodels.integrations.dask_cluster",
                      DeprecationWarning, stacklevel=2)
        if kwargs.get("runner") is not None:
            raise ValueError("run_campaign: pass a runner or a cluster, not both "
                             "(on a cluster every worker opens its own device)")
        from powermodels.integrations.dask_cluster import DaskExecutor

        kwargs["executor"] = DaskExecutor(cluster, per_gpu=per_gpu, workers=workers)
    elif per_gpu:
        raise ValueError("run_campaign: per_gpu needs a cluster (cluster='local-cuda' or an address)")
    elif workers is not None:
        raise ValueError("run_campaign: workers needs cluster='local'")
    return _new.run_campaign(spec, out_dir, **kwargs)
