"""Optional integrations with other tools (Kernel Tuner, Dask); each imports its tool lazily.

Nothing here is imported by ``import powermodels``: importing a submodule needs
its extra (e.g. ``pip install 'powermodels[distributed]'`` for
:mod:`powermodels.integrations.dask_cluster`).
"""
